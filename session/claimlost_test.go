package session_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// lostClaimStore lets a claim's transaction commit and then answers an
// error, as a claim cut by its bound after the commit, or whose
// connection broke while the commit's answer was in flight, does: the
// sessions it leased are the caller's, which does not know it. lose
// claims that took a session are lost so, then claims answer as the
// store does.
type lostClaimStore struct {
	store.Store
	lose atomic.Int32 // claims still to lose
	lost atomic.Int32 // claims lost

	// recoverErr, when set, makes RecoverClaim fail: after it waited
	// for its context's end when hang is set (a database that does not
	// answer), at once otherwise.
	recoverErr error
	hang       bool
	mu         sync.Mutex
	lostTokens map[string]bool // the tokens of the claims lost
	recovers   int             // RecoverClaim calls for a lost claim
	inFlight   int             // RecoverClaim calls not yet returned
	unbounded  bool            // a RecoverClaim call came without a deadline
}

func (s *lostClaimStore) Claim(ctx context.Context, p *store.ClaimParams) ([]*store.Session, error) {
	got, err := s.Store.Claim(ctx, p)
	if err == nil && len(got) > 0 && s.lose.Add(-1) >= 0 {
		s.lost.Add(1)
		s.mu.Lock()
		if s.lostTokens == nil {
			s.lostTokens = map[string]bool{}
		}
		s.lostTokens[p.Token] = true
		s.mu.Unlock()
		return nil, fmt.Errorf("claim: %w", context.DeadlineExceeded)
	}
	return got, err
}

func (s *lostClaimStore) RecoverClaim(ctx context.Context, p *store.ClaimParams) ([]*store.Session, error) {
	s.mu.Lock()
	if _, ok := ctx.Deadline(); !ok {
		s.unbounded = true
	}
	if !s.lostTokens[p.Token] {
		// A claim the store itself lost (its bound cut it on a loaded
		// machine): not this test's, answered by the store.
		s.mu.Unlock()
		return s.Store.RecoverClaim(ctx, p)
	}
	s.recovers++
	s.inFlight++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	if s.recoverErr != nil {
		if s.hang {
			<-ctx.Done()
		}
		return nil, s.recoverErr
	}
	return s.Store.RecoverClaim(ctx, p)
}

// TestLostClaimsChargeNoAttempt: the dispatcher's claims commit and
// answer an error, as many as it takes to reach MaxAttempts. The
// dispatcher asks the store what its claim took and runs it, so that the
// session runs once, to its end, with one model request, after one
// claim; it used to leave the session leased until the lease lapsed,
// claim it again, another attempt counted, and give it up as poison at
// the claim after MaxAttempts, without ever running it. A session whose
// workers died twice (a crash suspect) is taken by the dispatcher's
// second claim, which is recovered the same way.
func TestLostClaimsChargeNoAttempt(t *testing.T) {
	for _, died := range []int{0, 2} {
		t.Run(fmt.Sprint("died=", died), func(t *testing.T) {
			eachStore(t, func(t *testing.T, base store.Store) {
				st := &lostClaimStore{Store: base}
				st.lose.Store(int32(3 - died)) // MaxAttempts: the next claim would give the session up
				model := llmtest.NewModel(llmtest.Text("fine"), llmtest.Text("fine again"))
				m, log := newLogged(t, st, model, &session.Options{LeaseTTL: 200 * time.Millisecond})
				v := create(t, m, `{"agent":{"name":"a"},"messages":"hi"}`) // unclaimed: the manager is not started
				claimAndDie(t, base, died, 1)
				start(t, m)
				f, c := ended(t, m, v.ID)
				if c.Status != session.StatusCompleted {
					t.Fatalf("ended %s (%v) after %d lost claims, want completed; events:\n%s\nlog:\n%s", c.Status, c.Error, st.lost.Load(), f.dump(), log)
				}
				if n := len(model.Requests()); n != 1 {
					t.Errorf("%d model requests, want 1", n)
				}
				if n := st.lost.Load(); n != 1 {
					t.Errorf("%d claims lost, want 1 (the session's only claim)", n)
				}
				if s, _ := st.GetSession(t.Context(), v.ID); s.Attempts != 0 || s.LeaseOwner != "" {
					t.Errorf("after completion: attempts %d, lease %q; want 0 and none", s.Attempts, s.LeaseOwner)
				}
				if err := m.Stop(t.Context()); err != nil {
					t.Fatal(err)
				}
				st.mu.Lock()
				defer st.mu.Unlock()
				if st.unbounded {
					t.Error("RecoverClaim was called without a deadline")
				}
			})
		})
	}
}

// TestLostClaimRecoveryFails: the claim is lost and so is every attempt
// to learn what it took (the store answers an error, or nothing until
// the call's bound). The dispatcher tries a bounded number of times,
// then leaves the lease to lapse: the session is claimed again then, its
// attempt counted as before, and runs once. No call of the store is left
// in flight once the manager stopped.
func TestLostClaimRecoveryFails(t *testing.T) {
	for _, hang := range []bool{false, true} {
		t.Run(fmt.Sprint("hang=", hang), func(t *testing.T) {
			eachStore(t, func(t *testing.T, base store.Store) {
				st := &lostClaimStore{Store: base, recoverErr: fmt.Errorf("recover claim: %w", context.DeadlineExceeded), hang: hang}
				st.lose.Store(1)
				model := llmtest.NewModel(llmtest.Text("fine"), llmtest.Text("fine again"))
				m, log := newLogged(t, st, model, &session.Options{LeaseTTL: 400 * time.Millisecond})
				v := create(t, m, `{"agent":{"name":"a"},"messages":"hi"}`)
				start(t, m)
				f, c := ended(t, m, v.ID)
				if c.Status != session.StatusCompleted {
					t.Fatalf("ended %s (%v), want completed; events:\n%s\nlog:\n%s", c.Status, c.Error, f.dump(), log)
				}
				if n := len(model.Requests()); n != 1 {
					t.Errorf("%d model requests, want 1; events:\n%s\nlog:\n%s", n, f.dump(), log)
				}
				if err := m.Stop(t.Context()); err != nil {
					t.Fatal(err)
				}
				st.mu.Lock()
				defer st.mu.Unlock()
				if st.recovers != session.ClaimRecoveryTries {
					t.Errorf("RecoverClaim called %d times, want %d", st.recovers, session.ClaimRecoveryTries)
				}
				if st.inFlight != 0 || st.unbounded {
					t.Errorf("after Stop: %d RecoverClaim calls in flight, one without a deadline: %v", st.inFlight, st.unbounded)
				}
			})
		})
	}
}
