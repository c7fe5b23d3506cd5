package main

// Issue 32 through the binary: a pre_tool hook that cannot run refuses the
// call (finding 8), and permission rules are judged on the line as the
// shell that runs it reads it (finding 1).

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// TestShellHookThatCannotRunRefuses: a pre_tool hook whose program is
// missing or not executable, or that a signal ends, refuses the call even
// with --yes; before, the shell's 127 was a non-blocking error and the
// command ran.
func TestShellHookThatCannotRunRefuses(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "check.sh")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, command string }{
		{"missing program", "/nonexistent/hooks/check.sh"},
		{"not executable", notExec},
		{"killed by a signal", "kill -KILL $$"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := openaitest.NewServer(
				openaitest.Reply{ToolCalls: []llm.ToolCall{call("c1", "run_command", `{"command":"touch ran.txt"}`)}},
				openaitest.Reply{Text: "Done."},
			)
			defer srv.Close()
			cfg := filepath.Join(t.TempDir(), "config.toml")
			body := "[[hooks.pre_tool]]\nmatcher = \"run_command\"\ncommand = " + strconv.Quote(tt.command) + "\ntimeout = 30\n"
			if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			dir := workdir(t)
			r := hrns(t, dir, srv, "run", "--config", cfg, "--yes", "make ran.txt")
			if r.code != 0 {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			if _, err := os.Stat(filepath.Join(dir, "ran.txt")); err == nil {
				t.Fatalf("the guarded command ran\n%s", r.stderr)
			}
			if got := toolResults(t, srv.Requests()[1].Body); len(got) != 1 || !strings.Contains(got[0], "hook") {
				t.Errorf("the model read %q", got)
			}
		})
	}
}

// TestRulesJudgedAsTheShellReadsIt: run_command runs its line with
// /bin/sh (dash on Debian), which reads "git status &>/dev/null touch
// pwned" as "git status &" and "touch pwned", where bash reads one git
// command. The allow rule for git status must not run it, nor may --yes
// get it past the deny rule for touch.
func TestRulesJudgedAsTheShellReadsIt(t *testing.T) {
	for _, tt := range []struct {
		name  string
		args  []string
		model string // what the model reads
	}{
		{"allow rule", []string{"--allow", "run_command(git status:*)"}, "needs approval"},
		{"deny rule", []string{"--yes", "--deny", "run_command(touch:*)"}, "cannot be checked"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := openaitest.NewServer(
				openaitest.Reply{ToolCalls: []llm.ToolCall{call("c1", "run_command", `{"command":"git status &>/dev/null touch pwned"}`)}},
				openaitest.Reply{Text: "Done."},
			)
			defer srv.Close()
			dir := workdir(t)
			r := hrns(t, dir, srv, append(append([]string{"run"}, tt.args...), "check the status")...)
			if r.code != 0 {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
				t.Fatalf("the line ran\n%s", r.stderr)
			}
			if got := toolResults(t, srv.Requests()[1].Body); len(got) != 1 || !strings.Contains(got[0], tt.model) {
				t.Errorf("the model read %q, want %q", got, tt.model)
			}
		})
	}
}
