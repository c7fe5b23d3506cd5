package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/loop/cmdline"
	"github.com/hrns-dev/hrns/sandbox"
	"github.com/hrns-dev/hrns/session"
)

// HookConfig is a shell-command hook of the config file, under the name of
// its event:
//
//	[[hooks.pre_tool]]
//	matcher = "run_command"        # tool names: a name, a glob, or several joined by |
//	command = "/home/me/.config/hrns/hooks/check.sh"
//	timeout = 10                    # seconds (default 60)
//
// The command is run with /bin/sh -c in the sandbox, in the working
// directory, with a JSON description of the event on stdin; it answers with
// its exit code and, on exit 0, optional JSON on stdout (see docs/cli.md).
type HookConfig struct {
	Matcher string `toml:"matcher" yaml:"matcher"`
	Command string `toml:"command" yaml:"command"`
	// Timeout is in seconds; 0 means 60.
	Timeout int `toml:"timeout" yaml:"timeout"`
	// AllowNetwork lets the command use the network.
	AllowNetwork bool `toml:"allow_network" yaml:"allow_network"`
	// ReadPaths are more files and folders the command may read (the
	// working directory and the folder of a program named by path are
	// readable already).
	ReadPaths []string `toml:"read_paths" yaml:"read_paths"`
}

// hookEvents maps the event names of the config (hrns's, and Claude Code's
// for the same events) to the loop's events, and the loop's events to the
// name hook_event_name gives the command (Claude Code's).
var hookEvents = []struct {
	ours   loop.HookEvent
	claude string
}{
	{loop.HookPreTool, "PreToolUse"},
	{loop.HookPostTool, "PostToolUse"},
	{loop.HookUserPrompt, "UserPromptSubmit"},
	{loop.HookStop, "Stop"},
	{loop.HookSubagentStop, "SubagentStop"},
	{loop.HookPreCompact, "PreCompact"},
	{loop.HookRunStart, "SessionStart"},
	{loop.HookRunEnd, "SessionEnd"},
}

// hookEvent returns the loop event of a config key.
func hookEvent(key string) (loop.HookEvent, bool) {
	for _, e := range hookEvents {
		if key == string(e.ours) || key == e.claude {
			return e.ours, true
		}
	}
	return "", false
}

func claudeEventName(ev loop.HookEvent) string {
	for _, e := range hookEvents {
		if e.ours == ev {
			return e.claude
		}
	}
	return string(ev)
}

// Bounds of a shell hook's exchange.
const (
	maxHookOutput      = 64 << 10 // stdout kept; a longer one is an error
	maxHookStderr      = 16 << 10 // stderr kept, for reasons and reports
	defaultHookSeconds = 60
	maxHookSeconds     = 3600
)

// checkHooks validates the hooks section of a config.
func checkHooks(hooks map[string][]HookConfig) error {
	for key, hs := range hooks {
		if _, ok := hookEvent(key); !ok {
			return fmt.Errorf("hooks: unknown event %q: use pre_tool, post_tool, user_prompt, stop, subagent_stop, pre_compact, run_start or run_end", key)
		}
		for i, h := range hs {
			if strings.TrimSpace(h.Command) == "" {
				return fmt.Errorf("hooks.%s[%d]: no command", key, i)
			}
			if h.Timeout < 0 || h.Timeout > maxHookSeconds {
				return fmt.Errorf("hooks.%s[%d]: timeout %d is not between 0 and %d seconds", key, i, h.Timeout, maxHookSeconds)
			}
			for _, m := range strings.Split(h.Matcher, "|") {
				if _, err := path.Match(strings.TrimSpace(m), ""); err != nil {
					return fmt.Errorf("hooks.%s[%d]: matcher %q: %v", key, i, h.Matcher, err)
				}
			}
		}
	}
	return nil
}

// hookEnv is what shell hooks of one run share.
type hookEnv struct {
	workdir    string // absolute
	sessionID  string
	mode       loop.PermissionMode
	perms      *loop.Permissions // when set, its mode in force wins over mode (the chat's Shift+Tab changes it)
	unconfined bool
	readOnly   []string // more paths every command may read
}

