package main

// Hooks and permission rules through the real binary: a shell hook of the
// config file decides a run_command call, and the model reads the result.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// hookConfig writes a config file whose pre_tool hook on run_command is
// the script body, and returns its path.
func hookConfig(t *testing.T, event, script string) string {
	t.Helper()
	dir := t.TempDir()
	hook := filepath.Join(dir, "hook.sh")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.toml")
	body := "[[hooks." + event + "]]\nmatcher = \"run_command\"\ncommand = \"" + hook + "\"\ntimeout = 30\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestShellHookDenies(t *testing.T) {
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("c1", "run_command", `{"command":"rm -f hello.txt"}`)}},
		openaitest.Reply{Text: "I may not delete files."},
	)
	defer srv.Close()
	dir := workdir(t)
	// The hook saves what it read, and refuses commands that delete:
	// exit 2, the reason on stderr (Claude Code's convention).
	cfg := hookConfig(t, "pre_tool", `input=$(cat)
printf '%s' "$input" > hook-input.json
case "$input" in
*'"rm '*) echo "deleting files is not allowed in this repository" >&2; exit 2;;
esac
exit 0
`)
	// --yes (bypassPermissions) does not get past a hook.
	r := hrns(t, dir, srv, "run", "--config", cfg, "--yes", "clean up")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "hello.txt")); err != nil {
		t.Fatalf("the command ran: %v", err)
	}
	got := toolResults(t, srv.Requests()[1].Body)
	if len(got) != 1 || !strings.Contains(got[0], "deleting files is not allowed in this repository") {
		t.Errorf("the model read %q", got)
	}
	if !strings.Contains(r.stderr, "pre_tool hook") || !strings.Contains(r.stderr, "deny") {
		t.Errorf("the user is not told a hook refused the call:\n%s", r.stderr)
	}
	var in map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "hook-input.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatalf("the hook read %q: %v", b, err)
	}
	abs, _ := filepath.EvalSymlinks(dir)
	cwd, _ := filepath.EvalSymlinks(in["cwd"].(string))
	if in["hook_event_name"] != "PreToolUse" || in["hrns_event"] != "pre_tool" || in["tool_name"] != "run_command" ||
		in["tool_input"].(map[string]any)["command"] != "rm -f hello.txt" || cwd != abs || in["permission_mode"] != "bypassPermissions" ||
		in["session_id"] == "" || in["tool_use_id"] != "c1" {
		t.Errorf("the hook read %s", b)
	}
}

func TestShellHookRewrites(t *testing.T) {
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("c1", "run_command", `{"command":"echo original > out.txt"}`)}},
		openaitest.Reply{Text: "Done."},
	)
	defer srv.Close()
	dir := workdir(t)
	// Claude Code's JSON answer: allow, with new arguments. Without
	// --yes and without a terminal the call would be refused: the
	// hook's allow decides.
	cfg := hookConfig(t, "PreToolUse", `cat > /dev/null
echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{"command":"echo rewritten > out.txt"}}}'
`)
	r := hrns(t, dir, srv, "run", "--config", cfg, "make out.txt")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	b, err := os.ReadFile(filepath.Join(dir, "out.txt"))
	if err != nil || string(b) != "rewritten\n" {
		t.Fatalf("out.txt = %q, %v\n%s", b, err, r.stderr)
	}
}

func TestShellHookRedactsResult(t *testing.T) {
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("c1", "run_command", `{"command":"echo token=s3cr3t"}`)}},
		openaitest.Reply{Text: "Done."},
	)
	defer srv.Close()
	cfg := hookConfig(t, "post_tool", `cat > /dev/null
echo '{"updated_output":"token=[redacted]"}'
`)
	r := hrns(t, workdir(t), srv, "run", "--config", cfg, "--yes", "print the token")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	got := toolResults(t, srv.Requests()[1].Body)
	if len(got) != 1 || got[0] != "token=[redacted]" {
		t.Errorf("the model read %q", got)
	}
}

