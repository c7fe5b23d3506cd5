package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// refusingStore fails the session updates it is told to, without writing
// and without calling their Committed hook, as a store whose transaction
// failed does.
type refusingStore struct {
	readCounter
	refuse atomic.Bool
}

var errRefused = errors.New("test: update refused")

func (s *refusingStore) UpdateSession(ctx context.Context, sess *store.Session, events []store.Event, o *store.UpdateOptions) error {
	if s.refuse.Load() {
		return errRefused
	}
	return s.Store.UpdateSession(ctx, sess, events, o)
}

// awaitingSession creates a session on m that waits for a client tool's
// result, and follows it there.
func awaitingSession(t *testing.T, m *session.Manager) *follower {
	t.Helper()
	v := create(t, m, `{"agent":{"name":"support-agent","tools":[{"name":"get_order_status","description":"Look up an order.","input_schema":{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}}]},"messages":"Check order 4242."}`)
	f := &follower{t: t, m: m, id: v.ID}
	f.status(session.StatusAwaitingToolResults)
	return f
}

func callsModel() llm.Model {
	return llmtest.NewModel(llmtest.Calls(llm.ToolCall{ID: "call_1", Name: "get_order_status", Arguments: llm.Arguments(`{"order_id":"4242"}`)}))
}

// TestLongPollAfterFailedCommit: a commit that fails publishes nothing to
// the long-polls waiting on its session (no record of it, no wake-up
// answered from one): the long-poll's wait ends with nothing, a long-poll
// after it finds nothing, and the next commit's events are the ones
// answered, from the cursor the failed one would have taken.
func TestLongPollAfterFailedCommit(t *testing.T) {
	st := &refusingStore{readCounter: readCounter{Store: openStore(t)}}
	m := startManager(t, st, callsModel(), nil)
	f := awaitingSession(t, m)
	from := int64(len(f.events))
	counts := st.counts.Load()
	done := make(chan answer, 1)
	go func() {
		c, _, err := m.Changes(t.Context(), owner, f.id, &session.ChangesParams{From: from, Wait: 500 * time.Millisecond})
		done <- answer{c, err}
	}()
	for st.counts.Load() == counts { // it read the count: it waits
		runtime.Gosched()
	}
	st.refuse.Store(true)
	if err := m.SendMessages(t.Context(), owner, f.id, []session.UserMessage{{Message: "lost"}}); !errors.Is(err, errRefused) {
		t.Fatalf("SendMessages = %v, want the store's error", err)
	}
	if a := <-done; a.err != nil || a.c != nil {
		t.Fatalf("the waiting long-poll answered %+v, %v after a failed commit; want nothing", a.c, a.err)
	}
	if c, count, err := m.Changes(t.Context(), owner, f.id, &session.ChangesParams{From: from}); err != nil || c != nil || count != from {
		t.Fatalf("a long-poll after the failed commit = %+v, %d, %v; want nothing at %d", c, count, err, from)
	}
	st.refuse.Store(false)
	if err := m.SendMessages(t.Context(), owner, f.id, []session.UserMessage{{Message: "kept"}}); err != nil {
		t.Fatal(err)
	}
	c, _, err := m.Changes(t.Context(), owner, f.id, &session.ChangesParams{From: from, Wait: 10 * time.Second})
	if err != nil || c == nil || len(c.NewEvents) == 0 {
		t.Fatalf("after the next commit: %+v, %v", c, err)
	}
	if got := c.NewEvents[0]; got.Index != from || !containsMessage(got, "kept") {
		t.Errorf("first event after the next commit = %d %s, want the message \"kept\" at %d", got.Index, got.Data, from)
	}
	for _, e := range c.NewEvents {
		if containsMessage(e, "lost") {
			t.Errorf("the failed commit's message was answered: %d %s", e.Index, e.Data)
		}
	}
}

func containsMessage(e session.Event, text string) bool {
	var d struct {
		Kind    string   `json:"kind"`
		Content []string `json:"content"`
	}
	json.Unmarshal(e.Data, &d)
	return d.Kind == "message_event" && len(d.Content) == 1 && d.Content[0] == text
}

