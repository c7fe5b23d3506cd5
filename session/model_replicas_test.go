package session_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"iter"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/postgres"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
)

// The model-based test of several replicas: TestModelBased (model_test.go)
// runs one manager at a time; this one runs two or three at once on one
// PostgreSQL schema, each with a store of its own (its own pool, listener
// and notifier, as separate processes have), so that leases decide which
// replica's worker runs a session and LISTEN/NOTIFY carries the wake-ups
// between them. Random actions of a caller (create, messages, tool
// results, decisions, pause and resume, cancel, force answer) go to a
// random replica, interleaved with faults: a replica stops cleanly and a
// new one starts in its place; a replica dies (its store's writes hang,
// it is abandoned without waiting: its leases must expire and another
// replica take its sessions over); a replica loses the next wake-ups the
// store delivers to it; a worker's store call on a replica fails at a
// chosen point, before it reaches the store or after it committed
// (rpStore.arm); a replica is partitioned for longer than a lease TTL,
// its writes held and its runs going on, then heals (rpStore.part).
// Parents delegate to child sessions (the delegate directives of
// mtWorld.reply), which run on whichever replica claims them; the
// children are found in the store after each step (adopt) and acted on
// as sessions; the delivery of a child's end to its parent fails at
// chosen points (rpStore.arm "deliver"), and so does a worker's commit
// that ends a session, after it landed ("end").
// After every action the sessions are checked
// against a reference model (the same scripted model and tools as
// TestModelBased's, mtWorld), and these invariants across the replicas:
//
//   - one-worker: no two live replicas have a model request of one
//     session in flight at once (unless the first's lease was lost);
//   - step-twice: no model request is sent again, by any replica, after
//     the same request completed, unless a disruption (a stop, a death,
//     a lease of the session lost) came since;
//   - step-committed-twice: the steps counted by the log's metrics
//     events grow (a stale worker's commit does not land over the new
//     owner's);
//   - input-lost: every message, tool result and decision a replica
//     accepted is in the session's log once, and every message is in the
//     next model request;
//   - after-cancel: a cancelled session sends no request and runs no
//     tool after the cancel returned, until a message starts it again;
//   - force-answer: the first request after a force answer offers no
//     tools;
//   - end-state: each session settles (within a bound) in the state the
//     reference predicts;
//   - event-log: the indexes of the log read through every live replica
//     are 0..n-1, the same events at the same indexes on every replica,
//     and each read extends the one before (nothing renumbered or
//     reordered);
//   - long-poll: a long-poll waiting on one replica is woken by a
//     caller's commit on another;
//   - children (checkDelivery): the end of a child the reference
//     delivered is its delegate call's result once, as it ended
//     (child-end-twice, child-end-lost, child-end-wrong); a child its
//     parent waits for has given none (child-end-early); a parent never
//     waits for a child that ended, and a parent's end cancels the
//     children it waited for (settle, then end-state).
//
// Run it so:
//
//	go test -run TestModelBasedReplicas ./session/                          # a few seconds
//	go test -run TestModelBasedReplicas ./session/ -modeltest.duration=5m   # long
//	go test -run TestModelBasedReplicas ./session/ -modeltest.seed=N -v     # one sequence, logged
//	go test -run TestModelBasedReplicas ./session/ -modeltest.leasettl=60ms # leases that lapse
//
// It needs PostgreSQL (skipped when the default server is unreachable,
// as the other PostgreSQL tests are).
func TestModelBasedReplicas(t *testing.T) {
	dsn := postgrestest.DSN(t)
	stats := map[string]int{}
	run := func(seed uint64) bool {
		q := &rpSeq{t: t, dsn: dsn, seed: seed, stats: stats, verbose: *mtSeed != 0}
		q.run()
		stats["sequences"]++
		return !t.Failed()
	}
	if *mtSeed != 0 {
		run(*mtSeed)
		t.Logf("seed %d: %v", *mtSeed, stats)
		return
	}
	deadline := time.Now().Add(mtBudget())
	for time.Now().Before(deadline) {
		if !run(rand.Uint64N(1 << 40)) {
			return
		}
	}
	t.Logf("replicas model-based test: %v", stats)
}

// rpLeaseTTL is the replicas' lease TTL: a dead replica's sessions are
// taken over within two of it.
var rpLeaseTTL = flag.Duration("modeltest.leasettl", 500*time.Millisecond, "the lease TTL of TestModelBasedReplicas's replicas (shorter: more lapsed leases)")

// rpStore is one replica's store: its own PostgreSQL store, whose writes
// hang once the replica is dead (as a frozen process's never land), and
// which drops the wake-ups it is told to lose.
type rpStore struct {
	*postgres.Store
	q       *rpSeq
	dead    atomic.Bool
	deadAt  atomic.Int64  // the world's tick when it died
	thaw    chan struct{} // closed at the sequence's end
	deaf    atomic.Int32  // wake-ups still to lose
	lost    atomic.Int32  // wake-ups lost
	counted chan string   // the sessions whose event count was read (long-poll probes)

	// part, while not nil, partitions the replica from the database:
	// its writes hang until the channel is closed (or their context
	// ends, failing without writing), then reach the store as sent; the
	// wake-ups the store delivers meanwhile are lost. Its runs go on.
	part atomic.Pointer[chan struct{}]
	held atomic.Int32 // calls held by a partition

	// fault fails one call of a worker's store writes at a chosen point
	// (see arm).
	fault struct {
		sync.Mutex
		op       string // "update" (under a lease), "end" (the same, of a commit that ends a session, after it), "claim", "renew", "recover", "deliver" (a child's end to its parent); "" none
		skip     int    // calls of op to let pass first
		after    bool   // the call is made, and commits, before it answers the error
		injected int
	}
}

// errRPInjected is the error of a store call the test failed on purpose.
var errRPInjected = errors.New("rpmodel: injected store failure")

// arm makes the call of op after the next skip fail once: before it
// reaches the store (nothing written) or, after, once it committed (the
// lost answer of a call cut by its deadline, or of a connection broken
// while the commit's answer was in flight).
func (s *rpStore) arm(op string, skip int, after bool) {
	s.fault.Lock()
	s.fault.op, s.fault.skip, s.fault.after = op, skip, after
	s.fault.Unlock()
}

// fails reports whether this call of op fails, and whether after its
// commit.
func (s *rpStore) fails(op string) (fail, after bool) {
	s.fault.Lock()
	defer s.fault.Unlock()
	if s.fault.op != op {
		return false, false
	}
	if s.fault.skip > 0 {
		s.fault.skip--
		return false, false
	}
	s.fault.op = ""
	s.fault.injected++
	return true, s.fault.after
}

func (s *rpStore) partitioned() bool { return s.part.Load() != nil }

func (s *rpStore) hang(ctx context.Context) error {
	if p := s.part.Load(); p != nil {
		s.held.Add(1)
		select {
		case <-*p:
		case <-ctx.Done():
			return fmt.Errorf("rpmodel: partitioned: %w", ctx.Err())
		}
	}
	if !s.dead.Load() {
		return nil
	}
	select {
	case <-s.thaw:
	case <-ctx.Done():
	}
	return errors.New("rpmodel: the replica died")
}

// lease counts a lost lease as a disruption: the step it cut may be sent
// again.
func (s *rpStore) lease(id string, err error) error {
	switch {
	case errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrConflict):
		s.q.lapse(id)
	case err != nil:
		// A failed write (a timeout of an overloaded server): the
		// worker may do its step again.
		s.q.lapse(id)
		s.q.failedWrites.Add(1)
	}
	return err
}

func (s *rpStore) CreateSession(ctx context.Context, ss *store.Session, events []store.Event) (*store.Session, bool, error) {
	if err := s.hang(ctx); err != nil {
		return nil, false, err
	}
	return s.Store.CreateSession(ctx, ss, events)
}

