package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// endsBetween is a store that, once armed, lets skip reads of a session
// pass, then, at the next, runs between before reading it: a commit
// that lands between a stream's long-poll, which found nothing, and its
// read of the status.
type endsBetween struct {
	store.Store
	armed   atomic.Bool
	skip    atomic.Int32
	between func()
}

func (s *endsBetween) GetSession(ctx context.Context, id string) (*store.Session, error) {
	if s.armed.Load() && s.skip.Add(-1) < 0 && s.armed.CompareAndSwap(true, false) {
		s.between()
	}
	return s.Store.GetSession(ctx, id)
}

// TestStreamEndsAfterItsEvents: a stream whose long-poll found nothing
// (a keep-alive) reads the session's status; when the session ended
// between the two (here a cancel), the stream sends the events that
// ended it before "end", instead of ending at the long-poll's count,
// read before them: its client would never get the completion event.
// The stream waits out one long-poll of 15 s.
func TestStreamEndsAfterItsEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a stream's long-poll (15 s)")
	}
	eb := &endsBetween{}
	e := newEnv(t, &envOptions{wrap: func(st store.Store) store.Store { eb.Store = st; return eb }},
		calls(openaitest.ToolCall("call_1", "get_order_status", `{"order_id":"4242"}`)))
	id := e.create(keyAlice, orderAgent)
	f := e.follow(keyAlice, id)
	f.status(session.StatusAwaitingToolResults)
	from := len(f.events)
	eb.between = func() {
		if r := e.do("DELETE", "/api/v2/sessions/"+id, keyAlice, nil); r.status/100 != 2 {
			t.Errorf("cancel: %d %s", r.status, r.body)
		}
	}
	eb.skip.Store(1) // the stream's first read: does the session exist
	eb.armed.Store(true)
	r := e.do("GET", fmt.Sprintf("/api/v2/sessions/%s/events?from_index=%d", id, from), keyAlice, nil, "Accept", "text/event-stream")
	if eb.armed.Load() {
		t.Fatal("the session was not cancelled while the stream read its status")
	}
	var types []string
	for _, block := range strings.Split(string(r.body), "\n\n") {
		for _, line := range strings.Split(block, "\n") {
			if typ, ok := strings.CutPrefix(line, "event: "); ok {
				types = append(types, typ)
			}
		}
	}
	if len(types) < 2 || types[len(types)-1] != "end" || types[len(types)-2] != session.EventAgentCompletion {
		t.Errorf("the stream from %d sent %v, want the cancel's events up to %s, then end:\n%s", from, types, session.EventAgentCompletion, r.body)
	}
}
