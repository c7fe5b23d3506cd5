package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// readCounter counts the reads a long-poll makes.
type readCounter struct {
	store.Store
	sessions, events, counts atomic.Int64
}

func (r *readCounter) GetSession(ctx context.Context, id string) (*store.Session, error) {
	r.sessions.Add(1)
	return r.Store.GetSession(ctx, id)
}

// EventCount counts once the count is read, so that a long-poll seen to
// have read it goes on to wait (see waitingLongPoll).
func (r *readCounter) EventCount(ctx context.Context, id string) (string, int64, error) {
	defer r.counts.Add(1)
	return r.Store.EventCount(ctx, id)
}

func (r *readCounter) Events(ctx context.Context, id string, from int64, limit int) ([]store.Event, error) {
	r.events.Add(1)
	return r.Store.Events(ctx, id, from, limit)
}

func (r *readCounter) EventsWithin(ctx context.Context, id string, from int64, limit int, maxBytes int64) ([]store.Event, error) {
	r.events.Add(1)
	return r.Store.EventsWithin(ctx, id, from, limit, maxBytes)
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
				s, e, n := st.sessions.Load(), st.events.Load(), st.counts.Load()
				got, gotCount, err := m.Changes(ctx, owner, v.ID, &p)
				if err != nil {
					t.Fatal(err)
				}
				if st.sessions.Load() == s && st.events.Load() == e && st.counts.Load() == n {
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

// TestLongPollWaitsOnTheCount: a long-poll with nothing new reads the
// session's event count, not the session, before it waits, and the
// commit that wakes it answers it.
func TestLongPollWaitsOnTheCount(t *testing.T) {
	model := llmtest.NewModel(llmtest.Calls(llm.ToolCall{ID: "call_1", Name: "get_order_status", Arguments: llm.Arguments(`{"order_id":"4242"}`)}))
	st := &readCounter{Store: openStore(t)}
	m := startManager(t, st, model, nil)
	id, from := pausedAtFirstCall(t, m)
	ctx := t.Context()

	sessions, events := st.sessions.Load(), st.events.Load()
	done := waitingLongPoll(t, m, st, id, from)
	if err := postWhilePaused(ctx, m, id); err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err != nil || a.c == nil || len(a.c.NewEvents) == 0 || a.c.NewEvents[0].Index != from {
		t.Fatalf("the long-poll answered %+v, %v", a.c, a.err)
	}
	if n := st.sessions.Load() - sessions; n != 0 {
		t.Errorf("the long-poll and the result read the session %d times, want none", n)
	}
	if n := st.events.Load() - events; n != 0 {
		t.Errorf("the long-poll read the events %d times, want none", n)
	}
}

// lateRecord is a store that, once armed, announces a commit before the
// commit's record comes back to the manager, as PostgreSQL's listening
// connection can, and holds the record until release is closed.
type lateRecord struct {
	store.Store
	armed    atomic.Bool
	notified chan struct{} // closed once the armed commit is announced
	release  chan struct{}
}

func (l *lateRecord) UpdateSession(ctx context.Context, s *store.Session, events []store.Event, opts *store.UpdateOptions) error {
	if opts == nil || opts.Committed == nil || !l.armed.CompareAndSwap(true, false) {
		return l.Store.UpdateSession(ctx, s, events, opts)
	}
	o := *opts
	var record func()
	o.Committed = func(s *store.Session, events []store.Event) {
		cs, ce := *s, slices.Clone(events)
		record = func() { opts.Committed(&cs, ce) }
	}
	err := l.Store.UpdateSession(ctx, s, events, &o) // committed and announced
	close(l.notified)
	<-l.release
	if record != nil {
		record()
	}
	return err
}

// TestWokenBeforeRecorded: a long-poll woken by a commit of this process
// before the commit is recorded waits for it, and answers from it
// without reading the session back.
func TestWokenBeforeRecorded(t *testing.T) {
	model := llmtest.NewModel(llmtest.Calls(llm.ToolCall{ID: "call_1", Name: "get_order_status", Arguments: llm.Arguments(`{"order_id":"4242"}`)}))
	late := &lateRecord{Store: openStore(t), notified: make(chan struct{}), release: make(chan struct{})}
	st := &readCounter{Store: late}
	waited := make(chan struct{}, 1)
	m := session.New(st, model, &session.Options{Logger: slog.New(slog.NewTextHandler(tWriter{t}, nil))})
	session.SetFlightWaited(m, func(string) {
		select {
		case waited <- struct{}{}:
		default:
		}
	})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(context.Background()) })
	id, from := pausedAtFirstCall(t, m)
	select {
	case <-waited: // a wait of the follower's, before
	default:
	}
	ctx := t.Context()

	done := waitingLongPoll(t, m, st, id, from)
	sessions, events := st.sessions.Load(), st.events.Load()
	late.armed.Store(true)
	sent := make(chan error, 1)
	go func() {
		sent <- postWhilePaused(ctx, m, id)
	}()
	<-late.notified
	select {
	case <-waited:
	case a := <-done:
		t.Fatalf("woken before the commit was recorded, the long-poll answered without waiting for it (%+v, %v), reading the session %d times",
			a.c, a.err, st.sessions.Load()-sessions)
	}
	close(late.release)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err != nil || a.c == nil || len(a.c.NewEvents) == 0 || a.c.NewEvents[0].Index != from {
		t.Fatalf("the long-poll answered %+v, %v", a.c, a.err)
	}
	if n, e := st.sessions.Load()-sessions, st.events.Load()-events; n != 0 || e != 0 {
		t.Errorf("the long-poll and the result read the session %d times and the events %d times, want none", n, e)
	}
}

