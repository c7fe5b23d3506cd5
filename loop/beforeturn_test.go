package loop_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
)

// TestBeforeTurnYields stops a run between two turns and resumes it with a
// message: nothing is lost or sent twice, and budgets carry over.
func TestBeforeTurnYields(t *testing.T) {
	model := llmtest.NewModel(
		llmtest.Call("c1", "echo", `{"text":"one"}`),
		llmtest.Text("done"),
	)
	var seen []loop.NextTurn
	stopAt := 2
	opts := &loop.Options{MaxTurns: 3, BeforeTurn: func(_ context.Context, next loop.NextTurn) bool {
		seen = append(seen, next)
		return next.Turn != stopAt
	}}
	agent := loop.NewAgent(model, loop.MustToolset(echoTool()), opts)
	chunks, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	if res.Status != loop.StatusYielded || res.Err != nil {
		t.Fatalf("status %s (err %v), want yielded", res.Status, res.Err)
	}
	if diff := cmp.Diff([]loop.NextTurn{{Turn: 1}, {Turn: 2}}, seen); diff != "" {
		t.Errorf("turns seen (-want +got):\n%s", diff)
	}
	if n := len(only(chunks, loop.ChunkTurnStart)); n != 1 {
		t.Errorf("%d turns started, want 1", n)
	}
	s := roundTrip(t, res.Suspension)
	if len(s.Calls) != 0 || s.Turn != 1 || len(s.Messages) != 3 || s.Messages[2].Role != llm.RoleTool {
		t.Fatalf("yielded suspension: turn %d, %d calls, %d messages", s.Turn, len(s.Calls), len(s.Messages))
	}

	stopAt = 0
	seen = nil
	chunks, res = collect(t, agent.Resume(t.Context(), s, &loop.ResumeInput{Messages: []llm.Message{llm.UserMessage("and then?")}}))
	if res.Status != loop.StatusCompleted || res.Answer != "done" {
		t.Fatalf("resumed: status %s, answer %q, err %v", res.Status, res.Answer, res.Err)
	}
	// The turn count carried over: turn 2 of 3 is not the last one.
	if diff := cmp.Diff([]loop.NextTurn{{Turn: 2}}, seen); diff != "" {
		t.Errorf("turns seen after resuming (-want +got):\n%s", diff)
	}
	reqs := model.Requests()
	last := reqs[len(reqs)-1].Messages
	roles := ""
	for _, m := range last {
		roles += string(m.Role)[:1]
	}
	if roles != "uatu" {
		t.Errorf("second request's roles %q, want uatu (user, assistant, tool, user)", roles)
	}
	if n := len(only(chunks, loop.ChunkToolCallResult)); n != 0 {
		t.Errorf("%d tool results after resuming a yielded run, want 0", n)
	}
}

// TestBeforeTurnSeesFinalTurn: the hook is told which turn asks for the
// final answer, and a run it stops there has no final-answer prompt in
// its transcript.
func TestBeforeTurnSeesFinalTurn(t *testing.T) {
	model := llmtest.NewModel(llmtest.Call("c1", "echo", `{"text":"one"}`))
	var seen []loop.NextTurn
	opts := &loop.Options{MaxTurns: 2, BeforeTurn: func(_ context.Context, next loop.NextTurn) bool {
		seen = append(seen, next)
		return !next.Final()
	}}
	agent := loop.NewAgent(model, loop.MustToolset(echoTool()), opts)
	_, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	if res.Status != loop.StatusYielded {
		t.Fatalf("status %s, want yielded", res.Status)
	}
	if diff := cmp.Diff([]loop.NextTurn{{Turn: 1}, {Turn: 2, Budget: "max_turns"}}, seen); diff != "" {
		t.Errorf("turns seen (-want +got):\n%s", diff)
	}
	if last := res.Suspension.Messages[len(res.Suspension.Messages)-1]; last.Role != llm.RoleTool {
		t.Errorf("yielded transcript ends with a %s message, want the tool results", last.Role)
	}
}

// TestTurnEndCarriesTranscript: turn_end carries the transcript with the
// assistant message exactly as appended: calls dropped on a final turn,
// IDs unique across the transcript (a model that numbers its calls from
// 0 each turn, as some local servers do).
func TestTurnEndCarriesTranscript(t *testing.T) {
	model := llmtest.NewModel(
		llmtest.Call("call_0", "echo", `{"text":"one"}`),
		llmtest.Call("call_0", "echo", `{"text":"two"}`),
		llmtest.Reply{Text: "final", ToolCalls: []llm.ToolCall{{ID: "call_0", Name: "echo", Arguments: llm.Arguments(`{"text":"three"}`)}}},
	)
	agent := loop.NewAgent(model, loop.MustToolset(echoTool()), &loop.Options{MaxTurns: 3})
	chunks, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	if res.Status != loop.StatusCompleted || res.Answer != "final" {
		t.Fatalf("status %s, answer %q, err %v", res.Status, res.Answer, res.Err)
	}
	ends := only(chunks, loop.ChunkTurnEnd)
	if len(ends) != 3 {
		t.Fatalf("%d turn_end chunks, want 3", len(ends))
	}
	var ids []string
	for _, c := range ends {
		msgs := c.Messages
		last := msgs[len(msgs)-1]
		if last.Role != llm.RoleAssistant {
			t.Fatalf("turn %d: transcript ends with %s", c.Turn, last.Role)
		}
		if diff := cmp.Diff(res.Messages[:len(msgs)], msgs); diff != "" {
			t.Errorf("turn %d: transcript differs from the result's (-want +got):\n%s", c.Turn, diff)
		}
		for _, call := range last.ToolCalls() {
			ids = append(ids, call.ID)
		}
	}
	if diff := cmp.Diff([]string{"call_0", "call_2_0"}, ids); diff != "" {
		t.Errorf("call IDs (-want +got):\n%s", diff)
	}
}

// BenchmarkBeforeTurn measures the cost of the hook on a run of ten
// turns: nil, and a hook that lets every turn go.
func BenchmarkBeforeTurn(b *testing.B) {
	for _, bc := range []struct {
		name string
		hook func(context.Context, loop.NextTurn) bool
	}{
		{"nil", nil},
		{"pass", func(context.Context, loop.NextTurn) bool { return true }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			tools := loop.MustToolset(echoTool())
			for b.Loop() {
				var replies []llmtest.Reply
				for range 9 {
					replies = append(replies, llmtest.Call("", "echo", `{"text":"x"}`))
				}
				replies = append(replies, llmtest.Text("done"))
				agent := loop.NewAgent(llmtest.NewModel(replies...), tools, &loop.Options{BeforeTurn: bc.hook})
				if _, err := agent.Run(context.Background(), []llm.Message{llm.UserMessage("go")}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