func (s *rpStore) UpdateSession(ctx context.Context, ss *store.Session, events []store.Event, opts *store.UpdateOptions) error {
	if err := s.hang(ctx); err != nil {
		return err
	}
	if (opts == nil || opts.Lease == "") && isDelivery(events) {
		// The delivery of a child's end to its parent (a commit
		// without a lease, made by whichever replica committed the
		// child's end or runs the parent's check of its children).
		if fail, after := s.fails("deliver"); fail {
			if after {
				if err := s.Store.UpdateSession(ctx, ss, events, opts); err != nil {
					return err
				}
			}
			return errRPInjected
		}
	}
	if opts != nil && opts.Lease != "" && session.Status(ss.Status).Terminal() {
		// A worker's commit that ends a session, its answer lost: what
		// follows from the end (its children cancelled, its parent
		// told) is not done by this worker.
		if fail, _ := s.fails("end"); fail {
			if err := s.Store.UpdateSession(ctx, ss, events, opts); err != nil {
				return s.lease(ss.ID, err)
			}
			return s.lease(ss.ID, errRPInjected)
		}
	}
	if opts != nil && opts.Lease != "" {
		if fail, after := s.fails("update"); fail {
			if after {
				if err := s.Store.UpdateSession(ctx, ss, events, opts); err != nil {
					return s.lease(ss.ID, err)
				}
			}
			return s.lease(ss.ID, errRPInjected)
		}
	}
	return s.lease(ss.ID, s.Store.UpdateSession(ctx, ss, events, opts))
}

func (s *rpStore) Claim(ctx context.Context, p *store.ClaimParams) ([]*store.Session, error) {
	if err := s.hang(ctx); err != nil {
		return nil, err
	}
	fail, after := s.fails("claim")
	if fail && !after {
		return nil, errRPInjected
	}
	got, err := s.Store.Claim(ctx, p)
	if fail && err == nil {
		return nil, fmt.Errorf("claim: %w (after it took %d sessions)", errRPInjected, len(got))
	}
	return got, err
}

func (s *rpStore) RecoverClaim(ctx context.Context, p *store.ClaimParams) ([]*store.Session, error) {
	if err := s.hang(ctx); err != nil {
		return nil, err
	}
	fail, after := s.fails("recover")
	if fail && !after {
		return nil, errRPInjected
	}
	got, err := s.Store.RecoverClaim(ctx, p)
	if fail && err == nil {
		return nil, errRPInjected
	}
	return got, err
}

func (s *rpStore) Renew(ctx context.Context, id, owner string, until time.Time) error {
	if err := s.hang(ctx); err != nil {
		return err
	}
	if fail, after := s.fails("renew"); fail {
		if after {
			if err := s.Store.Renew(ctx, id, owner, until); err != nil {
				return s.lease(id, err)
			}
		}
		return s.lease(id, errRPInjected)
	}
	return s.lease(id, s.Store.Renew(ctx, id, owner, until))
}

func (s *rpStore) Release(ctx context.Context, id, owner string) error {
	if err := s.hang(ctx); err != nil {
		return err
	}
	return s.Store.Release(ctx, id, owner)
}

func (s *rpStore) EventCount(ctx context.Context, id string) (string, int64, error) {
	o, n, err := s.Store.EventCount(ctx, id)
	select {
	case s.counted <- id:
	default:
	}
	return o, n, err
}

// Subscribe passes the store's wake-ups on, but the ones it is told to
// lose.
func (s *rpStore) Subscribe(topic string) (<-chan struct{}, func()) {
	in, cancel := s.Store.Subscribe(topic)
	out := make(chan struct{}, 1)
	stop := make(chan struct{})
	var once sync.Once
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-in:
			}
			if s.partitioned() {
				s.lost.Add(1)
				continue
			}
			if n := s.deaf.Load(); n > 0 && s.deaf.CompareAndSwap(n, n-1) {
				s.lost.Add(1)
				continue
			}
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out, func() { once.Do(func() { close(stop) }); cancel() }
}

// rpReplica is one replica: a store and a manager, alive or dead.
type rpReplica struct {
	n  int // its number in the sequence, for the log
	st *rpStore
	m  *session.Manager
}

// rpModel is a replica's model: the world's, with the requests in flight
// counted by session across the replicas.
type rpModel struct {
	q *rpSeq
	r *rpReplica
}

// rpReq is one model request as the replicas' check sees it.
type rpReq struct {
	key, id string
	sig     string // the request's messages: the same step sends the same
	replica *rpReplica
	start   int64 // world tick
	mark    int64 // disruptions at its start
	done    bool  // the model answered it whole
	tools   int
}

func (m rpModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	q := m.q
	key, sig := "", ""
	for _, msg := range req.Messages {
		sig += string(msg.Role) + ":" + msg.Text() + "|"
		for _, p := range msg.Parts {
			if p.Kind == llm.PartToolResult && p.ToolResult != nil {
				sig += "result:" + p.ToolResult.CallID + "|"
			}
		}
		if msg.Role != llm.RoleUser {
			continue
		}
		if g := mtTag.FindStringSubmatch(strings.TrimSpace(msg.Text())); g != nil {
			key = g[1][:strings.IndexByte(g[1], '.')]
		}
	}
	tools := len(req.Tools)
	if req.ToolChoice.Mode == llm.ToolChoiceNone {
		tools = 0
	}
	inner := q.w.Stream(ctx, req)
	return func(yield func(llm.Chunk, error) bool) {
		id, _ := session.IDFromContext(ctx)
		r := &rpReq{key: key, id: id, sig: sig, replica: m.r, start: q.w.clock.tick(), mark: q.mark(id), tools: tools}
		q.mu.Lock()
		for o := range q.inflight[key] {
			if o.replica == m.r && !m.r.st.dead.Load() {
				// Two workers of one process: a lapsed lease does not
				// excuse it (the process knows what it runs).
				q.overlaps = append(q.overlaps, rpOverlap{fmt.Sprintf("%s: replica %d sends two model requests at once (ticks %d and %d)", key, m.r.n, o.start, r.start), o.id, -1})
			}
			if o.replica != m.r && !o.replica.st.dead.Load() && !m.r.st.dead.Load() {
				// A violation unless a disruption comes of it (the
				// other's lease lapsed: its commit fails, and it
				// stops), counted by the check after the step.
				q.overlaps = append(q.overlaps, rpOverlap{fmt.Sprintf("%s: replicas %d and %d send model requests at once (ticks %d and %d)", key, o.replica.n, m.r.n, o.start, r.start), o.id, o.mark})
			}
		}
		if q.inflight[key] == nil {
			q.inflight[key] = map[*rpReq]bool{}
		}
		q.inflight[key][r] = true
		q.reqs = append(q.reqs, r)
		q.mu.Unlock()
		defer func() {
			q.mu.Lock()
			delete(q.inflight[key], r)
			q.mu.Unlock()
		}()
		for c, err := range inner {
			if c.Kind == llm.ChunkDone && err == nil {
				q.mu.Lock()
				r.done = true
				q.mu.Unlock()
			}
			if !yield(c, err) {
				return
			}
		}
	}
}

// rpSession is the reference of one session.
type rpSession struct {
	key, id   string
	phase     string // "wait", "run" (paused, its calls settled), "done"
	status    session.Status
	clients   int
	approvals int
	paused    bool
	inbox     string // the directive of the last unread message
	waiting   string // the directive whose calls it waits for
	msgs      []mtMsg
	results   []string // call ids whose results were accepted
	decided   []string // call ids decided
	approved  map[string]bool
	cancels   [][2]int64 // ticks around each Cancel
	starts    []int64    // ticks before each message that may start it again
	forces    [][2]int64
	next      int
	seen      []string // the event log last read: "index type data"
	// given up: failed by the runtime after MaxAttempts claims without a
	// step committed, its leases lapsing (-modeltest.leasettl shorter
	// than a step takes): not checked further (nor is its family: its
	// parent, its children).
	givenUp bool
	// Child sessions (as model_test.go's): a parent's delegate-approve
	// and delegate2 start children that wait for a decision, which the
	// parent waits for; delegate and delegate-fail one that ends at once.
	parent  *rpSession // (a child) the session whose step started it
	kids    int        // (a parent) the children it waits for
	unbound int        // (a parent) of those, the ones not yet adopted
	owed    bool       // (a child) its parent waits for its end
	// delivered: (a child) it ended while its parent waited for it: the
	// delegate call that started it has its end as its result, once.
	delivered bool
	// stray: (a child) started by a step of its parent whose commit was
	// lost (a write failed, a lease lost, a replica died or was cut off
	// after it created the child): no call of the parent waits for it,
	// and the parent's end cancels it.
	stray bool
}

