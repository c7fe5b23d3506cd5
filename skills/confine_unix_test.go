//go:build unix

package skills_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hrns-dev/hrns/skills"
)

// TestProjectSkillsStayInTheProject is a cloned repository's attack on
// discovery: its ./.agents/skills links a skill folder and a SKILL.md to
// the user's files, and names a FIFO SKILL.md (which a plain open would
// wait on forever). None is read; each is a problem naming its file; the
// project's own skills, links inside it included, and the user's skills
// (whose links may go anywhere) are found.
func TestProjectSkillsStayInTheProject(t *testing.T) {
	base := t.TempDir()
	project, home, outside := filepath.Join(base, "project"), filepath.Join(base, "home"), filepath.Join(base, "outside")
	root := filepath.Join(project, ".agents", "skills")
	writeSkill(t, root, "ok", skillMD("ok", "A project skill.", "ok"), nil)
	writeSkill(t, project, "kept/inside", skillMD("inside", "Linked inside the project.", "inside"), nil)
	writeSkill(t, outside, "secret", skillMD("secret", "The user's private skill.", "PRIVATE"), nil)
	if err := os.WriteFile(filepath.Join(outside, "creds"), []byte(skillMD("creds", "Private.", "TOKEN=abc")), 0o600); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		filepath.Join(root, "inside"):            filepath.Join(project, "kept", "inside"),
		filepath.Join(root, "secret"):            filepath.Join(outside, "secret"),
		filepath.Join(root, "creds", "SKILL.md"): filepath.Join(outside, "creds"),
	}
	for link, target := range links {
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "fifo"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo", "SKILL.md"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The user's own skills may link anywhere.
	if err := os.MkdirAll(filepath.Join(home, ".agents", "skills"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeSkill(t, outside, "mine", skillMD("mine", "The user's skill, kept elsewhere.", "mine"), nil)
	if err := os.Symlink(filepath.Join(outside, "mine"), filepath.Join(home, ".agents", "skills", "mine")); err != nil {
		t.Fatal(err)
	}

	found, problems := skills.Discover(nil, &skills.Options{WorkDir: project, Home: home})
	if got := names(found); got != "inside,mine,ok" {
		t.Errorf("skills %s, want inside,mine,ok", got)
	}
	for _, s := range found {
		if strings.Contains(s.Body, "PRIVATE") || strings.Contains(s.Body, "TOKEN") {
			t.Errorf("read the user's file through the project: %+v", s)
		}
	}
	want := map[string]string{
		filepath.Join(root, "secret", "SKILL.md"): "must stay inside it",
		filepath.Join(root, "creds", "SKILL.md"):  "must stay inside it",
		filepath.Join(root, "fifo", "SKILL.md"):   "not a regular file",
	}
	if len(problems) != len(want) {
		t.Errorf("problems %v, want %d", problems, len(want))
	}
	for _, p := range problems {
		if has, ok := want[p.Path]; !ok || !errors.Is(p, skills.ErrInvalid) || !strings.Contains(p.Error(), has) {
			t.Errorf("problem %v, want one of %v", p, want)
		}
	}
}

// TestProjectSkillsRelativeWorkDir: a relative WorkDir (the CLI's ".")
// confines the project's skills to the same folder, and finds them.
func TestProjectSkillsRelativeWorkDir(t *testing.T) {
	project := t.TempDir()
	writeSkill(t, filepath.Join(project, ".agents", "skills"), "ok", skillMD("ok", "A project skill.", "ok"), nil)
	t.Chdir(project)
	found, problems := skills.Discover(nil, &skills.Options{WorkDir: ".", Home: t.TempDir()})
	if names(found) != "ok" || len(problems) != 0 {
		t.Errorf("skills %s, problems %v", names(found), problems)
	}
}