func newSessionID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// shellHooks turns the hooks of a config into loop hooks, in a stable
// order: by event, hrns's name of the event before Claude Code's, then in
// the config's order.
func shellHooks(hooks map[string][]HookConfig, env *hookEnv) []loop.Hook {
	var out []loop.Hook
	for _, e := range hookEvents {
		for _, key := range []string{string(e.ours), e.claude} {
			for _, hc := range hooks[key] {
				out = append(out, shellHook(e.ours, hc, env))
			}
		}
	}
	return out
}

// shellHook returns a loop hook that runs hc's command.
func shellHook(ev loop.HookEvent, hc HookConfig, env *hookEnv) loop.Hook {
	secs := hc.Timeout
	if secs <= 0 {
		secs = defaultHookSeconds
	}
	timeout := time.Duration(secs) * time.Second
	var matchers []string
	for _, m := range strings.Split(hc.Matcher, "|") {
		if m = strings.TrimSpace(m); m != "" {
			matchers = append(matchers, m)
		}
	}
	return loop.Hook{
		Name:  hc.Command,
		Event: ev,
		// The sandbox's own timeout ends the command first; this one
		// is the loop's watchdog.
		Timeout: timeout + 10*time.Second,
		Func: func(ctx context.Context, in *loop.HookInput) (*loop.HookOutput, error) {
			if in.Tool != "" && len(matchers) > 0 && !slices.ContainsFunc(matchers, func(m string) bool {
				ok, _ := path.Match(m, in.Tool)
				return ok
			}) {
				return nil, nil
			}
			return runShellHook(ctx, in, hc, env, timeout)
		},
	}
}

// hookRequest is what a shell hook reads on stdin: Claude Code's fields,
// plus hrns's own.
type hookRequest struct {
	SessionID      string          `json:"session_id"`
	TranscriptPath string          `json:"transcript_path"`
	Cwd            string          `json:"cwd"`
	PermissionMode string          `json:"permission_mode"`
	HookEventName  string          `json:"hook_event_name"`
	HrnsEvent      loop.HookEvent  `json:"hrns_event"`
	ToolName       string          `json:"tool_name,omitempty"`
	ToolInput      json.RawMessage `json:"tool_input,omitempty"`
	ToolUseID      string          `json:"tool_use_id,omitempty"`
	ToolResponse   *string         `json:"tool_response,omitempty"`
	IsError        bool            `json:"is_error,omitempty"`
	Prompt         string          `json:"prompt,omitempty"`
	Answer         string          `json:"answer,omitempty"`
	StopHookActive bool            `json:"stop_hook_active,omitempty"`
	Trigger        string          `json:"trigger,omitempty"`
	Status         loop.Status     `json:"status,omitempty"`
	Error          string          `json:"error,omitempty"`
	Agent          string          `json:"agent,omitempty"`
}

// hookReply is what a shell hook may print on stdout with exit 0: hrns's
// fields, or Claude Code's (hookSpecificOutput and the rest).
type hookReply struct {
	Decision          string          `json:"decision"`
	Reason            string          `json:"reason"`
	UpdatedInput      json.RawMessage `json:"updated_input"`
	UpdatedOutput     *string         `json:"updated_output"`
	AdditionalContext string          `json:"additional_context"`
	// Claude Code's.
	Continue           *bool  `json:"continue"`
	StopReason         string `json:"stopReason"`
	SystemMessage      string `json:"systemMessage"`
	HookSpecificOutput *struct {
		PermissionDecision       string          `json:"permissionDecision"`
		PermissionDecisionReason string          `json:"permissionDecisionReason"`
		UpdatedInput             json.RawMessage `json:"updatedInput"`
		AdditionalContext        string          `json:"additionalContext"`
	} `json:"hookSpecificOutput"`
}

