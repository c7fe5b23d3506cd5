package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/loop"
)

func TestParseHookReply(t *testing.T) {
	tests := []struct {
		name string
		ev   loop.HookEvent
		out  string
		want *loop.HookOutput
		err  string
	}{
		{"empty", loop.HookPreTool, ``, nil, ""},
		{"plain text is ignored before a tool", loop.HookPreTool, `ok`, nil, ""},
		{"plain text is context for a prompt", loop.HookUserPrompt, `today is Monday`, &loop.HookOutput{Context: "today is Monday"}, ""},
		{"hrns deny", loop.HookPreTool, `{"decision":"deny","reason":"no"}`, &loop.HookOutput{Decision: loop.HookDeny, Reason: "no"}, ""},
		{"hrns rewrite", loop.HookPreTool, `{"updated_input":{"command":"ls"}}`, &loop.HookOutput{Arguments: json.RawMessage(`{"command":"ls"}`)}, ""},
		{"claude allow with input", loop.HookPreTool,
			`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"check it","updatedInput":{"a":1}}}`,
			&loop.HookOutput{Decision: loop.HookAsk, Reason: "check it", Arguments: json.RawMessage(`{"a":1}`)}, ""},
		{"claude's old approve", loop.HookPreTool, `{"decision":"approve"}`, &loop.HookOutput{Decision: loop.HookAllow}, ""},
		{"claude's old block", loop.HookPreTool, `{"decision":"block","reason":"r"}`, &loop.HookOutput{Decision: loop.HookDeny, Reason: "r"}, ""},
		{"continue false denies a call", loop.HookPreTool, `{"continue":false,"stopReason":"halt"}`, &loop.HookOutput{Decision: loop.HookDeny, Reason: "halt"}, ""},
		{"system message", loop.HookPreTool, `{"systemMessage":"careful"}`, &loop.HookOutput{Message: "careful"}, ""},
		{"unknown decision", loop.HookPreTool, `{"decision":"maybe"}`, nil, `"maybe" is not allow, deny or ask`},
		{"not JSON", loop.HookPreTool, `{"decision":`, nil, "not valid JSON"},
		{"stop block", loop.HookStop, `{"decision":"block","reason":"run the tests"}`, &loop.HookOutput{Decision: loop.HookBlock, Reason: "run the tests"}, ""},
		{"prompt context", loop.HookUserPrompt, `{"hookSpecificOutput":{"hookEventName":"UserPromptSubmit","additionalContext":"ctx"}}`, &loop.HookOutput{Context: "ctx"}, ""},
		{"post replace", loop.HookPostTool, `{"updated_output":"[redacted]"}`, &loop.HookOutput{Output: loop.TextOutput("[redacted]")}, ""},
		{"post block", loop.HookPostTool, `{"decision":"block","reason":"secret"}`, &loop.HookOutput{Reason: "secret", Output: loop.ErrorOutput("secret")}, ""},
		{"arguments only before a tool", loop.HookStop, `{"updated_input":{"a":1}}`, &loop.HookOutput{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseHookReply(tt.ev, []byte(tt.out))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestHookConfigErrors(t *testing.T) {
	tests := []struct{ body, err string }{
		{"[[hooks.before_tool]]\ncommand = \"x\"\n", `unknown event "before_tool"`},
		{"[[hooks.pre_tool]]\nmatcher = \"x\"\n", "no command"},
		{"[[hooks.pre_tool]]\ncommand = \"x\"\ntimeout = 99999\n", "timeout 99999"},
		{"[[hooks.pre_tool]]\ncommand = \"x\"\nmatcher = \"[\"\n", "matcher"},
		{"[[hooks.pre_tool]]\ncommand = \"x\"\nwhen = 1\n", "unknown key"},
		{"[permissions]\nmode = \"yolo\"\n", `unknown permission mode "yolo"`},
		{"[permissions]\nallow = [\"run_command(git\"]\n", "must end with )"},
		{"[permissions]\ndeny = [\"\"]\n", "no tool name"},
		{"[agents.ops]\npermissions = { mode = \"yolo\" }\n", "agents.ops.permissions"},
		{"[[agents.ops.hooks.stop]]\nmatcher = \"x\"\n", "agents.ops: hooks.stop[0]: no command"},
	}
	for _, tt := range tests {
		_, err := loadConfig(writeFile(t, "config.toml", tt.body, 0o644), env(nil))
		if err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%q: err = %v, want %q", tt.body, err, tt.err)
		}
	}
	yaml := "permissions:\n  mode: plan\n  deny: [\"run_command(rm:*)\"]\nhooks:\n  PreToolUse:\n    - matcher: run_command|write_*\n      command: ./check.sh\n"
	cfg, err := loadConfig(writeFile(t, "config.yaml", yaml, 0o644), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Permissions.Mode != "plan" || len(cfg.Hooks["PreToolUse"]) != 1 || cfg.Hooks["PreToolUse"][0].Matcher != "run_command|write_*" {
		t.Errorf("config %+v", cfg)
	}
}

// A shell hook run in process: the matcher selects tools, exit codes
// mean what they mean in Claude Code, and a hook that cannot finish in
// time fails.
func TestShellHookExitCodes(t *testing.T) {
	dir := t.TempDir()
	env := &hookEnv{workdir: dir, sessionID: "s", mode: loop.ModeDefault}
	run := func(command string, timeout int, in *loop.HookInput) (*loop.HookOutput, error) {
		h := shellHook(in.Event, HookConfig{Matcher: "run_*|edit_file", Command: command, Timeout: timeout}, env)
		return h.Func(context.Background(), in)
	}
	call := &loop.HookInput{Event: loop.HookPreTool, Tool: "run_command", Arguments: json.RawMessage(`{"command":"ls"}`)}
	if out, err := run("exit 2", 10, &loop.HookInput{Event: loop.HookPreTool, Tool: "read_file"}); out != nil || err != nil {
		t.Errorf("a tool the matcher leaves out: %+v %v", out, err)
	}
	if out, err := run("echo why >&2; exit 2", 10, call); err != nil || out.Decision != loop.HookDeny || out.Reason != "why" {
		t.Errorf("exit 2: %+v %v", out, err)
	}
	if out, err := run("echo oops >&2; exit 1", 10, call); err != nil || out.Decision != loop.HookNone || !strings.Contains(out.Message, "oops") {
		t.Errorf("exit 1: %+v %v", out, err)
	}
	if out, err := run(`grep -q '"tool_name":"run_command"' && echo '{"decision":"allow"}'`, 10, call); err != nil || out.Decision != loop.HookAllow {
		t.Errorf("reading stdin: %+v %v", out, err)
	}
	if _, err := run("sleep 30", 1, call); err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("timeout: %v", err)
	}
	if _, err := run("head -c 100000 /dev/zero | tr '\\0' a", 10, call); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("long output: %v", err)
	}
	// The hook runs in the working directory, confined to it: it cannot
	// write elsewhere.
	outside := t.TempDir()
	if out, err := run("touch here.txt; touch "+filepath.Join(outside, "x")+" 2>/dev/null || echo confined >&2; exit 2", 10, call); err != nil || out.Reason != "confined" {
		t.Errorf("confinement: %+v %v", out, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "here.txt")); err != nil {
		t.Errorf("the hook did not run in the working directory: %v", err)
	}
}

func TestHookReadOnly(t *testing.T) {
	dir, bin, extra := t.TempDir(), t.TempDir(), t.TempDir()
	env := &hookEnv{workdir: dir}
	got := hookReadOnly(HookConfig{Command: filepath.Join(bin, "check.sh") + " --strict", ReadPaths: []string{extra, "missing"}}, env)
	if diff := cmp.Diff([]string{extra, bin}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := hookReadOnly(HookConfig{Command: "jq .tool_name"}, env); len(got) != 0 {
		t.Errorf("a program on the PATH grants %v", got)
	}
}

// TestShellHookFailsClosed: issue 32, finding 8. A pre_tool hook whose
// program cannot run (missing, not executable, the shell's 126 and 127)
// or does not finish (timeout, killed by a signal, its own or its
// program's) fails, which refuses the call; it is never the non-blocking
// error of a hook that ran and exited 1.
func TestShellHookFailsClosed(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(t.TempDir(), "check.sh")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := &hookEnv{workdir: dir, sessionID: "s", mode: loop.ModeDefault}
	call := &loop.HookInput{Event: loop.HookPreTool, Tool: "run_command", Arguments: json.RawMessage(`{"command":"ls"}`)}
	tests := []struct {
		name, command string
		timeout       int
		want          string
	}{
		{"missing program", filepath.Join(dir, "no-such-hook.sh"), 10, "not found (exit 127)"},
		{"missing program in PATH", "no-such-hook-program --check", 10, "not found (exit 127)"},
		{"not executable", notExec, 10, "cannot be executed (exit 126)"},
		{"exit 126", "exit 126", 10, "exit 126"},
		{"exit 127", "exit 127", 10, "exit 127"},
		{"timeout", "sleep 30", 1, "timed out"},
		{"the hook's shell killed", "kill -KILL $$", 10, "killed"},
		{"its program killed", "sh -c 'kill -SEGV $$'", 10, "killed by signal 11"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := shellHook(loop.HookPreTool, HookConfig{Matcher: "run_command", Command: tt.command, Timeout: tt.timeout}, env)
			out, err := h.Func(context.Background(), call)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%q: %+v, %v; want an error saying %q", tt.command, out, err, tt.want)
			}
		})
	}
}
