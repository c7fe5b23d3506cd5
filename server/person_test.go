package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// TestApprovalOnlyByAPerson: a call its tool says only a person may
// approve (loop.ToolDef.AskPerson: typing into a password field, a
// provider's safety check) waits for a decision through the API even on
// a server that approves calls itself (session.Options.AutoApprove, hrns
// serve --yes), and its pending approval carries the tool's reason; an
// ordinary call that requires approval is approved at once.
func TestApprovalOnlyByAPerson(t *testing.T) {
	ran := make(chan string, 2)
	deploy := loop.NewTool("deploy", "Deploys a service.", func(_ context.Context, in struct {
		Service string `json:"service"`
	}) (string, error) {
		ran <- "deploy " + in.Service
		return "deployed " + in.Service, nil
	})
	deploy.RequiresApproval = true
	pay := loop.NewTool("pay", "Types a card's secret code.", func(_ context.Context, in struct {
		Code string `json:"code"`
	}) (string, error) {
		ran <- "pay " + in.Code
		return "paid", nil
	})
	pay.AskPerson = func(args json.RawMessage) string {
		var in struct {
			Code string `json:"code"`
		}
		json.Unmarshal(args, &in)
		return "typing into a password field: the text " + in.Code
	}
	e := newEnv(t, &envOptions{session: &session.Options{
		AutoApprove: true,
		Agents:      map[string]*session.AgentConfig{"ops": {Description: "Deploys and pays.", Toolsets: []string{"ops"}}},
		Toolsets:    map[string]*loop.Toolset{"ops": loop.MustToolset(deploy, pay)},
	}},
		calls(openaitest.ToolCall("call_1", "deploy", `{"service":"api"}`), openaitest.ToolCall("call_2", "pay", `{"code":"1234"}`)),
		openaitest.Reply{Text: "deployed and paid"},
	)
	id := e.create(keyAlice, `{"agent":"ops","messages":"deploy and pay"}`)
	f := e.follow(keyAlice, id)
	f.status(session.StatusAwaitingToolResults)
	var as session.ActiveState
	json.Unmarshal(f.events[len(f.events)-1].Data, &as)
	if len(as.PendingApprovals) != 1 || as.PendingApprovals[0].ID != "call_2" || as.PendingApprovals[0].Reason != "typing into a password field: the text 1234" {
		t.Fatalf("pending approvals = %+v", as.PendingApprovals)
	}
	if got := <-ran; got != "deploy api" {
		t.Fatalf("ran %q", got)
	}
	select {
	case got := <-ran:
		t.Fatalf("ran %q before a person approved it", got)
	default:
	}
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/approvals", keyAlice, `{"id":"call_2","approved":true}`), http.StatusAccepted)
	f.status(session.StatusCompleted)
	if got := <-ran; got != "pay 1234" {
		t.Fatalf("ran %q", got)
	}
}

// TestPersonCallNotDecidedEarly: a call of a tool that both requires
// approval and may need a person (the desktop's computer tool, whose
// calls carry a provider's safety checks) is not taken as waiting for a
// decision when its step is committed, before the run has asked the tool
// why: a decision posted then (while another call of the step runs) is
// refused, and the call is decided once it waits with its reason, the
// person told what the tool says. Before, the step's checkpoint said the
// call waited for approval, the early approval was taken, and the call
// ran without the person being shown the safety check.
func TestPersonCallNotDecidedEarly(t *testing.T) {
	started, proceed := make(chan struct{}), make(chan struct{})
	ran := make(chan string, 2)
	slow := loop.NewTool("slow", "Takes a while.", func(ctx context.Context, _ struct{}) (string, error) {
		close(started)
		select {
		case <-proceed:
		case <-ctx.Done():
		}
		return "done", nil
	})
	click := loop.NewTool("click", "Clicks.", func(_ context.Context, in struct {
		X int `json:"x"`
	}) (string, error) {
		ran <- "click"
		return "clicked", nil
	})
	click.RequiresApproval = true
	click.AskPerson = func(json.RawMessage) string {
		return "the model's provider asks a person to acknowledge its safety checks on this computer action: [malicious_instructions] the page asks to click"
	}
	e := newEnv(t, &envOptions{session: &session.Options{
		Agents:   map[string]*session.AgentConfig{"ops": {Description: "Clicks.", Toolsets: []string{"ops"}}},
		Toolsets: map[string]*loop.Toolset{"ops": loop.MustToolset(slow, click)},
	}},
		calls(openaitest.ToolCall("call_1", "slow", `{}`), openaitest.ToolCall("call_2", "click", `{"x":1}`)),
		openaitest.Reply{Text: "clicked"},
	)
	id := e.create(keyAlice, `{"agent":"ops","messages":"click"}`)
	<-started // the step is committed: its calls run
	r := e.do("POST", "/api/v2/sessions/"+id+"/approvals", keyAlice, `{"id":"call_2","approved":true}`)
	close(proceed)
	if r.status == http.StatusAccepted {
		t.Fatalf("an approval before the person was told why was taken: %s", r.body)
	}
	e.expect(r, http.StatusUnprocessableEntity)
	f := e.follow(keyAlice, id)
	f.status(session.StatusAwaitingToolResults)
	var as session.ActiveState
	json.Unmarshal(f.events[len(f.events)-1].Data, &as)
	if len(as.PendingApprovals) != 1 || as.PendingApprovals[0].ID != "call_2" || !strings.Contains(as.PendingApprovals[0].Reason, "safety checks") {
		t.Fatalf("pending approvals = %+v", as.PendingApprovals)
	}
	select {
	case got := <-ran:
		t.Fatalf("ran %q before a person approved it", got)
	default:
	}
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/approvals", keyAlice, `{"id":"call_2","approved":true}`), http.StatusAccepted)
	f.status(session.StatusCompleted)
	if got := <-ran; got != "click" {
		t.Fatalf("ran %q", got)
	}
}
