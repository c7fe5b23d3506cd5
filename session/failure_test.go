package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/postgres"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
)

// eachStore runs fn with a new SQLite store, and with a new PostgreSQL
// store (in a schema of its own) when the test server is reachable.
func eachStore(t *testing.T, fn func(t *testing.T, st store.Store)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, openStore(t)) })
	t.Run("postgres", func(t *testing.T) {
		st, err := postgres.Open(t.Context(), postgrestest.DSN(t), &postgres.Options{MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
}

// syncLog keeps a manager's log, and shows it in the test's.
type syncLog struct {
	t  *testing.T
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.b.Write(p)
	l.mu.Unlock()
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// newLogged returns a manager (not started) whose log the test reads.
func newLogged(t *testing.T, st store.Store, model llm.Model, opts *session.Options) (*session.Manager, *syncLog) {
	t.Helper()
	if opts == nil {
		opts = &session.Options{}
	}
	log := &syncLog{t: t}
	opts.Logger = slog.New(slog.NewTextHandler(log, nil))
	m := session.New(st, model, opts)
	t.Cleanup(func() { m.Stop(context.Background()) })
	return m, log
}

func start(t *testing.T, m *session.Manager) {
	t.Helper()
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// ended follows the session until it ends.
func ended(t *testing.T, m *session.Manager, id string) (*follower, *session.Changes) {
	t.Helper()
	f := &follower{t: t, m: m, id: id}
	c := f.until(func(c *session.Changes) bool { return c.Status.Terminal() })
	return f, c
}

// checkInternal checks that the session failed with error_code internal,
// its last event an AgentErrorEvent whose message holds want and no
// stack.
func checkInternal(t *testing.T, f *follower, c *session.Changes, want string) {
	t.Helper()
	if c.Status != session.StatusFailed || c.ErrorCode == nil || *c.ErrorCode != session.CodeInternal || c.Error == nil {
		t.Fatalf("session ended %s (error %v, code %v), want failed with code internal; events:\n%s", c.Status, c.Error, c.ErrorCode, f.dump())
	}
	last := f.events[len(f.events)-1]
	var d struct{ Error string }
	json.Unmarshal(last.Data, &d)
	if last.Type != session.EventAgentError || !strings.Contains(d.Error, want) || d.Error != *c.Error {
		t.Errorf("last event %s %s, want an AgentErrorEvent saying %q, as the status does (%q)", last.Type, last.Data, want, *c.Error)
	}
	if strings.Contains(d.Error, "goroutine") || strings.Contains(d.Error, ".go:") {
		t.Errorf("the error event holds a stack: %s", d.Error)
	}
	checkIndexes(t, f.events)
}

// checkReleased checks that no worker holds the session.
func checkReleased(t *testing.T, st store.Store, id string) {
	t.Helper()
	s, err := st.GetSession(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if s.LeaseOwner != "" || s.Runnable || !s.WakeAt.IsZero() {
		t.Errorf("ended session: lease %q, runnable %v, wake at %v; want no lease and nothing to do", s.LeaseOwner, s.Runnable, s.WakeAt)
	}
}

// replies returns n replies that answer "fine", except to a request whose
// last message mentions poison: then the model panics.
func replies(n int) []llmtest.Reply {
	var out []llmtest.Reply
	for range n {
		out = append(out, llmtest.Reply{Func: func(req *llm.Request) llmtest.Reply {
			if strings.Contains(req.Messages[len(req.Messages)-1].Text(), "poison") {
				panic("model exploded")
			}
			return llmtest.Text("fine")
		}})
	}
	return out
}

// TestModelPanicFailsSessionAlone: a model that panics while a worker runs
// one session (outside the loop's recovery, which covers tools) fails
// that session alone, with the stack in the log; the others, and the
// manager, go on.
func TestModelPanicFailsSessionAlone(t *testing.T) {
	st := openStore(t)
	model := llmtest.NewModel(replies(10)...)
	m, log := newLogged(t, st, model, nil)
	start(t, m)
	poison := create(t, m, `{"agent":{"name":"a"},"messages":"eat the poison"}`)
	var others []*session.View
	for i := range 3 {
		others = append(others, create(t, m, fmt.Sprintf(`{"agent":{"name":"a"},"messages":"hello %d"}`, i)))
	}
	f, c := ended(t, m, poison.ID)
	checkInternal(t, f, c, "panicked: model exploded")
	for _, v := range others {
		f, c := ended(t, m, v.ID)
		if c.Status != session.StatusCompleted || string(c.Answer) != `"fine"` {
			t.Errorf("session %s ended %s with %s, want completed; events:\n%s", v.ID, c.Status, c.Answer, f.dump())
		}
	}
	checkReleased(t, st, poison.ID)
	logs := log.String()
	if !strings.Contains(logs, "session="+poison.ID) || !strings.Contains(logs, "model exploded") || !strings.Contains(logs, "goroutine") {
		t.Errorf("the log does not hold the panic with its session and stack:\n%s", logs)
	}
	// The manager still runs sessions.
	after := create(t, m, `{"agent":{"name":"a"},"messages":"still there?"}`)
	if _, c := ended(t, m, after.ID); c.Status != session.StatusCompleted {
		t.Errorf("a session created after the panic ended %s", c.Status)
	}
	v, err := m.Get(t.Context(), owner, poison.ID)
	if err != nil || v.Status.Status != session.StatusFailed {
		t.Errorf("Get of the failed session = %+v, %v", v, err)
	}
}

// TestPanicAtBoundaryFailsSessionAlone: a panic anywhere in the work of a
// worker on one session (here a nil pointer where the run starts)
// fails that session alone.
func TestPanicAtBoundaryFailsSessionAlone(t *testing.T) {
	st := openStore(t)
	m, _ := newLogged(t, st, llmtest.NewModel(llmtest.Text("fine"), llmtest.Text("fine")), nil)
	poison := create(t, m, `{"agent":{"name":"a"},"messages":"one"}`)
	other := create(t, m, `{"agent":{"name":"a"},"messages":"two"}`)
	session.SetBeforeRun(m, func(id string) {
		if id == poison.ID {
			views := map[string]*session.View{}
			_ = views[id].ID
		}
	})
	start(t, m)
	f, c := ended(t, m, poison.ID)
	checkInternal(t, f, c, "nil pointer dereference")
	if _, c := ended(t, m, other.ID); c.Status != session.StatusCompleted {
		t.Errorf("the other session ended %s, want completed", c.Status)
	}
	checkReleased(t, st, poison.ID)
}

// TestCorruptStateFailsSessionAlone: a session whose stored state does not
// decode fails at once (running it again would fail again); callers
// still read it, and it takes no more input.
func TestCorruptStateFailsSessionAlone(t *testing.T) {
	st := openStore(t)
	m, _ := newLogged(t, st, llmtest.NewModel(llmtest.Text("fine")), nil)
	poison := create(t, m, `{"agent":{"name":"a"},"messages":"one"}`)
	other := create(t, m, `{"agent":{"name":"a"},"messages":"two"}`)
	ctx := t.Context()
	s, err := st.GetSession(ctx, poison.ID)
	if err != nil {
		t.Fatal(err)
	}
	s.State = s.State[:len(s.State)/2]
	if err := st.UpdateSession(ctx, s, nil, nil); err != nil {
		t.Fatal(err)
	}
	start(t, m)
	f, c := ended(t, m, poison.ID)
	checkInternal(t, f, c, "corrupt state")
	if _, c := ended(t, m, other.ID); c.Status != session.StatusCompleted {
		t.Errorf("the other session ended %s, want completed", c.Status)
	}
	checkReleased(t, st, poison.ID)
	if v, err := m.Get(ctx, owner, poison.ID); err != nil || v.Status.Status != session.StatusFailed {
		t.Errorf("Get = %+v, %v; want the failed session", v, err)
	}
	if err := m.SendMessages(ctx, owner, poison.ID, []session.UserMessage{{Message: "hi"}}); !errors.Is(err, session.ErrFinished) {
		t.Errorf("SendMessages = %v, want ErrFinished", err)
	}
	if err := m.Cancel(ctx, owner, poison.ID); err != nil {
		t.Errorf("Cancel of the failed session = %v", err)
	}
}

// claimAndDie claims the sessions n times as a worker that dies at once
// would, each claim after the last one's lease expired.
func claimAndDie(t *testing.T, st store.Store, n, sessions int) {
	t.Helper()
	at := time.Now().Add(-time.Hour)
	for i := range n {
		got, err := st.Claim(t.Context(), &store.ClaimParams{Owner: fmt.Sprint("dead-", i), Now: at.Add(time.Duration(i) * time.Minute), TTL: time.Second, Limit: sessions})
		if err != nil || len(got) != sessions {
			t.Fatalf("claim %d = %v, %v; want %d sessions", i, got, err, sessions)
		}
	}
}

// TestAttemptsBound: a session whose workers died while running it (its
// attempts counted by the claims) runs again until it was attempted
// MaxAttempts times; then the next claim fails it instead.
func TestAttemptsBound(t *testing.T) {
	tests := []struct {
		name        string
		max, died   int
		wantFailure string // "" for a session that completes
	}{
		{"within the default bound", 0, 2, ""},
		{"past the default bound", 0, 3, "failed 3 times in a row"},
		{"within a configured bound", 5, 4, ""},
		{"past a configured bound", 1, 1, "failed once (the server crashed or hit an internal error); it is not retried"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, st store.Store) {
				model := llmtest.NewModel(llmtest.Text("fine"))
				m, _ := newLogged(t, st, model, &session.Options{MaxAttempts: tt.max})
				v := create(t, m, `{"agent":{"name":"a"},"messages":"hi"}`)
				claimAndDie(t, st, tt.died, 1)
				start(t, m)
				f, c := ended(t, m, v.ID)
				if tt.wantFailure != "" {
					checkInternal(t, f, c, tt.wantFailure)
					if n := len(model.Requests()); n != 0 {
						t.Errorf("%d model requests for a session given up, want 0", n)
					}
					checkReleased(t, st, v.ID)
					return
				}
				if c.Status != session.StatusCompleted {
					t.Fatalf("ended %s (%v), want completed; events:\n%s", c.Status, c.Error, f.dump())
				}
				if s, _ := st.GetSession(t.Context(), v.ID); s.Attempts != 0 {
					t.Errorf("attempts after completion = %d, want 0", s.Attempts)
				}
			})
		})
	}
}

// TestCleanStopsDoNotCount: a manager stopped while it runs a session (a
// shutdown, a rolling deploy) releases it cleanly, which is no failed
// attempt: stopped more often than MaxAttempts, it still runs.
func TestCleanStopsDoNotCount(t *testing.T) {
	st := openStore(t)
	var id string
	for i := range 5 {
		blocked := llmtest.NewModel(llmtest.Reply{Block: true})
		m := session.New(st, blocked, nil)
		m.Start(context.Background())
		if i == 0 {
			id = create(t, m, `{"agent":{"name":"a"},"messages":"hi"}`).ID
		}
		for len(blocked.Requests()) == 0 {
			time.Sleep(time.Millisecond)
		}
		if err := m.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	m := startManager(t, st, llmtest.NewModel(llmtest.Text("fine")), nil)
	if f, c := ended(t, m, id); c.Status != session.StatusCompleted {
		t.Errorf("ended %s (%v) after 5 clean stops, want completed; events:\n%s", c.Status, c.Error, f.dump())
	}
}

// flakyStore fails the progress commits of workers while fail says so, as
// a store that cannot write would.
type flakyStore struct {
	store.Store
	fail func() bool
}

func (f *flakyStore) UpdateSession(ctx context.Context, s *store.Session, events []store.Event, opts *store.UpdateOptions) error {
	if opts != nil && opts.ResetAttempts && f.fail() {
		return errors.New("disk I/O error")
	}
	return f.Store.UpdateSession(ctx, s, events, opts)
}

// TestStoreErrorsRetried: an error of the store is no reason to fail the
// session: its lease is left to expire and it runs again then. When the
// store fails every attempt, the attempts bound the retries.
func TestStoreErrorsRetried(t *testing.T) {
	t.Run("passing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var failures atomic.Int32
			failures.Store(2)
			st := &flakyStore{Store: openStore(t), fail: func() bool { return failures.Add(-1) >= 0 }}
			model := llmtest.NewModel(llmtest.Text("fine"), llmtest.Text("fine"), llmtest.Text("fine"))
			m, log := newLogged(t, st, model, nil)
			start(t, m)
			began := time.Now()
			v := create(t, m, `{"agent":{"name":"a"},"messages":"hi"}`)
			f, c := ended(t, m, v.ID)
			if c.Status != session.StatusCompleted {
				t.Fatalf("ended %s (%v), want completed; events:\n%s", c.Status, c.Error, f.dump())
			}
			if took := time.Since(began); took < 30*time.Second || took > 31*time.Second {
				t.Errorf("completed after %v of fake time, want two lease TTLs (30s)", took)
			}
			if n := len(model.Requests()); n != 3 {
				t.Errorf("%d model requests, want 3 (the step was lost twice)", n)
			}
			if !strings.Contains(log.String(), "disk I/O error") {
				t.Errorf("the store's errors were not logged:\n%s", log)
			}
		})
	})
	t.Run("lasting", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := &flakyStore{Store: openStore(t), fail: func() bool { return true }}
			model := llmtest.NewModel(llmtest.Text("fine"), llmtest.Text("fine"), llmtest.Text("fine"), llmtest.Text("fine"))
			m, _ := newLogged(t, st, model, nil)
			start(t, m)
			v := create(t, m, `{"agent":{"name":"a"},"messages":"hi"}`)
			f, c := ended(t, m, v.ID)
			checkInternal(t, f, c, "failed 3 times in a row")
			if n := len(model.Requests()); n != 3 {
				t.Errorf("%d model requests, want 3 (one per attempt)", n)
			}
		})
	})
}

