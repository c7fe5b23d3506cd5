package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// lostInputStore lets a caller's input that claims its session in its
// commit (UpdateOptions.Claim) commit and then answers an error, as a
// commit whose connection broke while its answer was in flight does: the
// session is leased to the process that received the input, which does
// not know it. lose such commits are lost so. It records the attempts of
// each session the dispatcher's claims take, and can make RecoverClaim
// fail (recoverErr).
type lostInputStore struct {
	store.Store
	lose       atomic.Int32
	lost       atomic.Int32
	recoverErr error
	loseCreate atomic.Bool  // the next creation that claims is lost so
	createdID  atomic.Value // the id of the session whose creation was lost
	mu         sync.Mutex
	claimed    map[string][]int // attempts of each claim by Claim
}

func (s *lostInputStore) CreateSession(ctx context.Context, sess *store.Session, events []store.Event) (*store.Session, bool, error) {
	got, created, err := s.Store.CreateSession(ctx, sess, events)
	if err == nil && created && sess.LeaseOwner != "" && s.loseCreate.CompareAndSwap(true, false) {
		s.createdID.Store(sess.ID)
		s.lost.Add(1)
		return nil, false, errors.New("create session: connection reset by peer")
	}
	return got, created, err
}

func (s *lostInputStore) Renew(ctx context.Context, id, owner string, until time.Time) error {
	if s.recoverErr != nil && s.createdID.Load() == id {
		return s.recoverErr
	}
	return s.Store.Renew(ctx, id, owner, until)
}

func (s *lostInputStore) UpdateSession(ctx context.Context, sess *store.Session, events []store.Event, opts *store.UpdateOptions) error {
	err := s.Store.UpdateSession(ctx, sess, events, opts)
	if err == nil && opts != nil && opts.Claim != nil && s.lose.Add(-1) >= 0 {
		s.lost.Add(1)
		return fmt.Errorf("update session: %w", errors.New("connection reset by peer"))
	}
	return err
}

func (s *lostInputStore) Claim(ctx context.Context, p *store.ClaimParams) ([]*store.Session, error) {
	got, err := s.Store.Claim(ctx, p)
	s.mu.Lock()
	for _, g := range got {
		s.claimed[g.ID] = append(s.claimed[g.ID], g.Attempts)
	}
	s.mu.Unlock()
	return got, err
}

func (s *lostInputStore) RecoverClaim(ctx context.Context, p *store.ClaimParams) ([]*store.Session, error) {
	if s.recoverErr != nil {
		return nil, s.recoverErr
	}
	return s.Store.RecoverClaim(ctx, p)
}

// TestLostInputClaimRuns: a caller posts the result a session waits for;
// the commit claims the session for this process (to run it at once) and
// answers an error after it committed. The caller gets the error, and the
// manager asks the store what the commit's claim took (its token) and
// runs the session at once, with the attempt that claim counted; before,
// the session stayed leased to this process, which did not know it,
// until the lease lapsed (a lease TTL, 15 s, of fake time), and the
// dispatcher claimed it again, a second attempt counted toward
// MaxAttempts. When the store cannot say (recovery fails), the lease
// lapses as before and the session still runs to its end.
//
// The same for a session's creation, which claims the new session for
// the process that creates it (and writes no token: the session is found
// by its id, which the creation chose).
func TestLostInputClaimRuns(t *testing.T) {
	for _, tc := range []struct {
		create, recoverFails bool
	}{{false, false}, {false, true}, {true, false}, {true, true}} {
		t.Run(fmt.Sprintf("create=%v/recover_fails=%v", tc.create, tc.recoverFails), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &lostInputStore{Store: openStore(t), claimed: map[string][]int{}}
				if tc.recoverFails {
					st.recoverErr = errors.New("recover claim: connection refused")
				}
				model := llmtest.NewModel(llmtest.Call("c1", "lookup", `{}`), llmtest.Text("fine"))
				if tc.create {
					model = llmtest.NewModel(llmtest.Text("fine"))
				}
				m, log := newLogged(t, st, model, nil) // the default lease TTL
				start(t, m)
				var f *follower
				var began time.Time
				if tc.create {
					st.loseCreate.Store(true)
					began = time.Now()
					var req session.Request
					if err := json.Unmarshal([]byte(transcriptAgent), &req); err != nil {
						t.Fatal(err)
					}
					if _, _, err := m.Create(t.Context(), &session.CreateParams{Owner: owner, Request: &req, Raw: json.RawMessage(transcriptAgent)}); err == nil {
						t.Fatal("the lost creation answered no error")
					}
					f = &follower{t: t, m: m, id: st.createdID.Load().(string)}
				} else {
					v := create(t, m, transcriptAgent)
					f = &follower{t: t, m: m, id: v.ID}
					f.status(session.StatusAwaitingToolResults)
					st.lose.Store(1)
					began = time.Now()
					req := session.ToolRequest{ToolName: "lookup", Args: json.RawMessage(`{}`), ID: "c1"}
					if err := m.PostToolResults(t.Context(), owner, v.ID, []session.ToolResult{{Kind: session.KindToolResult, ToolReq: req, Result: json.RawMessage(`"ok"`)}}); err == nil {
						t.Fatal("the posted result's lost commit answered no error")
					}
				}
				c := f.until(func(c *session.Changes) bool { return c.Status.Terminal() })
				took := time.Since(began)
				if c.Status != session.StatusCompleted || string(c.Answer) != `"fine"` {
					t.Fatalf("ended %s with %s, want completed; events:\n%s\nlog:\n%s", c.Status, c.Answer, f.dump(), log)
				}
				if n := st.lost.Load(); n != 1 {
					t.Fatalf("%d commits lost, want 1", n)
				}
				want := 2 // the call, the answer
				if tc.create {
					want = 1
				}
				if n := len(model.Requests()); n != want {
					t.Errorf("%d model requests, want %d", n, want)
				}
				st.mu.Lock()
				claims := st.claimed[f.id]
				st.mu.Unlock()
				if tc.recoverFails {
					// The lease lapses; the dispatcher claims it then.
					if took < 15*time.Second || len(claims) != 1 {
						t.Errorf("ran after %v of fake time, claimed by the dispatcher with attempts %v; want after the lease's lapse (15s), one claim", took, claims)
					}
					return
				}
				if took >= 15*time.Second || len(claims) != 0 {
					t.Errorf("ran after %v of fake time, claimed by the dispatcher with attempts %v; want at once (not a lease TTL later), no claim (no attempt counted again); log:\n%s", took, claims, log)
				}
			})
		})
	}
}