func runShellHook(ctx context.Context, in *loop.HookInput, hc HookConfig, env *hookEnv, timeout time.Duration) (*loop.HookOutput, error) {
	sid := env.sessionID
	if id, ok := session.IDFromContext(ctx); ok {
		sid = id // hrns serve's
	}
	mode := env.mode
	if env.perms != nil {
		mode = env.perms.CurrentMode()
	}
	req := hookRequest{
		SessionID: sid, Cwd: env.workdir, PermissionMode: string(mode),
		HookEventName: claudeEventName(in.Event), HrnsEvent: in.Event,
		ToolName: in.Tool, ToolInput: in.Arguments, ToolUseID: in.CallID, ToolResponse: in.Result, IsError: in.IsError,
		Prompt: in.Prompt, Answer: in.Answer, StopHookActive: in.StopHookActive, Trigger: in.Trigger,
		Status: in.Status, Error: in.Error, Agent: in.Agent,
	}
	if req.PermissionMode == "" {
		req.PermissionMode = string(loop.ModeDefault)
	}
	stdin, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	scratch, err := os.MkdirTemp("", "hrns-hook-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	errFile := filepath.Join(scratch, "stderr")
	stdout := &boundedBuffer{max: maxHookOutput}
	res, err := sandbox.Run(ctx, &sandbox.Spec{
		// stderr goes to a file of the scratch folder: the sandbox
		// captures one stream, and the two mean different things.
		Shell:        "exec 2>'" + strings.ReplaceAll(errFile, "'", `'\''`) + "'\n" + hc.Command,
		Dir:          env.workdir,
		Scratch:      scratch,
		ReadOnly:     hookReadOnly(hc, env),
		Env:          []string{"HOME=" + scratch, "HRNS_PROJECT_DIR=" + env.workdir, "CLAUDE_PROJECT_DIR=" + env.workdir, "HRNS_HOOK_EVENT=" + string(in.Event)},
		Stdin:        bytes.NewReader(stdin),
		AllowNetwork: hc.AllowNetwork,
		Limits:       sandbox.Limits{CPUTime: timeout, AddressSpace: 4 << 30, FileSize: 64 << 20, Processes: 128},
		Timeout:      timeout,
		Output:       stdout,
		Unconfined:   env.unconfined,
		// Where this machine isolates commands, a hook that cannot be isolated is refused, not run with less.
		RequireIsolation: !env.unconfined && sandbox.Isolation() == nil,
	})
	if err != nil {
		return nil, fmt.Errorf("running the hook: %w", err)
	}
	stderr := strings.TrimSpace(readHead(errFile, maxHookStderr))
	switch {
	case res.TimedOut:
		return nil, fmt.Errorf("the hook timed out after %v", timeout)
	case res.Signal != "":
		return nil, fmt.Errorf("the hook was killed (%s)", res.Signal)
	case res.ExitCode >= 126:
		// The shell's statuses for a program it could not run, and
		// for one a signal ended: the hook did not answer.
		return nil, fmt.Errorf("the hook did not run: %s", failedStatus(res.ExitCode, stderr))
	case res.ExitCode == 2:
		return blockingExit(in.Event, firstString(stderr, "the hook exited with status 2")), nil
	case res.ExitCode != 0:
		// Claude Code's convention: a non-blocking error, reported.
		return &loop.HookOutput{Message: fmt.Sprintf("hook exited with status %d (not a decision: exit 2 blocks): %s", res.ExitCode, clip(stderr, 500))}, nil
	}
	if stdout.over {
		return nil, fmt.Errorf("the hook wrote more than %d bytes on stdout", maxHookOutput)
	}
	return parseHookReply(in.Event, bytes.TrimSpace(stdout.buf.Bytes()))
}

// failedStatus says what the shell's exit status code, 126 or above,
// means, with the hook's stderr.
func failedStatus(code int, stderr string) string {
	var what string
	switch {
	case code == 126:
		what = "its program cannot be executed (exit 126)"
	case code == 127:
		what = "its program was not found (exit 127)"
	case code > 128 && code < 128+65:
		what = fmt.Sprintf("its program was killed by signal %d (exit %d)", code-128, code)
	default:
		what = fmt.Sprintf("exit %d", code)
	}
	if stderr != "" {
		what += ": " + clip(stderr, 500)
	}
	return what
}

// blockingExit is the answer of a hook that exited with status 2.
func blockingExit(ev loop.HookEvent, reason string) *loop.HookOutput {
	switch ev {
	case loop.HookPreTool:
		return &loop.HookOutput{Decision: loop.HookDeny, Reason: reason}
	case loop.HookPostTool:
		return &loop.HookOutput{Output: loop.ErrorOutput(reason)}
	case loop.HookUserPrompt, loop.HookStop, loop.HookSubagentStop:
		return &loop.HookOutput{Decision: loop.HookBlock, Reason: reason}
	}
	return &loop.HookOutput{Message: reason}
}

// parseHookReply reads the stdout of a hook that exited 0.
func parseHookReply(ev loop.HookEvent, out []byte) (*loop.HookOutput, error) {
	if len(out) == 0 {
		return nil, nil
	}
	if out[0] != '{' {
		// Plain text: context where an event takes it, as in Claude
		// Code; otherwise nothing.
		if ev == loop.HookUserPrompt || ev == loop.HookRunStart {
			return &loop.HookOutput{Context: string(out)}, nil
		}
		return nil, nil
	}
	var r hookReply
	if err := json.Unmarshal(out, &r); err != nil {
		return nil, fmt.Errorf("the hook's stdout is not valid JSON: %v", err)
	}
	o := &loop.HookOutput{Reason: r.Reason, Arguments: r.UpdatedInput, Context: r.AdditionalContext, Message: r.SystemMessage}
	decision := r.Decision
	if s := r.HookSpecificOutput; s != nil {
		if s.PermissionDecision != "" {
			decision, o.Reason = s.PermissionDecision, firstString(s.PermissionDecisionReason, o.Reason)
		}
		if len(s.UpdatedInput) > 0 {
			o.Arguments = s.UpdatedInput
		}
		o.Context = firstString(s.AdditionalContext, o.Context)
	}
	if r.Continue != nil && !*r.Continue {
		// Claude Code stops the whole agent; hrns refuses what the
		// event can refuse.
		decision, o.Reason = "block", firstString(r.StopReason, o.Reason, "a hook asked to stop")
	}
	switch ev {
	case loop.HookPreTool:
		switch decision {
		case "", "allow", "deny", "ask":
		case "approve":
			decision = "allow"
		case "block":
			decision = "deny"
		default:
			return nil, fmt.Errorf("the hook's decision %q is not allow, deny or ask", decision)
		}
		o.Decision = loop.HookDecision(decision)
	case loop.HookPostTool:
		if r.UpdatedOutput != nil {
			o.Output = loop.TextOutput(*r.UpdatedOutput)
		}
		if decision == "block" || decision == "deny" {
			o.Output = loop.ErrorOutput(firstString(o.Reason, "a hook withheld the result"))
		}
	case loop.HookUserPrompt, loop.HookStop, loop.HookSubagentStop:
		if decision == "block" {
			o.Decision = loop.HookBlock
		}
	}
	if ev != loop.HookPreTool {
		o.Arguments = nil
	}
	return o, nil
}

// hookReadOnly lists what a hook's command may read besides the working
// directory: its read_paths, and the folder of the program the command
// names by path. Not the config's folder: it may hold keys.
func hookReadOnly(hc HookConfig, env *hookEnv) []string {
	ro := slices.Clone(env.readOnly)
	for _, p := range hc.ReadPaths {
		if !filepath.IsAbs(p) {
			p = filepath.Join(env.workdir, p)
		}
		ro = append(ro, p)
	}
	if pc, err := cmdline.Parse(hc.Command); err == nil && len(pc.Commands) > 0 && len(pc.Commands[0]) > 0 {
		if prog := pc.Commands[0][0]; strings.Contains(prog, "/") {
			if !filepath.IsAbs(prog) {
				prog = filepath.Join(env.workdir, prog)
			}
			ro = append(ro, filepath.Dir(prog))
		}
	}
	return slices.DeleteFunc(ro, func(p string) bool {
		_, err := os.Stat(p)
		return err != nil
	})
}

// boundedBuffer keeps the first max bytes written to it.
type boundedBuffer struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); room < len(p) {
		b.over = true
		b.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.buf.Write(p)
}

// readHead returns the first n bytes of the file at name, or "".
func readHead(name string, n int64) string {
	f, err := os.Open(name)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, n))
	return string(b)
}