// TestLongPollsOrderedUnderConcurrentCommits: long-polls that follow a
// session while several callers commit to it at once get every event
// once, in the log's order, as a read of the log gives them.
func TestLongPollsOrderedUnderConcurrentCommits(t *testing.T) {
	st := &readCounter{Store: openStore(t)}
	model := callsModel()
	m := startManager(t, st, model, nil)
	f := awaitingSession(t, m)
	const senders, each = 4, 6
	start := len(f.events)
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			for i := range each {
				if err := m.SendMessages(t.Context(), owner, f.id, []session.UserMessage{{Message: fmt.Sprintf("m-%d-%d", g, i)}}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	followed := make([][]session.Event, 3)
	var fg sync.WaitGroup
	for k := range followed {
		fg.Go(func() {
			events := append([]session.Event(nil), f.events...)
			for messages := 0; messages < senders*each; {
				c, _, err := m.Changes(t.Context(), owner, f.id, &session.ChangesParams{From: int64(len(events)), Wait: 10 * time.Second})
				if err != nil {
					t.Error(err)
					return
				}
				if c == nil {
					continue
				}
				for _, e := range c.NewEvents {
					if e.Index != int64(len(events)) {
						t.Errorf("follower %d: event %d came at %d", k, e.Index, len(events))
						return
					}
					if isMessage(e) {
						messages++
					}
					events = append(events, e)
				}
			}
			followed[k] = events
		})
	}
	wg.Wait()
	fg.Wait()
	if t.Failed() {
		return
	}
	reader := session.New(st.Store, model, nil)
	want, _, err := reader.Changes(t.Context(), owner, f.id, &session.ChangesParams{From: 0})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, e := range want.NewEvents[start:] {
		if isMessage(e) {
			var d struct{ Content []string }
			json.Unmarshal(e.Data, &d)
			seen[d.Content[0]]++
		}
	}
	if len(seen) != senders*each {
		t.Errorf("%d messages in the log, want %d: %v", len(seen), senders*each, seen)
	}
	for msg, n := range seen {
		if n != 1 {
			t.Errorf("message %s %d times in the log", msg, n)
		}
	}
	for k, events := range followed {
		if d := cmp.Diff(want.NewEvents[:len(events)], events); d != "" {
			t.Errorf("follower %d (-log +followed):\n%s", k, d)
		}
	}
}

func isMessage(e session.Event) bool {
	var d struct{ Kind string }
	json.Unmarshal(e.Data, &d)
	return e.Type == session.EventAgent && d.Kind == "message_event"
}

// TestWokenLongPollAnswersFirst: on one P, a long-poll woken by a
// caller's input that starts no work (a message to a paused session) has
// its answer before the input's call returns: the commit yields to it
// once committed, instead of the long-poll waiting for the rest of the
// call and the caller's answer. Before, it ran once the call returned.
func TestWokenLongPollAnswersFirst(t *testing.T) {
	st := &readCounter{Store: openStore(t)}
	m := startManager(t, st, callsModel(), nil)
	f := awaitingSession(t, m)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const n = 20
	first := 0
	for range n {
		if err := m.Pause(t.Context(), owner, f.id); err != nil {
			t.Fatal(err)
		}
		f.status(session.StatusPaused)
		done := waitingLongPoll(t, m, st, f.id, int64(len(f.events)))
		if err := m.SendMessages(t.Context(), owner, f.id, []session.UserMessage{{Message: "ping"}}); err != nil {
			t.Fatal(err)
		}
		var a answer
		select {
		case a = <-done:
			first++
		default:
			a = <-done
		}
		if a.err != nil || a.c == nil || !isMessage(a.c.NewEvents[0]) {
			t.Fatalf("the woken long-poll answered %+v, %v; want the message", a.c, a.err)
		}
		f.events = append(f.events, a.c.NewEvents...)
	}
	t.Logf("long-polls answered before the message's call returned: %d of %d", first, n)
	// A scheduler may take another goroutine first now and then (the
	// race detector's, at random): most, not all (before, none).
	if first < n/2 {
		t.Errorf("the woken long-poll answered before the message's call returned %d times in %d, want at least %d", first, n, n/2)
	}
}
