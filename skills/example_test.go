package skills_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/skills"
)

func ExampleDiscover() {
	root, _ := os.MkdirTemp("", "skills")
	defer os.RemoveAll(root)
	write := func(name, content string) {
		os.MkdirAll(filepath.Join(root, name), 0o755)
		os.WriteFile(filepath.Join(root, name, "SKILL.md"), []byte(content), 0o644)
	}
	write("changelog", "---\nname: changelog\ndescription: Write the changelog entry of a release.\n---\n# Changelog\n\nList user-visible changes, newest first.\n")
	write("broken", "# No front matter\n")

	found, problems := skills.Discover([]string{root}, &skills.Options{NoDefaults: true})
	for _, s := range found {
		fmt.Printf("%s: %s\n", s.Name, s.Description)
	}
	for _, p := range problems {
		fmt.Println("skipped:", strings.TrimPrefix(p.Error(), root+string(filepath.Separator)))
	}

	load, _ := skills.Tools(found, nil).Lookup("load_skill")
	out, _ := load.Handler(context.Background(), &loop.Call{Arguments: json.RawMessage(`{"name":"changelog"}`)})
	_, body, _ := strings.Cut(out.Content[0].Text, "\n\n# Changelog")
	fmt.Println("# Changelog" + body)
	// Output:
	// changelog: Write the changelog entry of a release.
	// skipped: broken/SKILL.md: invalid skill: no front matter: the file must start with a line '---', then YAML with name and description, then a line '---'
	// # Changelog
	//
	// List user-visible changes, newest first.
}

func ExamplePromptSection() {
	fmt.Println(skills.PromptSection([]*skills.Skill{
		{Name: "changelog", Description: "Write the changelog entry of a release."},
		{Name: "pdf", Description: "Extract text & tables from PDF files."},
	}))
	// Output:
	// # Skills
	//
	// Skills are folders of instructions for particular tasks. When a task matches the description of a skill below, call load_skill with its name before you start, and follow the instructions it returns; read_skill reads the other files of a skill when the instructions point to them.
	//
	// <available_skills>
	// <skill>
	// <name>changelog</name>
	// <description>Write the changelog entry of a release.</description>
	// </skill>
	// <skill>
	// <name>pdf</name>
	// <description>Extract text &amp; tables from PDF files.</description>
	// </skill>
	// </available_skills>
}
