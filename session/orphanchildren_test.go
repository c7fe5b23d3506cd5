package session_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// endAnswerLostStore commits the update that ends the session lost (its
// id), then answers an error, once: a connection broken while the
// commit's answer was in flight, or a process that died right after it.
type endAnswerLostStore struct {
	store.Store
	lost atomic.Pointer[string]
}

func (s *endAnswerLostStore) UpdateSession(ctx context.Context, ss *store.Session, events []store.Event, opts *store.UpdateOptions) error {
	id := s.lost.Load()
	if id == nil || ss.ID != *id || !session.Status(ss.Status).Terminal() {
		return s.Store.UpdateSession(ctx, ss, events, opts)
	}
	if err := s.Store.UpdateSession(ctx, ss, events, opts); err != nil {
		return err
	}
	s.lost.Store(nil)
	return errors.New("rpmodel: the connection broke before the commit's answer")
}

// TestEndingLostAnswerCancelsChildren: a parent whose end was committed
// but whose commit answered an error (the answer lost after the commit:
// no follow-up ran) left its child waiting for a client forever, holding
// one of its owner's active sessions: a Cancel tried again found the
// parent ended and did nothing more.
func TestEndingLostAnswerCancelsChildren(t *testing.T) {
	model := llmtest.NewModel(
		llmtest.Call("c1", "delegate", `{"agent":"helper","task":"ask"}`),
		llmtest.Call("c2", "ask", `{}`), // the child waits for its client
	)
	st := &endAnswerLostStore{Store: openStore(t)}
	m, _ := newLogged(t, st, model, nil)
	session.SetChildCheck(m, 50*time.Millisecond)
	start(t, m)
	v := create(t, m, `{"agent":{"name":"boss","subagents":[{"name":"helper","description":"Helps.","tools":[{"name":"ask","description":"Asks."}]}]},"messages":"ask the helper"}`)
	f := &follower{t: t, m: m, id: v.ID}
	untilStatus(t, f, session.StatusAwaitingToolResults)
	var child string
	for deadline := time.Now().Add(30 * time.Second); child == ""; {
		for id, st := range childrenOf(t, m, v.ID) {
			if st == session.StatusAwaitingToolResults {
				child = id
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child never waited: %v", childrenOf(t, m, v.ID))
		}
		time.Sleep(10 * time.Millisecond)
	}
	st.lost.Store(&v.ID)
	if err := m.Cancel(t.Context(), owner, v.ID); err == nil {
		t.Fatal("Cancel answered nil: the store's error was lost")
	}
	// The caller tries again, as told by the error.
	if err := m.Cancel(t.Context(), owner, v.ID); err != nil {
		t.Fatal(err)
	}
	untilStatus(t, f, session.StatusInterrupted)
	for deadline := time.Now().Add(10 * time.Second); ; {
		got := childrenOf(t, m, v.ID)[child]
		if got == session.StatusInterrupted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child of the ended parent is still %s, want interrupted", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