// TestSuspectsOneAtATime: sessions that were running when their worker
// died twice in a row run one at a time, so that the one that takes the
// process down cannot take the others with it again.
func TestSuspectsOneAtATime(t *testing.T) {
	eachStore(t, testSuspectsOneAtATime)
}

func testSuspectsOneAtATime(t *testing.T, st store.Store) {
	var running, most atomic.Int32
	model := llmtest.NewModel()
	for range 4 {
		model.Push(llmtest.Reply{Func: func(*llm.Request) llmtest.Reply {
			n := running.Add(1)
			defer running.Add(-1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(20 * time.Millisecond)
			return llmtest.Text("fine")
		}})
	}
	m, _ := newLogged(t, st, model, nil)
	var ids []string
	for i := range 4 {
		ids = append(ids, create(t, m, fmt.Sprintf(`{"agent":{"name":"a"},"messages":"hello %d"}`, i)).ID)
	}
	claimAndDie(t, st, 2, 4)
	start(t, m)
	for _, id := range ids {
		if f, c := ended(t, m, id); c.Status != session.StatusCompleted {
			t.Errorf("session %s ended %s (%v), want completed; events:\n%s", id, c.Status, c.Error, f.dump())
		}
	}
	if n := most.Load(); n != 1 {
		t.Errorf("%d suspects ran at once, want 1", n)
	}
}

// panickyStore panics in its first Claim, as a store with a bug would.
type panickyStore struct {
	store.Store
	claims atomic.Int32
}

func (p *panickyStore) Claim(ctx context.Context, cp *store.ClaimParams) ([]*store.Session, error) {
	if p.claims.Add(1) == 1 {
		panic("claim exploded")
	}
	return p.Store.Claim(ctx, cp)
}

// TestDispatcherPanic: a panic where the manager claims sessions is logged
// and the manager goes on.
func TestDispatcherPanic(t *testing.T) {
	st := &panickyStore{Store: openStore(t)}
	m, log := newLogged(t, st, llmtest.NewModel(llmtest.Text("fine")), nil)
	v := create(t, m, `{"agent":{"name":"a"},"messages":"hi"}`)
	start(t, m)
	if _, c := ended(t, m, v.ID); c.Status != session.StatusCompleted {
		t.Errorf("ended %s, want completed", c.Status)
	}
	if !strings.Contains(log.String(), "claim exploded") {
		t.Errorf("the panic was not logged:\n%s", log)
	}
}

// TestStoreErrorAfterAClaimedResult: a session a caller's result claimed
// (no dispatcher involved) whose worker then meets an error of the store
// keeps its lease, which expires: the dispatcher must learn of it and run
// the session again then, although nothing else happens on the server.
func TestStoreErrorAfterAClaimedResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var failing atomic.Bool
		st := &flakyStore{Store: openStore(t), fail: func() bool { return failing.CompareAndSwap(true, false) }}
		model := llmtest.NewModel(llmtest.Call("c1", "lookup", `{}`), llmtest.Text("lost"), llmtest.Text("fine"))
		m, log := newLogged(t, st, model, nil)
		start(t, m)
		v := create(t, m, transcriptAgent)
		f := &follower{t: t, m: m, id: v.ID}
		f.status(session.StatusAwaitingToolResults)
		// Long enough for any wake-up the dispatcher had set to pass: it
		// sleeps with nothing to wake it for.
		time.Sleep(time.Minute)
		failing.Store(true) // the next step's commit fails, once
		began := time.Now()
		req := session.ToolRequest{ToolName: "lookup", Args: json.RawMessage(`{}`), ID: "c1"}
		if err := m.PostToolResults(t.Context(), owner, v.ID, []session.ToolResult{{Kind: session.KindToolResult, ToolReq: req, Result: json.RawMessage(`"ok"`)}}); err != nil {
			t.Fatal(err)
		}
		c := f.until(func(c *session.Changes) bool { return c.Status.Terminal() })
		if c.Status != session.StatusCompleted || string(c.Answer) != `"fine"` {
			t.Fatalf("ended %s with %s, want completed with the retried step's answer; events:\n%s", c.Status, c.Answer, f.dump())
		}
		if took := time.Since(began); took < 15*time.Second || took > 16*time.Second {
			t.Errorf("completed after %v of fake time, want one lease TTL (15s)", took)
		}
		if !strings.Contains(log.String(), "disk I/O error") {
			t.Errorf("the store's error was not logged:\n%s", log)
		}
	})
}

