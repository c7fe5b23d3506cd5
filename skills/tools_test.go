package skills_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/skills"
)

func callTool(t *testing.T, ts *loop.Toolset, name string, args any) (string, error) {
	t.Helper()
	def, ok := ts.Lookup(name)
	if !ok {
		t.Fatalf("no tool %q", name)
	}
	raw, _ := json.Marshal(args)
	out, err := def.Handler(t.Context(), &loop.Call{ID: "c1", Name: name, Arguments: raw})
	if err != nil {
		return "", err
	}
	var text string
	for _, p := range out.Content {
		text += p.Text
	}
	return text, nil
}

// fixture makes two skills beside a secret, and returns their tools.
func fixture(t *testing.T, opts *skills.ToolOptions) (*loop.Toolset, []*skills.Skill, string) {
	t.Helper()
	base := t.TempDir()
	root := filepath.Join(base, "skills")
	if err := os.WriteFile(filepath.Join(base, "secret.txt"), []byte("SECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pdf := writeSkill(t, root, "pdf", skillMD("pdf", "Extract text and tables from PDF files.",
		"# PDF\n\nRun scripts/extract.py, then read reference.md.\n"), map[string]string{
		"reference.md":       "# Reference\n\nThe Extract step\nhandles Tables.\n",
		"scripts/extract.py": "import sys\n# extract tables\n",
		"assets/logo.png":    "\x89PNG\x00\x00binary",
		".git/config":        "[core]\n",
	})
	writeSkill(t, root, "release", skillMD("release", `"Cut a release: changelog, tag, publish."`,
		"# Release\n\n1. Update CHANGELOG.md.\n2. Tag.\n"), nil)
	// Ways out of the pdf folder.
	for name, target := range map[string]string{
		"up":       "../../secret.txt",
		"abs":      filepath.Join(base, "secret.txt"),
		"sibling":  "../release/SKILL.md",
		"absinner": filepath.Join(pdf, "reference.md"),
		"inside":   "reference.md",
	} {
		if err := os.Symlink(target, filepath.Join(pdf, name)); err != nil {
			t.Fatal(err)
		}
	}
	found, problems := skills.Discover([]string{root}, &skills.Options{NoDefaults: true})
	if len(problems) != 0 || len(found) != 2 {
		t.Fatalf("skills %v, problems %v", names(found), problems)
	}
	return skills.Tools(found, opts), found, pdf
}

