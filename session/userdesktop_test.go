package session_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/hrns-dev/hrns/desktop"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/session"
)

// TestUserDesktopTool: the agent of a session with the user's desktop is
// offered the computer tool as a computer tool (providers render it as
// their own) on the view the caller's screen is fitted in, with the
// actions package desktop runs, and its calls wait for the caller.
func TestUserDesktopTool(t *testing.T) {
	model := llmtest.NewModel(llmtest.Call("c1", "computer", `{"action":"screenshot"}`), llmtest.Text("done"))
	m := startManager(t, openStore(t), model, nil)
	v := create(t, m, `{"agent":{"name":"a","environments":[{"kind":"desktop","host":"user_device","id":"laptop"}]},"messages":"look"}`)
	f := &follower{t: t, m: m, id: v.ID}
	f.status(session.StatusAwaitingToolResults)
	reqs := model.Requests()
	i := slices.IndexFunc(reqs[0].Tools, func(s llm.ToolSpec) bool { return s.Name == desktop.ToolName })
	if i < 0 {
		t.Fatalf("tools %v", reqs[0].Tools)
	}
	spec := reqs[0].Tools[i]
	if spec.Computer == nil || spec.Computer.Width != session.UserDesktopWidth || spec.Computer.Height != session.UserDesktopHeight {
		t.Fatalf("computer %+v", spec.Computer)
	}
	props := func(raw json.RawMessage) (names []string, actions []string) {
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(raw, &schema); err != nil {
			t.Fatal(err)
		}
		var action struct {
			Enum []string `json:"enum"`
		}
		json.Unmarshal(schema.Properties["action"], &action)
		for n := range schema.Properties {
			names = append(names, n)
		}
		slices.Sort(names)
		return names, action.Enum
	}
	names, actions := props(spec.InputSchema)
	if !slices.Equal(actions, desktop.Actions) {
		t.Errorf("the session's computer actions %v, package desktop's %v", actions, desktop.Actions)
	}
	d := &desktop.Desktop{}
	wantNames, _ := props(d.Tool().InputSchema)
	if !slices.Equal(names, wantNames) {
		t.Errorf("the session's computer arguments %v, package desktop's %v", names, wantNames)
	}
	if err := m.PostToolResults(t.Context(), owner, v.ID, []session.ToolResult{{Kind: "error_event", ToolReq: session.ToolRequest{ID: "c1"}, Error: "refused by the person", Origin: "user"}}); err != nil {
		t.Fatal(err)
	}
	f.status(session.StatusCompleted)
}
