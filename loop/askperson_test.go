package loop_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
)

// TestAskPerson: a call its tool says needs a person goes to the approver
// whatever the mode, the allow rules and the hooks say; a deny rule still
// refuses it; without an approver it is refused; calls without the reason
// run as before.
func TestAskPerson(t *testing.T) {
	var ran atomic.Int32
	def := &loop.ToolDef{
		Name: "act", InputSchema: json.RawMessage(`{"type":"object","properties":{"risky":{"type":"boolean"}}}`),
		AskPerson: func(args json.RawMessage) string {
			if strings.Contains(string(args), `"risky":true`) {
				return "a safety check"
			}
			return ""
		},
		Handler: func(context.Context, *loop.Call) (*loop.Output, error) {
			ran.Add(1)
			return loop.TextOutput("done"), nil
		},
	}
	ts, err := loop.NewToolset(def)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		args     string
		perms    *loop.Permissions
		approver bool
		verdict  loop.Verdict
		asked    int32
		ran      int32
	}{
		{"plain call, bypass", `{}`, &loop.Permissions{Mode: loop.ModeBypass}, true, loop.Approve, 0, 1},
		{"risky, bypass, approved", `{"risky":true}`, &loop.Permissions{Mode: loop.ModeBypass}, true, loop.Approve, 1, 1},
		{"risky, allow rule, rejected", `{"risky":true}`, &loop.Permissions{Allow: []loop.Rule{{Tool: "act"}}}, true, loop.Reject, 1, 0},
		{"risky, no policy, approved", `{"risky":true}`, nil, true, loop.Approve, 1, 1},
		{"risky, deny rule", `{"risky":true}`, &loop.Permissions{Mode: loop.ModeBypass, Deny: []loop.Rule{{Tool: "act"}}}, true, loop.Approve, 0, 0},
		{"risky, no approver", `{"risky":true}`, &loop.Permissions{Mode: loop.ModeBypass}, false, 0, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ran.Store(0)
			var asked atomic.Int32
			opts := &loop.Options{Permissions: c.perms}
			if c.approver {
				opts.Approver = loop.ApproverFunc(func(_ context.Context, req *loop.ApprovalRequest) (loop.Decision, error) {
					asked.Add(1)
					if req.Permission == nil || req.Permission.Reason != "a safety check" || req.Person != "a safety check" {
						t.Errorf("asked with %+v, person %q", req.Permission, req.Person)
					}
					return loop.Decision{Verdict: c.verdict}, nil
				})
			}
			model := llmtest.NewModel(llmtest.Call("c1", "act", c.args), llmtest.Text("ok"))
			if _, err := loop.NewAgent(model, ts, opts).Run(context.Background(), []llm.Message{llm.UserMessage("go")}); err != nil {
				t.Fatal(err)
			}
			if asked.Load() != c.asked || ran.Load() != c.ran {
				t.Fatalf("asked %d, ran %d; want %d, %d", asked.Load(), ran.Load(), c.asked, c.ran)
			}
		})
	}
}