// rpSeq is one sequence.
type rpSeq struct {
	t       *testing.T
	dsn     string
	seed    uint64
	stats   map[string]int
	verbose bool

	rng      *rand.Rand
	w        *mtWorld
	n        int64
	owner    string
	replicas []*rpReplica // the live ones, by slot
	dead     []*rpReplica // abandoned
	parted   *rpReplica   // partitioned, until the action's end
	partedAt time.Time
	waiter   *rpReplica // the next long-poll probe's (a healed replica)
	made     int
	sessions []*rpSession
	actions  []string
	log      mtLog
	failed   bool
	disrupt  atomic.Int64
	// failedWrites counts the writes of workers that failed otherwise
	// than by a lost lease.
	failedWrites atomic.Int64
	lapses       struct {
		sync.Mutex
		n map[string]int64
	}

	mu       sync.Mutex
	inflight map[string]map[*rpReq]bool
	reqs     []*rpReq
	overlaps []rpOverlap // requests of one session in flight at once on two live replicas
}

// rpOverlap is a request sent while another replica's request of the
// same session was in flight, and the disruptions at that one's start.
type rpOverlap struct {
	what, id string
	mark     int64
}

// lapse counts a lease of the session id lost by a replica's worker.
func (q *rpSeq) lapse(id string) {
	q.lapses.Lock()
	if q.lapses.n == nil {
		q.lapses.n = map[string]int64{}
	}
	q.lapses.n[id]++
	q.lapses.Unlock()
}

// lapsesOf counts the leases of the session id lost so far.
func (q *rpSeq) lapsesOf(id string) int64 {
	q.lapses.Lock()
	defer q.lapses.Unlock()
	return q.lapses.n[id]
}

// mark counts the disruptions that may make a worker send a step of the
// session id again: the stops and deaths of replicas, and the session's
// lost leases.
func (q *rpSeq) mark(id string) int64 {
	q.lapses.Lock()
	defer q.lapses.Unlock()
	return q.disrupt.Load() + q.lapses.n[id]
}

func (q *rpSeq) logf(format string, args ...any) {
	a := fmt.Sprintf(format, args...)
	q.actions = append(q.actions, a)
	if q.verbose {
		q.t.Log(a)
	}
}

// rpKnownBugs are the invariants this test finds broken on main, with
// who is fixing each: a violation of one is logged (with its seed, once
// per run) and ends its sequence without failing the test. Remove an
// entry when its fix lands. None is known today: "one-worker-in-process"
// (a second worker of one process after a lapsed lease, seen with
// -modeltest.leasettl=60ms, seed 1033374649455) was fixed by
// startWorker's holding check (TestLapsedLeaseReclaimedByItsOwnProcess).
var rpKnownBugs = map[string]string{}

func (q *rpSeq) violation(s *rpSession, invariant, format string, args ...any) {
	if q.failed {
		return
	}
	q.failed = true
	if bug, ok := rpKnownBugs[invariant]; ok {
		q.stats["known: "+invariant]++
		if q.stats["known: "+invariant] == 1 || q.verbose {
			q.t.Logf("seed %d: known bug (%s): invariant %s broken: %s\nactions:\n  %s", q.seed, bug, invariant, fmt.Sprintf(format, args...), strings.Join(q.actions, "\n  "))
		}
		return
	}
	q.t.Errorf("seed %d: invariant %s broken: %s\nactions:\n  %s", q.seed, invariant, fmt.Sprintf(format, args...), strings.Join(q.actions, "\n  "))
	for _, o := range q.sessions {
		q.dump(o)
	}
	q.t.Logf("the managers' log:\n%s", q.log.String())
}

func (q *rpSeq) dump(s *rpSession) {
	q.t.Logf("%s (%s): reference %s/%s", s.key, s.id, s.phase, s.status)
	q.mu.Lock()
	for _, r := range q.reqs {
		if r.key == s.key {
			q.t.Logf("  request at tick %d by replica %d: %d tools, done %v, disruptions %d", r.start, r.replica.n, r.tools, r.done, r.mark)
		}
	}
	q.mu.Unlock()
	for _, e := range s.seen {
		q.t.Logf("  event %s", e)
	}
}

