package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hrns-dev/hrns/store"
)

// Why a worker stops running a session before it waits or ends.
var (
	errShutdown     = errors.New("session manager stopped")
	errStopped      = errors.New("session ended")
	errLeaseLost    = errors.New("lease on the session lost")
	errHardDeadline = errors.New("max_time_s reached and the final answer took too long")
	// errYield ends a segment whose run yielded between steps (see
	// segment.beforeTurn), so that the worker applies the caller's input
	// (messages, pause, force_answer) and goes on from the checkpoint.
	errYield = errors.New("yield to the caller's input")
)

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
				sleep(ctx, m.opts.LeaseTTL/3)
			}
		})
	}
	work, unsubscribe := m.st.Subscribe(store.WorkTopic)
	defer unsubscribe()
	for ctx.Err() == nil {
		if p := protect(func() { m.dispatchOnce(ctx, work) }); p != nil {
			m.log.Error("session dispatcher panicked; going on", "panic", fmt.Sprint(p.value), "stack", string(p.stack))
			sleep(ctx, time.Second)
		}
	}
}

// dispatchOnce claims the sessions it can run and starts their workers,
// then sleeps until there may be more.
func (m *Manager) dispatchOnce(ctx context.Context, work <-chan struct{}) {
	m.mu.Lock()
	free := m.opts.Workers - m.workers() - m.reserved
	m.wantSlot = free <= 0
	m.mu.Unlock()
	var wake <-chan time.Time
	if free > 0 {
		claimed, err := m.claim(ctx, free)
		if err != nil {
			if ctx.Err() == nil {
				m.log.Error("claiming sessions", "err", err)
				sleep(ctx, time.Second)
			}
			return
		}
		m.mu.Lock()
		for _, s := range claimed {
			m.startWorker(ctx, s)
		}
		// A suspect running here keeps the others waiting (see claim):
		// its end is worth claiming again.
		m.wantSlot = m.suspect != ""
		m.mu.Unlock()
		if len(claimed) == free {
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
// held, m.stopping false).
func (m *Manager) startWorker(ctx context.Context, s *store.Session) {
	wctx, cancel := context.WithCancelCause(ctx)
	m.running[s.ID]++
	if s.Attempts > suspectAfter {
		m.suspect = s.ID
	}
	m.wg.Go(func() { m.work(wctx, cancel, s) })
}

// reserveClaim reserves a worker for the session a caller's input is
// about to change and returns the update options that claim it in the
// same commit (see [store.UpdateOptions.Claim]): the process that
// receives a tool result or a message runs the session it made runnable
// at once, without waking its dispatcher or a claim of its own. It
// returns nil, and reserves nothing, when no worker is free or the
// manager is not running. Sessions claimed often without progress are
// left to the dispatcher, which runs them one at a time. Every non-nil
// return must be followed by runClaimed.
func (m *Manager) reserveClaim() *store.UpdateOptions {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.workCtx == nil || m.stopping || m.opts.Workers-m.workers()-m.reserved <= 0 {
		return nil
	}
	m.reserved++
	return &store.UpdateOptions{Claim: &store.ClaimParams{Owner: m.owner, Now: time.Now(), TTL: m.opts.LeaseTTL, BelowAttempts: suspectAfter}}
}

// runClaimed ends a reservation of reserveClaim: it runs s, as committed
// with opts, when h says the commit claimed it, and frees the reserved
// worker otherwise.
func (m *Manager) runClaimed(opts *store.UpdateOptions, s *store.Session, h *hold) {
	if opts == nil {
		return
	}
	m.mu.Lock()
	m.reserved--
	if h.claimed && !m.stopping {
		m.startWorker(m.workCtx, s)
		m.mu.Unlock()
		return
	}
	m.slotFreed()
	m.mu.Unlock()
	if h.claimed {
		// The manager stops: the next one to start claims it.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := m.st.Release(ctx, s.ID, m.owner); err != nil {
			m.log.Warn("releasing session", "session", s.ID, "err", err)
		}
	}
}

// slotFreed tells the dispatcher that a worker is free again, if it waits
// for one (m.mu held): when it last looked, every worker was busy or a
// suspect ran. Otherwise it has claimed all there was, and only new work
// (announced on store.WorkTopic) or a wake-up time gives it more to do.
func (m *Manager) slotFreed() {
	if !m.wantSlot {
		return
	}
	m.wantSlot = false
	select {
	case m.freed <- struct{}{}:
	default:
	}
}

// suspectAfter is the number of claims without progress after which a
// session is a suspect: it was running when its worker died or failed,
// twice in a row. A replica runs one suspect at a time, so that a session
// that takes the process down (each time, the attempts of the sessions
// running with it count too) brings down few others: they progress, run
// alone or with sessions that are not suspects, and are suspects no more.
const suspectAfter = 2

// claim claims up to free sessions: those claimed fewer than suspectAfter
// times without progress, and one more, the oldest, when no suspect runs
// here.
func (m *Manager) claim(ctx context.Context, free int) ([]*store.Session, error) {
	p := &store.ClaimParams{Owner: m.owner, Now: time.Now(), TTL: m.opts.LeaseTTL, Limit: free, BelowAttempts: suspectAfter}
	claimed, err := m.st.Claim(ctx, p)
	if err != nil || len(claimed) == free {
		return claimed, err
	}
	m.mu.Lock()
	busy := m.suspect != ""
	m.mu.Unlock()
	if busy {
		return claimed, nil
	}
	p.Now, p.Limit, p.BelowAttempts = time.Now(), 1, 0
	more, err := m.st.Claim(ctx, p)
	if err != nil {
		if len(claimed) == 0 {
			return nil, err
		}
		m.log.Error("claiming sessions", "err", err) // the others run
	}
	return append(claimed, more...), nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// work runs one claimed session until it waits or ends, renewing the lease
// meanwhile (see drive), then releases it.
func (m *Manager) work(ctx context.Context, cancel context.CancelCauseFunc, s *store.Session) {
	id := s.ID
	end := leaseKept
	defer func() {
		m.mu.Lock()
		if m.running[id]--; m.running[id] <= 0 {
			delete(m.running, id)
			if m.suspect == id {
				m.suspect = ""
			}
		}
		if end == leaseKept {
			// The session needs a worker again once the lease expires:
			// the dispatcher learns when, whatever it waits for.
			m.wantSlot = true
		}
		m.slotFreed()
		m.mu.Unlock()
	}()
	if p := protect(func() { end = m.drive(ctx, cancel, s) }); p != nil {
		// drive recovers the run's panics; this one is its own. The
		// lease expires, and the attempts bound the retries.
		m.log.Error("session worker panicked", "session", id, "panic", fmt.Sprint(p.value), "stack", string(p.stack))
		end = leaseKept
	}
	cancel(nil)
	if end != releaseLease {
		return
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer rcancel()
	if err := m.st.Release(rctx, id, m.owner); err != nil && !errors.Is(err, store.ErrNotFound) {
		m.log.Warn("releasing session", "session", id, "err", err)
	}
}

// watch renews the lease of a running session and stops the run when the
// session ends (cancelled by its caller), when its run generation moves
// on (it ended and restarted: Cancel followed at once by a message), or
// when the lease is lost. run is the generation the worker was claimed
// for.
func (m *Manager) watch(ctx context.Context, cancel context.CancelCauseFunc, id string, run int64) {
	notify, unsubscribe := m.st.Subscribe(id)
	defer unsubscribe()
	tick := time.NewTicker(m.opts.LeaseTTL / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			err := m.st.Renew(ctx, id, m.owner, time.Now().Add(m.opts.LeaseTTL))
			if errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrNotFound) {
				cancel(errLeaseLost)
				return
			}
		case <-notify:
			s, err := m.st.GetSession(ctx, id)
			if err == nil && (Status(s.Status).Terminal() || runOf(s) != run) {
				cancel(errStopped)
				return
			}
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

// leased is the update option of a worker's writes.
func (m *Manager) leased() *store.UpdateOptions { return &store.UpdateOptions{Lease: m.owner} }

// A hold records what commits did to a session's lease (see updateFrom).
//
// A worker's last commit gives its lease up in its own transaction when it
// leaves the session needing no worker (waiting for the caller, idle,
// paused or ended: see needsNoWorker), instead of a transaction of its own
// afterwards; released records that it did. From then on the session may
// be claimed again, here or by another replica, at once, and the worker
// writes nothing more: it returns.
//
// A caller's input may claim the session in its commit (see
// reserveClaim); claimed records that it did.
type hold struct {
	released bool
	claimed  bool
}

// needsNoWorker reports whether s, as about to be committed, gives a
// worker nothing to do until someone changes it: it is not runnable and
// has no wake-up time due at now. runSession then has nothing to do
// either: each of its passes returns at once for such a state.
func needsNoWorker(s *store.Session, now time.Time) bool {
	return !s.Runnable && (s.WakeAt.IsZero() || s.WakeAt.After(now))
}

// runSession does what the session needs until it waits or ends: each
// pass reads the session and applies the one transition its state calls
// for (see machine.go), or runs the agent. The first pass starts from
// claimed, the session as its claim returned it, instead of reading it.
// It returns once h is released.
func (m *Manager) runSession(ctx context.Context, claimed *store.Session, h *hold) error {
	id := claimed.ID
	for ctx.Err() == nil && !h.released {
		var s *store.Session
		var st *state
		var err error
		if claimed != nil {
			s, claimed = claimed, nil
			st, err = stateOf(s)
		} else {
			s, st, err = m.read(ctx, id)
		}
		if err != nil {
			return err
		}
		if st.Phase == phaseDone {
			return nil
		}
		now := time.Now()
		switch {
		case !st.Deadline.IsZero() && !now.Before(st.Deadline.Add(m.opts.TimeoutGrace)):
			// The final answer asked for at the deadline never came.
			return m.step(ctx, id, h, func(s *store.Session, st *state) ([]store.Event, bool) {
				return finish(s, st, outcomeTimedOut), true
			})
		case !st.Deadline.IsZero() && !now.Before(st.Deadline) && st.Final != finalTimeout:
			err = m.step(ctx, id, h, func(s *store.Session, st *state) ([]store.Event, bool) {
				if st.Final == finalTimeout {
					return nil, false
				}
				return timeUp(s, st), true
			})
			if err != nil {
				return err
			}
			continue
		}
		switch st.Phase {
		case phaseQueued:
			return nil // started by promote when a slot frees
		case phaseNew:
			err = m.step(ctx, id, h, func(s *store.Session, st *state) ([]store.Event, bool) {
				if st.Phase != phaseNew {
					return nil, false
				}
				return begin(s, st, time.Now().UTC()), true
			})
		case phaseIdle:
			if st.IdleUntil.IsZero() || now.Before(st.IdleUntil) {
				return nil
			}
			return m.step(ctx, id, h, func(s *store.Session, st *state) ([]store.Event, bool) {
				if st.Phase != phaseIdle || time.Now().Before(st.IdleUntil) {
					return nil, false
				}
				return finish(s, st, outcomeFinished), true
			})
		case phaseWait:
			if !st.waitsForChild() || now.Before(st.CheckChildrenAt) {
				return nil
			}
			err = m.checkChildren(ctx, id, st)
		case phaseRun:
			switch {
			case st.Paused:
				return nil
			case st.PauseRequested:
				return m.step(ctx, id, h, func(s *store.Session, st *state) ([]store.Event, bool) {
					if !st.PauseRequested {
						return nil, false
					}
					return st.toPaused(), true
				})
			default:
				err = m.runSegment(ctx, s, st, h)
				if errors.Is(err, errYield) {
					err = nil
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// step commits, under the lease, the transition fn applies to the session
// unless it is done; fn reports false when the transition no longer
// applies to the session as read again (nothing is written then).
func (m *Manager) step(ctx context.Context, id string, h *hold, fn func(s *store.Session, st *state) ([]store.Event, bool)) error {
	_, _, err := m.updateFrom(ctx, id, nil, m.leased(), h, func(s *store.Session, st *state) ([]store.Event, error) {
		if st.Phase == phaseDone {
			return nil, errNoChange
		}
		events, ok := fn(s, st)
		if !ok {
			return nil, errNoChange
		}
		return events, nil
	})
	return err
}

// runOf reads the run generation of the stored state of s (see
// state.Run) without decoding the rest; a state that does not decode
// has generation 0.
func runOf(s *store.Session) int64 {
	var r struct {
		Run int64 `json:"run"`
	}
	json.Unmarshal(s.State, &r)
	return r.Run
}
