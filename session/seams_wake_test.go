package session_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/session"
)

// TestWokenLongPollOutlastedByCommit: a long-poll woken by a commit that
// is announced before it returns (PostgreSQL's notification; lateRecord
// here) waits for that commit's record; when the commit outlasts the
// long-poll's wait, the long-poll answers the events already there,
// read from the store, as a new long-poll does
// (TestNewLongPollOutlastedByCommit), not nothing: the events came
// within its wait.
func TestWokenLongPollOutlastedByCommit(t *testing.T) {
	model := llmtest.NewModel(llmtest.Calls(llm.ToolCall{ID: "call_1", Name: "get_order_status", Arguments: llm.Arguments(`{"order_id":"4242"}`)}))
	late := &lateRecord{Store: openStore(t), notified: make(chan struct{}), release: make(chan struct{})}
	st := &readCounter{Store: late}
	m := startManager(t, st, model, nil)
	id, from := pausedAtFirstCall(t, m)
	ctx := t.Context()

	counts := st.counts.Load()
	done := make(chan answer, 1)
	var count int64
	go func() {
		c, n, err := m.Changes(ctx, owner, id, &session.ChangesParams{From: from, Wait: 500 * time.Millisecond})
		count = n
		done <- answer{c, err}
	}()
	for st.counts.Load() == counts { // it read the count: nothing new, it waits
		runtime.Gosched()
	}
	late.armed.Store(true)
	sent := make(chan error, 1)
	go func() {
		sent <- postWhilePaused(context.Background(), m, id)
	}()
	<-late.notified // committed and announced, held past the wait
	a := <-done
	close(late.release)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if a.err != nil || a.c == nil || len(a.c.NewEvents) == 0 || a.c.NewEvents[0].Index != from {
		t.Fatalf("woken by a commit that outlasted its wait, the long-poll answered %+v (count %d), %v; want the events from %d, committed within its wait", a.c, count, a.err, from)
	}
}