// releaseSpy is a store whose Release calls run onRelease first.
type releaseSpy struct {
	store.Store
	mu        sync.Mutex
	releases  int
	onRelease func(id string)
}

func (r *releaseSpy) Release(ctx context.Context, id, owner string) error {
	r.mu.Lock()
	r.releases++
	f := r.onRelease
	r.onRelease = nil
	r.mu.Unlock()
	if f != nil {
		f(id)
	}
	return r.Store.Release(ctx, id, owner)
}

// TestFailedWorkerDoesNotReleaseAgain: a worker that failed its session
// (here: given up, poison) gave the lease up in that commit; releasing
// it again afterwards released the claim that a message sent in between
// made for the same process (the same lease owner), so that the
// dispatcher ran the restarted session in a second worker beside the
// first: two model requests, the first answer lost, and the second run's
// error failing the session. The worker releases nothing more, and the
// message gets one answer.
func TestFailedWorkerDoesNotReleaseAgain(t *testing.T) {
	eachStore(t, func(t *testing.T, base store.Store) {
		st := &releaseSpy{Store: base}
		model := llmtest.NewModel(llmtest.Text("sorry"), llmtest.Text("a second run"))
		m, _ := newLogged(t, st, model, nil)
		v := create(t, m, `{"agent":{"name":"a"},"messages":"hi"}`)
		claimAndDie(t, base, 3, 1)
		var sent atomic.Bool
		st.onRelease = func(id string) {
			// What a caller could do between the failure's commit and
			// a late release: restart the session with a message.
			if id != v.ID {
				return
			}
			err := m.SendMessages(context.Background(), owner, id, []session.UserMessage{{Message: "what happened?"}})
			t.Logf("message sent before the late release: %v", err)
			sent.Store(err == nil)
		}
		start(t, m)
		f, _ := ended(t, m, v.ID)
		if !sent.Load() {
			if err := m.SendMessages(t.Context(), owner, v.ID, []session.UserMessage{{Message: "what happened?"}}); err != nil {
				t.Fatal(err)
			}
		}
		c := untilStatus(t, f, session.StatusCompleted)
		if c.Status != session.StatusCompleted {
			t.Fatalf("ended %s, want completed; events:\n%s", c.Status, f.dump())
		}
		if n := len(model.Requests()); n != 1 {
			t.Errorf("%d model requests after the restart, want 1", n)
		}
	})
}

