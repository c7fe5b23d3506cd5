package session_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/session"
)

// TestChildEndLostIsFound: when the delivery of a child session's end to
// its parent is lost (a crash at that moment), the waiting parent finds
// the ended child itself at its next check, and runs on.
func TestChildEndLostIsFound(t *testing.T) {
	model := llmtest.NewModel(
		llmtest.Call("c1", "delegate", `{"agent":"helper","task":"say yes"}`),
		llmtest.Text("yes"),
		llmtest.Text("the helper said yes"),
	)
	m := session.New(openStore(t), model, &session.Options{Logger: slog.New(slog.NewTextHandler(tWriter{t}, nil))})
	session.SetLostDelivery(m, 20*time.Millisecond)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(context.Background()) })
	v := create(t, m, `{"agent":{"name":"boss","subagents":[{"name":"helper","description":"Helps."}]},"messages":"ask the helper"}`)
	f := &follower{t: t, m: m, id: v.ID}
	c := f.status(session.StatusCompleted)
	if string(c.Answer) != `"the helper said yes"` {
		t.Errorf("answer = %s", c.Answer)
	}
	st, err := m.Status(t.Context(), owner, v.ID)
	if err != nil || len(st.SubagentSessionIDs) != 1 {
		t.Fatalf("status = %+v, %v", st, err)
	}
}

// childrenOf lists the child sessions of parent, with their statuses.
func childrenOf(t *testing.T, m *session.Manager, parent string) map[string]session.Status {
	t.Helper()
	page, err := m.List(t.Context(), owner, &session.ListParams{ParentSessionID: parent, Page: 1, Size: 100})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]session.Status{}
	for _, s := range page.Items {
		out[s.ID] = s.Status
	}
	return out
}

// TestEndingCancelsChildren: a parent session that ends (cancelled here)
// cancels its child sessions still running: nothing will read their
// answers, and they would run on, and spend, for nothing.
func TestEndingCancelsChildren(t *testing.T) {
	model := llmtest.NewModel(
		llmtest.Call("c1", "delegate", `{"agent":"helper","task":"ask"}`),
		llmtest.Call("c2", "ask", `{}`), // the child waits for its client
	)
	m := startManager(t, openStore(t), model, nil)
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
	if err := m.Cancel(t.Context(), owner, v.ID); err != nil {
		t.Fatal(err)
	}
	untilStatus(t, f, session.StatusInterrupted)
	if got := childrenOf(t, m, v.ID)[child]; got != session.StatusInterrupted {
		t.Errorf("the child of the cancelled parent is %s, want interrupted", got)
	}
}

// TestEndedRunMakesNoLiveChild: a run that was ended (Cancel) while it
// created a child session leaves no child running.
func TestEndedRunMakesNoLiveChild(t *testing.T) {
	model := llmtest.NewModel(
		llmtest.Call("c1", "delegate", `{"agent":"helper","task":"ask"}`),
		llmtest.Call("c2", "ask", `{}`),
	)
	m, _ := newLogged(t, openStore(t), model, nil)
	var once sync.Once
	session.SetAfterChild(m, func(parent string) {
		once.Do(func() {
			if err := m.Cancel(context.Background(), owner, parent); err != nil {
				t.Error(err)
			}
		})
	})
	v := create(t, m, `{"agent":{"name":"boss","subagents":[{"name":"helper","description":"Helps.","tools":[{"name":"ask","description":"Asks."}]}]},"messages":"ask the helper"}`)
	start(t, m)
	f := &follower{t: t, m: m, id: v.ID}
	untilStatus(t, f, session.StatusInterrupted)
	// The child, if one was made, ends: it must not wait for a client
	// that will never come, nor run on.
	deadline := time.Now().Add(30 * time.Second)
	for {
		live := 0
		children := childrenOf(t, m, v.ID)
		for _, st := range children {
			if !st.Terminal() {
				live++
			}
		}
		if live == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ended run left children running: %v", children)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
