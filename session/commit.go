package session

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"slices"
	"time"

	"github.com/hrns-dev/hrns/store"
)

// The one commit path. Every change of a session (a caller's input, a
// worker's step or transition, a child's end delivered to its parent, a
// queued session promoted, a failure of the runtime) is committed by
// Manager.commit: it applies the change to the session, writes it with
// its events in one store transaction (the store wakes the session's
// waiters: long-polls, streams, the worker that watches it), and then
// does what follows from it whoever made it: a session that stops being
// active promotes its owner's queued sessions (promote), and a child
// session that ends tells its parent (deliver). No change is written
// around it, so none can skip those: the only other writes are a
// session's creation and the lease's own (Store.Renew, Store.Release).

// errNoChange makes update return without writing.
var errNoChange = errors.New("no change")

// update applies fn to the session as stored and commits the result with
// the events fn returns, retrying from a fresh read when someone else
// committed in between. fn must have no effect but on its arguments.
func (m *Manager) update(ctx context.Context, id string, opts *store.UpdateOptions, fn func(s *store.Session, st *state) ([]store.Event, error)) (*store.Session, *state, error) {
	return m.commit(ctx, id, &change{opts: opts}, fn)
}

// updateFrom is update that starts from cur, the session as this process
// last read or committed it, instead of reading it again (nil: read it).
// The store's version check still guards the commit: when someone else
// committed since, the store answers ErrConflict and update reads the
// session again; when fn decides on cur to write nothing or refuses, the
// decision is made again on the session read from the store. cur is not
// modified.
//
// h, when not nil, records what the commit did to the lease (see leaseChange):
// with opts.Lease (a worker's commit), a commit after which the session
// needs no worker gives the lease up in its own transaction; with
// opts.Claim (a caller's input), the commit may claim the session.
func (m *Manager) updateFrom(ctx context.Context, id string, cur *store.Session, opts *store.UpdateOptions, h *leaseChange, fn func(s *store.Session, st *state) ([]store.Event, error)) (*store.Session, *state, error) {
	return m.commit(ctx, id, &change{cur: cur, opts: opts, lease: h}, fn)
}

// A change says how commit writes: from which copy of the session, with
// which store options, recording what to the lease.
type change struct {
	// cur, opts and hold are updateFrom's.
	cur   *store.Session
	opts  *store.UpdateOptions
	lease *leaseChange
	// curState, when not nil, is the state of cur, as decoding it gives
	// it, which commit may change: it starts from it instead of decoding
	// cur's state (a worker's first commit after the pass that decoded
	// it or was handed it: see segment.curState).
	curState *state
	// keepState: the caller does not use the state commit returns, which
	// commit may then keep (keptStates) when the commit gives the lease
	// up (a worker's last commit of a run).
	keepState bool
	// keepUnclaimed: the caller uses the state commit returns only to
	// hand it to the worker its commit claims (a caller's input), so
	// that commit may keep it when the commit claimed nothing: the
	// session's next input (a message after a pause, the results of a
	// session waiting on several callers) takes it instead of decoding
	// the state again.
	keepUnclaimed bool
	// corrupt lets the change apply to a session whose stored state does
	// not decode (a failure of the runtime ends such a session): fn gets
	// an empty state, whose changes but the phase and the fields of the
	// session are not written; the state stays as stored.
	corrupt bool
}