func TestPermissionFlags(t *testing.T) {
	script := func() *openaitest.Server {
		return openaitest.NewServer(
			openaitest.Reply{ToolCalls: []llm.ToolCall{call("c1", "run_command", `{"command":"echo made > out.txt"}`)}},
			openaitest.Reply{Text: "Done."},
		)
	}
	tests := []struct {
		name  string
		args  []string
		ran   bool
		model string // what the model reads
	}{
		{"deny rule beats --yes", []string{"--yes", "--deny", "run_command(echo:*)"}, false, "denied by the rule run_command(echo:*)"},
		{"plan mode", []string{"--permission-mode", "plan"}, false, "plan mode"},
		{"allow rule does not cover a redirection", []string{"--allow", "run_command(echo:*)"}, false, "needs approval"},
		{"allow rule for the tool", []string{"--allow", "run_command"}, true, "exit code: 0"},
		{"bypass mode", []string{"--permission-mode", "bypassPermissions"}, true, "exit code: 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := script()
			defer srv.Close()
			dir := workdir(t)
			r := hrns(t, dir, srv, append(append([]string{"run"}, tt.args...), "make out.txt")...)
			if r.code != 0 {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			_, err := os.Stat(filepath.Join(dir, "out.txt"))
			if ran := err == nil; ran != tt.ran {
				t.Errorf("ran = %v, want %v", ran, tt.ran)
			}
			if got := toolResults(t, srv.Requests()[1].Body)[0]; !strings.Contains(got, tt.model) {
				t.Errorf("the model read %q, want %q", got, tt.model)
			}
		})
	}
	t.Run("--yes with another mode", func(t *testing.T) {
		r := hrns(t, workdir(t), nil, "run", "--yes", "--permission-mode", "plan", "x")
		if r.code != 2 || !strings.Contains(r.stderr, "--yes means --permission-mode bypassPermissions") {
			t.Errorf("exit %d\n%s", r.code, r.stderr)
		}
	})
	t.Run("bad rule", func(t *testing.T) {
		r := hrns(t, workdir(t), nil, "run", "--allow", "run_command(git", "x")
		if r.code != 2 || !strings.Contains(r.stderr, "must end with )") {
			t.Errorf("exit %d\n%s", r.code, r.stderr)
		}
	})
}

// user_prompt and stop hooks through the binary: plain stdout adds context
// to the prompt; exit 2 on stop makes the model go on with the reason.
func TestShellHooksPromptAndStop(t *testing.T) {
	srv := openaitest.NewServer(openaitest.Reply{Text: "done?"}, openaitest.Reply{Text: "done."})
	defer srv.Close()
	dir := t.TempDir()
	prompt := filepath.Join(dir, "prompt.sh")
	stop := filepath.Join(dir, "stop.sh")
	os.WriteFile(prompt, []byte("#!/bin/sh\ncat > /dev/null\necho 'The release branch is frozen.'\n"), 0o755)
	os.WriteFile(stop, []byte("#!/bin/sh\ngrep -q '\"stop_hook_active\":true' && exit 0\necho 'Run the tests first.' >&2\nexit 2\n"), 0o755)
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte("hooks:\n  UserPromptSubmit:\n    - command: "+prompt+"\n  stop:\n    - command: "+stop+"\n"), 0o644)
	r := hrns(t, workdir(t), srv, "run", "--config", cfg, "ship it")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "done.") {
		t.Errorf("stdout %q", r.stdout)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	json.Unmarshal(reqs[0].Body, &req)
	if first := string(req.Messages[len(req.Messages)-1].Content); !strings.Contains(first, "ship it") || !strings.Contains(first, "The release branch is frozen.") {
		t.Errorf("the prompt the model read: %s", first)
	}
	json.Unmarshal(reqs[1].Body, &req)
	if last := req.Messages[len(req.Messages)-1]; last.Role != "user" || !strings.Contains(string(last.Content), "Run the tests first.") {
		t.Errorf("after the stop hook the model read %s %s", last.Role, last.Content)
	}
}
