package session

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/hrns-dev/hrns/store"
)

// Leases. A worker holds its session's lease while it runs it: it renews
// it (watch), gives it up in the commit that leaves the session needing no
// worker (hold, needsNoWorker), and stops the run when the session ends or
// its run generation moves on (runOf).

// watch renews the lease of a running session and stops the run when the
// session ends (cancelled by its caller), when its run generation moves
// on (it ended and restarted: Cancel followed at once by a message), or
// when the lease is lost. run is the generation the worker was claimed
// for.
//
// notify is the session's subscription, made before the run started. A
// change this process committed between the claim (of version claimed)
// and the subscription is found in the sessions it last committed, when
// the watch starts, without a read; one another replica committed in
// that moment reaches the run at its next commit, which the store
// refuses.
func (m *Manager) watch(ctx context.Context, cancel context.CancelCauseFunc, id string, run, claimed int64, notify <-chan struct{}) {
	tick := time.NewTicker(m.opts.LeaseTTL / 3)
	defer tick.Stop()
	stops := func(s *store.Session) bool {
		if Status(s.Status).Terminal() || runOf(s) != run {
			cancel(errStopped)
			return true
		}
		return false
	}
	if s := m.committed.get(id); s != nil && s.Version > claimed && stops(s) {
		return
	}
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
			if ctx.Err() != nil {
				// The run has stopped: most often its last commit,
				// which gave the lease up, is what woke the watch,
				// and select picks either of the two ready cases.
				return
			}
			if s, err := m.st.GetSession(ctx, id); err == nil && stops(s) {
				return
			}
		}
	}
}

// leased is the update option of a worker's writes.
func (m *Manager) leased() *store.UpdateOptions { return &store.UpdateOptions{Lease: m.owner} }

// A leaseChange records what commits did to a session's lease (see updateFrom).
//
// A worker's last commit gives its lease up in its own transaction when it
// leaves the session needing no worker (waiting for the caller, idle,
// paused or ended: see needsNoWorker), instead of a transaction of its own
// afterwards; released records that it did. From then on the session may
// be claimed again, here or by another replica, at once, and the worker
// writes nothing more: it returns.
//
// A caller's input may claim the session in its commit (see
// reserveClaim); claimed records that it did, lost the error such a
// commit answered (it may have committed all the same: see runClaimed),
// and created, for a creation, the new session's id, by which what it
// took is found (a creation writes no claim token).
type leaseChange struct {
	released bool
	claimed  bool
	lost     error
	created  string
	// admitted: admitClaim let the commit claim for owner (a caller's
	// input), counted in Manager.ownerWorkers until runClaimed (m.mu).
	admitted bool
	owner    string
	// left: the worker's giving the lease up was counted (see
	// Manager.leaseLeft), at its releasing commit or when it returned
	// (m.mu).
	left bool
}

// needsNoWorker reports whether s, as about to be committed, gives a
// worker nothing to do until someone changes it: it is not runnable and
// has no wake-up time due at now. runSession then has nothing to do
// either: each of its passes returns at once for such a state.
func needsNoWorker(s *store.Session, now time.Time) bool {
	return !s.Runnable && (s.WakeAt.IsZero() || s.WakeAt.After(now))
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