func TestSkillTools(t *testing.T) {
	ts, _, pdf := fixture(t, nil)
	if got := strings.Join(ts.Names(), ","); got != "list_skills,load_skill,read_skill,search_skills" {
		t.Errorf("tools %s", got)
	}
	for def := range ts.All() {
		if !def.Concurrent || def.RequiresApproval {
			t.Errorf("%s: Concurrent %v RequiresApproval %v", def.Name, def.Concurrent, def.RequiresApproval)
		}
	}

	tests := []struct {
		tool    string
		args    map[string]any
		want    string
		wantErr string
	}{
		{tool: "list_skills", args: map[string]any{},
			want: "- pdf: Extract text and tables from PDF files.\n- release: Cut a release: changelog, tag, publish."},
		{tool: "load_skill", args: map[string]any{"name": "pdf"},
			want: "# Skill: pdf\n\nFolder: " + pdf + "\nOther files (read them with read_skill): abs, absinner, assets/logo.png, inside, reference.md, scripts/extract.py, sibling, up\n\n# PDF\n\nRun scripts/extract.py, then read reference.md."},
		{tool: "load_skill", args: map[string]any{"name": "nope"}, wantErr: `there is no skill "nope"; the skills are: pdf, release`},
		{tool: "read_skill", args: map[string]any{"name": "release"}, want: "# Release\n\n1. Update CHANGELOG.md.\n2. Tag."},
		{tool: "read_skill", args: map[string]any{"name": "pdf", "path": "reference.md"}, want: "# Reference\n\nThe Extract step\nhandles Tables.\n"},
		{tool: "read_skill", args: map[string]any{"name": "pdf", "path": "scripts/../reference.md"}, want: "# Reference\n\nThe Extract step\nhandles Tables.\n"},
		{tool: "read_skill", args: map[string]any{"name": "pdf", "path": "inside"}, want: "# Reference\n\nThe Extract step\nhandles Tables.\n"},
		{tool: "read_skill", args: map[string]any{"name": "pdf", "path": "SKILL.md"}, want: "---\nname: pdf\n"},
		{tool: "read_skill", args: map[string]any{"name": "pdf", "path": "scripts"}, want: "extract.py"},
		{tool: "read_skill", args: map[string]any{"name": "pdf", "path": "."}, want: ".git/\nSKILL.md\nabs\nabsinner\nassets/\ninside\nreference.md\nscripts/\nsibling\nup"},
		{tool: "read_skill", args: map[string]any{"name": "pdf", "path": "assets/logo.png"}, wantErr: "assets/logo.png is a binary file"},
		{tool: "read_skill", args: map[string]any{"name": "pdf", "path": "missing.md"}, wantErr: `skill "pdf" has no file missing.md`},
		{tool: "search_skills", args: map[string]any{"query": "TABLES"},
			want: "pdf/SKILL.md:3: description: Extract text and tables from PDF files.\npdf/reference.md:4: handles Tables.\npdf/scripts/extract.py:2: # extract tables"},
		{tool: "search_skills", args: map[string]any{"query": "changelog"},
			want: "release/SKILL.md:3: description: \"Cut a release: changelog, tag, publish.\"\nrelease/SKILL.md:7: 1. Update CHANGELOG.md."},
		{tool: "search_skills", args: map[string]any{"query": "kubernetes"}, want: `(no skill mentions "kubernetes")`},
		{tool: "search_skills", args: map[string]any{"query": " "}, wantErr: "query is empty"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %v", tt.tool, tt.args), func(t *testing.T) {
			got, err := callTool(t, ts, tt.tool, tt.args)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %q, %v; want error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want && !(strings.Contains(got, tt.want) && tt.tool == "read_skill") {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// TestReadSkillConfinement tries the ways out of a skill's folder.
func TestReadSkillConfinement(t *testing.T) {
	ts, _, _ := fixture(t, nil)
	for _, p := range []string{
		"../release/SKILL.md",
		"../../secret.txt",
		"scripts/../../release/SKILL.md",
		"..",
		"/etc/passwd",
		"up",       // relative link out
		"abs",      // absolute link out
		"sibling",  // link to the next skill
		"absinner", // absolute link, even inside
	} {
		t.Run(p, func(t *testing.T) {
			got, err := callTool(t, ts, "read_skill", map[string]any{"name": "pdf", "path": p})
			if err == nil {
				t.Fatalf("read %q: %q", p, got)
			}
			msg := err.Error()
			if !strings.Contains(msg, "outside the folder") && !strings.Contains(msg, "must be relative") {
				t.Errorf("unclear refusal: %s", msg)
			}
			if strings.Contains(msg, "SECRET") || strings.Contains(msg, "Release") {
				t.Errorf("refusal leaks content: %s", msg)
			}
		})
	}
	// search_skills does not follow links out either.
	got, err := callTool(t, ts, "search_skills", map[string]any{"query": "secret"})
	if err != nil || got != `(no skill mentions "secret")` {
		t.Errorf("search followed a link out: %q %v", got, err)
	}
}

func TestSkillToolCaps(t *testing.T) {
	root := t.TempDir()
	var lines []string
	for i := range 30 {
		lines = append(lines, fmt.Sprintf("needle %d", i))
	}
	writeSkill(t, root, "big", skillMD("big", "Big.", strings.Join(lines, "\n")+"\n"+strings.Repeat("é", 100)), map[string]string{"long.txt": strings.Repeat("x", 300)})
	found, _ := skills.Discover([]string{root}, &skills.Options{NoDefaults: true})
	ts := skills.Tools(found, &skills.ToolOptions{MaxSearchHits: 5, MaxReadBytes: 201})
	got, err := callTool(t, ts, "search_skills", map[string]any{"query": "needle"})
	if err != nil || !strings.HasSuffix(got, "big/SKILL.md:9: needle 4\n[search stopped at 5 matches; use a more specific query]") {
		t.Errorf("search cap: %q %v", got, err)
	}
	got, err = callTool(t, ts, "read_skill", map[string]any{"name": "big", "path": "long.txt"})
	if err != nil || got != strings.Repeat("x", 201)+"\n\n[file cut at 201 of 300 bytes]" {
		t.Errorf("read cap: %q %v", got, err)
	}
	got, err = callTool(t, ts, "load_skill", map[string]any{"name": "big"})
	if err != nil || !strings.Contains(got, "[instructions cut at 201 of") {
		t.Errorf("load cap: %q %v", got, err)
	}
	if !utf8.ValidString(got) {
		t.Errorf("cut inside a rune: %q", got)
	}
	got, err = callTool(t, skills.Tools(nil, nil), "list_skills", map[string]any{})
	if err != nil || got != "(no skills are installed)" {
		t.Errorf("no skills: %q %v", got, err)
	}
}

// TestSkillsInAgentRun drives the skill tools through a real run.
func TestSkillsInAgentRun(t *testing.T) {
	ts, found, _ := fixture(t, nil)
	model := llmtest.NewModel(
		llmtest.Call("c1", "load_skill", `{"name":"release"}`),
		llmtest.Call("c2", "read_skill", `{"name":"pdf","path":"../../secret.txt"}`),
		llmtest.Text("Released."),
	)
	agent := loop.NewAgent(model, ts, nil)
	system := "You help.\n\n" + skills.PromptSection(found)
	res, err := agent.Run(t.Context(), []llm.Message{llm.SystemMessage(system), llm.UserMessage("cut a release")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "Released." {
		t.Errorf("answer %q", res.Answer)
	}
	reqs := model.Requests()
	if got := reqs[0].Messages[0].Text(); !strings.Contains(got, "<name>release</name>") || !strings.Contains(got, "call load_skill") {
		t.Errorf("system prompt lacks the skills:\n%s", got)
	}
	results := map[string]*llm.ToolResult{}
	for _, m := range reqs[2].Messages {
		for _, p := range m.Parts {
			if p.ToolResult != nil {
				results[p.ToolResult.CallID] = p.ToolResult
			}
		}
	}
	if r := results["c1"]; r == nil || r.IsError || !strings.Contains(r.Text(), "1. Update CHANGELOG.md.") {
		t.Errorf("load_skill result: %+v", r)
	}
	if r := results["c2"]; r == nil || !r.IsError || !strings.Contains(r.Text(), "outside the folder of skill") {
		t.Errorf("read_skill escape result: %+v", r)
	}
}
