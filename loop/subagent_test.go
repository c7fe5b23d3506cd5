package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
)

func usageReply(r llmtest.Reply, in, out int64) llmtest.Reply {
	r.Usage = llm.Usage{InputTokens: in, OutputTokens: out}
	return r
}

func TestAgentToolChunksTranscriptAndUsage(t *testing.T) {
	childModel := llmtest.NewModel(
		usageReply(llmtest.Call("k1", "echo", `{"text":"deep"}`), 100, 10),
		usageReply(llmtest.Text("The child found: deep."), 200, 20),
	)
	child := loop.NewAgent(childModel, loop.MustToolset(echoTool()), nil)
	parentModel := llmtest.NewModel(
		usageReply(llmtest.Call("p1", "research", `{"task":"Find what is deep."}`), 1000, 1),
		usageReply(llmtest.Text("Deep it is."), 2000, 2),
	)
	parent := loop.NewAgent(parentModel, loop.MustToolset(
		loop.AgentTool("research", "Researches a question.", child, &loop.AgentToolOptions{SystemPrompt: "You research."}),
	), nil)
	chunks, res := collect(t, parent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("What is deep?")}))
	if res.Err != nil || res.Answer != "Deep it is." {
		t.Fatalf("err %v, answer %q", res.Err, res.Answer)
	}
	// The child ran on its system prompt and the task.
	req := childModel.Requests()[0]
	if len(req.Messages) != 2 || req.Messages[0].Text() != "You research." || req.Messages[1].Text() != "Find what is deep." {
		t.Errorf("child request %+v", req.Messages)
	}
	// Its chunks reach the parent's consumer, tagged, between the agent
	// call's start and its result; its end chunk does not.
	var got []string
	for _, c := range chunks {
		if c.Type == loop.ChunkMessage || c.Type == loop.ChunkToolCallDelta || c.Type == loop.ChunkReasoning {
			continue
		}
		s := string(c.Type)
		if c.Agent != "" {
			s = c.Agent + "@" + string(rune('0'+c.Depth)) + ":" + s
		}
		got = append(got, s)
	}
	want := []string{
		"turn_start", "turn_end", "tool_call_start",
		"research@1:turn_start", "research@1:turn_end", "research@1:tool_call_start", "research@1:tool_call_result",
		"research@1:turn_start", "research@1:turn_end",
		"tool_call_result", "turn_start", "turn_end", "end",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
	for _, c := range chunks {
		if c.Agent == "" && c.Type == loop.ChunkMessage && strings.Contains(c.Content, "child") {
			t.Errorf("a child's delta untagged: %+v", c)
		}
	}
	// The parent's transcript holds the child's answer only.
	results := toolResults(parentModel.Requests()[1])
	if len(results) != 1 || results[0].Text() != "The child found: deep." {
		t.Errorf("parent's tool results %+v", results)
	}
	for _, m := range res.Messages {
		for _, c := range m.ToolCalls() {
			if c.Name == "echo" {
				t.Error("the child's call entered the parent's transcript")
			}
		}
	}
	// Usage: the parent's two turns plus the child's two.
	if want := (llm.Usage{InputTokens: 3300, OutputTokens: 33}); res.Usage != want {
		t.Errorf("usage %+v, want %+v", res.Usage, want)
	}
	if len(res.Turns) != 2 {
		t.Errorf("%d turns: the child's are not the parent's", len(res.Turns))
	}
	b, _ := json.Marshal(only(chunks, loop.ChunkTurnStart)[1])
	if !strings.Contains(string(b), `"agent":"research","depth":1`) {
		t.Errorf("tagged chunk JSON %s", b)
	}
}

