package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
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
)

// leaseLog counts what happens to leases through the store: sessions
// handed out by Claim, Release calls, and updates that released or
// claimed.
type leaseLog struct {
	store.Store
	mu                          sync.Mutex
	claimed, releases           int
	updateReleased, updateClaim int
	createdClaimed              int
}

func (l *leaseLog) CreateSession(ctx context.Context, s *store.Session, events []store.Event) (*store.Session, bool, error) {
	got, created, err := l.Store.CreateSession(ctx, s, events)
	if err == nil && created && got.LeaseOwner != "" {
		l.mu.Lock()
		l.createdClaimed++
		l.mu.Unlock()
	}
	return got, created, err
}

func (l *leaseLog) Claim(ctx context.Context, p *store.ClaimParams) ([]*store.Session, error) {
	got, err := l.Store.Claim(ctx, p)
	l.mu.Lock()
	l.claimed += len(got)
	l.mu.Unlock()
	return got, err
}

func (l *leaseLog) Release(ctx context.Context, id, owner string) error {
	l.mu.Lock()
	l.releases++
	l.mu.Unlock()
	return l.Store.Release(ctx, id, owner)
}

func (l *leaseLog) UpdateSession(ctx context.Context, s *store.Session, events []store.Event, opts *store.UpdateOptions) error {
	err := l.Store.UpdateSession(ctx, s, events, opts)
	if err == nil && opts != nil {
		l.mu.Lock()
		if opts.Release {
			l.updateReleased++
		}
		if opts.Claim != nil && s.LeaseOwner == opts.Claim.Owner {
			l.updateClaim++
		}
		l.mu.Unlock()
	}
	return err
}

// TestLeaseChangesInTheCommits: a session makes no transaction for the
// lease alone. It is created claimed by the process that creates it; the
// worker's commit that parks it (and the one that ends it) gives the
// lease up, and the caller's result, which makes it runnable, claims it
// in its own commit, for the process that received it, which runs it
// without a claim of its own.
func TestLeaseChangesInTheCommits(t *testing.T) {
	st := &leaseLog{Store: openStore(t)}
	m := startManager(t, st, llmtest.NewModel(llmtest.Call("c1", "lookup", `{}`), llmtest.Call("c2", "lookup", `{}`), llmtest.Text("done")), nil)
	v := create(t, m, transcriptAgent)
	f := &follower{t: t, m: m, id: v.ID}
	for _, id := range []string{"c1", "c2"} {
		f.status(session.StatusAwaitingToolResults)
		s, err := st.GetSession(t.Context(), v.ID)
		if err != nil {
			t.Fatal(err)
		}
		if s.LeaseOwner != "" || s.Attempts != 0 {
			t.Errorf("parked with the lease of %q, %d attempts; want it free, 0", s.LeaseOwner, s.Attempts)
		}
		req := session.ToolRequest{ToolName: "lookup", Args: json.RawMessage(`{}`), ID: id}
		if err := m.PostToolResults(t.Context(), owner, v.ID, []session.ToolResult{{Kind: session.KindToolResult, ToolReq: req, Result: json.RawMessage(`"ok"`)}}); err != nil {
			t.Fatal(err)
		}
	}
	f.status(session.StatusCompleted)
	if err := m.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.releases != 0 {
		t.Errorf("Release called %d times; want none: the commits give the lease up", st.releases)
	}
	if st.updateReleased != 3 {
		t.Errorf("%d commits released the lease; want 3 (two parks and the end)", st.updateReleased)
	}
	if st.createdClaimed != 1 || st.claimed != 0 || st.updateClaim != 2 {
		t.Errorf("claimed at creation %d times, by Claim %d and by the posted results %d; want 1, 0 and 2", st.createdClaimed, st.claimed, st.updateClaim)
	}
}

