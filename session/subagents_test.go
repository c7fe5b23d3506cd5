package session_test

import (
	"context"
	"log/slog"
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