// newReplica opens a store of its own and starts a manager on it.
func (q *rpSeq) newReplica() *rpReplica {
	ctx := context.Background()
	pg, err := postgres.Open(ctx, q.dsn, &postgres.Options{MaxConns: 4})
	if err != nil {
		q.t.Fatal(err)
	}
	q.made++
	r := &rpReplica{n: q.made, st: &rpStore{Store: pg, q: q, thaw: make(chan struct{}), counted: make(chan string, 16)}}
	r.m = session.New(r.st, rpModel{q: q, r: r}, &session.Options{
		Environments: map[string]*loop.Toolset{"lab": q.w.tools()},
		Permissions:  mtPermissions,
		LeaseTTL:     *rpLeaseTTL,
		ReplicaID:    fmt.Sprintf("rp%d-%d", q.seed, q.made),
		Logger:       slog.New(slog.NewTextHandler(&q.log, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	// A delivery of a child's end lost (to a death, a partition, a
	// failed write) is made by the parent's periodic check of its
	// children, on whichever replica claims it: every rpChildCheck here.
	session.SetChildCheck(r.m, rpChildCheck)
	if err := r.m.Start(ctx); err != nil {
		q.t.Fatal(err)
	}
	return r
}

// rpChildCheck is how often a parent waiting for children checks them.
const rpChildCheck = 250 * time.Millisecond

func (q *rpSeq) stopReplica(r *rpReplica) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.m.Stop(ctx); err != nil {
		q.t.Fatalf("seed %d: Stop of replica %d: %v", q.seed, r.n, err)
	}
	r.st.Store.Close()
}

func (q *rpSeq) run() {
	q.rng = rand.New(rand.NewPCG(q.seed, q.seed>>32|1))
	q.w = newWorld()
	q.owner = fmt.Sprintf("rp%d", q.seed)
	q.n = mtSequences.Add(1)
	q.inflight = map[string]map[*rpReq]bool{}
	for range 2 + q.rng.IntN(2) {
		q.replicas = append(q.replicas, q.newReplica())
	}
	q.logf("%d replicas", len(q.replicas))
	defer q.end()
	for range 8 + q.rng.IntN(12) {
		if q.failed {
			return
		}
		q.act()
		q.settle()
		q.adopt()
		q.check()
		q.stats["actions"]++
	}
}

// end cancels the sequence's sessions, stops the live replicas, and lets
// the dead ones go (their hung writes fail, writing nothing).
func (q *rpSeq) end() {
	ctx := context.Background()
	if r := q.parted; r != nil {
		close(*r.st.part.Swap(nil))
		q.parted = nil
	}
	q.w.release("*")
	m := q.replicas[0].m
	for _, s := range q.sessions {
		m.Cancel(ctx, q.owner, s.id)
	}
	q.mu.Lock()
	for _, r := range q.reqs {
		if r.id == "" {
			q.stats["model requests without a session id"]++
		}
	}
	q.mu.Unlock()
	q.stats["failed writes"] += int(q.failedWrites.Load())
	for _, r := range append(slices.Clone(q.replicas), q.dead...) {
		q.stats["wake-ups lost"] += int(r.st.lost.Load())
		q.stats["calls held by partitions"] += int(r.st.held.Load())
		r.st.fault.Lock()
		q.stats["store calls failed on purpose"] += r.st.fault.injected
		r.st.fault.Unlock()
	}
	for _, r := range q.replicas {
		q.stopReplica(r)
	}
	for _, r := range q.dead {
		close(r.st.thaw)
		q.stopReplica(r)
	}
}

// kill makes r a dead replica: its store's writes hang from now on and
// fail when the sequence ends, writing nothing. Half the time its manager
// is told to stop without being waited for (its runs are cut at once, as
// a process killed); otherwise it goes on as a frozen process would seem
// to the others (its runs go on, but nothing they do lands).
func (q *rpSeq) kill(r *rpReplica) {
	r.st.deadAt.Store(q.w.clock.tick())
	r.st.dead.Store(true)
	if q.rng.IntN(2) == 0 {
		cut, cancel := context.WithCancel(context.Background())
		cancel()
		r.m.Stop(cut)
	}
}

// pick returns a random live replica, not partitioned.
func (q *rpSeq) pick() *rpReplica {
	for {
		if r := q.replicas[q.rng.IntN(len(q.replicas))]; !r.st.partitioned() {
			return r
		}
	}
}

// partition cuts r off the database (see rpStore.part) until heal.
func (q *rpSeq) partition(r *rpReplica) {
	ch := make(chan struct{})
	r.st.part.Store(&ch)
	q.parted, q.partedAt = r, time.Now()
	q.stats["partitions"]++
	q.logf("replica %d is partitioned", r.n)
}

// heal ends the partition once it lasted longer than a lease TTL (1.2 to
// 3 of them): the partitioned replica's sessions were taken over by the
// others meanwhile, and its held writes, and the rest of its runs' steps,
// now reach the store. The next long-poll probe waits on it.
func (q *rpSeq) heal() {
	r := q.parted
	if r == nil {
		return
	}
	long := time.Duration(float64(*rpLeaseTTL) * (1.2 + 1.8*q.rng.Float64()))
	time.Sleep(time.Until(q.partedAt.Add(long)))
	p := r.st.part.Swap(nil)
	close(*p)
	q.parted, q.waiter = nil, r
	q.logf("replica %d's partition heals (%d calls held)", r.n, r.st.held.Load())
}

// act does one to three actions without waiting between them, each on
// a session of its own (or a fault of a replica), so that sessions run on
// several replicas at once and a replica stops or dies while others run.
func (q *rpSeq) act() {
	touched := map[*rpSession]bool{}
	for range 1 + q.rng.IntN(3) {
		q.act1(touched)
		q.deliverEnds()
	}
	q.heal()
}

func (q *rpSeq) act1(touched map[*rpSession]bool) {
	ctx := context.Background()
	if len(q.sessions) == 0 || len(q.sessions) < 4 && q.rng.IntN(6) == 0 {
		q.create(ctx, q.pick())
		touched[q.sessions[len(q.sessions)-1]] = true
		return
	}
	switch n := q.rng.IntN(24); n {
	case 0: // a replica stops cleanly; a new one takes its place
		i := q.rng.IntN(len(q.replicas))
		old := q.replicas[i]
		if old.st.partitioned() {
			return
		}
		q.disrupt.Add(1)
		q.stopReplica(old)
		q.replicas[i] = q.newReplica()
		q.stats["clean stops"]++
		q.logf("replica %d stops, %d starts", old.n, q.replicas[i].n)
		return
	case 1: // a replica dies: its writes never land, it is not waited for
		i := q.rng.IntN(len(q.replicas))
		old := q.replicas[i]
		if old.st.partitioned() {
			return
		}
		q.disrupt.Add(1)
		q.kill(old)
		q.stats["deaths"]++
		if all, _, err := q.replicas[(i+1)%len(q.replicas)].st.ListSessions(ctx, &store.ListParams{Owner: q.owner, Limit: 1000}); err == nil {
			for _, got := range all {
				if got.LeaseOwner == old.m.ReplicaID() && got.LeaseUntil.After(time.Now()) {
					q.stats["leases of a dead replica taken over"]++
				}
			}
		}
		q.dead = append(q.dead, old)
		q.replicas[i] = q.newReplica()
		q.logf("replica %d dies, %d starts", old.n, q.replicas[i].n)
		return
	case 2: // a replica loses its next wake-ups
		r := q.pick()
		k := 1 + q.rng.IntN(3)
		r.st.deaf.Store(int32(k))
		q.logf("replica %d loses its next %d wake-ups", r.n, k)
		return
	case 3, 4: // a worker's store call fails on a replica, maybe after its commit
		r := q.pick()
		ops := []string{"update", "update", "claim", "renew", "recover", "deliver", "end"}
		op, skip, after := ops[q.rng.IntN(len(ops))], q.rng.IntN(2), q.rng.IntN(2) == 0
		r.st.arm(op, skip, after)
		q.stats["store calls failed: "+op]++
		q.logf("replica %d fails its %s after the next %d (after the commit: %v)", r.n, op, skip, after)
		return
	case 5: // a replica is partitioned for longer than a lease TTL
		if q.parted == nil && len(q.replicas) > 1 {
			q.partition(q.pick())
		}
		return
	}
	s := q.sessions[q.rng.IntN(len(q.sessions))]
	if kin := slices.DeleteFunc(slices.Clone(q.sessions), func(c *rpSession) bool { return !c.owed && c.kids == 0 }); len(kin) > 0 && q.rng.IntN(2) == 0 {
		s = kin[q.rng.IntN(len(kin))] // a child its parent waits for, or that parent
	}
	// A session's family (its parent, its children) is acted on once an
	// action: a child's end and an action on its parent would race.
	if slices.ContainsFunc(q.family(s), func(o *rpSession) bool { return touched[o] || o.givenUp }) {
		return
	}
	if s.parent != nil && s.phase == "done" {
		return // a child is not started again
	}
	for _, o := range q.family(s) {
		touched[o] = true
	}
	r := q.pick()
	switch s.phase {
	case "done":
		if q.rng.IntN(3) == 0 {
			q.cutStep(ctx, r, s)
			return
		}
		q.probe(s, r, func() {
			q.send(ctx, r, s, 1+q.rng.IntN(2))
		})
		q.runOn(s, s.inbox)
	case "run":
		switch q.rng.IntN(3) {
		case 0:
			q.resume(ctx, r, s)
		case 1:
			q.probe(s, r, func() { q.send(ctx, r, s, 1) })
			s.paused = false
			q.runOn(s, s.inbox)
		default:
			q.probe(s, r, func() { q.cancel(ctx, r, s) })
		}
	case "wait":
		q.actWaiting(ctx, r, s)
	}
}

// probe runs action (a caller's commit on replica r) while a long-poll
// of s waits on another live replica, and checks that the commit woke it.
func (q *rpSeq) probe(s *rpSession, r *rpReplica, action func()) {
	var other *rpReplica
	for _, o := range q.replicas {
		if o != r && o.st.deaf.Load() == 0 && !o.st.partitioned() {
			other = o
		}
	}
	if w := q.waiter; w != nil && w != r && slices.Contains(q.replicas, w) && w.st.deaf.Load() == 0 && !w.st.partitioned() {
		// A replica whose partition healed: its long-polls recover.
		other = w
		q.waiter = nil
		q.stats["long-polls on a healed replica"]++
	}
	if other == nil {
		action()
		return
	}
	ctx := context.Background()
	from := int64(len(s.seen))
	for len(other.st.counted) > 0 {
		<-other.st.counted
	}
	type answer struct {
		c   *session.Changes
		err error
	}
	got := make(chan answer, 1)
	go func() {
		c, _, err := other.m.Changes(ctx, q.owner, s.id, &session.ChangesParams{From: from, Wait: 20 * time.Second})
		got <- answer{c, err}
	}()
	// The long-poll has subscribed and read the count: what it returns
	// now comes of a wake-up.
	waited := false
	for !waited {
		select {
		case id := <-other.st.counted:
			waited = id == s.id
		case a := <-got:
			q.violation(s, "long-poll", "%s: a long-poll from %d on replica %d returned before the action: %+v, %v", s.key, from, other.n, a.c, a.err)
			return
		case <-time.After(20 * time.Second):
			q.violation(s, "long-poll", "%s: the long-poll on replica %d never read the count", s.key, other.n)
			return
		}
	}
	action()
	a := <-got
	q.stats["long-polls across replicas"]++
	if a.err != nil || a.c == nil || len(a.c.NewEvents) == 0 {
		q.violation(s, "long-poll", "%s: a long-poll on replica %d (from %d) was not woken by the commit on replica %d: %+v, %v", s.key, other.n, from, r.n, a.c, a.err)
	}
}

// cutStep sends s, through r, a message whose step blocks (the model's
// request or a server tool), then stops or kills the replica that runs
// the step while it blocks, and lets the step go on: another replica
// must take the session over (at once after a stop, once the lease
// expires after a death) and run the step again.
func (q *rpSeq) cutStep(ctx context.Context, r *rpReplica, s *rpSession) {
	kinds := []string{"slow-answer", "slow-client", "slow-server", "slowtool"}
	x := kinds[q.rng.IntN(len(kinds))]
	text := q.tag(s, x)
	tag := strings.Fields(text)[0]
	before := q.w.clock.tick()
	err := r.m.SendMessages(ctx, q.owner, s.id, []session.UserMessage{{Message: text}})
	after := q.w.clock.tick()
	q.logf("message %s on replica %d %q: %v", s.key, r.n, text, err)
	if err != nil {
		q.t.Fatalf("seed %d: SendMessages: %v", q.seed, err)
	}
	s.msgs = append(s.msgs, mtMsg{tag: tag, before: before, after: after})
	s.starts = append(s.starts, before)
	q.runOn(s, x)
	// Which replica's worker blocks?
	var runner *rpReplica
	deadline := time.Now().Add(20 * time.Second)
	for runner == nil {
		q.mu.Lock()
		for req := range q.inflight[s.key] {
			if !req.replica.st.dead.Load() {
				runner = req.replica
			}
		}
		q.mu.Unlock()
		if runner == nil && x == "slowtool" {
			runner = q.toolRunner(s)
		}
		if runner == nil && time.Now().After(deadline) {
			q.violation(s, "end-state", "%s: the step of %s never started", s.key, tag)
			q.w.release(tag)
			return
		}
		time.Sleep(time.Millisecond)
	}
	i := slices.Index(q.replicas, runner)
	if i < 0 || runner.st.partitioned() {
		q.w.release(tag)
		return
	}
	if q.parted == nil && q.rng.IntN(3) == 0 {
		// Not a disruption: the replica does not know it was cut
		// off, its runs go on; a step sent again must be excused by
		// a lease its worker lost (its commit, once the partition
		// heals, refused).
		q.stats["partitions mid-step"]++
		q.logf("replica %d, which runs the step of %s, is partitioned; release %s", runner.n, tag, tag)
		q.partition(runner)
		q.w.release(tag)
		return
	}
	q.disrupt.Add(1)
	if q.rng.IntN(2) == 0 {
		q.stats["stops mid-step"]++
		q.logf("replica %d, which runs the step of %s, stops", runner.n, tag)
		q.stopReplica(runner)
	} else {
		q.stats["deaths mid-step"]++
		q.logf("replica %d, which runs the step of %s, dies", runner.n, tag)
		q.kill(runner)
		q.dead = append(q.dead, runner)
	}
	q.replicas[i] = q.newReplica()
	q.logf("replica %d starts; release %s", q.replicas[i].n, tag)
	q.w.release(tag)
}

// toolRunner returns the replica whose worker runs s's slow tool, if
// one does: the replica of the last request of s.
func (q *rpSeq) toolRunner(s *rpSession) *rpReplica {
	running := false
	for _, run := range q.w.runsOf(s.id) {
		running = running || run.end == 0 && run.tool == "work_slow"
	}
	if !running {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := len(q.reqs) - 1; i >= 0; i-- {
		if q.reqs[i].key == s.key {
			return q.reqs[i].replica
		}
	}
	return nil
}

func (q *rpSeq) directive(s *rpSession) string {
	ds := []string{"answer", "answer", "client", "client", "client2", "server", "deny", "approve", "approve", "fail", "mute",
		"delegate", "delegate-fail", "delegate-approve", "delegate-approve", "delegate2"}
	if s.parent != nil {
		// A child's agent (the subagent helper) has neither the
		// caller's tool nor subagents.
		ds = []string{"answer", "server", "deny", "approve", "approve", "fail"}
	}
	return ds[q.rng.IntN(len(ds))]
}

func (q *rpSeq) tag(s *rpSession, d string) string {
	t := fmt.Sprintf("%s.m%d %s", s.key, s.next, d)
	s.next++
	return t
}

func (q *rpSeq) create(ctx context.Context, r *rpReplica) {
	s := &rpSession{key: fmt.Sprintf("q%ds%d", q.n, len(q.sessions)), approved: map[string]bool{}}
	d := q.directive(s)
	text := q.tag(s, d)
	agent := map[string]any{"name": "mt", "environments": []string{"lab"},
		"subagents": []any{map[string]any{"name": "helper", "description": "does a part", "environments": []string{"lab"}}},
		"tools":     []any{map[string]any{"name": "ask_client", "description": "the caller answers", "input_schema": map[string]any{"type": "object"}}}}
	body, _ := json.Marshal(map[string]any{"agent": agent, "messages": text})
	var req session.Request
	if err := json.Unmarshal(body, &req); err != nil {
		q.t.Fatal(err)
	}
	before := q.w.clock.tick()
	v, _, err := r.m.Create(ctx, &session.CreateParams{Owner: q.owner, Request: &req, Raw: body})
	after := q.w.clock.tick()
	if err != nil {
		q.t.Fatalf("seed %d: Create: %v", q.seed, err)
	}
	s.id = v.ID
	s.msgs = append(s.msgs, mtMsg{tag: strings.Fields(text)[0], before: before, after: after})
	s.starts = append(s.starts, before)
	q.sessions = append(q.sessions, s)
	q.logf("create %s (%s) on replica %d: %s", s.key, s.id, r.n, d)
	q.runOn(s, d)
}

// runOn predicts the end of a run whose last unread message has
// directive d (as model_test.go's runOn, without queues).
func (q *rpSeq) runOn(s *rpSession, d string) {
	d = strings.TrimPrefix(d, "slow-")
	s.inbox, s.paused, s.clients, s.approvals, s.waiting, s.kids, s.unbound = "", false, 0, 0, d, 0, 0
	switch d {
	case "delegate-approve":
		s.phase, s.status, s.kids, s.unbound = "wait", session.StatusAwaitingToolResults, 1, 1
	case "delegate2":
		s.phase, s.status, s.kids, s.unbound = "wait", session.StatusAwaitingToolResults, 2, 2
	case "client", "mute":
		s.phase, s.status, s.clients = "wait", session.StatusAwaitingToolResults, 1
	case "client2":
		s.phase, s.status, s.clients = "wait", session.StatusAwaitingToolResults, 2
	case "approve":
		s.phase, s.status, s.approvals = "wait", session.StatusAwaitingToolResults, 1
	case "fail":
		s.phase, s.status = "done", session.StatusFailed
	default:
		s.phase, s.status = "done", session.StatusCompleted
	}
}

func (q *rpSeq) send(ctx context.Context, r *rpReplica, s *rpSession, n int) {
	var msgs []session.UserMessage
	var tags []string
	d := ""
	for range n {
		d = q.directive(s)
		text := q.tag(s, d)
		tags = append(tags, text)
		msgs = append(msgs, session.UserMessage{Message: text})
	}
	before := q.w.clock.tick()
	err := r.m.SendMessages(ctx, q.owner, s.id, msgs)
	after := q.w.clock.tick()
	q.logf("message %s on replica %d %q: %v", s.key, r.n, tags, err)
	if err != nil {
		q.t.Fatalf("seed %d: SendMessages: %v", q.seed, err)
	}
	for _, t := range tags {
		s.msgs = append(s.msgs, mtMsg{tag: strings.Fields(t)[0], before: before, after: after})
	}
	s.starts = append(s.starts, before)
	s.inbox = d
}

func (q *rpSeq) resume(ctx context.Context, r *rpReplica, s *rpSession) {
	err := r.m.Resume(ctx, q.owner, s.id)
	q.logf("resume %s on replica %d: %v", s.key, r.n, err)
	if err != nil {
		q.t.Fatalf("seed %d: Resume: %v", q.seed, err)
	}
	s.paused = false
	if s.phase == "run" {
		q.runOn(s, s.inbox)
	} else {
		s.status = session.StatusAwaitingToolResults
	}
}

func (q *rpSeq) cancel(ctx context.Context, r *rpReplica, s *rpSession) {
	before := q.w.clock.tick()
	err := r.m.Cancel(ctx, q.owner, s.id)
	after := q.w.clock.tick()
	q.logf("cancel %s on replica %d: %v", s.key, r.n, err)
	if err != nil {
		q.t.Fatalf("seed %d: Cancel: %v", q.seed, err)
	}
	s.cancels = append(s.cancels, [2]int64{before, after})
	s.phase, s.status, s.paused = "done", session.StatusInterrupted, false
	if s.kids > 0 {
		q.stats["cancels while children run"]++
	}
	q.orphan(s, &[2]int64{before, after})
}

// pending reads what s waits for through r.
func (q *rpSeq) pending(ctx context.Context, r *rpReplica, s *rpSession) (clients, approvals []session.ToolRequest) {
	events := q.events(ctx, r, s)
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Type == session.EventActiveState {
			var a session.ActiveState
			json.Unmarshal(events[i].Data, &a)
			return a.PendingToolCalls, a.PendingApprovals
		}
	}
	return nil, nil
}

func (q *rpSeq) events(ctx context.Context, r *rpReplica, s *rpSession) []session.Event {
	p, err := r.m.Events(ctx, q.owner, s.id, &session.EventsParams{Page: 1, Size: 1 << 20})
	if err != nil {
		q.t.Fatalf("seed %d: Events through replica %d: %v", q.seed, r.n, err)
	}
	return p.Items
}

func (q *rpSeq) actWaiting(ctx context.Context, r *rpReplica, s *rpSession) {
	if s.kids > 0 && s.clients == 0 && s.approvals == 0 {
		q.actParent(ctx, r, s)
		return
	}
	clients, approvals := q.pending(ctx, r, s)
	switch n := q.rng.IntN(10); {
	case n < 4 && len(clients) > 0:
		c := clients[q.rng.IntN(len(clients))]
		res := session.ToolResult{Kind: session.KindToolResult, ToolReq: c, Result: json.RawMessage(`"client says hi"`)}
		if q.rng.IntN(3) == 0 {
			res = session.ToolResult{Kind: session.KindError, ToolReq: c, Error: "client failed", Origin: "custom_tools"}
		}
		var err error
		q.probe(s, r, func() { err = r.m.PostToolResults(ctx, q.owner, s.id, []session.ToolResult{res}) })
		q.logf("result %s %s on replica %d: %v", s.key, c.ID, r.n, err)
		if err != nil {
			q.t.Fatalf("seed %d: PostToolResults: %v", q.seed, err)
		}
		s.results = append(s.results, c.ID)
		s.clients--
		q.settleCalls(s)
	case n < 6 && len(approvals) > 0:
		c := approvals[0]
		ok := q.rng.IntN(2) == 0
		var err error
		q.probe(s, r, func() {
			err = r.m.Decide(ctx, q.owner, s.id, []session.Decision{{ID: c.ID, Approved: ok, Reason: "rpmodel"}})
		})
		q.logf("decide %s %s approved=%v on replica %d: %v", s.key, c.ID, ok, r.n, err)
		if err != nil {
			q.t.Fatalf("seed %d: Decide: %v", q.seed, err)
		}
		if ok {
			s.approved[c.ID] = true
		}
		s.decided = append(s.decided, c.ID)
		s.approvals--
		q.settleCalls(s)
	case n == 6:
		q.probe(s, r, func() { q.send(ctx, r, s, 1+q.rng.IntN(2)) })
		if s.paused {
			s.paused = false
			s.status = session.StatusAwaitingToolResults
		}
	case n == 7 && !s.paused:
		err := r.m.Pause(ctx, q.owner, s.id)
		q.logf("pause %s on replica %d: %v", s.key, r.n, err)
		if err != nil {
			q.t.Fatalf("seed %d: Pause: %v", q.seed, err)
		}
		s.paused, s.status = true, session.StatusPaused
	case n == 7:
		q.resume(ctx, r, s)
	case n == 8 && !s.paused: // (a paused session stays paused: model_test.go does the same)
		before := q.w.clock.tick()
		err := r.m.ForceAnswer(ctx, q.owner, s.id)
		after := q.w.clock.tick()
		q.logf("force answer %s on replica %d: %v", s.key, r.n, err)
		if err != nil {
			q.t.Fatalf("seed %d: ForceAnswer: %v", q.seed, err)
		}
		s.forces = append(s.forces, [2]int64{before, after})
		q.forcedEnd(s)
	default:
		q.probe(s, r, func() { q.cancel(ctx, r, s) })
	}
}

func (q *rpSeq) settleCalls(s *rpSession) {
	if s.clients > 0 || s.approvals > 0 || s.kids > 0 {
		return
	}
	if s.paused {
		s.phase = "run"
		return
	}
	q.runOn(s, s.inbox)
}

// settle waits until no session of the owner needs a worker, on any
// replica.
func (q *rpSeq) settle() {
	ctx := context.Background()
	start := time.Now()
	deadline := start.Add(30 * time.Second)
	for {
		all, _, err := q.replicas[0].st.ListSessions(ctx, &store.ListParams{Owner: q.owner, Limit: 1000})
		if err != nil {
			q.t.Fatal(err)
		}
		busy := ""
		status := map[string]session.Status{}
		for _, got := range all {
			status[got.ID] = session.Status(got.Status)
		}
		for _, got := range all {
			workers := 0
			for _, r := range q.replicas {
				workers += session.Workers(r.m, got.ID)
			}
			if got.Runnable || got.LeaseOwner != "" && got.LeaseUntil.After(time.Now()) || workers > 0 ||
				got.Status == string(session.StatusRunning) || got.Status == string(session.StatusPending) {
				busy = fmt.Sprintf("%s is %s (runnable %v, lease %q until %v, %d workers on live replicas)", got.ID, got.Status, got.Runnable, got.LeaseOwner, got.LeaseUntil, workers)
			}
		}
		if busy == "" && time.Since(start) < 10*time.Second {
			// A child that ended gives its end to its parent (or,
			// lost to a replica's death, a failed write, a
			// partition, the parent's periodic check of its children
			// does, every rpChildCheck): give it a moment
			// (child-end-lost says if it never comes).
			busy = q.undelivered(ctx, status)
		}
		if busy == "" {
			return
		}
		if time.Now().After(deadline) {
			q.violation(nil, "end-state", "a session never settles: %s", busy)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (q *rpSeq) check() {
	ctx := context.Background()
	q.mu.Lock()
	overlaps := slices.Clone(q.overlaps)
	q.mu.Unlock()
	for _, o := range overlaps {
		if o.mark < 0 {
			q.violation(nil, "one-worker-in-process", "%s", o.what)
			return
		}
		if o.mark == q.mark(o.id) {
			q.violation(nil, "one-worker", "%s", o.what)
			return
		}
		q.stats["overlaps with a lost lease"]++
	}
	q.checkSteps()
	views := map[*rpSession]*session.View{}
	for _, s := range q.sessions {
		v, err := q.pick().m.Get(ctx, q.owner, s.id)
		if err != nil {
			q.t.Fatal(err)
		}
		views[s] = v
		if !s.givenUp && v.Status.Status == session.StatusFailed && s.status != session.StatusFailed && v.Status.ErrorCode != nil && *v.Status.ErrorCode == "internal" &&
			q.lapsesOf(s.id) > 0 && v.Status.Error != nil && strings.Contains(*v.Status.Error, "times in a row") {
			q.stats["given up after lapsed leases"]++
			for _, o := range q.family(s) {
				// Its parent ran on with its end; its children
				// were cancelled by its end: none checked further.
				o.givenUp, o.phase = true, "given up"
			}
		}
	}
	for _, s := range q.sessions {
		if q.failed {
			return
		}
		r := q.pick()
		v := views[s]
		if s.givenUp {
			continue
		}
		q.checkLog(ctx, s)
		q.checkRequests(s)
		if s.parent == nil {
			q.checkDelivery(ctx, s)
		}
		if q.failed {
			return
		}
		if v.Status.Status != s.status {
			q.violation(s, "end-state", "%s is %s (error %s), the reference says %s", s.key, v.Status.Status, *cmp.Or(v.Status.Error, new(string)), s.status)
			return
		}
		if s.status == session.StatusAwaitingToolResults {
			clients, approvals := q.pending(ctx, r, s)
			if len(clients) != s.clients || len(approvals) != s.approvals {
				q.violation(s, "end-state", "%s waits for %d results and %d decisions, the reference says %d and %d", s.key, len(clients), len(approvals), s.clients, s.approvals)
			}
		}
	}
}

// checkSteps: no request sent again after it completed, without a
// disruption of its session since (a lease lost is seen by the worker
// that lost it after the other replica sent the request again).
func (q *rpSeq) checkSteps() {
	q.mu.Lock()
	defer q.mu.Unlock()
	first := map[string]*rpReq{}
	for _, r := range q.reqs {
		if d := r.replica.st.deadAt.Load(); d > 0 && r.start > d {
			continue // a frozen replica's: its commit never lands
		}
		k := r.key + "\x00" + r.sig
		if f, ok := first[k]; ok && f.done && f.mark == q.mark(f.id) {
			q.mu.Unlock()
			s := q.session(r.key)
			q.violation(s, "step-twice", "%s: the request at tick %d by replica %d was sent again at tick %d by replica %d, with no disruption between", r.key, f.start, f.replica.n, r.start, r.replica.n)
			q.mu.Lock()
			return
		}
		first[k] = r
	}
}

func (q *rpSeq) session(key string) *rpSession {
	for _, s := range q.sessions {
		if s.key == key {
			return s
		}
	}
	return nil
}

// checkLog reads s's log through every live replica: dense indexes, the
// same events everywhere, extending the last read; every accepted
// message, result and decision in it once.
func (q *rpSeq) checkLog(ctx context.Context, s *rpSession) {
	var ref []string
	var events []session.Event
	for _, r := range q.replicas {
		var got []string
		read := q.events(ctx, r, s)
		for i, e := range read {
			if e.Index != int64(i) {
				q.violation(s, "event-log", "%s: through replica %d, event %d has index %d", s.key, r.n, i, e.Index)
				return
			}
			got = append(got, fmt.Sprintf("%d %s %s", e.Index, e.Type, e.Data))
		}
		if ref == nil {
			ref, events = got, read
			continue
		}
		if !slices.Equal(got, ref) {
			q.violation(s, "event-log", "%s: replica %d reads %d events, another %d, or different ones", s.key, r.n, len(got), len(ref))
			return
		}
	}
	if len(ref) < len(s.seen) || !slices.Equal(ref[:len(s.seen)], s.seen) {
		q.violation(s, "event-log", "%s: the log (%d events) does not extend the one read before (%d)", s.key, len(ref), len(s.seen))
		return
	}
	s.seen = ref
	msgs, results, decisions := map[string]int{}, map[string]int{}, map[string]int{}
	steps := int64(0)
	for _, e := range events {
		if e.Type == session.EventMetricsUpdate {
			// Each step's commit counts it: a count that does not
			// grow is a step committed twice (a stale worker's,
			// whose lease another replica took, landing over the
			// new owner's work).
			var m struct {
				Metrics struct {
					Steps int64 `json:"steps"`
				} `json:"metrics"`
			}
			json.Unmarshal(e.Data, &m)
			if m.Metrics.Steps <= steps {
				q.violation(s, "step-committed-twice", "%s: event %d counts %d steps, an event before it %d", s.key, e.Index, m.Metrics.Steps, steps)
				return
			}
			steps = m.Metrics.Steps
		}
		if e.Type != session.EventAgent {
			continue
		}
		var d session.AgentEventData
		json.Unmarshal(e.Data, &d)
		switch {
		case d.Kind == session.KindMessage:
			for _, c := range d.MessageContent {
				if g := mtTag.FindStringSubmatch(strings.TrimSpace(fmt.Sprint(c))); g != nil {
					msgs[g[1]]++
				}
			}
		case d.ToolReq != nil && (d.Kind == session.KindToolResult || d.Kind == session.KindError && d.Origin == "custom_tools"):
			results[d.ToolReq.ID]++
		case d.ToolReq != nil && d.Kind == session.KindFlow:
			decisions[d.ToolReq.ID]++
		}
	}
	for _, m := range s.msgs {
		if msgs[m.tag] != 1 {
			q.violation(s, "input-lost", "%s: message %s, accepted, is in the log %d times", s.key, m.tag, msgs[m.tag])
			return
		}
	}
	for _, id := range s.results {
		if results[id] != 1 {
			q.violation(s, "input-lost", "%s: the result of %s, accepted, is in the log %d times", s.key, id, results[id])
			return
		}
	}
	for _, id := range s.decided {
		if decisions[id] != 1 {
			q.violation(s, "input-lost", "%s: the decision on %s, accepted, is in the log %d times", s.key, id, decisions[id])
			return
		}
	}
}

// checkRequests checks what reached the model: every message in the
// first request after it was accepted; no request after a cancel returned
// until a message came; after a force answer, a request without tools.
func (q *rpSeq) checkRequests(s *rpSession) {
	q.mu.Lock()
	var reqs []*rpReq
	for _, r := range q.reqs {
		if r.key == s.key {
			reqs = append(reqs, r)
		}
	}
	q.mu.Unlock()
	for _, m := range s.msgs {
		for _, r := range reqs {
			if r.start > m.after {
				if !strings.Contains(r.sig, m.tag+" ") {
					q.violation(s, "input-lost", "%s: message %s (accepted at tick %d) is not in the next request (tick %d)", s.key, m.tag, m.after, r.start)
					return
				}
				break
			}
		}
	}
	for _, c := range s.cancels {
		next := int64(1) << 62
		for _, st := range s.starts {
			if st > c[1] {
				next = min(next, st)
			}
		}
		for _, r := range reqs {
			if d := r.replica.st.deadAt.Load(); d > 0 && r.start > d {
				continue // a frozen replica's: it commits nothing
			}
			if r.start > c[1] && r.start < next {
				q.violation(s, "after-cancel", "%s: a model request at tick %d by replica %d, after the cancel returned at tick %d", s.key, r.start, r.replica.n, c[1])
				return
			}
		}
		for _, run := range q.w.runsOf(s.id) {
			if run.start > c[1] && run.start < next {
				q.violation(s, "after-cancel", "%s: call %s ran at tick %d, after the cancel returned at tick %d", s.key, run.call, run.start, c[1])
				return
			}
		}
	}
	for _, run := range q.w.runsOf(s.id) {
		if run.tool == "guarded" && !s.approved[run.call] {
			q.violation(s, "unapproved-call-ran", "%s: call %s of guarded ran without approval", s.key, run.call)
			return
		}
		if run.tool == "forbidden" {
			q.violation(s, "denied-call-ran", "%s: call %s of forbidden ran", s.key, run.call)
			return
		}
	}
	for _, fa := range s.forces {
		if slices.ContainsFunc(reqs, func(r *rpReq) bool { return r.start > fa[0] && r.start < fa[1] && r.tools == 0 }) {
			continue
		}
		for _, r := range reqs {
			if r.start > fa[1] {
				if r.tools > 0 {
					q.violation(s, "force-answer", "%s: the first request after the force answer (tick %d) offers %d tools", s.key, fa[1], r.tools)
				}
				break
			}
		}
	}
}

// forcedEnd predicts the end of a run asked for its final answer: the
// answer, or no_answer when the model says nothing; the children it
// waited for are cancelled by its end.
func (q *rpSeq) forcedEnd(s *rpSession) {
	if s.kids > 0 {
		q.stats["force answers while children run"]++
	}
	status := session.StatusCompleted
	if cmp.Or(s.inbox, s.waiting) == "mute" {
		status = session.StatusFailed
	}
	s.phase, s.status, s.clients, s.approvals, s.inbox, s.paused = "done", status, 0, 0, "", false
	q.orphan(s, nil)
}

// actParent acts, through r, on a parent that waits for its children (or
// is paused there): messages, which wait until they end; a force answer,
// which abandons them; a cancel, which cancels them; pause and resume.
func (q *rpSeq) actParent(ctx context.Context, r *rpReplica, s *rpSession) {
	switch n := q.rng.IntN(10); {
	case n < 4:
		q.stats["messages while children run"]++
		q.probe(s, r, func() { q.send(ctx, r, s, 1+q.rng.IntN(2)) })
		if s.paused {
			s.paused = false
			s.status = session.StatusAwaitingToolResults
		}
	case n < 6 && !s.paused:
		before := q.w.clock.tick()
		err := r.m.ForceAnswer(ctx, q.owner, s.id)
		after := q.w.clock.tick()
		q.logf("force answer %s on replica %d: %v", s.key, r.n, err)
		if err != nil {
			q.t.Fatalf("seed %d: ForceAnswer: %v", q.seed, err)
		}
		s.forces = append(s.forces, [2]int64{before, after})
		q.forcedEnd(s)
	case n < 6, n == 7 && s.paused:
		q.resume(ctx, r, s)
	case n == 6:
		q.probe(s, r, func() { q.cancel(ctx, r, s) })
	default:
		err := r.m.Pause(ctx, q.owner, s.id)
		q.logf("pause %s on replica %d: %v", s.key, r.n, err)
		if err != nil {
			q.t.Fatalf("seed %d: Pause: %v", q.seed, err)
		}
		s.paused, s.status = true, session.StatusPaused
	}
}

// orphan follows the end of a parent p: the children it waited for (and
// its strays) that have not ended are cancelled by that end (before
// Cancel returns, when cancel says its ticks).
func (q *rpSeq) orphan(p *rpSession, cancel *[2]int64) {
	p.kids, p.unbound = 0, 0
	for _, c := range q.sessions {
		if c.parent != p || !c.owed && !c.stray {
			continue
		}
		c.owed = false
		if c.phase != "done" {
			c.phase, c.status, c.paused, c.clients, c.approvals, c.inbox = "done", session.StatusInterrupted, false, 0, 0, ""
			q.stats["children cancelled by their parent's end"]++
			if cancel != nil && !c.stray {
				c.cancels = append(c.cancels, *cancel)
			}
		}
	}
}

// deliverEnds gives the ends of the children that ended to their parents
// that wait for them: a parent runs on once it has them all.
func (q *rpSeq) deliverEnds() {
	for _, c := range q.sessions {
		if !c.owed || c.phase != "done" {
			continue
		}
		c.owed, c.delivered = false, true
		q.stats["child ends delivered"]++
		p := c.parent
		p.kids--
		if p.phase == "wait" {
			q.settleCalls(p)
		}
	}
}

// family returns s's parent and children, s among them.
func (q *rpSeq) family(s *rpSession) []*rpSession {
	root := cmp.Or(s.parent, s)
	out := []*rpSession{root}
	for _, c := range q.sessions {
		if c.parent == root {
			out = append(out, c)
		}
	}
	return out
}

// adopt finds the children of the reference's parents in the store
// (their ids are the runtime's) and adds them to the reference: those
// the parent's log has a delegate call of, as model_test.go's adopt;
// the others as strays.
func (q *rpSeq) adopt() {
	ctx := context.Background()
	for _, p := range slices.Clone(q.sessions) {
		if p.parent != nil || p.givenUp || q.failed {
			continue
		}
		children, _, err := q.replicas[0].st.ListSessions(ctx, &store.ListParams{Owner: q.owner, ParentID: p.id, Limit: 1000, Ascending: true})
		if err != nil {
			q.t.Fatal(err)
		}
		var call map[string]string
		for _, got := range children {
			if slices.ContainsFunc(q.sessions, func(c *rpSession) bool { return c.id == got.ID }) {
				continue
			}
			if call == nil {
				call, _ = q.delegates(ctx, q.pick(), p)
			}
			tag, d := "", ""
			for _, e := range q.events(ctx, q.pick(), &rpSession{id: got.ID}) {
				var a session.AgentEventData
				if e.Type != session.EventAgent || json.Unmarshal(e.Data, &a) != nil || a.Kind != session.KindMessage {
					continue
				}
				for _, m := range a.MessageContent {
					if g := mtTag.FindStringSubmatch(strings.TrimSpace(fmt.Sprint(m))); g != nil && tag == "" {
						tag, d = g[1], g[2]
					}
				}
			}
			if tag == "" {
				q.violation(p, "child-task", "%s: its child %s has no task message", p.key, got.ID)
				return
			}
			c := &rpSession{key: tag[:strings.IndexByte(tag, '.')], id: got.ID, parent: p, next: 1, approved: map[string]bool{},
				msgs: []mtMsg{{tag: strings.Fields(tag)[0]}}, waiting: d}
			_, c.stray = call[c.key]
			c.stray = !c.stray
			q.sessions = append(q.sessions, c)
			q.logf("adopt %s (%s), child of %s: %s (stray %v)", c.key, c.id, p.key, got.Status, c.stray)
			q.stats["children"]++
			switch {
			case c.stray && d == "approve" && p.phase != "done":
				q.stats["stray children"]++
				c.phase, c.status, c.approvals = "wait", session.StatusAwaitingToolResults, 1
			case d == "approve" && !c.stray && p.unbound > 0:
				p.unbound--
				c.owed = true
				c.phase, c.status, c.approvals = "wait", session.StatusAwaitingToolResults, 1
			case d == "approve":
				// Started by a run the reference saw end (a force
				// answer, a cancel): cancelled by that end.
				c.phase, c.status = "done", session.StatusInterrupted
			case d == "fail":
				c.phase, c.status, c.delivered = "done", session.StatusFailed, !c.stray
			default:
				c.phase, c.status, c.delivered = "done", session.StatusCompleted, !c.stray
			}
		}
	}
}

// delegates reads the parent p's delegate calls from its log, through r:
// the call that started each child (by the child's key), and the results
// of each.
func (q *rpSeq) delegates(ctx context.Context, r *rpReplica, p *rpSession) (call map[string]string, results map[string]*mtResult) {
	call, results = map[string]string{}, map[string]*mtResult{}
	for _, e := range q.events(ctx, r, p) {
		var d session.AgentEventData
		if e.Type != session.EventAgent || json.Unmarshal(e.Data, &d) != nil {
			continue
		}
		switch d.Kind {
		case session.KindPolicy:
			for _, c := range d.ToolReqs {
				var in struct{ Task string }
				if c.ToolName != "delegate" || json.Unmarshal(c.Args, &in) != nil {
					continue
				}
				if g := mtTag.FindStringSubmatch(in.Task); g != nil {
					call[g[1][:strings.IndexByte(g[1], '.')]] = c.ID
				}
			}
		case session.KindToolResult, session.KindError:
			if d.ToolReq == nil || d.ToolReq.ToolName != "delegate" {
				continue
			}
			res := results[d.ToolReq.ID]
			if res == nil {
				res = &mtResult{kind: d.Kind, origin: d.Origin, text: d.Error + string(d.Result)}
				results[d.ToolReq.ID] = res
			}
			res.n++
		}
	}
	return call, results
}

// checkDelivery checks the delegate calls of the parent p against its
// children: a child whose end the reference delivered is its call's
// result, once, as it ended; a child the parent still waits for has given
// none; a stray is no call's.
func (q *rpSeq) checkDelivery(ctx context.Context, p *rpSession) {
	call, results := q.delegates(ctx, q.pick(), p)
	for _, c := range q.sessions {
		if c.parent != p || c.stray {
			continue
		}
		id, ok := call[c.key]
		if !ok {
			q.violation(p, "child-call", "%s: no delegate call of %s started its child %s", p.key, p.key, c.key)
			return
		}
		r := results[id]
		switch {
		case r != nil && r.n > 1:
			q.violation(p, "child-end-twice", "%s: the end of its child %s (call %s) was given to it %d times", p.key, c.key, id, r.n)
			return
		case c.owed && r != nil:
			q.violation(p, "child-end-early", "%s: call %s has a result (%s %s) while its child %s, the reference says, runs (%s)", p.key, id, r.kind, r.text, c.key, c.status)
			return
		case c.delivered && r == nil:
			q.violation(p, "child-end-lost", "%s: the end of its child %s (%s) never became the result of call %s", p.key, c.key, c.status, id)
			return
		case c.delivered && c.status == session.StatusCompleted && r.kind != session.KindToolResult,
			c.delivered && c.status != session.StatusCompleted && (r.kind != session.KindError || r.origin != "subagent" || !strings.Contains(r.text, string(c.status))):
			q.violation(p, "child-end-wrong", "%s: its child %s ended %s, and call %s got %s from %q: %s", p.key, c.key, c.status, id, r.kind, r.origin, r.text)
			return
		}
	}
}

// undelivered returns, while a child the reference knows has ended in
// the store and its parent, not ended, has a delegate call of it without
// a result, what that is: its delivery (or, lost, the parent's periodic
// check of its children) is still to come; the same while a child has
// not ended and its parent has (its cancel, or, lost, the child's
// periodic check of its parent, is still to come).
func (q *rpSeq) undelivered(ctx context.Context, status map[string]session.Status) string {
	for _, c := range q.sessions {
		// A child whose parent ended is cancelled by that end (or, its
		// follow-up lost, by its own periodic check of its parent).
		if c.parent != nil && !c.givenUp && status[c.parent.id].Terminal() && !status[c.id].Terminal() && status[c.id] != "" {
			return fmt.Sprintf("%s (%s) is %s, its parent %s ended %s", c.key, c.id, status[c.id], c.parent.key, status[c.parent.id])
		}
	}
	for _, p := range q.sessions {
		if p.parent != nil || p.givenUp || status[p.id].Terminal() {
			continue
		}
		var call map[string]string
		var results map[string]*mtResult
		for _, c := range q.sessions {
			if c.parent != p || c.stray || !status[c.id].Terminal() {
				continue
			}
			if call == nil {
				call, results = q.delegates(ctx, q.replicas[0], p)
			}
			if id, ok := call[c.key]; ok && results[id] == nil {
				return fmt.Sprintf("%s (%s) waits for the end of %s (%s), which is %s", p.key, status[p.id], c.key, c.id, status[c.id])
			}
			// Given it after the list was read: the parent read
			// again says whether it moved on since (the list is
			// stale then).
			got, err := q.replicas[0].st.GetSession(ctx, p.id)
			if err != nil {
				q.t.Fatal(err)
			}
			if session.Status(got.Status) != status[p.id] || got.Runnable {
				return fmt.Sprintf("%s was given the end of %s since the list was read", p.key, c.key)
			}
		}
	}
	return ""
}