// TestOneWorkerRunsThemAll: with a single worker, sessions created while
// it is busy wait, unclaimed, and each is claimed when the worker frees
// up: the dispatcher, which found no free worker, is woken by the worker's
// end (and by nothing else: it does not claim again after each run when
// it has claimed all there was).
func TestOneWorkerRunsThemAll(t *testing.T) {
	st := &leaseLog{Store: openStore(t)}
	m := startManager(t, st, llmtest.NewModel(llmtest.Call("c1", "lookup", `{}`), llmtest.Call("c1", "lookup", `{}`), llmtest.Call("c1", "lookup", `{}`)), &session.Options{Workers: 1})
	var ids []string
	for range 3 {
		ids = append(ids, create(t, m, transcriptAgent).ID)
	}
	for _, id := range ids {
		f := &follower{t: t, m: m, id: id}
		f.status(session.StatusAwaitingToolResults)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.createdClaimed+st.claimed != 3 {
		t.Errorf("claimed %d at creation and %d by Claim; want 3 in all", st.createdClaimed, st.claimed)
	}
}

// TestMessageClaimsAnIdleSession: a message to an idle session (one that
// answered and waits for more) claims it in the message's commit.
func TestMessageClaimsAnIdleSession(t *testing.T) {
	st := &leaseLog{Store: openStore(t)}
	m := startManager(t, st, llmtest.NewModel(llmtest.Text("first"), llmtest.Text("second")), nil)
	v := create(t, m, `{"agent":{"name":"a"},"messages":"go","idle_timeout_s":600}`)
	f := &follower{t: t, m: m, id: v.ID}
	f.status(session.StatusIdle)
	if err := m.SendMessages(t.Context(), owner, v.ID, []session.UserMessage{{Message: "more"}}); err != nil {
		t.Fatal(err)
	}
	f.until(func(c *session.Changes) bool { return c.Answer != nil && string(c.Answer) == `"second"` })
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.createdClaimed != 1 || st.claimed != 0 || st.updateClaim != 1 {
		t.Errorf("claimed at creation %d times, by Claim %d and by the message %d; want 1, 0 and 1", st.createdClaimed, st.claimed, st.updateClaim)
	}
}

// TestStaleCommittedSession: a manager starts a caller's input from the
// session as it last committed it, but what it decides on that copy
// without committing (here: refusing a result for a call it does not see)
// is decided again on the stored session. Two managers share a store, as
// two replicas do: the second runs the session on after the first
// committed it, and a result for the call the second committed, posted
// through the first, is taken.
func TestStaleCommittedSession(t *testing.T) {
	st := openStore(t)
	model := llmtest.NewModel(llmtest.Call("c1", "lookup", `{}`), llmtest.Call("c2", "lookup", `{}`), llmtest.Text("done"))
	a := startManager(t, st, model, nil)
	b := startManager(t, st, model, nil)
	v := create(t, a, transcriptAgent)
	f := &follower{t: t, m: a, id: v.ID}
	f.status(session.StatusAwaitingToolResults)
	post := func(m *session.Manager, id string) error {
		req := session.ToolRequest{ToolName: "lookup", Args: json.RawMessage(`{}`), ID: id}
		return m.PostToolResults(t.Context(), owner, v.ID, []session.ToolResult{{Kind: session.KindToolResult, ToolReq: req, Result: json.RawMessage(`"ok"`)}})
	}
	// Through b, which claims the session and runs it to its next wait.
	if err := post(b, "c1"); err != nil {
		t.Fatal(err)
	}
	seen := false
	f.until(func(c *session.Changes) bool {
		for _, e := range c.NewEvents {
			seen = seen || strings.Contains(string(e.Data), `"c2"`)
		}
		return seen && c.Status == session.StatusAwaitingToolResults
	})
	// a last committed the session waiting for c1.
	if err := post(a, "c2"); err != nil {
		t.Fatalf("a result for the call the other manager committed, posted through the first: %v", err)
	}
	f.status(session.StatusCompleted)
}

// frozenStore stands for a replica that stopped dead (a kill -9, a frozen
// VM) while it held leases: once frozen, its writes never return until the
// test thaws it (or their context ends). With fail, they answer an error
// at once instead, as a database refusing connections does.
type frozenStore struct {
	store.Store
	frozen   atomic.Bool
	thaw     chan struct{}
	fail     bool
	inFlight atomic.Int32 // calls waiting
}

func (f *frozenStore) wait(ctx context.Context) error {
	if f.frozen.Load() {
		if !f.fail {
			f.inFlight.Add(1)
			defer f.inFlight.Add(-1)
			select {
			case <-f.thaw:
			case <-ctx.Done():
			}
		}
		return errors.New("the replica died")
	}
	return nil
}

func (f *frozenStore) Release(ctx context.Context, id, owner string) error {
	if err := f.wait(ctx); err != nil {
		return err
	}
	return f.Store.Release(ctx, id, owner)
}

func (f *frozenStore) NextWake(ctx context.Context, now time.Time) (time.Time, error) {
	if err := f.wait(ctx); err != nil {
		return time.Time{}, err
	}
	return f.Store.NextWake(ctx, now)
}

func (f *frozenStore) UpdateSession(ctx context.Context, s *store.Session, events []store.Event, opts *store.UpdateOptions) error {
	if err := f.wait(ctx); err != nil {
		return err
	}
	return f.Store.UpdateSession(ctx, s, events, opts)
}

func (f *frozenStore) Claim(ctx context.Context, p *store.ClaimParams) ([]*store.Session, error) {
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	return f.Store.Claim(ctx, p)
}

func (f *frozenStore) RecoverClaim(ctx context.Context, p *store.ClaimParams) ([]*store.Session, error) {
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	return f.Store.RecoverClaim(ctx, p)
}

func (f *frozenStore) Renew(ctx context.Context, id, owner string, until time.Time) error {
	if err := f.wait(ctx); err != nil {
		return err
	}
	return f.Store.Renew(ctx, id, owner, until)
}

// TestDeadReplicasClaimTakenOver: a replica claims a session in the
// commit of a caller's result (announced to no one: it runs it itself)
// and dies running it. Another replica, idle for long enough to have no
// wake-up time set, takes the session over once the lease expires.
func TestDeadReplicasClaimTakenOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := openStore(t)
		dying := &frozenStore{Store: base, thaw: make(chan struct{})}
		defer close(dying.thaw)
		inner := llmtest.NewModel(llmtest.Call("c1", "lookup", `{}`), llmtest.Text("lost with the replica"), llmtest.Text("fine"))
		// The model's second request is the dying replica's run after the
		// result: the replica freezes then, before the step commits.
		var calls atomic.Int32
		model := modelFunc(func(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
			if calls.Add(1) == 2 {
				dying.frozen.Store(true)
			}
			return inner.Stream(ctx, req)
		})
		a := startManager(t, dying, model, nil)
		b := startManager(t, base, model, nil)
		v := create(t, a, transcriptAgent)
		f := &follower{t: t, m: b, id: v.ID}
		f.status(session.StatusAwaitingToolResults)
		time.Sleep(time.Minute) // b's dispatcher has nothing to wake for
		began := time.Now()
		req := session.ToolRequest{ToolName: "lookup", Args: json.RawMessage(`{}`), ID: "c1"}
		if err := a.PostToolResults(t.Context(), owner, v.ID, []session.ToolResult{{Kind: session.KindToolResult, ToolReq: req, Result: json.RawMessage(`"ok"`)}}); err != nil {
			t.Fatal(err)
		}
		c := f.until(func(c *session.Changes) bool { return c.Status.Terminal() })
		if c.Status != session.StatusCompleted || string(c.Answer) != `"fine"` {
			t.Fatalf("ended %s with %s, want completed by the other replica; events:\n%s", c.Status, c.Answer, f.dump())
		}
		if took := time.Since(began); took > 31*time.Second {
			t.Errorf("taken over after %v of fake time, want at most two lease TTLs (30s)", took)
		}
	})
}