func TestAgentToolFailureIsAToolError(t *testing.T) {
	child := loop.NewAgent(llmtest.NewModel(llmtest.Fail(&llm.APIError{StatusCode: 401, Message: "bad key"})), nil, nil)
	parentModel := llmtest.NewModel(llmtest.Call("p1", "helper", `{"task":"x"}`), llmtest.Text("I will do it myself."))
	parent := loop.NewAgent(parentModel, loop.MustToolset(loop.AgentTool("helper", "Helps.", child, nil)), nil)
	chunks, res := collect(t, parent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	if res.Err != nil || res.Answer != "I will do it myself." {
		t.Fatalf("err %v", res.Err)
	}
	errs := only(chunks, loop.ChunkToolCallError)
	if len(errs) != 1 || errs[0].Agent != "" || !strings.Contains(errs[0].Content, `agent "helper" failed`) || !strings.Contains(errs[0].Content, "bad key") {
		t.Fatalf("tool errors %+v", errs)
	}
	// The child's error chunk reached the consumer, tagged.
	if ce := only(chunks, loop.ChunkError); len(ce) != 1 || ce[0].Agent != "helper" {
		t.Errorf("error chunks %+v", ce)
	}
}

// An agent that is its own tool: the depth bound stops the cycle.
func TestAgentToolDepthBoundsCycles(t *testing.T) {
	model := llmtest.NewModel(
		llmtest.Call("a0", "self", `{"task":"go deeper"}`),
		llmtest.Call("a1", "self", `{"task":"go deeper"}`),
		llmtest.Call("a2", "self", `{"task":"go deeper"}`),
		llmtest.Call("a3", "self", `{"task":"go deeper"}`), // at depth 3: refused
		llmtest.Text("d3"), llmtest.Text("d2"), llmtest.Text("d1"), llmtest.Text("d0"),
	)
	ts := loop.MustToolset()
	agent := loop.NewAgent(model, ts, nil)
	if err := ts.Add(loop.AgentTool("self", "Delegates to itself.", agent, nil)); err != nil {
		t.Fatal(err)
	}
	chunks, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	if res.Err != nil || res.Answer != "d0" || model.Remaining() != 0 {
		t.Fatalf("err %v, answer %q, %d replies left", res.Err, res.Answer, model.Remaining())
	}
	errs := only(chunks, loop.ChunkToolCallError)
	if len(errs) != 1 || errs[0].Depth != 3 || !strings.Contains(errs[0].Content, "deeper than the limit of 3") {
		t.Fatalf("tool errors %+v", errs)
	}
	maxDepth := 0
	for _, c := range chunks {
		maxDepth = max(maxDepth, c.Depth)
	}
	if maxDepth != 3 {
		t.Errorf("deepest chunk at depth %d", maxDepth)
	}
	// A smaller bound.
	model = llmtest.NewModel(llmtest.Call("a0", "self", `{"task":"x"}`), llmtest.Call("a1", "self", `{"task":"x"}`), llmtest.Text("d1"), llmtest.Text("d0"))
	ts = loop.MustToolset()
	agent = loop.NewAgent(model, ts, nil)
	ts.Add(loop.AgentTool("self", "Delegates.", agent, &loop.AgentToolOptions{MaxDepth: 1}))
	chunks, res = collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	if errs := only(chunks, loop.ChunkToolCallError); res.Answer != "d0" || len(errs) != 1 || errs[0].Depth != 1 {
		t.Fatalf("err %v, answer %q, errors %+v", res.Err, res.Answer, errs)
	}
}

// Breaking out of the parent's range, or cancelling its context, stops the
// child and its tools.
func TestAgentToolCancellation(t *testing.T) {
	var started, stopped chan struct{}
	block := &loop.ToolDef{Name: "wait", Description: "Waits.", Handler: func(ctx context.Context, _ *loop.Call) (*loop.Output, error) {
		close(started)
		<-ctx.Done()
		close(stopped)
		return nil, ctx.Err()
	}}
	tick := &loop.ToolDef{Name: "tick", Description: "Ticks.", Concurrent: true, Handler: func(context.Context, *loop.Call) (*loop.Output, error) {
		<-started
		return loop.TextOutput("tick"), nil
	}}
	newParent := func() *loop.Agent {
		started, stopped = make(chan struct{}), make(chan struct{})
		child := loop.NewAgent(llmtest.NewModel(llmtest.Call("k1", "wait", `{}`)), loop.MustToolset(block), nil)
		return loop.NewAgent(llmtest.NewModel(llmtest.Calls(tc("p1", "helper", `{"task":"wait"}`), tc("p2", "tick", `{}`))),
			loop.MustToolset(loop.AgentTool("helper", "Helps.", child, &loop.AgentToolOptions{Concurrent: true}), tick), nil)
	}
	parent := newParent()
	for c := range parent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}) {
		if c.Type == loop.ChunkToolCallResult && c.ToolCall.Name == "tick" {
			break
		}
	}
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the child's tool was not cancelled")
	}

	// The consumer leaves while the child relays a chunk, and a sibling
	// call runs on: the run returns at once, cancelling both.
	siblingStopped := make(chan struct{})
	sibling := &loop.ToolDef{Name: "sibling", Description: "Runs long.", Concurrent: true, Handler: func(ctx context.Context, _ *loop.Call) (*loop.Output, error) {
		<-ctx.Done()
		close(siblingStopped)
		return nil, ctx.Err()
	}}
	child := loop.NewAgent(llmtest.NewModel(llmtest.Text("hello")), nil, nil)
	parent = loop.NewAgent(llmtest.NewModel(llmtest.Calls(tc("p1", "sibling", `{}`), tc("p2", "helper", `{"task":"hi"}`))),
		loop.MustToolset(sibling, loop.AgentTool("helper", "Helps.", child, &loop.AgentToolOptions{Concurrent: true})), nil)
	for c := range parent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}) {
		if c.Agent == "helper" {
			break
		}
	}
	select {
	case <-siblingStopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the sibling call was not cancelled")
	}

	ctx, cancel := context.WithCancel(t.Context())
	parent = newParent()
	go func() {
		<-started
		cancel()
	}()
	_, res := collect(t, parent.RunLoop(ctx, []llm.Message{llm.UserMessage("go")}))
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the child's tool was not cancelled")
	}
	if !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("err %v", res.Err)
	}
}

