package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
)

// roundTrip stores a suspension as JSON and loads it back, as a server
// would between requests.
func roundTrip(t *testing.T, s *loop.Suspension) *loop.Suspension {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out loop.Suspension
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func TestClientToolSuspendsAndResumes(t *testing.T) {
	client := loop.NewClientTool("get_order_status", "Order status.", json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}`))
	model := llmtest.NewModel(
		llmtest.Calls(
			llm.ToolCall{ID: "c1", Name: "get_order_status", Arguments: llm.Arguments(`{"order_id":"4242"}`)},
			llm.ToolCall{ID: "c2", Name: "echo", Arguments: llm.Arguments(`{"text":"local"}`)},
			llm.ToolCall{ID: "c3", Name: "get_order_status", Arguments: llm.Arguments(`{"order_id":"7"}`)},
		),
		llmtest.Text("4242 shipped, 7 is lost"),
	)
	agent := loop.NewAgent(model, loop.MustToolset(client, echoTool()), nil)
	chunks, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("check orders")}))
	if res.Status != loop.StatusSuspended || res.Suspension == nil {
		t.Fatalf("status %s, want suspended", res.Status)
	}
	if n := len(only(chunks, loop.ChunkToolCallPending)); n != 2 {
		t.Errorf("%d pending chunks, want 2", n)
	}
	s := roundTrip(t, res.Suspension)
	var pending []string
	for _, c := range s.Pending() {
		pending = append(pending, c.Call.ID+":"+string(c.Waiting))
	}
	if diff := cmp.Diff([]string{"c1:result", "c3:result"}, pending); diff != "" {
		t.Fatalf("pending (-want +got):\n%s", diff)
	}
	if s.Calls[1].Result == nil || s.Calls[1].Result.Text() != "echo: local" {
		t.Fatalf("the local call did not run before suspending: %+v", s.Calls[1])
	}
	if len(model.Requests()) != 1 {
		t.Fatal("the model was called while calls were pending")
	}

	// One result at a time: the run suspends again until all are in.
	_, res = collect(t, agent.Resume(t.Context(), s, &loop.ResumeInput{Results: []llm.ToolResult{
		{CallID: "c1", Content: []llm.Part{llm.TextPart("shipped")}},
	}}))
	if res.Status != loop.StatusSuspended || len(res.Suspension.Pending()) != 1 {
		t.Fatalf("after one result: status %s", res.Status)
	}
	s = roundTrip(t, res.Suspension)
	// Delivering c1 again is harmless; c3 fails on the client side.
	chunks, res = collect(t, agent.Resume(t.Context(), s, &loop.ResumeInput{Results: []llm.ToolResult{
		{CallID: "c1", Content: []llm.Part{llm.TextPart("shipped (again)")}},
		{CallID: "c3", Content: []llm.Part{llm.TextPart("order not found")}, IsError: true},
	}}))
	if res.Status != loop.StatusCompleted || res.Answer != "4242 shipped, 7 is lost" {
		t.Fatalf("result %+v", res)
	}
	if n := len(only(chunks, loop.ChunkToolCallError)); n != 1 {
		t.Errorf("%d tool_call_error chunks, want 1 for the client's error", n)
	}
	var got []string
	for _, r := range lastResults(t, model) {
		got = append(got, r.CallID+"="+r.Text())
	}
	if diff := cmp.Diff([]string{"c1=shipped", "c2=echo: local", "c3=order not found"}, got); diff != "" {
		t.Errorf("results sent in call order (-want +got):\n%s", diff)
	}
	if res.Turns[len(res.Turns)-1].FinishReason != llm.FinishStop || len(res.Turns) != 2 || res.Usage.OutputTokens == 0 {
		t.Errorf("accounting lost across the suspension: %+v, %+v", res.Turns, res.Usage)
	}
}

func TestResumeRejectsUnknownCall(t *testing.T) {
	client := loop.NewClientTool("remote", "Remote.", nil)
	model := llmtest.NewModel(llmtest.Call("c1", "remote", `{}`))
	agent := loop.NewAgent(model, loop.MustToolset(client), nil)
	_, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	_, res = collect(t, agent.Resume(t.Context(), res.Suspension, &loop.ResumeInput{Results: []llm.ToolResult{{CallID: "nope"}}}))
	if !errors.Is(res.Err, loop.ErrUnknownCall) {
		t.Fatalf("err = %v", res.Err)
	}
}

func TestResumeWithSteeringMessage(t *testing.T) {
	client := loop.NewClientTool("remote", "Remote.", nil)
	model := llmtest.NewModel(llmtest.Call("c1", "remote", `{}`), llmtest.Text("ok, in French"))
	agent := loop.NewAgent(model, loop.MustToolset(client), nil)
	_, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	_, res = collect(t, agent.Resume(t.Context(), res.Suspension, &loop.ResumeInput{
		Results:  []llm.ToolResult{{CallID: "c1", Content: []llm.Part{llm.TextPart("42")}}},
		Messages: []llm.Message{llm.UserMessage("answer in French")},
	}))
	reqs := model.Requests()
	msgs := reqs[len(reqs)-1].Messages
	if res.Err != nil || msgs[len(msgs)-2].Role != llm.RoleTool || msgs[len(msgs)-1].Text() != "answer in French" {
		t.Fatalf("err %v; last messages %+v", res.Err, msgs[len(msgs)-2:])
	}
}

func guarded() (*loop.ToolDef, *int) {
	runs := 0
	return &loop.ToolDef{Name: "delete_file", Description: "Deletes a file.", RequiresApproval: true,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
		Handler: func(_ context.Context, c *loop.Call) (*loop.Output, error) {
			runs++
			return loop.TextOutput("deleted " + c.Args["path"].(string)), nil
		}}, &runs
}

func TestApprovals(t *testing.T) {
	tests := []struct {
		name     string
		approver loop.Approver
		runs     int
		want     string // what the model reads
	}{
		{"approved", loop.ApproverFunc(func(context.Context, *loop.ApprovalRequest) (loop.Decision, error) {
			return loop.Decision{Verdict: loop.Approve}, nil
		}), 1, "deleted a.txt"},
		{"rejected", loop.ApproverFunc(func(context.Context, *loop.ApprovalRequest) (loop.Decision, error) {
			return loop.Decision{Verdict: loop.Reject, Reason: "keep it"}, nil
		}), 0, `the call to tool "delete_file" was rejected: keep it`},
		{"approver error", loop.ApproverFunc(func(context.Context, *loop.ApprovalRequest) (loop.Decision, error) {
			return loop.Decision{}, errors.New("ui closed")
		}), 0, `approval for tool "delete_file" failed (ui closed); the call was not run`},
		{"no approver", nil, 0, `tool "delete_file" requires approval and no approver is configured; the call was not run`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, runs := guarded()
			model := llmtest.NewModel(llmtest.Call("c1", "delete_file", `{"path":"a.txt"}`), llmtest.Text("ok"))
			agent := loop.NewAgent(model, loop.MustToolset(tool), &loop.Options{Approver: tt.approver})
			_, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
			if res.Status != loop.StatusCompleted || *runs != tt.runs {
				t.Fatalf("status %s, tool ran %d times, want %d", res.Status, *runs, tt.runs)
			}
			if got := lastResults(t, model)[0].Text(); got != tt.want {
				t.Errorf("model read %q, want %q", got, tt.want)
			}
			for _, m := range res.Messages {
				if strings.Contains(m.Text(), "approv") && m.Role != llm.RoleTool {
					t.Errorf("approval leaked into the transcript: %+v", m)
				}
			}
		})
	}
}

func TestApprovalDeadlineIsAWatchdog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		// A broken approver that ignores its context.
		hung := loop.ApproverFunc(func(context.Context, *loop.ApprovalRequest) (loop.Decision, error) {
			<-release
			return loop.Decision{Verdict: loop.Approve}, nil
		})
		tool, runs := guarded()
		model := llmtest.NewModel(llmtest.Call("c1", "delete_file", `{"path":"a.txt"}`), llmtest.Text("ok"))
		agent := loop.NewAgent(model, loop.MustToolset(tool), &loop.Options{Approver: hung, ApprovalTimeout: 30 * time.Second})
		start := time.Now()
		chunks, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
		if res.Err != nil || *runs != 0 {
			t.Fatalf("err %v, runs %d", res.Err, *runs)
		}
		if waited := time.Since(start); waited != 30*time.Second {
			t.Errorf("waited %v for the approver, want the 30s deadline", waited)
		}
		if diff := cmp.Diff([]string{"approval_request", "tool_call_error"}, types(chunks, loop.ChunkApprovalRequest, loop.ChunkToolCallError, loop.ChunkToolCallStart)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if got := lastResults(t, model)[0].Text(); got != `approval for tool "delete_file" timed out after 30s; the call was not run` {
			t.Errorf("model read %q", got)
		}
	})
}

func TestDeferredApprovalResumes(t *testing.T) {
	var seen *loop.ApprovalRequest
	deferAll := loop.ApproverFunc(func(_ context.Context, req *loop.ApprovalRequest) (loop.Decision, error) {
		seen = req
		return loop.Decision{Verdict: loop.Defer}, nil
	})
	tool, runs := guarded()
	model := llmtest.NewModel(
		llmtest.Calls(
			llm.ToolCall{ID: "c1", Name: "delete_file", Arguments: llm.Arguments(`{"path":"a.txt"}`)},
			llm.ToolCall{ID: "c2", Name: "delete_file", Arguments: llm.Arguments(`{"path":"b.txt"}`)},
		),
		llmtest.Text("done"),
	)
	agent := loop.NewAgent(model, loop.MustToolset(tool), &loop.Options{Approver: deferAll})
	_, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	if res.Status != loop.StatusSuspended || *runs != 0 || seen == nil || seen.Description != "Deletes a file." {
		t.Fatalf("status %s runs %d request %+v", res.Status, *runs, seen)
	}
	for _, c := range res.Suspension.Pending() {
		if c.Waiting != loop.PendingApproval {
			t.Errorf("call %s waits for %q", c.Call.ID, c.Waiting)
		}
	}
	s := roundTrip(t, res.Suspension)
	chunks, res := collect(t, agent.Resume(t.Context(), s, &loop.ResumeInput{Approvals: []loop.ApprovalDecision{
		{CallID: "c1", Approved: true},
		{CallID: "c2", Approved: false, Reason: "not that one"},
	}}))
	if res.Status != loop.StatusCompleted || *runs != 1 {
		t.Fatalf("status %s err %v runs %d", res.Status, res.Err, *runs)
	}
	var got []string
	for _, r := range lastResults(t, model) {
		got = append(got, r.CallID+"="+r.Text())
	}
	want := []string{"c1=deleted a.txt", `c2=the call to tool "delete_file" was rejected: not that one`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"tool_call_error", "tool_call_start", "tool_call_result"}, types(chunks, loop.ChunkToolCallStart, loop.ChunkToolCallResult, loop.ChunkToolCallError)); diff != "" {
		t.Errorf("resume chunks (-want +got):\n%s", diff)
	}
}

func TestApproverCancelEndsTheRun(t *testing.T) {
	tool, runs := guarded()
	model := llmtest.NewModel(llmtest.Call("c1", "delete_file", `{"path":"a.txt"}`))
	cancelAll := loop.ApproverFunc(func(context.Context, *loop.ApprovalRequest) (loop.Decision, error) {
		return loop.Decision{Verdict: loop.Cancel}, nil
	})
	agent := loop.NewAgent(model, loop.MustToolset(tool), &loop.Options{Approver: cancelAll})
	chunks, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	if !errors.Is(res.Err, loop.ErrCancelled) || *runs != 0 || len(only(chunks, loop.ChunkError)) != 1 {
		t.Fatalf("err %v runs %d", res.Err, *runs)
	}
}

// TestReevaluateIsNoApproval: a call given to Resume to evaluate again goes
// through the permission evaluation (a deny rule refuses it, an approver
// that defers makes it wait), while an approval runs it as decided.
func TestReevaluateIsNoApproval(t *testing.T) {
	defer_ := loop.ApproverFunc(func(context.Context, *loop.ApprovalRequest) (loop.Decision, error) {
		return loop.Decision{Verdict: loop.Defer}, nil
	})
	tests := []struct {
		name   string
		perms  *loop.Permissions
		in     loop.ResumeInput
		runs   int
		status loop.Status
	}{
		{"evaluated: denied", &loop.Permissions{Deny: []loop.Rule{{Tool: "delete_file"}}}, loop.ResumeInput{Reevaluate: []string{"c1"}}, 0, loop.StatusCompleted},
		{"evaluated: waits for approval", nil, loop.ResumeInput{Reevaluate: []string{"c1"}}, 0, loop.StatusSuspended},
		{"approved", nil, loop.ResumeInput{Approvals: []loop.ApprovalDecision{{CallID: "c1", Approved: true}}}, 1, loop.StatusCompleted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, runs := guarded()
			model := llmtest.NewModel(llmtest.Text("ok"))
			agent := loop.NewAgent(model, loop.MustToolset(tool), &loop.Options{Approver: defer_, Permissions: tt.perms})
			s := &loop.Suspension{
				Messages: []llm.Message{llm.UserMessage("go"), {Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "c1", Name: "delete_file", Arguments: llm.Arguments(`{"path":"a.txt"}`)}}}}},
				Calls:    []loop.SuspendedCall{{Call: llm.ToolCall{ID: "c1", Name: "delete_file", Arguments: llm.Arguments(`{"path":"a.txt"}`)}, Waiting: loop.PendingApproval}},
				Turn:     1,
			}
			_, res := collect(t, agent.Resume(t.Context(), s, &tt.in))
			if res.Status != tt.status || *runs != tt.runs {
				t.Fatalf("status %s (%v), tool ran %d times; want %s, %d", res.Status, res.Err, *runs, tt.status, tt.runs)
			}
		})
	}
}
