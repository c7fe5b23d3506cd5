package session_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/loop/compact"
	"github.com/hrns-dev/hrns/pricing"
	"github.com/hrns-dev/hrns/session"
)

// TestCompactionSurvivesRestart: a session whose transcript was compacted
// logs a ContextCompactedEvent, its stored transcript is the compacted
// one (old results replaced by stubs, in place: a trim keeps the number
// of messages), and a manager started afterwards on the same store (a
// restart) goes on from it: its first request carries the stubs, not the
// results they replaced.
func TestCompactionSurvivesRestart(t *testing.T) {
	st := openStore(t)
	const steps = 6
	var replies []llmtest.Reply
	for i := 1; i <= steps; i++ {
		r := llmtest.Call(fmt.Sprintf("c%d", i), "lookup", `{}`)
		r.Usage = llm.Usage{InputTokens: int64(100 + 500*i), OutputTokens: 10}
		replies = append(replies, r)
	}
	opts := &session.Options{
		// The window comes from the table, by the agent's model.
		ContextWindows: pricing.Tokens(map[string]int{"small-model": 2000}),
		Compaction:     &loop.Compaction{KeepTurns: 1, Strategy: compact.Trim{}},
	}
	m1 := startManager(t, st, llmtest.NewModel(replies...), opts)
	v := create(t, m1, `{"agent":{"name":"a","model":"small-model","system":"be brief","tools":[{"name":"lookup","description":"d"}]},"messages":"go"}`)
	f := &follower{t: t, m: m1, id: v.ID}
	result := func(i int) string { return fmt.Sprintf("%q", fmt.Sprintf("result %d: ", i)+strings.Repeat("x", 2000)) }
	for i := 1; i < steps; i++ {
		f.until(func(c *session.Changes) bool {
			return c.Status == session.StatusAwaitingToolResults && c.Metrics.Steps == i
		})
		post(t, m1, v.ID, fmt.Sprintf("c%d", i), result(i))
	}
	f.until(func(c *session.Changes) bool {
		return c.Status == session.StatusAwaitingToolResults && c.Metrics.Steps == steps
	})
	var compacted []session.ContextCompacted
	for _, e := range f.events {
		if e.Type == session.EventContextCompacted {
			var d session.ContextCompacted
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			compacted = append(compacted, d)
		}
	}
	if len(compacted) == 0 {
		t.Fatalf("no ContextCompactedEvent; events:\n%s", f.dump())
	}
	if d := compacted[0]; d.Reason != "context_window" || d.Strategy != "trim" || d.Window != 2000 || d.Trimmed == 0 || d.TokensAfter >= d.TokensBefore {
		t.Errorf("ContextCompactedEvent %+v", d)
	}
	if err := m1.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	stored := storedMessages(t, st, v.ID)
	stubs := 0
	for _, msg := range stored {
		for _, p := range msg.Parts {
			if p.ToolResult != nil && strings.HasPrefix(p.ToolResult.Text(), "[compacted:") {
				stubs++
			}
		}
	}
	if stubs == 0 || strings.Contains(stored[3].Parts[0].ToolResult.Text(), "xxxx") {
		t.Fatalf("the stored transcript is not the compacted one: %d stubs; first result %.60q", stubs, stored[3].Parts[0].ToolResult.Text())
	}

	model := llmtest.NewModel(llmtest.Text("done"))
	m2 := startManager(t, st, model, opts)
	f.m = m2
	post(t, m2, v.ID, fmt.Sprintf("c%d", steps), result(steps))
	f.status(session.StatusCompleted)
	reqs := model.Requests()
	if len(reqs) == 0 {
		t.Fatal("no request after the restart")
	}
	first := reqs[0].Messages
	if txt := first[3].Parts[0].ToolResult.Text(); !strings.HasPrefix(txt, "[compacted:") {
		t.Errorf("after the restart the first result is %.40q, want the stub", txt)
	}
}
