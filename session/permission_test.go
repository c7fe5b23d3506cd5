package session_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/loop/cmdline"
	"github.com/hrns-dev/hrns/session"
)

// The server's permission policy and hooks hold for its sessions: deny and
// allow rules decide without asking for approval, hooks know the session,
// and a named agent's own policy replaces the server's.
func TestSessionPermissions(t *testing.T) {
	var ran []string
	var mu sync.Mutex
	cmd := &loop.ToolDef{Name: "run_command", RequiresApproval: true, Access: loop.AccessExecute,
		Subject:     cmdline.Subject("command"),
		InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`),
		Handler: func(_ context.Context, c *loop.Call) (*loop.Output, error) {
			mu.Lock()
			ran = append(ran, c.Args["command"].(string))
			mu.Unlock()
			return loop.TextOutput("ok"), nil
		}}
	var sessions []string
	hook := loop.Hook{Event: loop.HookPreTool, Func: func(ctx context.Context, _ *loop.HookInput) (*loop.HookOutput, error) {
		id, _ := session.IDFromContext(ctx)
		mu.Lock()
		sessions = append(sessions, id)
		mu.Unlock()
		return nil, nil
	}}
	model := llmtest.NewModel(
		llmtest.Calls(
			llm.ToolCall{ID: "a", Name: "run_command", Arguments: llm.Arguments(`{"command":"rm -rf x"}`)},
			llm.ToolCall{ID: "b", Name: "run_command", Arguments: llm.Arguments(`{"command":"ls -la"}`)},
		),
		llmtest.Text("done"),
		llmtest.Call("c", "run_command", `{"command":"ls"}`),
		llmtest.Text("planned"),
	)
	perms := &loop.Permissions{Deny: []loop.Rule{{Tool: "run_command", Pattern: "rm:*"}}, Allow: []loop.Rule{{Tool: "run_command", Pattern: "ls:*"}}}
	m := startManager(t, openStore(t), model, &session.Options{
		Toolsets:    map[string]*loop.Toolset{"cmds": loop.MustToolset(cmd)},
		Permissions: perms,
		Hooks:       []loop.Hook{hook},
		Agents: map[string]*session.AgentConfig{
			"ops":     {Toolsets: []string{"cmds"}},
			"planner": {Toolsets: []string{"cmds"}, Permissions: &loop.Permissions{Mode: loop.ModePlan}},
		},
	})
	v := create(t, m, `{"agent":"ops","messages":"clean"}`)
	f := &follower{t: t, m: m, id: v.ID}
	f.status(session.StatusCompleted)
	if strings.Join(ran, ",") != "ls -la" {
		t.Errorf("ran %q, want only the allowed command", ran)
	}
	if len(sessions) != 2 || sessions[0] != v.ID {
		t.Errorf("hooks saw sessions %q, want %s", sessions, v.ID)
	}
	if !strings.Contains(f.dump(), "denied by the rule run_command(rm:*)") {
		t.Errorf("the denial is not in the events:\n%s", f.dump())
	}

	v = create(t, m, `{"agent":"planner","messages":"plan"}`)
	f = &follower{t: t, m: m, id: v.ID}
	f.status(session.StatusCompleted)
	if len(ran) != 1 {
		t.Errorf("plan mode ran %q", ran)
	}
	if !strings.Contains(f.dump(), "plan mode") {
		t.Errorf("the refusal is not in the events:\n%s", f.dump())
	}
}
