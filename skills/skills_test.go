package skills_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/skills"
)

// writeSkill creates root/<dir>/SKILL.md with content, and extra files.
func writeSkill(t *testing.T, root, dir, content string, extra map[string]string) string {
	t.Helper()
	d := filepath.Join(root, dir)
	files := map[string]string{skills.FileName: content}
	for k, v := range extra {
		files[k] = v
	}
	for name, c := range files {
		p := filepath.Join(d, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func skillMD(name, desc, body string) string {
	return "---\nname: " + name + "\ndescription: " + desc + "\n---\n" + body
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		check   func(t *testing.T, s *skills.Skill)
		wantErr string
	}{
		{name: "good", in: skillMD("pdf-tools", "Work with PDF files.", "\n# PDF\n\nUse pdftotext.\n"),
			check: func(t *testing.T, s *skills.Skill) {
				if s.Name != "pdf-tools" || s.Description != "Work with PDF files." || s.Body != "# PDF\n\nUse pdftotext." {
					t.Errorf("%+v", s)
				}
			}},
		{name: "crlf and bom", in: "\uFEFF---\r\nname: x\r\ndescription: d\r\n---\r\nbody\r\n",
			check: func(t *testing.T, s *skills.Skill) {
				if s.Name != "x" || s.Body != "body" {
					t.Errorf("%+v", s)
				}
			}},
		{name: "optional fields", in: "---\nname: x\ndescription: >\n  Folded\n  text.\nlicense: MIT\ncompatibility: needs git\nallowed-tools: Bash(git:*) Read\nmetadata:\n  author: me\n  version: \"1.0\"\nunknown: ignored\n---\n",
			check: func(t *testing.T, s *skills.Skill) {
				if s.Description != "Folded text." || s.License != "MIT" || s.Compatibility != "needs git" ||
					s.AllowedTools != "Bash(git:*) Read" || s.Metadata["author"] != "me" || s.Metadata["version"] != "1.0" || s.Body != "" {
					t.Errorf("%+v", s)
				}
			}},
		{name: "closing line at the end", in: "---\nname: x\ndescription: d\n---",
			check: func(t *testing.T, s *skills.Skill) {
				if s.Name != "x" || s.Body != "" {
					t.Errorf("%+v", s)
				}
			}},
		{name: "no front matter", in: "# Just markdown\n", wantErr: "no front matter"},
		{name: "unclosed", in: "---\nname: x\ndescription: d\n", wantErr: "no closing '---' line"},
		{name: "empty front matter", in: "---\n---\nbody", wantErr: "no name"},
		{name: "not yaml", in: "---\nname: [x\ndescription: d\n---\n", wantErr: "front matter:"},
		{name: "unquoted colon", in: "---\nname: x\ndescription: Do this: then that\n---\n",
			wantErr: `front matter: line 3: mapping values are not allowed in this context (a value that contains ": " must be quoted)`},
		{name: "name not a string", in: "---\nname: {a: b}\ndescription: d\n---\n", wantErr: "front matter:"},
		{name: "no name", in: "---\ndescription: d\n---\n", wantErr: "no name"},
		{name: "upper case name", in: skillMD("PDF", "d", ""), wantErr: `name "PDF" must be lowercase`},
		{name: "double hyphen", in: skillMD("a--b", "d", ""), wantErr: "must be lowercase letters, digits and single hyphens"},
		{name: "leading hyphen", in: skillMD("-a", "d", ""), wantErr: "must be lowercase"},
		{name: "long name", in: skillMD(strings.Repeat("a", 65), "d", ""), wantErr: "longer than 64"},
		{name: "no description", in: "---\nname: x\n---\n", wantErr: "no description"},
		{name: "long description", in: skillMD("x", strings.Repeat("d", 1025), ""), wantErr: "more than 1024"},
		{name: "not utf-8", in: "---\nname: x\ndescription: caf\xe9\n---\n", wantErr: "not UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := skills.Parse([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, skills.ErrInvalid) {
					t.Fatalf("got %v, want an ErrInvalid containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, s)
		})
	}
}

// layout makes an explicit root, a project and a home with skills that
// overlap.
func layout(t *testing.T) (explicit, project, home string) {
	t.Helper()
	base := t.TempDir()
	explicit = filepath.Join(base, "explicit")
	project = filepath.Join(base, "project")
	home = filepath.Join(base, "home")
	projectRoot := filepath.Join(project, ".agents", "skills")
	homeRoot := filepath.Join(home, ".agents", "skills")

	writeSkill(t, explicit, "deploy", skillMD("deploy", "Deploy from the explicit root.", "explicit deploy"), nil)
	writeSkill(t, projectRoot, "deploy", skillMD("deploy", "Deploy from the project.", "project deploy"), nil)
	writeSkill(t, projectRoot, "lint", skillMD("lint", "Lint the project.", "project lint"), nil)
	writeSkill(t, projectRoot, "broken", "---\nname: broken\ndescription: [unclosed\n---\n", nil)
	writeSkill(t, projectRoot, "misnamed", skillMD("other-name", "Wrong folder.", ""), nil)
	writeSkill(t, projectRoot, ".hidden", skillMD("hidden", "Hidden.", ""), nil)
	if err := os.MkdirAll(filepath.Join(projectRoot, "not-a-skill"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(projectRoot, "README.md"), []byte("not a skill"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeSkill(t, homeRoot, "lint", skillMD("lint", "Lint from home.", "home lint"), nil)
	writeSkill(t, homeRoot, "notes", skillMD("notes", "Keep notes.", "home notes"), nil)
	// A skill kept elsewhere and linked into the home root.
	shared := writeSkill(t, filepath.Join(base, "shared"), "linked", skillMD("linked", "Linked in.", ""), nil)
	if err := os.Symlink(shared, filepath.Join(homeRoot, "linked")); err != nil {
		t.Fatal(err)
	}
	return explicit, project, home
}

func names(ss []*skills.Skill) string {
	var n []string
	for _, s := range ss {
		n = append(n, s.Name)
	}
	return strings.Join(n, ",")
}

func TestDiscover(t *testing.T) {
	explicit, project, home := layout(t)
	single := writeSkill(t, t.TempDir(), "solo", skillMD("solo", "A single skill folder.", ""), nil)
	missing := filepath.Join(project, "missing")

	found, problems := skills.Discover([]string{explicit, single, missing}, &skills.Options{WorkDir: project, Home: home})
	if got := names(found); got != "deploy,linked,lint,notes,solo" {
		t.Errorf("skills %s", got)
	}
	byName := map[string]*skills.Skill{}
	for _, s := range found {
		byName[s.Name] = s
	}
	// The explicit root wins over the project, the project over home.
	if s := byName["deploy"]; s.Body != "explicit deploy" || s.Root != explicit || s.Dir != filepath.Join(explicit, "deploy") {
		t.Errorf("deploy: %+v", s)
	}
	if s := byName["lint"]; s.Body != "project lint" {
		t.Errorf("lint: %+v", s)
	}
	if s := byName["solo"]; s.Dir != single || s.Root != single {
		t.Errorf("solo: %+v", s)
	}
	if s := byName["linked"]; s.Path() != filepath.Join(home, ".agents/skills/linked/SKILL.md") {
		t.Errorf("linked: %s", s.Path())
	}

	projectRoot := filepath.Join(project, ".agents", "skills")
	homeRoot := filepath.Join(home, ".agents", "skills")
	want := []struct {
		path string
		is   error
		has  string
	}{
		{missing, skills.ErrNotFound, ""},
		{filepath.Join(projectRoot, "broken", "SKILL.md"), skills.ErrInvalid, "front matter"},
		{filepath.Join(projectRoot, "deploy", "SKILL.md"), skills.ErrShadowed, `"deploy" is already defined by ` + filepath.Join(explicit, "deploy", "SKILL.md")},
		{filepath.Join(projectRoot, "misnamed", "SKILL.md"), skills.ErrInvalid, `name "other-name" does not match its folder "misnamed"`},
		{filepath.Join(homeRoot, "lint", "SKILL.md"), skills.ErrShadowed, `"lint" is already defined by ` + filepath.Join(projectRoot, "lint", "SKILL.md")},
	}
	if len(problems) != len(want) {
		t.Errorf("%d problems, want %d: %v", len(problems), len(want), problems)
	}
	for _, w := range want {
		found := false
		for _, p := range problems {
			if p.Path == w.path {
				found = true
				if !errors.Is(p, w.is) || !strings.Contains(p.Error(), w.has) || !strings.HasPrefix(p.Error(), w.path+": ") {
					t.Errorf("problem %v, want %v containing %q", p, w.is, w.has)
				}
			}
		}
		if !found {
			t.Errorf("no problem reported for %s", w.path)
		}
	}
}

func TestDiscoverNoDefaults(t *testing.T) {
	explicit, project, home := layout(t)
	found, problems := skills.Discover([]string{explicit, explicit}, &skills.Options{NoDefaults: true, WorkDir: project, Home: home})
	if names(found) != "deploy" || len(problems) != 0 {
		t.Errorf("skills %s, problems %v", names(found), problems)
	}
	// Missing default roots are not problems.
	found, problems = skills.Discover(nil, &skills.Options{WorkDir: t.TempDir(), Home: t.TempDir()})
	if len(found) != 0 || len(problems) != 0 {
		t.Errorf("skills %s, problems %v", names(found), problems)
	}
	// The project in the home: one root, searched once.
	found, problems = skills.Discover(nil, &skills.Options{WorkDir: home, Home: home})
	if names(found) != "linked,lint,notes" || len(problems) != 0 {
		t.Errorf("skills %s, problems %v", names(found), problems)
	}
}

func TestDiscoverSizeCap(t *testing.T) {
	root := t.TempDir()
	writeSkill(t, root, "big", skillMD("big", "Big.", strings.Repeat("x", 200)), nil)
	found, problems := skills.Discover([]string{root}, &skills.Options{NoDefaults: true, MaxFileBytes: 100})
	if len(found) != 0 || len(problems) != 1 || !strings.Contains(problems[0].Error(), "larger than 100 bytes") {
		t.Errorf("skills %s, problems %v", names(found), problems)
	}
}

func TestDefaultRoots(t *testing.T) {
	got := skills.DefaultRoots(&skills.Options{WorkDir: "/w", Home: "/h"})
	if strings.Join(got, " ") != "/w/.agents/skills /w/.claude/skills /h/.agents/skills /h/.claude/skills" {
		t.Errorf("got %v", got)
	}
}

func TestPromptSection(t *testing.T) {
	if got := skills.PromptSection(nil); got != "" {
		t.Errorf("no skills: %q", got)
	}
	got := skills.PromptSection([]*skills.Skill{{Name: "a", Description: "Use <this> &\n  that."}})
	if !strings.Contains(got, "<skill>\n<name>a</name>\n<description>Use &lt;this&gt; &amp; that.</description>\n</skill>\n</available_skills>") {
		t.Errorf("got %s", got)
	}
}