// oneOrderRequest creates a session whose model calls one client tool.
const oneOrderRequest = `{"agent":{"name":"support-agent","tools":[{"name":"get_order_status","description":"Look up an order.","input_schema":{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}}]},"messages":"Check order 4242."}`

// pausedAtFirstCall creates a session of oneOrderRequest, waits until it
// waits for its call's result, pauses it, waits until no worker runs it,
// and returns it with the number of its events.
func pausedAtFirstCall(t *testing.T, m *session.Manager) (id string, events int64) {
	t.Helper()
	v := create(t, m, oneOrderRequest)
	f := &follower{t: t, m: m, id: v.ID}
	f.status(session.StatusAwaitingToolResults)
	if err := m.Pause(t.Context(), owner, v.ID); err != nil {
		t.Fatal(err)
	}
	f.status(session.StatusPaused)
	// The worker that ran it up to its call may still be winding down:
	// its watcher would read the session at the next commit.
	for session.Workers(m, v.ID) > 0 {
		runtime.Gosched()
	}
	return v.ID, int64(len(f.events))
}

// postWhilePaused posts the result of the call of a session of
// pausedAtFirstCall. The session stays paused: no worker runs, whose
// reads (its watcher's) would count with the long-poll's.
func postWhilePaused(ctx context.Context, m *session.Manager, id string) error {
	return m.PostToolResults(ctx, owner, id, []session.ToolResult{{Kind: "tool_result",
		ToolReq: session.ToolRequest{ToolName: "get_order_status", ID: "call_1"}, Result: json.RawMessage(`"shipped"`)}})
}

type answer struct {
	c   *session.Changes
	err error
}

// waitingLongPoll starts a long-poll of the session from from and
// returns once it has read the event count (nothing new then), with the
// channel its answer comes on: a commit made after it returns wakes the
// long-poll, which subscribed before reading.
func waitingLongPoll(t *testing.T, m *session.Manager, st *readCounter, id string, from int64) <-chan answer {
	t.Helper()
	counts := st.counts.Load()
	done := make(chan answer, 1)
	go func() {
		c, _, err := m.Changes(t.Context(), owner, id, &session.ChangesParams{From: from, Wait: 20 * time.Second})
		done <- answer{c, err}
	}()
	for st.counts.Load() == counts {
		select {
		case a := <-done:
			t.Fatalf("the long-poll returned before anything came: %+v, %v", a.c, a.err)
		default:
			runtime.Gosched()
		}
	}
	return done
}

// TestChangesCommitsBehind: a long-poll that fell behind by a few
// commits of this process (its client posted results, then the session
// ran on to its end before it asked again) is answered from what those
// commits wrote, without reading the session or its events back, and
// gets the events a read gives. Before, only a session's last commit was
// kept, and such a long-poll read the store.
func TestChangesCommitsBehind(t *testing.T) {
	model := llmtest.NewModel(
		llmtest.Calls(llm.ToolCall{ID: "call_1", Name: "get_order_status", Arguments: llm.Arguments(`{"order_id":"4242"}`)}),
		llmtest.Calls(llm.ToolCall{ID: "call_2", Name: "get_order_status", Arguments: llm.Arguments(`{"order_id":"4243"}`)}),
		llmtest.Text("Order 4242 shipped; 4243 was not found."),
	)
	st := &readCounter{Store: openStore(t)}
	m := startManager(t, st, model, nil)
	reader := session.New(st.Store, model, nil)
	ctx := t.Context()
	v := create(t, m, oneOrderRequest)
	f := &follower{t: t, m: m, id: v.ID}
	f.status(session.StatusAwaitingToolResults)
	behind := int64(len(f.events)) // the cursor of a client that went away
	post := func(call string) {
		t.Helper()
		if err := m.PostToolResults(ctx, owner, v.ID, []session.ToolResult{{Kind: "tool_result",
			ToolReq: session.ToolRequest{ToolName: "get_order_status", ID: call}, Result: json.RawMessage(`"shipped"`)}}); err != nil {
			t.Fatal(err)
		}
	}
	post("call_1")
	f.status(session.StatusAwaitingToolResults) // the second call
	post("call_2")
	f.status(session.StatusCompleted)
	for session.Workers(m, v.ID) > 0 {
		runtime.Gosched()
	}
	for _, from := range []int64{behind, behind + 1} {
		want, wantCount, err := reader.Changes(ctx, owner, v.ID, &session.ChangesParams{From: from})
		if err != nil {
			t.Fatal(err)
		}
		s, e, n := st.sessions.Load(), st.events.Load(), st.counts.Load()
		got, gotCount, err := m.Changes(ctx, owner, v.ID, &session.ChangesParams{From: from})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got); d != "" || wantCount != gotCount {
			t.Errorf("from %d: count %d, want %d; changes (-read +answered):\n%s", from, gotCount, wantCount, d)
		}
		if ds, de, dn := st.sessions.Load()-s, st.events.Load()-e, st.counts.Load()-n; ds+de+dn != 0 {
			t.Errorf("from %d, %d events behind the end: the long-poll read the session %d times, the events %d times, the count %d times; want none",
				from, wantCount-from, ds, de, dn)
		}
	}
}

