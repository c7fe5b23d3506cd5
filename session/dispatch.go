package session

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/hrns-dev/hrns/internal/retry"
	"github.com/hrns-dev/hrns/store"
)

// Claiming sessions. The dispatcher (one per manager, started by Start)
// claims the sessions that need a worker, up to Options.Workers at once,
// and starts a worker goroutine for each (see work in worker.go); a
// caller's input may claim a session in its own commit instead
// (reserveClaim), in its owner's turn (admitClaim). Sessions claimed
// often without progress (suspects) run one at a time.

// Start starts the workers: from now until ctx is done or [Manager.Stop]
// is called, they claim the sessions that need running (those a stopped
// or crashed process left running included) and run them. Cancelling ctx
// stops them as Stop does, without waiting; call Stop to wait. Start
// returns an error if the manager was started before.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done != nil {
		return errors.New("session: manager already started")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	m.cancel = cancel
	m.done = make(chan struct{})
	m.workCtx = ctx
	go m.dispatch(ctx)
	return nil
}

// Stop stops the workers and waits for them until ctx is done. A running
// session stops where it is and stays runnable: its last checkpoint is in
// the store, and the next manager to start resumes it (a model request in
// flight is sent again). Stop is idempotent.
func (m *Manager) Stop(ctx context.Context) error {
	m.mu.Lock()
	cancel, done := m.cancel, m.done
	m.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel(errShutdown)
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// dispatch claims sessions and runs each in a worker goroutine. It sleeps
// until the store announces work, a wake-up time comes, or a worker frees
// up: no polling loop. Wake-up times include the expiry of leases other
// replicas hold on sessions that need a worker, so that a replica that
// dies has its sessions taken over once their leases expire. With a store
// that keeps replicas, it also records this replica's heartbeat.
func (m *Manager) dispatch(ctx context.Context) {
	defer close(m.done)
	defer func() {
		m.mu.Lock()
		m.stopping = true // no worker starts after this
		m.mu.Unlock()
		m.wg.Wait()
	}()
	if rs, ok := m.st.(store.Replicas); ok {
		m.wg.Go(func() {
			for {
				p := protect(func() { m.heartbeat(ctx, rs) })
				if p == nil || ctx.Err() != nil {
					return
				}
				m.log.Error("replica heartbeat panicked; restarting it", "panic", fmt.Sprint(p.value), "stack", string(p.stack))
				retry.Sleep(ctx, m.opts.LeaseTTL/3)
			}
		})
	}
	work, unsubscribe := m.st.Subscribe(store.WorkTopic)
	defer unsubscribe()
	for ctx.Err() == nil {
		if p := protect(func() { m.dispatchOnce(ctx, work) }); p != nil {
			m.log.Error("session dispatcher panicked; going on", "panic", fmt.Sprint(p.value), "stack", string(p.stack))
			retry.Sleep(ctx, time.Second)
		}
	}
}

// dispatchOnce claims the sessions it can run and starts their workers,
// then sleeps until there may be more.
func (m *Manager) dispatchOnce(ctx context.Context, work <-chan struct{}) {
	m.mu.Lock()
	free := m.opts.Workers - m.workers() - m.reserved
	m.dispatcherWaitsForWorker = free <= 0
	if free <= 0 {
		// It cannot look: sessions may wait meanwhile (see admitClaim).
		m.setBacklog()
	}
	backlogSet := m.backlogSet
	if free > 1 && !m.backlog {
		// A pool with room: the claim is for half the free workers
		// (rounded up), and the callers' inputs committed while it is
		// in flight claim their sessions in their commits on the
		// others, as when no claim is. A claim that takes all it asked
		// for sets the backlog, and the next is for every free worker.
		free = (free + 1) / 2
	}
	if free > 0 {
		// The claim's workers are reserved while it is in flight, so
		// that a caller's input committed meanwhile (reserveClaim) does
		// not take one of them too: this process would then run more
		// than Workers sessions. What the claim does not fill is given
		// back once it answers.
		m.reserved += free
	}
	m.mu.Unlock()
	var wake <-chan time.Time
	if free > 0 {
		reserved := true
		unreserve := func() { // m.mu held
			if reserved {
				reserved = false
				m.reserved -= free
			}
		}
		defer func() { // a panic in the claim gives them back too
			m.mu.Lock()
			unreserve()
			m.mu.Unlock()
		}()
		claimed, again, err := m.claim(ctx, free)
		if err != nil {
			m.mu.Lock()
			unreserve()
			m.mu.Unlock()
			if ctx.Err() == nil {
				m.log.Error("claiming sessions", "err", err)
				retry.Sleep(ctx, time.Second)
			}
			return
		}
		if ctx.Err() != nil {
			// The manager stopped during the claim: what it took is
			// given back for the next manager to run at once.
			m.release(claimed)
			return
		}
		m.mu.Lock()
		unreserve()
		for _, s := range claimed {
			m.startWorker(ctx, s, nil)
		}
		switch {
		case len(claimed) == free || again:
			m.setBacklog() // there may be more
		case m.backlogSet == backlogSet:
			// It took every session that needed a worker when it looked;
			// one made runnable since is announced, or was set so.
			m.backlog = false
		}
		// A crash suspect running here keeps the others waiting (see claim):
		// its end is worth claiming again.
		m.dispatcherWaitsForWorker = m.crashSuspect != ""
		m.mu.Unlock()
		if len(claimed) == free || again {
			return // there may be more
		}
		next, err := m.st.NextWake(ctx, time.Now())
		if err != nil && ctx.Err() == nil {
			m.log.Error("reading wake-up times", "err", err)
			next = time.Now().Add(time.Second)
		}
		// Look again within a lease TTL in any case: a session claimed
		// in the commit of a caller's input (or at its creation) by a
		// replica that died since is announced to no one, and its lease
		// expiry is in no wake-up time computed before; this bounds its
		// takeover to two TTLs.
		if limit := time.Now().Add(m.opts.LeaseTTL); next.IsZero() || next.After(limit) {
			next = limit
		}
		timer := time.NewTimer(max(time.Until(next), time.Millisecond))
		defer timer.Stop()
		wake = timer.C
	}
	select {
	case <-ctx.Done():
	case <-work:
	case <-wake:
	case <-m.freed:
	}
}

// startWorker runs the claimed session s in a worker goroutine (m.mu
// held, m.stopping false). st, when not nil, is the state of s, which the
// worker then does not decode again (see handOver); nothing else may use
// it. It reports whether it started one.
//
// It starts none while a worker here still holds the session's lease:
// the store knows a lease by its process (Options' owner), so a claim
// this process makes of a session whose lease lapsed while its own
// worker ran it (renewals held up by a loaded machine or a slow
// database) succeeds, and so does that worker's next renewal. Two
// workers would then run the session under one lease, each sending its
// step to the model and committing it. The worker that runs goes on
// under the lease the claim took, and once it gives the lease up
// (leaseLeft) the claim is run, if the lease is still this process's
// (see takeBack): a caller's input can claim a session between the
// commit that gives the lease up and the moment this process learns of
// it.
func (m *Manager) startWorker(ctx context.Context, s *store.Session, st *state) bool {
	if m.holding[s.ID] > 0 {
		m.claimedAgain[s.ID] = s.Owner
		return false
	}
	if s.Attempts > crashSuspectAfter {
		m.crashSuspect = s.ID
	}
	m.launch(ctx, s, s.Owner, st, false)
	return true
}

// launch starts a worker of s, a session of owner (m.mu held); again: s
// is only the session's id, claimed again while a worker here held it
// (see startWorker).
func (m *Manager) launch(ctx context.Context, s *store.Session, owner string, st *state, again bool) {
	wctx, cancel := context.WithCancelCause(ctx)
	m.running[s.ID]++
	m.holding[s.ID]++
	m.ownerWorkers[owner]++
	h := &leaseChange{}
	job := func() { m.work(wctx, cancel, s, owner, st, h, again) }
	select {
	case m.idleWorkers <- job:
	default:
		m.workerGoroutines++
		m.wg.Go(func() { m.worker(ctx, job) })
	}
}

// workerIdle is how long a worker's goroutine waits for the next session
// to run once it has run one (Manager.workerIdle: tests change it).
const workerIdle = 50 * time.Millisecond

// worker runs job, then the jobs startWorker hands it (m.idleWorkers)
// until none comes for workerIdle or ctx is done: a waiting session
// still holds no goroutine, and an idle manager none but its own. A worker's goroutine
// is kept so for its stack: a new goroutine's grows, by copies, to the
// size running a session takes (JSON, the loop, SQLite), which cost
// about 6 % of a turn's CPU.
func (m *Manager) worker(ctx context.Context, job func()) {
	idle := time.NewTimer(m.workerIdle)
	defer idle.Stop()
	for {
		job()
		idle.Reset(m.workerIdle)
		select {
		case job = <-m.idleWorkers:
		case <-idle.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// reserveClaim reserves a worker for the session a caller's input is
// about to change and returns the update options that claim it in the
// same commit (see [store.UpdateOptions.Claim]): the process that
// receives a tool result or a message runs the session it made runnable
// at once, without waking its dispatcher or a claim of its own. It
// returns nil, and reserves nothing, when no worker is free or the
// manager is not running. Sessions claimed often without progress are
// left to the dispatcher, which runs them one at a time. The commit
// claims only in its owner's turn (admitClaim), which it learns once it
// has the session. Every non-nil return must be followed by runClaimed.
//
// The claim carries a token of its own, as the dispatcher's do (see
// claim): a commit that claims may answer an error after it committed
// (the connection broke while its answer was on its way), leaving the
// session leased to this process, which does not know it, until the
// lease lapses; it would then be claimed again with another attempt
// counted. runClaimed asks the store what the claim took instead.
func (m *Manager) reserveClaim() *store.UpdateOptions {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.workCtx == nil || m.stopping {
		return nil
	}
	if m.opts.Workers-m.workers()-m.reserved <= 0 {
		// The input's session, if it makes it runnable, waits for the
		// dispatcher.
		m.setBacklog()
		return nil
	}
	m.reserved++
	return &store.UpdateOptions{Claim: &store.ClaimParams{Owner: m.owner, Token: rand.Text(), Now: time.Now(), TTL: m.opts.LeaseTTL, BelowAttempts: crashSuspectAfter}}
}

// runClaimed ends a reservation of reserveClaim: it runs s, as committed
// with opts, when h says the commit claimed it, and frees the reserved
// worker otherwise. st, when not nil, is the state the commit encoded
// into s, handed to the worker (see handOver); the caller must not use it
// afterwards. When the commit that claims answered an error (h.lost), the
// reservation is kept while recoverInput learns what it took.
func (m *Manager) runClaimed(opts *store.UpdateOptions, s *store.Session, st *state, h *leaseChange) {
	if opts == nil {
		return
	}
	m.mu.Lock()
	if h.lost != nil && !h.claimed && !m.stopping {
		m.recoverInput(opts.Claim, h)
		m.mu.Unlock()
		return
	}
	m.reserved--
	m.unadmit(h)
	if h.claimed && !m.stopping {
		if !m.startWorker(m.workCtx, s, st) {
			m.slotFreed()
		}
		m.mu.Unlock()
		return
	}
	m.slotFreed()
	m.mu.Unlock()
	if h.claimed {
		// The manager stops: the next one to start claims it.
		m.release([]*store.Session{s})
	}
}

// recoverInput asks the store, in a goroutine of its own, what the claim
// of p took, its commit (a caller's input, or a creation: h) having
// answered an error, and runs it on the worker the claim reserved (m.mu
// held, m.stopping false; the reservation ends there). Its calls are
// recoverClaim's (recoverCreated's for a creation), cut stopGrace after
// the manager stops; when they all fail, what the claim took, if
// anything, waits for its lease to lapse. A claim of a caller's input
// took one session or none.
func (m *Manager) recoverInput(p *store.ClaimParams, h *leaseChange) {
	ctx := m.workCtx
	m.wg.Go(func() {
		gctx, cancel := retry.Grace(ctx, stopGrace)
		defer cancel()
		var got []*store.Session
		var err error
		if h.created != "" {
			got, err = m.recoverCreated(gctx, h.created, h.lost)
		} else {
			got, err = m.recoverClaim(gctx, p, h.lost)
		}
		if err != nil {
			m.log.Error("claiming a session in a caller's input", "err", err)
		}
		m.mu.Lock()
		m.reserved--
		m.unadmit(h)
		if len(got) > 0 && !m.stopping {
			if !m.startWorker(ctx, got[0], nil) {
				m.slotFreed()
			}
			m.mu.Unlock()
			return
		}
		m.slotFreed()
		m.mu.Unlock()
		if len(got) > 0 {
			m.release(got) // the manager stops
		}
	})
}

// recoverCreated is recoverClaim for a creation that claimed its session
// (id) and answered createErr: the session, if the creation committed, is
// found by its id, which this creation chose, and is this process's while
// its lease (renewed here) is.
func (m *Manager) recoverCreated(ctx context.Context, id string, createErr error) ([]*store.Session, error) {
	var got *store.Session
	policy := retry.Policy{Tries: claimRecoveryTries, Bound: m.opts.LeaseTTL / 4, Pause: m.opts.LeaseTTL / 10}
	err, earlier := retry.Do(ctx, policy, func(ctx context.Context) error {
		if err := m.st.Renew(ctx, id, m.owner, time.Now().Add(m.opts.LeaseTTL)); err != nil {
			return err
		}
		s, err := m.st.GetSession(ctx, id)
		got = s
		return err
	}, store.ErrNotFound, store.ErrLeaseLost)
	switch {
	case errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrLeaseLost):
		return nil, nil // not created, or not this process's
	case err != nil:
		return nil, fmt.Errorf("a creation answered an error and whether it took its session is unknown (if it did, the session runs when its lease lapses): %w", errors.Join(createErr, earlier, err))
	}
	m.log.Warn("a creation answered an error after it committed; its session runs", "err", createErr, "session", id)
	return []*store.Session{got}, nil
}

// slotFreed tells the dispatcher that a worker is free again, if it waits
// for one (m.mu held): when it last looked, every worker was busy or a
// crash suspect ran, or sessions may wait that it has not claimed
// (m.backlog). Otherwise it has claimed all there was, and only new work
// (announced on store.WorkTopic) or a wake-up time gives it more to do.
func (m *Manager) slotFreed() {
	if !m.dispatcherWaitsForWorker && !m.backlog {
		return
	}
	m.dispatcherWaitsForWorker = false
	select {
	case m.freed <- struct{}{}:
	default:
	}
}

// setBacklog records that sessions may need a worker that the
// dispatcher has not claimed (m.mu held): it could not look (every worker
// was busy), its claim took as many as it could, or a caller's input
// found no worker free. Its next claim that takes fewer sessions than it
// could clears it, unless it was set again meanwhile.
func (m *Manager) setBacklog() {
	m.backlog = true
	m.backlogSet++
}

// admitClaim decides whether the commit of a caller's input (or a
// creation) that made a session of owner runnable, on a worker reserved
// by reserveClaim, claims the session, and records in h that it does.
// The dispatcher's claims are fair across owners (see store.Store.Claim);
// a claim in an input's commit ranks nothing, so that one owner whose
// sessions keep making themselves runnable (a client-side tool loop
// posting each result as soon as its session waits, or creations) would
// keep every worker it frees, and the sessions of other owners that need
// the dispatcher (created or woken while the pool was full) would wait
// behind it. So while sessions may wait unclaimed (m.backlog), an input
// claims only if its owner holds fewer of this process's workers than
// its fair share, Workers over the owners holding workers here plus one
// (an owner whose sessions wait, which the process does not know),
// rounded down: the owners below their share together leave at least a
// worker to the dispatcher, whose claim gives it to the owner running
// fewest. Otherwise the commit leaves the session runnable, which wakes
// the dispatcher, and the reserved worker is freed for it. With no
// backlog (a pool with room, the common case) every input claims, as
// before. A claim admitted counts as a worker of its owner
// (m.ownerWorkers) until runClaimed ends it, so that concurrent inputs
// see it.
func (m *Manager) admitClaim(owner string, h *leaseChange) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h.admitted {
		return true // decided at an earlier try of the same commit
	}
	if m.backlog {
		held := m.ownerWorkers[owner]
		owners := len(m.ownerWorkers) + 1
		if held == 0 {
			owners++
		}
		if held >= m.opts.Workers/owners {
			return false
		}
	}
	m.ownerWorkers[owner]++
	h.admitted, h.owner = true, owner
	return true
}

// unadmit ends the count of a claim admitClaim admitted (m.mu held).
func (m *Manager) unadmit(h *leaseChange) {
	if !h.admitted {
		return
	}
	h.admitted = false
	m.ownerLeft(h.owner)
}

// ownerLeft counts one worker (or admitted claim) of owner less (m.mu
// held).
func (m *Manager) ownerLeft(owner string) {
	if m.ownerWorkers[owner]--; m.ownerWorkers[owner] <= 0 {
		delete(m.ownerWorkers, owner)
	}
}

// leaseLeft records that a worker of session id gave its lease up (m.mu
// held): in its last commit, or when it returned. When no worker here
// holds the lease any more and the session was claimed again meanwhile
// (see startWorker), a worker runs it after checking that the lease is
// still this process's.
func (m *Manager) leaseLeft(id string) {
	if m.holding[id]--; m.holding[id] > 0 {
		return
	}
	delete(m.holding, id)
	owner, ok := m.claimedAgain[id]
	if !ok {
		return
	}
	delete(m.claimedAgain, id)
	if m.stopping || m.workCtx == nil || m.workCtx.Err() != nil {
		return // the lease was given up, or it expires
	}
	m.launch(m.workCtx, &store.Session{ID: id}, owner, nil, true)
}

// crashSuspectAfter is the number of claims without progress after which a
// session is a crash suspect: it was running when its worker died or failed,
// twice in a row. A replica runs one crash suspect at a time, so that a session
// that takes the process down (each time, the attempts of the sessions
// running with it count too) brings down few others: they progress, run
// alone or with sessions that are not suspects, and are suspects no more.
const crashSuspectAfter = 2

// claim claims up to free sessions: those claimed fewer than crashSuspectAfter
// times without progress, and one more, the oldest, when no crash suspect runs
// here.
//
// The claim is not cut by Stop (ctx) at once: a claim cancelled after
// its transaction committed would leave its sessions leased to a stopped
// replica until the lease expires. It is bounded by half a lease TTL, and
// by stopGrace once ctx ends; the caller gives back what it took if ctx
// ended meanwhile.
//
// A claim may commit and still answer an error: its bound passed, or the
// database's connection broke, while the commit's answer was on its way.
// Its sessions are then leased to this process, which does not know it:
// left so, their leases lapse and they are claimed again, another
// attempt counted as if a worker had died running them, so that under a
// slow database healthy sessions reach Options.MaxAttempts and are given
// up. So each claim has a token of its own, written with its leases, and
// after an error claim asks the store what the claim took
// (recoverClaim) and returns that as the claim's result.
func (m *Manager) claim(ctx context.Context, free int) (claimed []*store.Session, again bool, err error) {
	gctx, gcancel := retry.Grace(ctx, stopGrace)
	defer gcancel()
	cctx, cancel := context.WithTimeout(gctx, m.opts.LeaseTTL/2)
	defer cancel()
	p := &store.ClaimParams{Owner: m.owner, Token: rand.Text(), Now: time.Now(), TTL: m.opts.LeaseTTL, Limit: free, BelowAttempts: crashSuspectAfter}
	claimed, err = m.st.Claim(cctx, p)
	if err != nil {
		got, rerr := m.recoverClaim(gctx, p, err)
		if rerr != nil {
			return nil, false, rerr
		}
		if len(got) == 0 {
			return nil, false, err // it took nothing: an error as any
		}
		// Its bound has passed: the crash suspect's claim is left to
		// the next look, at once.
		return got, true, nil
	}
	if len(claimed) == free {
		return claimed, false, nil
	}
	m.mu.Lock()
	busy := m.crashSuspect != ""
	m.mu.Unlock()
	if busy {
		return claimed, false, nil
	}
	p.Now, p.Limit, p.BelowAttempts = time.Now(), 1, 0
	more, err := m.st.Claim(cctx, p)
	if err != nil {
		// Both claims' sessions carry the token: what the store says
		// they took includes those the first returned.
		got, rerr := m.recoverClaim(gctx, p, err)
		switch {
		case rerr != nil:
			m.log.Error("claiming sessions", "err", rerr) // the others run
		case len(got) == len(claimed):
			m.log.Error("claiming sessions", "err", err) // it took nothing more
		default:
			claimed = got
		}
		return claimed, true, nil
	}
	return append(claimed, more...), false, nil
}

// claimRecoveryTries bounds the calls recoverClaim makes.
const claimRecoveryTries = 3

// stopGrace bounds what the manager still waits for of the store once it
// stops: the dispatcher's claim in flight and what it does to learn what
// that claim took (see claim), the leases it gives back, the worker's
// releases and the replica's record. A store that does not answer
// within it leaves what it took leased until the leases lapse, to be
// taken over then, as after a crash; a store that answers gets its
// sessions back at once. Stop's wait thus does not grow with the lease
// TTL (it was about 1.45 of one, 22 s with the default, when the store
// did not answer: TestStopBoundedWhenStoreDoesNotAnswer).
const stopGrace = time.Second

// recoverClaim returns the sessions the claim of p took, claimErr being
// the error its call answered: it asks the store (RecoverClaim, which
// also extends their leases) up to claimRecoveryTries times, each call
// bounded by a quarter of a lease TTL and a tenth of one between them
// (all within a lease TTL), on ctx, which Stop does not cut at once (see
// claim): the caller gives back what it took if the manager stopped
// meanwhile. When every call fails it returns claimErr and the recovery
// errors: what the claim took, if anything, is left to its leases'
// lapse, and is claimed again then, its attempt counted. Otherwise it
// returns what the store says the claim took, nothing when the claim
// did not commit.
func (m *Manager) recoverClaim(ctx context.Context, p *store.ClaimParams, claimErr error) ([]*store.Session, error) {
	var got []*store.Session
	policy := retry.Policy{Tries: claimRecoveryTries, Bound: m.opts.LeaseTTL / 4, Pause: m.opts.LeaseTTL / 10}
	err, earlier := retry.Do(ctx, policy, func(ctx context.Context) (err error) {
		got, err = m.st.RecoverClaim(ctx, &store.ClaimParams{Owner: p.Owner, Token: p.Token, Now: time.Now(), TTL: m.opts.LeaseTTL})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("a claim answered an error and what it took is unknown (its sessions, if any, run when their leases lapse): %w", errors.Join(claimErr, earlier, err))
	}
	if len(got) > 0 {
		m.log.Warn("a claim answered an error after it committed; its sessions run", "err", claimErr, "sessions", len(got))
	}
	return got, nil
}

// release gives back the leases of sessions claimed but not run, as the
// manager stops (within stopGrace).
func (m *Manager) release(claimed []*store.Session) {
	ctx, cancel := context.WithTimeout(context.Background(), stopGrace)
	defer cancel()
	for _, s := range claimed {
		if err := m.st.Release(ctx, s.ID, m.owner); err != nil {
			m.log.Warn("releasing session", "session", s.ID, "err", err)
		}
	}
}

// workers counts the workers running here (m.mu held).
func (m *Manager) workers() int {
	n := 0
	for _, c := range m.running {
		n += c
	}
	return n
}
