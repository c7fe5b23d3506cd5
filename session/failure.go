package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/store"
)

// What goes wrong while a worker runs a session stays with that session.
// The worker runs it through drive, which recovers a panic of the run (or
// of the goroutine that renews its lease) and fails the session alone;
// the other sessions, and the process, go on. A failure that kills the
// process instead (a fatal runtime error, the OOM killer, kill -9) cannot
// be caught: the store counts the claims of a session since its last
// progress (store.Session.Attempts), and drive fails a session claimed
// more than Options.MaxAttempts times in a row instead of running it. The
// dispatcher runs one session claimed often without progress at a time
// (see crashSuspectAfter), so that the sessions running with a poison one are
// not failed with it.

// A panicError is a panic recovered at the session boundary.
type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string { return fmt.Sprintf("panic: %v", p.value) }

// protect runs fn and returns the panic it raised, if any.
func protect(fn func()) (p *panicError) {
	defer func() {
		if v := recover(); v != nil {
			p = &panicError{value: v, stack: debug.Stack()}
		}
	}()
	fn()
	return nil
}

// A storeError is an error of the store while reading or committing a
// session: the database may be unreachable for a moment, and the session
// itself may be fine.
type storeError struct{ err error }

func (e *storeError) Error() string { return e.err.Error() }
func (e *storeError) Unwrap() error { return e.err }

// How a worker leaves a session's lease when it stops (see drive).
type leaseEnd int

const (
	// leaseToRelease: the worker stopped cleanly; it releases the lease.
	leaseToRelease leaseEnd = iota
	// leaseReleasedByCommit: the worker's last commit gave the lease up.
	leaseReleasedByCommit
	// leaseLeftToExpire: after an error of the store (or a panic of the worker
	// itself) the lease is left to expire, and the session runs again
	// then.
	leaseLeftToExpire
	// leaseNotHeld: the worker never held the lease (see takeBack):
	// nothing to release or to wait for.
	leaseNotHeld
)

// drive runs a claimed session until it waits or ends, and fails it when
// it was claimed too often without progress, when running it panics, or
// when it fails with an error that is not the store's. It says how the
// worker leaves the lease (resetting the attempts when it releases it):
// after an error of the store it keeps it, and it expires: the session
// is claimed again a lease TTL later, its attempt counted.
func (m *Manager) drive(ctx context.Context, cancel context.CancelCauseFunc, s *store.Session, st *state, h *leaseChange) leaseEnd {
	if s.Attempts > m.opts.MaxAttempts {
		n := s.Attempts - 1
		m.log.Error("giving up on a session: every attempt to run it failed", "session", s.ID, "attempts", n)
		times := "once (the server crashed or hit an internal error)"
		if n != 1 {
			times = fmt.Sprintf("%d times in a row (the server crashed or hit an internal error each time)", n)
		}
		if m.failInternal(ctx, s.ID, runOf(s), "internal error: running the session failed "+times+"; it is not retried") {
			return leaseReleasedByCommit
		}
		return leaseToRelease
	}
	// The watch subscribes before the run starts: a caller's change
	// (cancel, a message) committed while the run's first step works
	// must reach it, and the watch's goroutine may start late.
	notify, unsubscribe := m.st.Subscribe(s.ID)
	var run int64
	if st != nil {
		run = st.Run // as decoded (see handOver)
	} else {
		run = runOf(s)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		defer unsubscribe()
		if m.beforeWatch != nil {
			m.beforeWatch(s.ID)
		}
		if p := protect(func() { m.watch(ctx, cancel, s.ID, run, s.Version, notify) }); p != nil {
			cancel(p)
		}
	})
	var err error
	if p := protect(func() {
		if m.beforeRun != nil {
			m.beforeRun(s.ID)
		}
		err = m.runSession(ctx, s, st, h)
	}); p != nil {
		err = p
	}
	stopped := ctx.Err() != nil // shutdown, lease lost, cancelled by the caller
	cancel(nil)
	wg.Wait()
	if p, ok := errors.AsType[*panicError](context.Cause(ctx)); ok {
		err = p
	}
	if errors.Is(context.Cause(ctx), errLeaseLost) || errors.Is(err, errLeaseLost) || errors.Is(err, store.ErrLeaseLost) {
		// No failure, but a run cut where it was, silently until this
		// line: its lease lapsed before a renewal (a loaded machine, a
		// slow store) or another replica holds it. It runs again once
		// claimed, by whoever holds it.
		m.log.Warn("lost the lease on a running session; its run stops where it is", "session", s.ID, "attempt", s.Attempts)
	}
	var p *panicError
	failed := false // failInternal's commit gave the lease up
	switch {
	case err == nil:
	case errors.As(err, &p):
		m.log.Error("running a session panicked", "session", s.ID, "panic", fmt.Sprint(p.value), "stack", string(p.stack))
		failed = m.failInternal(ctx, s.ID, runOf(s), fmt.Sprintf("internal error: running the session panicked: %v", p.value))
	case stopped || errors.Is(err, errStopped) || errors.Is(err, errLeaseLost) || errors.Is(err, store.ErrLeaseLost):
		// A shutdown, or someone else ended the session or holds it now.
	case errors.As(err, new(*storeError)):
		m.log.Error("running a session: the store failed; the session is retried when its lease expires", "session", s.ID, "err", err, "attempt", s.Attempts)
		return leaseLeftToExpire
	default:
		m.log.Error("running a session failed", "session", s.ID, "err", err)
		failed = m.failInternal(ctx, s.ID, runOf(s), "internal error: "+tenantError(err))
	}
	if h.released || failed {
		// Released in a commit: releasing it again could release the
		// claim a caller's input made for this process since (the same
		// lease owner), and leave the session to a second worker.
		return leaseReleasedByCommit
	}
	return leaseToRelease
}