// modelFunc is an llm.Model of a function.
type modelFunc func(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error]

func (f modelFunc) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	return f(ctx, req)
}

// claimCutByStop is a store whose Claim, once armed, waits for the
// dispatcher's context to end or for the test's signal, then commits the
// claim and answers with the context's error: a claim whose transaction
// committed as the manager stopped.
type claimCutByStop struct {
	store.Store
	entered chan struct{} // closed by the first Claim
	enter   sync.Once
	armed   chan struct{}
}

func (c *claimCutByStop) Claim(ctx context.Context, p *store.ClaimParams) ([]*store.Session, error) {
	c.enter.Do(func() { close(c.entered) })
	select {
	case <-ctx.Done():
	case <-c.armed:
	}
	got, err := c.Store.Claim(context.WithoutCancel(ctx), p)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return got, err
}

// TestClaimCutByStopReleased: a session the dispatcher claims while its
// manager stops is left unleased, for the next manager to run at once,
// not leased to a stopped replica until its lease expires.
func TestClaimCutByStopReleased(t *testing.T) {
	base := openStore(t)
	model := llmtest.NewModel(llmtest.Text("done"))
	idle := session.New(base, model, &session.Options{})
	v := create(t, idle, transcriptAgent) // not claimed: idle is not running
	st := &claimCutByStop{Store: base, entered: make(chan struct{}), armed: make(chan struct{})}
	m := startManager(t, st, model, &session.Options{LeaseTTL: time.Hour})
	<-st.entered
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	m.Stop(gone) // the dispatcher's context ends now; its claim is in flight
	close(st.armed)
	if err := m.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	s, err := base.GetSession(t.Context(), v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s.LeaseOwner != "" && s.LeaseUntil.After(time.Now()) {
		t.Errorf("session %s is %s, leased to %q until %v by a stopped manager", v.ID, s.Status, s.LeaseOwner, s.LeaseUntil)
	}
}

// lapsingStore holds its lease renewals while stalled (a watcher that a
// loaded machine or a slow database keeps from renewing in time) and
// tells when a Claim took a session, and when the dispatcher asked for
// its next wake-up time afterwards: it has started the workers of what
// it claimed by then.
type lapsingStore struct {
	store.Store
	stalled chan struct{} // closed: renewals go on
	mu      sync.Mutex
	claimed map[string]int
	woke    chan string // the ids claimed, at the NextWake that follows
	pending []string
}

func (l *lapsingStore) Renew(ctx context.Context, id, owner string, until time.Time) error {
	select {
	case <-l.stalled:
	case <-ctx.Done():
		return ctx.Err()
	}
	return l.Store.Renew(ctx, id, owner, time.Now().Add(time.Hour))
}

func (l *lapsingStore) Claim(ctx context.Context, p *store.ClaimParams) ([]*store.Session, error) {
	got, err := l.Store.Claim(ctx, p)
	l.mu.Lock()
	for _, s := range got {
		l.claimed[s.ID]++
		l.pending = append(l.pending, s.ID)
	}
	l.mu.Unlock()
	return got, err
}

func (l *lapsingStore) NextWake(ctx context.Context, now time.Time) (time.Time, error) {
	l.mu.Lock()
	ids := l.pending
	l.pending = nil
	l.mu.Unlock()
	for _, id := range ids {
		select {
		case l.woke <- id:
		default:
		}
	}
	return l.Store.NextWake(ctx, now)
}

// TestLapsedLeaseReclaimedByItsOwnProcess: a worker whose lease lapsed
// while its step ran (its renewals held up) is still running when its
// own process's dispatcher claims the session again: the store knows
// leases by process, so the running worker's next renewal succeeds, and
// a second worker of that process must not run the session beside it
// (it sent the step's model request again, and both committed under the
// one lease: a force answer committed between the second worker's read
// and its request was not honoured by that request; issue of
// TestModelBased/postgres under load, seed 451671390034). Before the fix
// the process ran two workers of the session (Workers = 2) and the model
// got the step's request twice.
func TestLapsedLeaseReclaimedByItsOwnProcess(t *testing.T) {
	eachStore(t, func(t *testing.T, base store.Store) {
		st := &lapsingStore{Store: base, stalled: make(chan struct{}), claimed: map[string]int{}, woke: make(chan string, 16)}
		gate := make(chan struct{})
		var requests atomic.Int32
		started := make(chan struct{}, 16)
		inner := llmtest.NewModel(llmtest.Text("done"), llmtest.Text("done again"))
		model := modelFunc(func(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
			requests.Add(1)
			started <- struct{}{}
			return func(yield func(llm.Chunk, error) bool) {
				select {
				case <-gate:
				case <-ctx.Done():
					yield(llm.Chunk{}, ctx.Err())
					return
				}
				for c, err := range inner.Stream(ctx, req) {
					if !yield(c, err) {
						return
					}
				}
			}
		})
		m := startManager(t, st, model, &session.Options{LeaseTTL: 300 * time.Millisecond})
		v := create(t, m, `{"agent":{"name":"a"},"messages":"go"}`) // claimed at its creation
		f := &follower{t: t, m: m, id: v.ID}
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("the session's first request never came")
		}
		// The lease lapses (renewals are held); the dispatcher, woken at
		// its expiry, claims the session again for this process.
		deadline := time.After(20 * time.Second)
		for again := false; !again; {
			select {
			case id := <-st.woke:
				again = id == v.ID
			case <-deadline:
				t.Fatal("the dispatcher never claimed the session again after its lease lapsed")
			}
		}
		if n := session.Workers(m, v.ID); n != 1 {
			t.Errorf("%d workers of this process run the session after its own dispatcher claimed it again, want 1", n)
		}
		close(st.stalled) // the first worker's renewal: the lease is its process's
		close(gate)
		c := f.until(func(c *session.Changes) bool { return c.Status.Terminal() })
		if c.Status != session.StatusCompleted {
			t.Fatalf("ended %s, want completed; events:\n%s", c.Status, f.dump())
		}
		if err := m.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := requests.Load(); n != 1 {
			t.Errorf("the model got %d requests for the session's one step, want 1; events:\n%s", n, f.dump())
		}
	})
}