// TestFailureOfAnEndedRun: a worker whose run panics after that run was
// ended (Cancel) and the next one started (a message) does not fail the
// session: the failure was the old run's; the new run answers.
func TestFailureOfAnEndedRun(t *testing.T) {
	gate := make(chan struct{})
	asked := make(chan struct{}, 1)
	model := llmtest.NewModel(llmtest.Reply{Func: func(*llm.Request) llmtest.Reply {
		asked <- struct{}{}
		<-gate
		panic("the old run's model exploded")
	}}, llmtest.Text("the new run's answer"))
	m, _ := newLogged(t, openStore(t), model, nil)
	start(t, m)
	v := create(t, m, `{"agent":{"name":"a"},"messages":"go"}`)
	received(t, asked, "the first model request")
	if err := m.Cancel(t.Context(), owner, v.ID); err != nil {
		t.Fatal(err)
	}
	if err := m.SendMessages(t.Context(), owner, v.ID, []session.UserMessage{{Message: "try again"}}); err != nil {
		t.Fatal(err)
	}
	close(gate)
	f := &follower{t: t, m: m, id: v.ID}
	c := untilStatus(t, f, session.StatusCompleted)
	if string(c.Answer) != `"the new run's answer"` {
		t.Errorf("answer %s; events:\n%s", c.Answer, f.dump())
	}
}