// failInternal ends the session failed with error_code internal and an
// AgentErrorEvent saying why, and releases its lease, if the worker still
// holds it. The session's state need not decode: a session whose stored
// state is corrupt fails too, and then reads as one without steps. It
// commits through the one commit path (see commit.go), so that the
// owner's queued sessions start and a parent learns of its child's end
// as after any other ending.
//
// It fails only the run it was given (run, the worker's run generation,
// as runOf reads it): a session whose run was ended since (Cancel, then
// a message that started the next run, perhaps already running in
// another worker of this process) is not the worker's to fail.
//
// It reports whether it gave the lease up in its commit, or no longer
// holds it: then the worker must not release it again, as a caller's input may have claimed the session for this
// process (the same lease owner) since.
func (m *Manager) failInternal(ctx context.Context, id string, run int64, msg string) (released bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	c := &change{opts: &store.UpdateOptions{Lease: m.owner, Release: true}, corrupt: true}
	ended := false // ended already: nothing is written, the lease is still held
	fenced := false
	_, _, err := m.commit(ctx, id, c, func(s *store.Session, st *state) ([]store.Event, error) {
		// runOf, not st.Run: a state that does not decode reads as an
		// empty one, and runOf reads it as the worker did.
		ended = st.Phase == phaseDone
		if ended {
			return nil, errNoChange
		}
		if fenced = runOf(s) != run; fenced {
			return nil, errNoChange
		}
		return finish(s, st, outcomeFailed(CodeInternal, msg)), nil
	})
	switch {
	case err == nil && fenced:
		// Nothing was written: the worker leaves the lease as after any
		// run that someone else ended (errStopped).
		m.log.Warn("not failing a session: the run that failed was ended, and another runs", "session", id, "run", run)
		return false
	case err == nil:
		return !ended
	case errors.Is(err, store.ErrLeaseLost), errors.Is(err, store.ErrNotFound):
		return true
	}
	m.log.Error("recording the failure of a session", "session", id, "err", err)
	return false
}

// read returns the session as stored and its state. An error of the store
// is a *storeError. An ended session whose state does not decode (it
// failed for that) reads as one without steps; the state of an ended
// session is always in phaseDone.
func (m *Manager) read(ctx context.Context, id string) (*store.Session, *state, error) {
	s, err := m.st.GetSession(ctx, id)
	if err != nil {
		return nil, nil, &storeError{err}
	}
	st, err := stateOf(s)
	return s, st, err
}

// viewState decodes the state of s for a reader (a view, a long-poll),
// who needs the stored fields more than the steps and usage that the
// state holds: a state that does not decode reads as one without them.
func viewState(s *store.Session) *state {
	st, err := decodeState(s)
	if err != nil {
		return &state{}
	}
	return st
}

// usageState decodes, of the state of s, only what its metrics are made
// of (steps and usage), for a long-poll's answer: skipping the rest (the
// agent's spec, the checkpoint) costs much less than decoding it. A state
// that does not decode reads as one without them, as in viewState.
func usageState(s *store.Session) *state {
	var u struct {
		Steps int                  `json:"steps"`
		Usage map[string]llm.Usage `json:"usage,omitempty"`
	}
	if json.Unmarshal(s.State, &u) != nil {
		return &state{}
	}
	return &state{Steps: u.Steps, Usage: u.Usage}
}

// stateOf decodes the state of s, as [Manager.read] does.
func stateOf(s *store.Session) (*state, error) {
	st, err := decodeState(s)
	if !Status(s.Status).Terminal() {
		return st, err
	}
	if err != nil {
		st = &state{}
	}
	st.Phase = phaseDone
	return st, nil
}
