//go:build unix

package tools_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/tools"
)

// TestAcceptEditsDoesNotConfigureGit: issue 32, finding 13. In acceptEdits
// with the allow rule run_command(git status:*), the model writes
// core.fsmonitor into .git/config (by its name, by an edit, through a
// symbolic link the repository holds) and runs git status, which would
// run the monitor. The write asks (here, with no approver, it is refused),
// so git status runs nothing of the model's.
func TestAcceptEditsDoesNotConfigureGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	const config = "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = \"touch pwned; false\"\n"
	tests := []struct {
		name string
		call llm.ToolCall
	}{
		{"write by name", call("w", "write_file", `{"path":".git/config","content":`+quote(config)+`}`)},
		{"write by another spelling", call("w", "write_file", `{"path":"./src/../.git/config","content":`+quote(config)+`}`)},
		{"edit", call("w", "edit_file", `{"path":".git/config","old_string":"[core]\n","new_string":`+quote("[core]\n\tfsmonitor = \"touch pwned; false\"\n")+`}`)},
		{"write through a link of the repository", call("w", "write_file", `{"path":"docs/settings","content":`+quote(config)+`}`)},
		{"edit through a link of the repository", call("w", "edit_file", `{"path":"docs/settings","old_string":"[core]\n","new_string":`+quote("[core]\n\tfsmonitor = \"touch pwned; false\"\n")+`}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			git := exec.Command("git", "init", "-q", dir)
			if out, err := git.CombinedOutput(); err != nil {
				t.Fatalf("git init: %v %s", err, out)
			}
			os.MkdirAll(filepath.Join(dir, "src"), 0o755)
			os.MkdirAll(filepath.Join(dir, "docs"), 0o755)
			if err := os.Symlink("../.git/config", filepath.Join(dir, "docs", "settings")); err != nil {
				t.Fatal(err)
			}
			ts, err := tools.ByName([]string{"write_file", "edit_file", "run_command"}, &tools.Config{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			model := llmtest.NewModel(
				llmtest.Calls(tt.call),
				llmtest.Calls(call("g", "run_command", `{"command":"git status --short"}`)),
				llmtest.Text("done"),
			)
			perms := &loop.Permissions{Mode: loop.ModeAcceptEdits, Allow: []loop.Rule{{Tool: "run_command", Pattern: "git status:*"}, {Tool: "write_file"}}}
			agent := loop.NewAgent(model, ts, &loop.Options{Permissions: perms})
			if _, err := agent.Run(context.Background(), []llm.Message{llm.UserMessage("go")}); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
				t.Fatal("git status ran the model's fsmonitor")
			}
		})
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Which paths acceptEdits and rules without a pattern leave to the
// approver.
func TestConfiguresPrograms(t *testing.T) {
	ts, err := tools.ByName([]string{"write_file"}, &tools.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	def, _ := ts.Lookup("write_file")
	perms := &loop.Permissions{Mode: loop.ModeAcceptEdits, Allow: []loop.Rule{{Tool: "write_file"}, {Tool: "write_file", Pattern: ".hrns/notes.md"}}}
	for p, want := range map[string]loop.Behavior{
		".git/config": loop.Ask, ".git": loop.Ask, ".git/hooks/pre-commit": loop.Ask, ".git/info/attributes": loop.Ask,
		"vendor/lib/.git/config": loop.Ask, `sub\.git\config`: loop.Ask, ".Git/Config": loop.Ask, "a/../.git/config": loop.Ask,
		".gitattributes": loop.Ask, "src/.gitattributes": loop.Ask, ".gitmodules": loop.Ask, ".envrc": loop.Ask,
		".hg/hgrc": loop.Ask, ".hrns/config.toml": loop.Ask, ".claude/settings.json": loop.Ask,
		".hrns/notes.md": loop.Allow, // a rule that names it
		"main.go":        loop.Allow, "Makefile": loop.Allow, ".gitignore": loop.Allow, "docs/git/config": loop.Allow, ".github/workflows/ci.yml": loop.Allow,
	} {
		args, _ := json.Marshal(map[string]string{"path": p, "content": "x"})
		if d := perms.Check(&def, args); d.Behavior != want {
			t.Errorf("write_file %s in acceptEdits: %s, want %s", p, d.Behavior, want)
		}
	}
}

// A write that symbolic links lead to a file that configures programs is
// refused, a file not there yet included (a hook git would run): the
// policy must see such a file named.
func TestWriteThroughLinkToProtected(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ".git", "hooks"), 0o755)
	os.MkdirAll(filepath.Join(dir, "docs"), 0o755)
	links := map[string]string{"docs/hook": "../.git/hooks/post-checkout", "docs/chain": "hook", "docs/gitdir": "../.git", "docs/readme": "../README.md"}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	ts := tools.FilesIn(root, nil)
	for _, p := range []string{"docs/hook", "docs/chain", "docs/gitdir/hooks/pre-push"} {
		r := callTool(t, t.Context(), ts, "write_file", map[string]any{"path": p, "content": "#!/bin/sh\ntouch pwned\n"})
		if r.err == nil {
			t.Errorf("write_file %s was allowed", p)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, ".git", "hooks")); len(entries) != 0 {
		t.Errorf("a hook was written: %v", entries)
	}
	if r := callTool(t, t.Context(), ts, "write_file", map[string]any{"path": "docs/readme", "content": "hi\n"}); r.err != nil {
		t.Errorf("write_file through a link to README.md: %v", r.err)
	}
}