// commit is the one commit path (see the top of this file).
func (m *Manager) commit(ctx context.Context, id string, c *change, fn func(s *store.Session, st *state) ([]store.Event, error)) (*store.Session, *state, error) {
	cur := c.cur
	for {
		var s *store.Session
		var st *state
		var err error
		fromCur := cur != nil
		if cur != nil {
			cp := *cur
			s, cur = &cp, nil
			if c.curState == nil {
				c.curState = m.kept.take(s)
			}
			if c.curState != nil {
				st, c.curState = c.curState, nil
				if handOverCheck != nil {
					handOverCheck(s, st)
				}
			} else if st, err = stateOf(s); err != nil {
				continue // not as committed: read it
			}
		} else if s, st, err = m.read(ctx, id); err != nil {
			if _, ok := errors.AsType[*storeError](err); ok || !c.corrupt {
				return nil, nil, err
			}
			st = nil // the state does not decode: keep it as stored
		}
		keep := st == nil
		if keep {
			st = &state{}
		}
		wasActive := slices.Contains(activeStatuses, s.Status)
		wasTerminal := Status(s.Status).Terminal()
		events, err := fn(s, st)
		if err != nil && fromCur {
			// Only a commit is checked against the stored version: a
			// decision to write nothing, or a refusal, is made again on
			// the session as stored.
			continue
		}
		if errors.Is(err, errNoChange) {
			return s, st, nil
		}
		if err != nil {
			return nil, nil, err
		}
		st.CheckChildrenAt = time.Time{}
		if st.Phase == phaseWait && (st.waitsForChild() || s.ParentID != "") {
			st.CheckChildrenAt = time.Now().Add(m.childCheck)
		}
		derive(s, st)
		if !keep {
			if s.State, err = json.Marshal(st); err != nil {
				return nil, nil, err
			}
		}
		o := c.opts
		if c.lease != nil && o != nil && o.Lease != "" && !o.Release && needsNoWorker(s, time.Now()) {
			released := *o
			released.Release = true
			o = &released
		}
		if o != nil && o.Claim != nil && s.Runnable && c.lease != nil && !m.admitClaim(s.Owner, c.lease) {
			// Not its turn: the dispatcher claims it (see admitClaim).
			unclaimed := *o
			unclaimed.Claim = nil
			o = &unclaimed
		}
		if o != nil && o.Claim != nil {
			// So that LeaseOwner tells whether this commit claimed it.
			s.LeaseOwner, s.LeaseUntil = "", time.Time{}
		}
		var uo store.UpdateOptions
		if o != nil {
			uo = *o
		}
		o = &uo
		// What the commit's record needs of st is computed before the
		// write: after its sync, only the record's put stands between
		// the commit and the wake-up of the session's long-polls.
		met := m.metrics(st)
		o.Committed = func(s *store.Session, events []store.Event) {
			// Before the session's long-polls are woken: they answer
			// from it.
			m.lastCommits.put(s, events, met)
		}
		err = func() error {
			defer m.commitsInFlight.begin(id)() // even if the store panics
			return m.write(ctx, s, events, o)
		}()
		if err == nil && o.Lease == "" && (o.Claim == nil || s.LeaseOwner != o.Claim.Owner) && m.longPolls.any(id) {
			// The commit woke long-polls of this process and starts no
			// work here (not a worker's, and it claimed nothing): let
			// them answer, from its record, before what follows the
			// commit here (the caches, promote, deliver) and the
			// caller's own answer, which they waited for on one P (see
			// server's yieldToWoken). With more Ps an idle one may take
			// them anyway. A worker's commit, or a claim's, goes on: the
			// model's next request is the worker's, which the server
			// yields to with the long-polls once the claim returns.
			runtime.Gosched()
		}
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			if c.lease != nil && o.Claim != nil {
				c.lease.lost = err // it may have committed (see runClaimed)
			}
			return nil, nil, &storeError{err}
		}
		if c.lease != nil {
			c.lease.released = o.Release
			c.lease.claimed = o.Claim != nil && s.LeaseOwner == o.Claim.Owner
			if o.Release && o.Lease != "" {
				// A worker gave its lease up: a claim this process
				// made meanwhile may run (see startWorker).
				m.mu.Lock()
				if !c.lease.left {
					c.lease.left = true
					m.leaseLeft(id)
				}
				m.mu.Unlock()
			}
		}
		m.committed.put(s)
		m.followUp(ctx, s, wasActive, wasTerminal, keep || len(st.Spec.Subagents) > 0)
		kept := c.keepState && o.Release ||
			c.keepUnclaimed && c.lease != nil && !c.lease.claimed
		if kept && !keep && !Status(s.Status).Terminal() {
			m.kept.put(s, st)
		} else {
			m.kept.drop(id)
		}
		return s, st, nil
	}
}

// write writes the change to the store. A write that is sent is waited for
// to its answer, whatever happens to ctx meanwhile: its outcome must be
// known, or what follows from it (promote, deliver) is skipped although
// it landed. A worker's context is cancelled by its own watcher when it
// sees the session end (see watch), and PostgreSQL notifies the watcher
// of the commit before the committer reads the answer: a worker's last
// commit, written, returned "context canceled", and the owner's queued
// sessions were not promoted nor the parent told. A context already done
// sends nothing, as the stores do; one sent is bounded by the store's own
// limits (its connection's and the database's), not by ctx.
func (m *Manager) write(ctx context.Context, s *store.Session, events []store.Event, o *store.UpdateOptions) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return m.st.UpdateSession(context.WithoutCancel(ctx), s, events, o)
}

// followUp does what follows from a committed change of s, whoever made
// it: a session that stops being active frees a slot of its owner, whose
// queued sessions may start; a child session that ends gives its end to
// its parent; a session that may have children (mayParent: its agent has
// subagents, or its state could not be read) and ends cancels those still
// running, whose answers nothing will read.
func (m *Manager) followUp(ctx context.Context, s *store.Session, wasActive, wasTerminal, mayParent bool) {
	if wasActive && !slices.Contains(activeStatuses, s.Status) {
		m.promote(context.WithoutCancel(ctx), s.Owner)
	}
	ended := !wasTerminal && Status(s.Status).Terminal()
	if s.ParentID != "" && ended && !m.dropDelivery {
		m.deliver(context.WithoutCancel(ctx), s) // a subagent's session ended
	}
	if ended && mayParent {
		m.cancelChildren(context.WithoutCancel(ctx), s)
	}
}