// TestLostLeaseLogged: a worker whose lease another replica took stops
// its run and says so in the log (it was silent: a run cut by a lost
// lease left no trace, as in a failure of TestSteeringDuringRerun).
func TestLostLeaseLogged(t *testing.T) {
	st := openStore(t)
	g := newGatedTool()
	m, log := newLogged(t, st, llmtest.NewModel(llmtest.Call("c1", "slow", `{}`)), gatedOptions(g, &session.Options{LeaseTTL: 300 * time.Millisecond}))
	start(t, m)
	v := create(t, m, `{"agent":"w","messages":"go"}`)
	received(t, g.started, "the call")
	// Another replica takes the session, as if the lease had lapsed: a
	// claim an hour ahead finds it expired, and holds it an hour.
	got, err := st.Claim(t.Context(), &store.ClaimParams{Owner: "other", Token: "t", Now: time.Now().Add(time.Hour), TTL: time.Hour, Limit: 1})
	if err != nil || len(got) != 1 || got[0].ID != v.ID {
		t.Fatalf("Claim = %v, %v; want the session", got, err)
	}
	g.waitCut(t)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(log.String(), "lost the lease on a running session") {
		if time.Now().After(deadline) {
			t.Fatalf("no log line says the lease was lost:\n%s", log.String())
		}
		time.Sleep(time.Millisecond)
	}
	if !strings.Contains(log.String(), "session="+v.ID) {
		t.Errorf("the log line lacks the session:\n%s", log.String())
	}
}
