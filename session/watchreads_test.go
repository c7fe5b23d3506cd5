package session_test

import (
	"encoding/json"
	"runtime"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/session"
)

// TestWatchReadsNothingAfterItsRun: a worker's last commit of a turn
// (the calls that wait for the caller, which gives the lease up) wakes
// the run's own watch, which found the run stopped too and read the
// session for nothing in about one turn in two (select picks either of
// its ready cases; with one P, as `hrns serve` pinned to a CPU has, the
// watch runs once the worker blocks). A count, not a time: at most one
// turn in ten may read, against 23 to 29 reads in 50 turns before.
func TestWatchReadsNothingAfterItsRun(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const turns = 50
	var replies []llmtest.Reply
	for i := range turns {
		replies = append(replies, llmtest.Calls(llm.ToolCall{ID: "call_" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Name: "get_order_status", Arguments: llm.Arguments(`{"order_id":"4242"}`)}))
	}
	replies = append(replies, llmtest.Text("done"))
	model := llmtest.NewModel(replies...)
	st := &readCounter{Store: openStore(t)}
	m := startManager(t, st, model, &session.Options{MaxSteps: 1000})
	v := create(t, m, `{"agent":{"name":"support-agent","tools":[{"name":"get_order_status","description":"Look up an order.","input_schema":{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}}]},"messages":"Check."}`)
	f := &follower{t: t, m: m, id: v.ID}
	f.status(session.StatusAwaitingToolResults)
	s0 := st.sessions.Load()
	for i := range turns {
		var as session.ActiveState
		for j := len(f.events) - 1; j >= 0; j-- {
			if f.events[j].Type == session.EventActiveState {
				json.Unmarshal(f.events[j].Data, &as)
				break
			}
		}
		if err := m.PostToolResults(t.Context(), owner, v.ID, []session.ToolResult{{Kind: "tool_result", ToolReq: as.PendingToolCalls[0], Result: json.RawMessage(`"shipped"`)}}); err != nil {
			t.Fatal(err)
		}
		if i < turns-1 {
			f.until(func(c *session.Changes) bool {
				return c.Status == session.StatusAwaitingToolResults && len(c.NewEvents) > 0 && c.NewEvents[len(c.NewEvents)-1].Type == session.EventActiveState
			})
		}
	}
	f.status(session.StatusCompleted)
	if n := st.sessions.Load() - s0; n > turns/10 {
		t.Errorf("%d session reads in %d turns of a client-side tool, want at most %d", n, turns, turns/10)
	}
}