// TestNewLongPollWaitsForRecord: a long-poll that comes while a commit of
// this process is in flight, its transaction already seen by readers but
// not yet recorded, waits for the record and answers from it, instead of
// reading the session and its events back. Before, only a long-poll the
// commit woke waited: one that came then read the store (about 150 of
// the 300-odd event reads of TestManySessionsOneKey on SQLite).
func TestNewLongPollWaitsForRecord(t *testing.T) {
	model := llmtest.NewModel(llmtest.Calls(llm.ToolCall{ID: "call_1", Name: "get_order_status", Arguments: llm.Arguments(`{"order_id":"4242"}`)}))
	late := &lateRecord{Store: openStore(t), notified: make(chan struct{}), release: make(chan struct{})}
	st := &readCounter{Store: late}
	waited := make(chan struct{}, 1)
	m := session.New(st, model, &session.Options{Logger: slog.New(slog.NewTextHandler(tWriter{t}, nil))})
	session.SetFlightWaited(m, func(string) {
		select {
		case waited <- struct{}{}:
		default:
		}
	})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(context.Background()) })
	id, from := pausedAtFirstCall(t, m)
	select {
	case <-waited: // a wait of the follower's, before
	default:
	}
	ctx := t.Context()

	late.armed.Store(true)
	sent := make(chan error, 1)
	go func() {
		sent <- postWhilePaused(ctx, m, id)
	}()
	<-late.notified // committed, not yet recorded
	sessions, events := st.sessions.Load(), st.events.Load()
	done := make(chan answer, 1)
	go func() {
		c, _, err := m.Changes(ctx, owner, id, &session.ChangesParams{From: from, Wait: 20 * time.Second})
		done <- answer{c, err}
	}()
	select {
	case <-waited:
	case a := <-done:
		t.Fatalf("a long-poll that came while the commit was in flight answered without waiting for it (%d events), reading the session %d times and the events %d times",
			len(a.c.NewEvents), st.sessions.Load()-sessions, st.events.Load()-events)
	}
	close(late.release)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	a := <-done
	if a.err != nil || a.c == nil || len(a.c.NewEvents) == 0 || a.c.NewEvents[0].Index != from {
		t.Fatalf("the long-poll answered %+v, %v", a.c, a.err)
	}
	if n, e := st.sessions.Load()-sessions, st.events.Load()-events; n != 0 || e != 0 {
		t.Errorf("the long-poll read the session %d times and the events %d times, want none", n, e)
	}
}

// TestNewLongPollOutlastedByCommit: a long-poll that waits for a commit in
// flight (see TestNewLongPollWaitsForRecord) which outlasts its wait
// answers with the events already there, read from the store, not with
// nothing.
func TestNewLongPollOutlastedByCommit(t *testing.T) {
	model := llmtest.NewModel(llmtest.Calls(llm.ToolCall{ID: "call_1", Name: "get_order_status", Arguments: llm.Arguments(`{"order_id":"4242"}`)}))
	late := &lateRecord{Store: openStore(t), notified: make(chan struct{}), release: make(chan struct{})}
	m := startManager(t, late, model, nil)
	id, from := pausedAtFirstCall(t, m)
	ctx := t.Context()

	late.armed.Store(true)
	sent := make(chan error, 1)
	go func() {
		sent <- postWhilePaused(ctx, m, id)
	}()
	<-late.notified // committed, not yet recorded, and held past the wait
	c, count, err := m.Changes(ctx, owner, id, &session.ChangesParams{From: from, Wait: 100 * time.Millisecond})
	close(late.release)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if err != nil || c == nil || len(c.NewEvents) == 0 || c.NewEvents[0].Index != from || count <= from {
		t.Fatalf("the long-poll answered %+v (count %d), %v; want the events from %d", c, count, err, from)
	}
}
