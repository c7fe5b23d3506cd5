package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hrns-dev/hrns/internal/retry"
	"github.com/hrns-dev/hrns/store"
)

// Running a session. A worker (work) runs one claimed session until it
// waits or ends: each pass of runSession applies the one transition its
// state calls for (machine.go) or runs the agent (a segment, segment.go).
// Claiming is in dispatch.go, the lease in lease.go, commits in commit.go,
// failures in failure.go.

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

// work runs one claimed session (of owner) until it waits or ends, renewing the lease
// meanwhile (see drive), then releases it. st, when not nil, is the state
// of s as its claim encoded it (see handOver). h records what the
// worker's commits do to the lease. again: the session was claimed again
// while another worker here held it (see startWorker), and s is only its
// id: the worker runs it if the lease is still this process's.
func (m *Manager) work(ctx context.Context, cancel context.CancelCauseFunc, s *store.Session, owner string, st *state, h *leaseChange, again bool) {
	id := s.ID
	end := leaseLeftToExpire
	defer func() {
		m.mu.Lock()
		m.ownerLeft(owner)
		if m.running[id]--; m.running[id] <= 0 {
			delete(m.running, id)
			if m.crashSuspect == id {
				m.crashSuspect = ""
			}
		}
		if !h.left {
			h.left = true
			m.leaseLeft(id)
		}
		if end == leaseLeftToExpire {
			// The session needs a worker again once the lease expires:
			// the dispatcher learns when, whatever it waits for.
			m.dispatcherWaitsForWorker = true
		}
		m.slotFreed()
		m.mu.Unlock()
	}()
	if again {
		if s, end = m.takeBack(ctx, id); s == nil {
			cancel(nil)
			return
		}
	}
	if p := protect(func() { end = m.drive(ctx, cancel, s, st, h) }); p != nil {
		// drive recovers the run's panics; this one is its own. The
		// lease expires, and the attempts bound the retries.
		m.log.Error("session worker panicked", "session", id, "panic", fmt.Sprint(p.value), "stack", string(p.stack))
		end = leaseLeftToExpire
	}
	cancel(nil)
	if end != leaseToRelease {
		return
	}
	// Bounded by 5 s, and by stopGrace once the manager stops: the lease
	// lapses if the store does not answer.
	gctx, gcancel := retry.Grace(m.workCtx, stopGrace)
	defer gcancel()
	rctx, rcancel := context.WithTimeout(gctx, 5*time.Second)
	defer rcancel()
	if err := m.st.Release(rctx, id, m.owner); err != nil && !errors.Is(err, store.ErrNotFound) {
		m.log.Warn("releasing session", "session", id, "err", err)
	}
}

// takeBack reads a session claimed again while another worker here held
// its lease (see startWorker), once that worker gave it up, if the lease
// is still this process's: that worker's last commit, or its release,
// gave up the lease the claim took, unless the claim came after it (a
// caller's input). It returns nil and how the worker leaves the lease
// otherwise.
func (m *Manager) takeBack(ctx context.Context, id string) (*store.Session, leaseEnd) {
	err := m.st.Renew(ctx, id, m.owner, time.Now().Add(m.opts.LeaseTTL))
	if errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrNotFound) {
		return nil, leaseNotHeld
	}
	if err != nil {
		return nil, leaseLeftToExpire
	}
	s, err := m.st.GetSession(ctx, id)
	if err != nil {
		return nil, leaseLeftToExpire
	}
	return s, leaseToRelease
}

// runSession does what the session needs until it waits or ends: each
// pass reads the session and applies the one transition its state calls
// for (see machine.go), or runs the agent. The first pass starts from
// claimed, the session as its claim returned it, instead of reading it,
// and from handed, when not nil, the state its claim encoded (see
// handOver), instead of decoding it. It returns once h is released.
func (m *Manager) runSession(ctx context.Context, claimed *store.Session, handed *state, h *leaseChange) error {
	id := claimed.ID
	for ctx.Err() == nil && !h.released {
		var s *store.Session
		var st *state
		var err error
		if claimed != nil {
			s, claimed = claimed, nil
			if handed != nil {
				st, handed = handed, nil
				if handOverCheck != nil {
					handOverCheck(s, st)
				}
			} else {
				st, err = stateOf(s)
			}
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
			if !st.waitsForChild() && s.ParentID == "" || now.Before(st.CheckChildrenAt) {
				return nil
			}
			err = m.checkChildren(ctx, s, st)
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
func (m *Manager) step(ctx context.Context, id string, h *leaseChange, fn func(s *store.Session, st *state) ([]store.Event, bool)) error {
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