func TestAgentToolApprovals(t *testing.T) {
	del, runs := guarded()
	var asked atomic.Int32
	var whose atomic.Value
	approver := loop.ApproverFunc(func(ctx context.Context, req *loop.ApprovalRequest) (loop.Decision, error) {
		asked.Add(1)
		whose.Store(loop.AgentName(ctx))
		return loop.Decision{Verdict: loop.Approve}, nil
	})
	child := loop.NewAgent(llmtest.NewModel(llmtest.Call("k1", "delete_file", `{"path":"a"}`), llmtest.Text("deleted")), loop.MustToolset(del), nil)
	parent := loop.NewAgent(llmtest.NewModel(llmtest.Call("p1", "cleaner", `{"task":"delete a"}`), llmtest.Text("done")),
		loop.MustToolset(loop.AgentTool("cleaner", "Cleans.", child, nil)), &loop.Options{Approver: approver})
	chunks, res := collect(t, parent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	if res.Err != nil || *runs != 1 || asked.Load() != 1 {
		t.Fatalf("err %v, %d runs, asked %d times", res.Err, *runs, asked.Load())
	}
	if ar := only(chunks, loop.ChunkApprovalRequest); len(ar) != 1 || ar[0].Agent != "cleaner" {
		t.Errorf("approval requests %+v", ar)
	}
	if got := whose.Load(); got != "cleaner" {
		t.Errorf("the approver's context names the agent %q, want cleaner", got)
	}
	if got := loop.AgentName(t.Context()); got != "" {
		t.Errorf("a top-level context names the agent %q", got)
	}
	// A child with its own approver uses it.
	del, runs = guarded()
	asked.Store(0)
	own := loop.ApproverFunc(func(context.Context, *loop.ApprovalRequest) (loop.Decision, error) {
		return loop.Decision{Verdict: loop.Reject, Reason: "not here"}, nil
	})
	child = loop.NewAgent(llmtest.NewModel(llmtest.Call("k1", "delete_file", `{"path":"a"}`), llmtest.Text("refused")), loop.MustToolset(del), &loop.Options{Approver: own})
	parent = loop.NewAgent(llmtest.NewModel(llmtest.Call("p1", "cleaner", `{"task":"delete a"}`), llmtest.Text("done")),
		loop.MustToolset(loop.AgentTool("cleaner", "Cleans.", child, nil)), &loop.Options{Approver: approver})
	_, res = collect(t, parent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	if res.Err != nil || *runs != 0 || asked.Load() != 0 {
		t.Fatalf("err %v, %d runs, parent's approver asked %d times", res.Err, *runs, asked.Load())
	}
}

// The child's output tokens count against the parent's budget, and bound
// the child's own.
func TestAgentToolBudgets(t *testing.T) {
	childModel := llmtest.NewModel(
		usageReply(llmtest.Call("k1", "echo", `{"text":"a"}`), 10, 80),
		usageReply(llmtest.Text("partial"), 10, 5),
	)
	child := loop.NewAgent(childModel, loop.MustToolset(echoTool()), nil)
	parentModel := llmtest.NewModel(
		usageReply(llmtest.Call("p1", "helper", `{"task":"x"}`), 10, 10),
		llmtest.Text("Final."),
	)
	parent := loop.NewAgent(parentModel, loop.MustToolset(loop.AgentTool("helper", "Helps.", child, nil)), &loop.Options{MaxOutputTokens: 50})
	_, res := collect(t, parent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	if res.Err != nil || res.Budget != "max_output_tokens" || res.Answer != "Final." {
		t.Fatalf("err %v, budget %q, answer %q", res.Err, res.Budget, res.Answer)
	}
	// The child had 40 tokens left: after its first turn (80) it was
	// asked for a final answer.
	reqs := childModel.Requests()
	if len(reqs) != 2 || reqs[1].ToolChoice.Mode != llm.ToolChoiceNone {
		t.Errorf("child requests: %d, last tool choice %q", len(reqs), reqs[len(reqs)-1].ToolChoice.Mode)
	}
}

// A child that suspends suspends the parent; the parent's Resume routes the
// results to the child, which finishes, and the parent goes on.
func TestAgentToolSuspendsTheTree(t *testing.T) {
	ask := loop.NewClientTool("ask_user", "Asks the user.", json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`))
	del, runs := guarded()
	childModel := llmtest.NewModel(
		usageReply(llmtest.Calls(tc("k1", "ask_user", `{"q":"which file?"}`), tc("k2", "delete_file", `{"path":"old"}`)), 10, 10),
		usageReply(llmtest.Text("Deleted old; the user said b."), 10, 10),
	)
	child := loop.NewAgent(childModel, loop.MustToolset(ask, del), nil)
	parentModel := llmtest.NewModel(
		usageReply(llmtest.Calls(tc("p1", "helper", `{"task":"clean up"}`), tc("p2", "echo", `{"text":"meanwhile"}`)), 100, 100),
		llmtest.Text("All clean."),
	)
	defer_ := loop.ApproverFunc(func(context.Context, *loop.ApprovalRequest) (loop.Decision, error) {
		return loop.Decision{Verdict: loop.Defer}, nil
	})
	parent := loop.NewAgent(parentModel, loop.MustToolset(loop.AgentTool("helper", "Helps.", child, nil), echoTool()), &loop.Options{Approver: defer_})
	_, res := collect(t, parent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	if res.Status != loop.StatusSuspended {
		t.Fatalf("status %s, err %v", res.Status, res.Err)
	}
	s := roundTrip(t, res.Suspension)
	if c := s.Calls[0]; c.Waiting != loop.PendingAgent || c.Agent == nil || c.Result != nil {
		t.Fatalf("agent call %+v", c)
	}
	if c := s.Calls[1]; c.Result == nil || c.Result.Text() != "echo: meanwhile" {
		t.Fatalf("the other call %+v", c)
	}
	var pending []string
	for _, c := range s.Pending() {
		pending = append(pending, c.Call.ID+":"+string(c.Waiting))
	}
	if diff := cmp.Diff([]string{"k1:result", "k2:approval"}, pending); diff != "" {
		t.Fatalf("pending (-want +got):\n%s", diff)
	}
	if s.Usage.OutputTokens != 110 {
		t.Errorf("suspension usage %+v", s.Usage)
	}
	// One answer at a time: the tree stays suspended.
	_, res = collect(t, parent.Resume(t.Context(), s, &loop.ResumeInput{Results: []llm.ToolResult{{CallID: "k1", Content: []llm.Part{llm.TextPart("b")}}}}))
	if res.Status != loop.StatusSuspended || len(res.Suspension.Pending()) != 1 || res.Suspension.Pending()[0].Call.ID != "k2" {
		t.Fatalf("status %s, err %v", res.Status, res.Err)
	}
	s = roundTrip(t, res.Suspension)
	// An unknown ID is refused whole.
	_, res = collect(t, parent.Resume(t.Context(), s, &loop.ResumeInput{Approvals: []loop.ApprovalDecision{{CallID: "nope", Approved: true}}}))
	if !errors.Is(res.Err, loop.ErrUnknownCall) || res.Status != loop.StatusSuspended {
		t.Fatalf("unknown call: status %s, err %v", res.Status, res.Err)
	}
	chunks, res := collect(t, parent.Resume(t.Context(), s, &loop.ResumeInput{Approvals: []loop.ApprovalDecision{{CallID: "k2", Approved: true}}}))
	if res.Err != nil || res.Answer != "All clean." || *runs != 1 {
		t.Fatalf("err %v, answer %q, %d deletions", res.Err, res.Answer, *runs)
	}
	results := toolResults(parentModel.Requests()[1])
	if len(results) != 2 || results[0].Text() != "Deleted old; the user said b." {
		t.Fatalf("parent's results %+v", results)
	}
	childResults := toolResults(childModel.Requests()[1])
	if len(childResults) != 2 || childResults[0].Text() != "b" || childResults[1].Text() != "deleted old" {
		t.Fatalf("child's results %+v", childResults)
	}
	// The agent call starts again, then the child's approved call runs.
	var starts []string
	for _, c := range only(chunks, loop.ChunkToolCallStart) {
		starts = append(starts, c.Agent+":"+c.ToolCall.Name)
	}
	if diff := cmp.Diff([]string{":helper", "helper:delete_file"}, starts); diff != "" {
		t.Errorf("tool starts on resume (-want +got):\n%s", diff)
	}
	// Usage: the parent's 100+100 and the child's 20+20, counted once.
	if res.Usage.OutputTokens != 100+20+res.Turns[1].Usage.OutputTokens {
		t.Errorf("usage %+v, turns %+v", res.Usage, res.Turns)
	}
}

// Children without an approver share the parent's, one approval at a time,
// even when they run in parallel.
func TestAgentToolApprovalsOneAtATime(t *testing.T) {
	var inside, most atomic.Int32
	approver := loop.ApproverFunc(func(context.Context, *loop.ApprovalRequest) (loop.Decision, error) {
		n := inside.Add(1)
		defer inside.Add(-1)
		if n > most.Load() {
			most.Store(n)
		}
		time.Sleep(20 * time.Millisecond)
		return loop.Decision{Verdict: loop.Approve}, nil
	})
	var tools []*loop.ToolDef
	var calls []llm.ToolCall
	for _, name := range []string{"a", "b", "c"} {
		del, _ := guarded()
		child := loop.NewAgent(llmtest.NewModel(llmtest.Call("k", "delete_file", `{"path":"x"}`), llmtest.Text("ok")), loop.MustToolset(del), nil)
		tools = append(tools, loop.AgentTool(name, "Deletes.", child, &loop.AgentToolOptions{Concurrent: true}))
		calls = append(calls, tc("p"+name, name, `{"task":"x"}`))
	}
	parent := loop.NewAgent(llmtest.NewModel(llmtest.Calls(calls...), llmtest.Text("done")), loop.MustToolset(tools...), &loop.Options{Approver: approver})
	chunks, res := collect(t, parent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	if res.Err != nil || len(only(chunks, loop.ChunkApprovalRequest)) != 3 {
		t.Fatalf("err %v", res.Err)
	}
	if most.Load() != 1 {
		t.Errorf("%d approvals at once", most.Load())
	}
}

// A call ID reused in a later turn runs a fresh child, not the resumed one.
func TestAgentToolCallIDReusedAfterResume(t *testing.T) {
	ask := loop.NewClientTool("ask_user", "Asks.", nil)
	childModel := llmtest.NewModel(llmtest.Call("k1", "ask_user", `{}`), llmtest.Text("first"), llmtest.Text("second"))
	child := loop.NewAgent(childModel, loop.MustToolset(ask), nil)
	parentModel := llmtest.NewModel(
		llmtest.Call("call_0", "helper", `{"task":"one"}`),
		llmtest.Call("call_0", "helper", `{"task":"two"}`),
		llmtest.Text("done"),
	)
	parent := loop.NewAgent(parentModel, loop.MustToolset(loop.AgentTool("helper", "Helps.", child, nil)), nil)
	_, res := collect(t, parent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	if res.Status != loop.StatusSuspended {
		t.Fatalf("status %s", res.Status)
	}
	_, res = collect(t, parent.Resume(t.Context(), res.Suspension, &loop.ResumeInput{Results: []llm.ToolResult{{CallID: "k1", Content: []llm.Part{llm.TextPart("yes")}}}}))
	if res.Err != nil || res.Answer != "done" {
		t.Fatalf("err %v, answer %q", res.Err, res.Answer)
	}
	reqs := childModel.Requests()
	if len(reqs) != 3 || reqs[2].Messages[0].Text() != "two" {
		t.Fatalf("child requests %d, last %+v", len(reqs), reqs[len(reqs)-1].Messages)
	}
	results := toolResults(parentModel.Requests()[2])
	if len(results) != 2 || results[0].Text() != "first" || results[1].Text() != "second" {
		t.Errorf("results %+v", results)
	}
}

// A parent and its child over each provider's wire format (and across
// them): the child's answer is the parent's tool result, the wire requests
// are valid, and the child's chunks are tagged.
func TestAgentToolAcrossProviders(t *testing.T) {
	for _, pw := range wires {
		for _, cw := range wires {
			t.Run(pw.name+"/"+cw.name, func(t *testing.T) {
				var cn, pn atomic.Int32
				childModel, childReqs, stopChild := cw.serve(func([]byte) wireReply {
					if cn.Add(1) == 1 {
						return wireReply{thinking: "Echo it.", calls: []llm.ToolCall{tc("k1", "echo", `{"text":"x"}`)}}
					}
					return wireReply{text: "The child says x."}
				})
				defer stopChild()
				parentModel, parentReqs, stopParent := pw.serve(func([]byte) wireReply {
					if pn.Add(1) == 1 {
						return wireReply{thinking: "Delegate.", calls: []llm.ToolCall{tc("p1", "helper", `{"task":"say x"}`)}}
					}
					return wireReply{text: "x, says the child."}
				})
				defer stopParent()
				child := loop.NewAgent(childModel, loop.MustToolset(echoTool()), nil)
				parent := loop.NewAgent(parentModel, loop.MustToolset(loop.AgentTool("helper", "Helps.", child, nil)), nil)
				chunks, res := collect(t, parent.RunLoop(t.Context(), []llm.Message{llm.SystemMessage("s"), llm.UserMessage("go")}))
				if res.Err != nil || res.Answer != "x, says the child." {
					t.Fatalf("err %v, answer %q", res.Err, res.Answer)
				}
				for _, b := range parentReqs() {
					pw.check(t, b)
				}
				for _, b := range childReqs() {
					cw.check(t, b)
				}
				last := parentReqs()[1]
				if !strings.Contains(string(last), "The child says x.") || strings.Contains(string(last), "echo: x") {
					t.Errorf("the parent's last request %s", last)
				}
				tagged := 0
				for _, c := range chunks {
					if c.Agent == "helper" && c.Depth == 1 {
						tagged++
					}
				}
				if tagged == 0 || res.Usage.InputTokens <= res.Turns[0].Usage.InputTokens+res.Turns[1].Usage.InputTokens {
					t.Errorf("%d tagged chunks, usage %+v", tagged, res.Usage)
				}
			})
		}
	}
}
