package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// readCounter counts the reads a long-poll makes.
type readCounter struct {
	store.Store
	sessions, events atomic.Int64
}

func (r *readCounter) GetSession(ctx context.Context, id string) (*store.Session, error) {
	r.sessions.Add(1)
	return r.Store.GetSession(ctx, id)
}

func (r *readCounter) Events(ctx context.Context, id string, from int64, limit int) ([]store.Event, error) {
	r.events.Add(1)
	return r.Store.Events(ctx, id, from, limit)
}

// TestChangesFromTheCommit: a long-poll of a session this process just
// committed is answered from the commit, without reading the session or
// its events back, and the answer is the one a read gives, for every
// cursor and limit, at each point of a session's life.
func TestChangesFromTheCommit(t *testing.T) {
	model := llmtest.NewModel(
		llmtest.Calls(
			llm.ToolCall{ID: "call_1", Name: "get_order_status", Arguments: llm.Arguments(`{"order_id":"4242"}`)},
			llm.ToolCall{ID: "call_2", Name: "get_order_status", Arguments: llm.Arguments(`{"order_id":"4243"}`)},
		),
		llmtest.Text("Order 4242 shipped; 4243 was not found."),
	)
	st := &readCounter{Store: openStore(t)}
	m := startManager(t, st, model, nil)
	// A manager that committed nothing answers every long-poll from the
	// store: the reference.
	reader := session.New(st.Store, model, nil)
	v := create(t, m, `{"agent":{"name":"support-agent","tools":[{"name":"get_order_status","description":"Look up an order.","input_schema":{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}}]},"messages":"Check orders 4242 and 4243."}`)
	f := &follower{t: t, m: m, id: v.ID}
	ctx := t.Context()

	// compare checks every cursor and limit of the session as it is, and
	// returns how many of the long-polls read nothing.
	compare := func(point string) (unread int) {
		t.Helper()
		_, count, err := reader.Changes(ctx, owner, v.ID, &session.ChangesParams{From: 1 << 40})
		if err != nil {
			t.Fatal(err)
		}
		zero, one := 0, 1
		for from := int64(-1); from <= count+1; from++ {
			for _, p := range []session.ChangesParams{{From: from}, {From: from, Limit: &zero}, {From: from, Limit: &one}, {From: from, NoEvents: true}} {
				want, wantCount, err := reader.Changes(ctx, owner, v.ID, &p)
				if err != nil {
					t.Fatal(err)
				}
				s, e := st.sessions.Load(), st.events.Load()
				got, gotCount, err := m.Changes(ctx, owner, v.ID, &p)
				if err != nil {
					t.Fatal(err)
				}
				if st.sessions.Load() == s && st.events.Load() == e {
					unread++
				}
				if d := cmp.Diff(want, got); d != "" || wantCount != gotCount {
					t.Errorf("%s, from %d, limit %v, no events %v: count %d, want %d; changes (-read +answered):\n%s", point, from, p.Limit, p.NoEvents, gotCount, wantCount, d)
				}
			}
		}
		// Not another owner's: the commit is no way around the check.
		if _, _, err := m.Changes(ctx, "mallory", v.ID, &session.ChangesParams{From: count - 1}); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("%s: another owner's long-poll = %v, want ErrNotFound", point, err)
		}
		return unread
	}

	f.status(session.StatusAwaitingToolResults)
	if n := compare("awaiting results"); n == 0 {
		t.Error("awaiting results: every long-poll read the store")
	}
	var as session.ActiveState
	json.Unmarshal(f.events[len(f.events)-1].Data, &as)
	if err := m.PostToolResults(ctx, owner, v.ID, []session.ToolResult{{Kind: "tool_result", ToolReq: as.PendingToolCalls[0], Result: json.RawMessage(`"shipped"`)}}); err != nil {
		t.Fatal(err)
	}
	if n := compare("one result posted"); n == 0 {
		t.Error("one result posted: every long-poll read the store")
	}
	if err := m.PostToolResults(ctx, owner, v.ID, []session.ToolResult{{Kind: "error_event", ToolReq: as.PendingToolCalls[1], Error: "Order not found", Origin: "custom_tools"}}); err != nil {
		t.Fatal(err)
	}
	f.status(session.StatusCompleted)
	if n := compare("completed"); n == 0 {
		t.Error("completed: every long-poll read the store")
	}
}
