package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/loop/cmdline"
)

func commandTool() loop.ToolDef {
	return loop.ToolDef{Name: "run_command", RequiresApproval: true, Access: loop.AccessExecute,
		Subject:     cmdline.Subject("command"),
		InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)}
}

func commandArgs(line string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"command": line})
	return b
}

func mustRules(t testing.TB, texts ...string) []loop.Rule {
	t.Helper()
	var out []loop.Rule
	for _, s := range texts {
		r, err := loop.ParseRule(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func TestCommandRules(t *testing.T) {
	tests := []struct {
		allow, deny []string
		line        string
		want        loop.Behavior
	}{
		{[]string{"run_command(git status)"}, nil, "git status", loop.Allow},
		{[]string{"run_command(git status)"}, nil, "git status --short", loop.Ask},
		{[]string{"run_command(git status:*)"}, nil, "git status --short", loop.Allow},
		{[]string{"run_command(git status *)"}, nil, "git status --short", loop.Allow},
		{[]string{"run_command(git status:*)"}, nil, "git statuses", loop.Ask},
		{[]string{"run_command(git status:*)"}, nil, "git status; rm -rf x", loop.Ask},
		{[]string{"run_command(git status:*)"}, nil, "git status && rm -rf x", loop.Ask},
		{[]string{"run_command(git status:*)"}, nil, "git status | sh", loop.Ask},
		{[]string{"run_command(git status:*)"}, nil, "git status $(rm -rf x)", loop.Ask},
		{[]string{"run_command(git status:*)"}, nil, "git status `rm -rf x`", loop.Ask},
		{[]string{"run_command(git status:*)"}, nil, "git status > ~/.bashrc", loop.Ask},
		{[]string{"run_command(git status:*)"}, nil, "GIT_DIR=/x git status", loop.Ask},
		{[]string{"run_command(git status:*)"}, nil, "git() { rm -rf x; }; git status", loop.Ask},
		{[]string{"run_command(git status:*)"}, nil, "git status 2>&1", loop.Allow},
		{[]string{"run_command(git status:*)"}, nil, `"git" 'status'`, loop.Allow},
		{[]string{"run_command(git status:*)"}, nil, "git status (", loop.Ask},
		{[]string{"run_command(git status:*)", "run_command(go test:*)"}, nil, "git status && go test ./...", loop.Allow},
		{[]string{"run_command(git status:*)", "run_command(go test:*)"}, nil, "git status && go vet", loop.Ask},
		{[]string{"run_command"}, nil, "anything at all; rm -rf /", loop.Allow},
		{[]string{"run_*"}, nil, "ls", loop.Allow},
		{[]string{"run_command"}, []string{"run_command(rm:*)"}, "git status; rm -rf x", loop.Deny},
		{[]string{"run_command"}, []string{"run_command(rm:*)"}, "git status $(rm -rf x)", loop.Deny},
		{[]string{"run_command"}, []string{"run_command(rm:*)"}, "/bin/rm -rf x", loop.Deny},
		{[]string{"run_command"}, []string{"run_command(rm:*)"}, `r\m -rf x`, loop.Deny},
		{[]string{"run_command"}, []string{"run_command(rm:*)"}, `sh -c "echo; rm -rf x"`, loop.Deny},
		{[]string{"run_command"}, []string{"run_command(rm:*)"}, `$X -rf x`, loop.Deny},
		{[]string{"run_command"}, []string{"run_command(rm:*)"}, "echo 'unclosed", loop.Deny},
		{[]string{"run_command"}, []string{"run_command(rm:*)"}, "echo rm", loop.Allow},
		{[]string{"run_command"}, []string{"run_command(git push)"}, "git push --force", loop.Allow},
		{[]string{"run_command"}, []string{"run_command(git push:*)"}, "git push --force", loop.Deny},
		// Words that are not constants may be the pattern's (issue 32).
		{[]string{"run_command"}, []string{"run_command(git push:*)"}, "X=push; git $X --force", loop.Deny},
		{[]string{"run_command"}, []string{"run_command(git push:*)"}, `git "$(echo push)"`, loop.Deny},
		{[]string{"run_command"}, []string{"run_command(git push)"}, `git push $X`, loop.Deny},
		{[]string{"run_command"}, []string{"run_command(git push:*)"}, `git pull $X`, loop.Allow},
		{[]string{"run_command"}, []string{"run_command(rm:*)"}, `eval "$X"`, loop.Deny},
		{[]string{"run_command"}, []string{"run_command(rm:*)"}, `command rm -rf x`, loop.Deny},
		{[]string{"run_command"}, []string{"run_command(rm:*)"}, `trap 'rm -rf x' EXIT`, loop.Deny},
		// What dash runs as two commands (issue 32, 1).
		{[]string{"run_command(git status:*)"}, nil, "git status &>/dev/null sh -c 'id'", loop.Ask},
		{[]string{"run_command"}, []string{"run_command(rm:*)"}, "git status &>/dev/null rm -rf x", loop.Deny},
	}
	def := commandTool()
	for _, tt := range tests {
		p := &loop.Permissions{Allow: mustRules(t, tt.allow...), Deny: mustRules(t, tt.deny...)}
		if got := p.Check(&def, commandArgs(tt.line)); got.Behavior != tt.want {
			t.Errorf("allow %v deny %v: %q: got %+v, want %s", tt.allow, tt.deny, tt.line, got, tt.want)
		}
	}
}

// nilParser is a CommandParser that returns neither a command nor an error.
type nilParser struct{}

func (nilParser) ParseCommand(string) (*loop.ParsedCommand, error) { return nil, nil }

// TestCommandSubjectWithoutParser checks that a command subject fails
// closed without a parser (or with one that returns nothing): a toolset
// refuses the tool, and the policy takes every line as one that does not
// parse, so that deny rules match it and allow rules never do.
func TestCommandSubjectWithoutParser(t *testing.T) {
	def := commandTool()
	def.Handler = func(context.Context, *loop.Call) (*loop.Output, error) { return loop.TextOutput("ran"), nil }
	def.Subject.Parser = nil
	_, err := loop.NewToolset(&def)
	if !errors.Is(err, loop.ErrInvalidTool) || !errors.Is(err, loop.ErrNoCommandParser) {
		t.Errorf("NewToolset with a command subject without a parser: %v, want ErrInvalidTool and ErrNoCommandParser", err)
	}
	for _, parser := range []loop.CommandParser{nil, nilParser{}} {
		def.Subject.Parser = parser
		tests := []struct {
			allow, deny []string
			line        string
			want        loop.Behavior
		}{
			{[]string{"run_command(git status:*)"}, nil, "git status", loop.Ask},
			{[]string{"run_command(git status)"}, nil, "git status", loop.Ask},
			{nil, []string{"run_command(rm:*)"}, "git status", loop.Deny},
			{[]string{"run_command"}, []string{"run_command(rm:*)"}, "ls", loop.Deny},
			{[]string{"run_command"}, nil, "ls", loop.Allow}, // a rule on the name alone needs no parsing
		}
		for _, tt := range tests {
			p := &loop.Permissions{Allow: mustRules(t, tt.allow...), Deny: mustRules(t, tt.deny...)}
			got := p.Check(&def, commandArgs(tt.line))
			if got.Behavior != tt.want {
				t.Errorf("parser %T: allow %v deny %v: %q: got %+v, want %s", parser, tt.allow, tt.deny, tt.line, got, tt.want)
			}
			if got.Behavior == loop.Deny && !strings.Contains(got.Reason, "cannot be checked") {
				t.Errorf("parser %T: %q: the reason %q does not say the command cannot be checked", parser, tt.line, got.Reason)
			}
		}
	}
	def.Subject.Parser = nil
	if d := (&loop.Permissions{Deny: mustRules(t, "run_command(rm:*)")}).Check(&def, commandArgs("ls")); !strings.Contains(d.Reason, "Subject.Parser") {
		t.Errorf("the reason %q does not say what is missing", d.Reason)
	}
}

func TestPathAndURLRules(t *testing.T) {
	file := loop.ToolDef{Name: "write_file", RequiresApproval: true, Access: loop.AccessEdit, Subject: loop.Subject{Kind: loop.SubjectPath, Argument: "path"}}
	web := loop.ToolDef{Name: "web_fetch", RequiresApproval: true, Access: loop.AccessRead, Subject: loop.Subject{Kind: loop.SubjectURL, Argument: "url"}}
	tests := []struct {
		def   loop.ToolDef
		rule  string
		value string
		match bool
	}{
		{file, "write_file(src/**)", "src/a/b.go", true},
		{file, "write_file(src/**)", "./src/a.go", true},
		{file, "write_file(src/**)", "src/../etc/passwd", false},
		{file, "write_file(src/*.go)", "src/a.go", true},
		{file, "write_file(src/*.go)", "src/a/b.go", false},
		{file, "write_file(**/.env)", ".env", true},
		{file, "write_file(**/.env)", "a/b/.env", true},
		{file, "write_file(**/.env)", "a/b/.envrc", false},
		{file, "write_file(/etc/**)", "etc/x", false},
		{file, "write_*(docs/**)", "docs/x.md", true},
		{web, "web_fetch(domain:example.com)", "https://example.com/x", true},
		{web, "web_fetch(domain:example.com)", "https://docs.Example.com./x", true},
		{web, "web_fetch(domain:example.com)", "https://example.com.evil.net/x", false},
		{web, "web_fetch(domain:example.com)", "https://evil.net/?example.com", false},
		{web, "web_fetch(domain:example.com)", "https://user@evil.net/", false},
		{web, "web_fetch(https://go.dev/doc/*)", "https://go.dev/doc/effective_go", true},
		{web, "web_fetch(https://go.dev/doc/*)", "https://go.dev/blog/x", false},
		{web, "web_fetch(https://go.dev/doc/*)", "HTTPS://GO.DEV/doc/x", true},
		{web, "web_fetch(domain:example.com)", "not a url", false},
	}
	for _, tt := range tests {
		arg := tt.def.Subject.Argument
		args, _ := json.Marshal(map[string]string{arg: tt.value})
		p := &loop.Permissions{Allow: mustRules(t, tt.rule)}
		got := p.Check(&tt.def, args).Behavior == loop.Allow
		if got != tt.match {
			t.Errorf("%s on %q: match %v, want %v", tt.rule, tt.value, got, tt.match)
		}
	}
	// A rule with a pattern never matches a call without the argument.
	p := &loop.Permissions{Allow: mustRules(t, "write_file(**)")}
	if d := p.Check(&file, json.RawMessage(`{"path":7}`)); d.Behavior != loop.Ask {
		t.Errorf("non-string path: %+v", d)
	}
}

func TestParseRule(t *testing.T) {
	for _, s := range []string{"run_command(git status:*)", "read_file", "mcp_*", "web_fetch(domain:go.dev)"} {
		r, err := loop.ParseRule(s)
		if err != nil || r.String() != s {
			t.Errorf("ParseRule(%q) = %v, %v", s, r, err)
		}
	}
	for _, s := range []string{"", "(x)", "run_command(", "run_command()", "[(x)"} {
		if _, err := loop.ParseRule(s); err == nil {
			t.Errorf("ParseRule(%q) = nil error", s)
		}
	}
	if _, err := loop.ParsePermissionMode("yolo"); err == nil {
		t.Error("ParsePermissionMode(yolo) = nil error")
	}
}

// approverFunc returns an approver answering v and counting its calls.
func countingApprover(v loop.Verdict, n *atomic.Int32) loop.Approver {
	return loop.ApproverFunc(func(context.Context, *loop.ApprovalRequest) (loop.Decision, error) {
		n.Add(1)
		return loop.Decision{Verdict: v, Reason: "the approver said no"}, nil
	})
}

func hookAnswering(d loop.HookDecision) []loop.Hook {
	return []loop.Hook{{Name: "h", Event: loop.HookPreTool, Func: func(context.Context, *loop.HookInput) (*loop.HookOutput, error) {
		return &loop.HookOutput{Decision: d, Reason: "the hook said no"}, nil
	}}}
}

// TestPermissionOrder drives one call through Toolset.Invoke for each step
// of the evaluation deciding: hooks, deny rules, the mode, allow rules,
// the approver.
func TestPermissionOrder(t *testing.T) {
	var ran atomic.Int32
	handler := func(context.Context, *loop.Call) (*loop.Output, error) {
		ran.Add(1)
		return loop.TextOutput("ran"), nil
	}
	cmd := commandTool()
	cmd.Handler = handler
	edit := loop.ToolDef{Name: "edit_file", RequiresApproval: true, Access: loop.AccessEdit, Handler: handler,
		Subject: loop.Subject{Kind: loop.SubjectPath, Argument: "path"}}
	read := loop.ToolDef{Name: "read_file", Access: loop.AccessRead, Handler: handler}
	other := loop.ToolDef{Name: "other", Handler: handler} // AccessUnknown, no approval
	ts := loop.MustToolset(&cmd, &edit, &read, &other)

	type want struct {
		ran      bool
		step     loop.PermissionStep // of the refusal; "" when it ran
		approver int32
	}
	tests := []struct {
		name     string
		tool     string
		args     string
		perms    *loop.Permissions
		hooks    []loop.Hook
		verdict  loop.Verdict
		noApprov bool
		want     want
	}{
		{"hook deny beats bypass and allow rules", "run_command", `{"command":"ls"}`,
			&loop.Permissions{Mode: loop.ModeBypass, Allow: mustRules(t, "run_command")}, hookAnswering(loop.HookDeny), loop.Approve, false,
			want{false, loop.StepHook, 0}},
		{"hook allow decides before deny rules", "run_command", `{"command":"rm -rf x"}`,
			&loop.Permissions{Deny: mustRules(t, "run_command(rm:*)")}, hookAnswering(loop.HookAllow), loop.Reject, false,
			want{true, "", 0}},
		{"hook ask goes to the approver in bypass mode", "run_command", `{"command":"ls"}`,
			&loop.Permissions{Mode: loop.ModeBypass}, hookAnswering(loop.HookAsk), loop.Approve, false,
			want{true, "", 1}},
		{"hook ask still meets deny rules", "run_command", `{"command":"rm x"}`,
			&loop.Permissions{Deny: mustRules(t, "run_command(rm:*)")}, hookAnswering(loop.HookAsk), loop.Approve, false,
			want{false, loop.StepDenyRule, 0}},
		{"deny rule beats bypass mode", "run_command", `{"command":"ls; rm x"}`,
			&loop.Permissions{Mode: loop.ModeBypass, Deny: mustRules(t, "run_command(rm:*)")}, nil, loop.Approve, false,
			want{false, loop.StepDenyRule, 0}},
		{"deny rule beats allow rule", "run_command", `{"command":"rm x"}`,
			&loop.Permissions{Deny: mustRules(t, "run_command(rm:*)"), Allow: mustRules(t, "run_command")}, nil, loop.Approve, false,
			want{false, loop.StepDenyRule, 0}},
		{"bypass mode allows without the approver", "run_command", `{"command":"ls"}`,
			&loop.Permissions{Mode: loop.ModeBypass}, nil, loop.Reject, false,
			want{true, "", 0}},
		{"plan mode refuses a command", "run_command", `{"command":"ls"}`,
			&loop.Permissions{Mode: loop.ModePlan, Allow: mustRules(t, "run_command")}, nil, loop.Approve, false,
			want{false, loop.StepMode, 0}},
		{"plan mode refuses a tool of unknown access", "other", `{}`,
			&loop.Permissions{Mode: loop.ModePlan}, nil, loop.Approve, false,
			want{false, loop.StepMode, 0}},
		{"plan mode runs a read-only tool", "read_file", `{}`,
			&loop.Permissions{Mode: loop.ModePlan}, nil, loop.Reject, false,
			want{true, "", 0}},
		{"acceptEdits runs an edit", "edit_file", `{"path":"a"}`,
			&loop.Permissions{Mode: loop.ModeAcceptEdits}, nil, loop.Reject, false,
			want{true, "", 0}},
		{"acceptEdits asks for a command", "run_command", `{"command":"ls"}`,
			&loop.Permissions{Mode: loop.ModeAcceptEdits}, nil, loop.Reject, false,
			want{false, loop.StepApprover, 1}},
		{"default mode runs a tool that needs no approval", "other", `{}`,
			&loop.Permissions{}, nil, loop.Reject, false,
			want{true, "", 0}},
		{"allow rule runs without the approver", "run_command", `{"command":"git status"}`,
			&loop.Permissions{Allow: mustRules(t, "run_command(git status:*)")}, nil, loop.Reject, false,
			want{true, "", 0}},
		{"allow rule does not cover a compound command", "run_command", `{"command":"git status; rm -rf x"}`,
			&loop.Permissions{Allow: mustRules(t, "run_command(git status:*)")}, nil, loop.Reject, false,
			want{false, loop.StepApprover, 1}},
		{"ask rule beats an allow rule", "run_command", `{"command":"git push"}`,
			&loop.Permissions{Allow: mustRules(t, "run_command"), Ask: mustRules(t, "run_command(git push:*)")}, nil, loop.Approve, false,
			want{true, "", 1}},
		{"ask rule beats acceptEdits", "edit_file", `{"path":"go.mod"}`,
			&loop.Permissions{Mode: loop.ModeAcceptEdits, Ask: mustRules(t, "edit_file(go.mod)")}, nil, loop.Reject, false,
			want{false, loop.StepApprover, 1}},
		{"ask rule matches any command of a line", "run_command", `{"command":"ls && git push"}`,
			&loop.Permissions{Allow: mustRules(t, "run_command"), Ask: mustRules(t, "run_command(git push:*)")}, nil, loop.Reject, false,
			want{false, loop.StepApprover, 1}},
		{"ask rule does not hold in bypass mode", "run_command", `{"command":"git push"}`,
			&loop.Permissions{Mode: loop.ModeBypass, Ask: mustRules(t, "run_command(git push:*)")}, nil, loop.Reject, false,
			want{true, "", 0}},
		{"deny rule beats ask rule", "run_command", `{"command":"git push"}`,
			&loop.Permissions{Deny: mustRules(t, "run_command(git push:*)"), Ask: mustRules(t, "run_command")}, nil, loop.Approve, false,
			want{false, loop.StepDenyRule, 0}},
		{"approver approves", "edit_file", `{"path":"a"}`,
			&loop.Permissions{}, nil, loop.Approve, false,
			want{true, "", 1}},
		{"approver rejects", "edit_file", `{"path":"a"}`,
			&loop.Permissions{}, nil, loop.Reject, false,
			want{false, loop.StepApprover, 1}},
		{"no approver refuses", "edit_file", `{"path":"a"}`,
			&loop.Permissions{}, nil, loop.Approve, true,
			want{false, loop.StepApprover, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ran.Store(0)
			var asked atomic.Int32
			opts := &loop.InvokeOptions{Permissions: tt.perms, Hooks: tt.hooks}
			if !tt.noApprov {
				opts.Approver = countingApprover(tt.verdict, &asked)
			}
			out, err := ts.Invoke(context.Background(), llm.ToolCall{Name: tt.tool, Arguments: llm.Arguments(tt.args)}, opts)
			if got := ran.Load() == 1; got != tt.want.ran {
				t.Errorf("ran = %v, want %v (out %v, err %v)", got, tt.want.ran, out, err)
			}
			if n := asked.Load(); n != tt.want.approver {
				t.Errorf("approver asked %d times, want %d", n, tt.want.approver)
			}
			if tt.want.step == "" {
				if err != nil {
					t.Errorf("err = %v", err)
				}
				return
			}
			var te *loop.ToolError
			if !errors.As(err, &te) || te.Kind != loop.ToolRefused {
				t.Fatalf("err = %v, want a refusal", err)
			}
			if te.Permission == nil || te.Permission.Step != tt.want.step || te.Permission.Behavior != loop.Deny {
				t.Errorf("permission = %+v, want denied at step %s", te.Permission, tt.want.step)
			}
			if tt.want.step == loop.StepMode && tt.perms.Mode == loop.ModePlan && !strings.Contains(te.Msg, "present your plan") {
				t.Errorf("plan refusal %q does not ask for the plan", te.Msg)
			}
			if tt.want.step != loop.StepApprover && !errors.Is(err, loop.ErrPermission) {
				t.Errorf("err %v does not wrap ErrPermission", err)
			}
		})
	}
}

func TestPreToolHookFailsClosed(t *testing.T) {
	var ran atomic.Int32
	cmd := commandTool()
	cmd.Handler = func(context.Context, *loop.Call) (*loop.Output, error) {
		ran.Add(1)
		return loop.TextOutput("ran"), nil
	}
	ts := loop.MustToolset(&cmd)
	bypass := &loop.Permissions{Mode: loop.ModeBypass}
	hooks := map[string]loop.Hook{
		"error": {Name: "h", Event: loop.HookPreTool, Func: func(context.Context, *loop.HookInput) (*loop.HookOutput, error) {
			return nil, errors.New("boom")
		}},
		"panic": {Name: "h", Event: loop.HookPreTool, Func: func(context.Context, *loop.HookInput) (*loop.HookOutput, error) {
			panic("boom")
		}},
		"timeout": {Name: "h", Event: loop.HookPreTool, Timeout: time.Millisecond, Func: func(ctx context.Context, _ *loop.HookInput) (*loop.HookOutput, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}},
		"ignores its deadline": {Name: "h", Event: loop.HookPreTool, Timeout: time.Millisecond, Func: func(context.Context, *loop.HookInput) (*loop.HookOutput, error) {
			select {} // never answers: the watchdog abandons it
		}},
		"bad decision": {Name: "h", Event: loop.HookPreTool, Func: func(context.Context, *loop.HookInput) (*loop.HookOutput, error) {
			return &loop.HookOutput{Decision: "maybe"}, nil
		}},
		"invalid rewrite": {Name: "h", Event: loop.HookPreTool, Func: func(context.Context, *loop.HookInput) (*loop.HookOutput, error) {
			return &loop.HookOutput{Arguments: json.RawMessage(`{"command":7}`)}, nil
		}},
	}
	for name, h := range hooks {
		t.Run(name, func(t *testing.T) {
			_, err := ts.Invoke(context.Background(), llm.ToolCall{Name: "run_command", Arguments: llm.Arguments(`{"command":"ls"}`)},
				&loop.InvokeOptions{Permissions: bypass, Hooks: []loop.Hook{h}})
			var te *loop.ToolError
			if !errors.As(err, &te) || te.Permission == nil || te.Permission.Step != loop.StepHook {
				t.Fatalf("err = %v, want a refusal by the hook", err)
			}
			if ran.Load() != 0 {
				t.Fatal("the tool ran")
			}
		})
	}
}

func TestPreToolHookRewrites(t *testing.T) {
	var got string
	cmd := commandTool()
	cmd.RequiresApproval = false
	cmd.Handler = func(_ context.Context, c *loop.Call) (*loop.Output, error) {
		got = c.Args["command"].(string)
		return loop.TextOutput("ok"), nil
	}
	ts := loop.MustToolset(&cmd)
	hooks := []loop.Hook{
		{Name: "quiet", Event: loop.HookPreTool, Match: "run_*", Func: func(_ context.Context, in *loop.HookInput) (*loop.HookOutput, error) {
			var a struct{ Command string }
			json.Unmarshal(in.Arguments, &a)
			b, _ := json.Marshal(map[string]string{"command": a.Command + " --quiet"})
			return &loop.HookOutput{Arguments: b}, nil
		}},
		{Name: "other tools", Event: loop.HookPreTool, Match: "read_file", Func: func(context.Context, *loop.HookInput) (*loop.HookOutput, error) {
			return &loop.HookOutput{Decision: loop.HookDeny}, nil
		}},
	}
	if _, err := ts.Invoke(context.Background(), llm.ToolCall{Name: "run_command", Arguments: llm.Arguments(`{"command":"make"}`)},
		&loop.InvokeOptions{Hooks: hooks}); err != nil {
		t.Fatal(err)
	}
	if got != "make --quiet" {
		t.Errorf("the tool got %q, want the rewritten command", got)
	}
}

// A deny rule checks the arguments a hook rewrote, not the model's.
func TestDenyRuleSeesRewrittenArguments(t *testing.T) {
	cmd := commandTool()
	cmd.Handler = func(context.Context, *loop.Call) (*loop.Output, error) { return loop.TextOutput("ran"), nil }
	ts := loop.MustToolset(&cmd)
	hooks := []loop.Hook{{Event: loop.HookPreTool, Func: func(context.Context, *loop.HookInput) (*loop.HookOutput, error) {
		return &loop.HookOutput{Arguments: commandArgs("rm -rf x")}, nil
	}}}
	_, err := ts.Invoke(context.Background(), llm.ToolCall{Name: "run_command", Arguments: llm.Arguments(`{"command":"ls"}`)},
		&loop.InvokeOptions{Hooks: hooks, Permissions: &loop.Permissions{Mode: loop.ModeBypass, Deny: mustRules(t, "run_command(rm:*)")}})
	var te *loop.ToolError
	if !errors.As(err, &te) || te.Permission == nil || te.Permission.Step != loop.StepDenyRule {
		t.Fatalf("err = %v, want the deny rule", err)
	}
}

// A pattern and a path that would make ** backtrack for ever are decided
// within a bound: such a path matches the deny rule and no allow rule.
func TestPathGlobBounded(t *testing.T) {
	file := loop.ToolDef{Name: "write_file", RequiresApproval: true, Subject: loop.Subject{Kind: loop.SubjectPath, Argument: "path"}}
	pattern := strings.Repeat("**/a/", 12) + "b"
	hostile := strings.Repeat("a/", 2000) + "c"
	args, _ := json.Marshal(map[string]string{"path": hostile})
	allow := &loop.Permissions{Allow: []loop.Rule{{Tool: "write_file", Pattern: pattern}}}
	if d := allow.Check(&file, args); d.Behavior != loop.Ask {
		t.Errorf("allow: %+v", d)
	}
	deny := &loop.Permissions{Deny: []loop.Rule{{Tool: "write_file", Pattern: pattern}}}
	if d := deny.Check(&file, args); d.Behavior != loop.Deny {
		t.Errorf("deny: %+v", d)
	}
	// Ordinary ones still decide.
	args, _ = json.Marshal(map[string]string{"path": "a/x/a/b"})
	if d := deny.Check(&file, args); d.Behavior != loop.Ask {
		t.Errorf("a path the pattern does not match: %+v", d)
	}
}

// TestSetModeWhileChecking: the mode changes while calls are decided (a
// person pressing Shift+Tab in the chat while a run goes on), without a
// data race, and the calls decided after SetMode follow the new mode.
func TestSetModeWhileChecking(t *testing.T) {
	edit := loop.ToolDef{Name: "write_file", RequiresApproval: true, Access: loop.AccessEdit, Subject: loop.Subject{Kind: loop.SubjectPath, Argument: "path"}}
	args := json.RawMessage(`{"path":"a.txt"}`)
	p := &loop.Permissions{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			p.Check(&edit, args)
			p.CurrentMode()
		}
	}()
	for _, m := range []loop.PermissionMode{loop.ModeAcceptEdits, loop.ModePlan, loop.ModeBypass, loop.ModeDefault} {
		p.SetMode(m)
	}
	<-done
	tests := []struct {
		mode loop.PermissionMode
		want loop.Behavior
	}{
		{loop.ModeDefault, loop.Ask},
		{loop.ModeAcceptEdits, loop.Allow},
		{loop.ModePlan, loop.Deny},
		{loop.ModeBypass, loop.Allow},
	}
	for _, tt := range tests {
		p.SetMode(tt.mode)
		if got := p.CurrentMode(); got != tt.mode {
			t.Errorf("CurrentMode() = %q after SetMode(%q)", got, tt.mode)
		}
		if d := p.Check(&edit, args); d.Behavior != tt.want {
			t.Errorf("in %s: %+v, want %s", tt.mode, d, tt.want)
		}
	}
	var none *loop.Permissions
	if got := none.CurrentMode(); got != loop.ModeDefault {
		t.Errorf("nil policy: CurrentMode() = %q", got)
	}
}
