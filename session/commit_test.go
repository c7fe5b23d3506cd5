package session_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// answerAfterNotify is a store whose worker write that ends a session
// lands but answers as PostgreSQL does when the committer's context is
// cancelled between the commit and its reply: the store notifies the
// session's subscribers (the worker's own watcher among them, which
// cancels the worker when it sees the end) before the reply is read, and
// the reply is then "context canceled". It does so once, when armed, for
// the sessions pick selects.
type answerAfterNotify struct {
	store.Store
	armed atomic.Bool
	pick  func(s *store.Session) bool
	// cut counts the writes that landed and answered the cancellation.
	cut atomic.Int32
}

func (a *answerAfterNotify) UpdateSession(ctx context.Context, s *store.Session, events []store.Event, o *store.UpdateOptions) error {
	ends := o != nil && o.Lease != "" && session.Status(s.Status).Terminal() && a.pick(s)
	if !ends || !a.armed.CompareAndSwap(true, false) {
		return a.Store.UpdateSession(ctx, s, events, o)
	}
	if err := a.Store.UpdateSession(ctx, s, events, o); err != nil {
		return err
	}
	if ctx.Done() == nil {
		return nil // a context that cannot be cancelled reads the reply
	}
	// The reply comes after the watcher had the notification.
	select {
	case <-ctx.Done():
		a.cut.Add(1)
		return ctx.Err()
	case <-time.After(10 * time.Second):
		return nil
	}
}

// endsWithin follows the session until it ends or d passes, and returns
// the status it has then.
func endsWithin(t *testing.T, m *session.Manager, id string, d time.Duration) session.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	from := int64(0)
	for {
		c, _, err := m.Changes(ctx, owner, id, &session.ChangesParams{From: from, Wait: time.Until(deadlineOf(ctx))})
		if ctx.Err() != nil {
			v, err := m.Get(t.Context(), owner, id)
			if err != nil {
				t.Fatal(err)
			}
			return v.Status.Status
		}
		if err != nil {
			t.Fatal(err)
		}
		if c == nil {
			continue
		}
		from += int64(len(c.NewEvents))
		if c.Status.Terminal() {
			return c.Status
		}
	}
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// TestChildEndDeliveredWhenReplyIsCut: a child session's last commit that
// lands while its worker is cancelled (PostgreSQL notifies the worker's
// watcher of the end before the worker reads the reply) still gives the
// child's answer to its parent at once, not at the parent's periodic
// check a minute later.
func TestChildEndDeliveredWhenReplyIsCut(t *testing.T) {
	eachStore(t, func(t *testing.T, base store.Store) {
		st := &answerAfterNotify{Store: base, pick: func(s *store.Session) bool { return s.ParentID != "" }}
		st.armed.Store(true)
		// The child answers once its parent's wait is committed, so that
		// its end is delivered by its own commit.
		release := make(chan struct{})
		model := llmtest.NewModel(
			llmtest.Call("c1", "delegate", `{"agent":"helper","task":"say yes"}`),
			llmtest.Reply{Func: func(*llm.Request) llmtest.Reply {
				select {
				case <-release:
				case <-t.Context().Done():
				}
				return llmtest.Text("yes")
			}},
			llmtest.Text("the helper said yes"),
		)
		m, log := newLogged(t, st, model, nil)
		start(t, m)
		v := create(t, m, `{"agent":{"name":"boss","subagents":[{"name":"helper","description":"Helps."}]},"messages":"ask the helper"}`)
		(&follower{t: t, m: m, id: v.ID}).status(session.StatusAwaitingToolResults)
		close(release)
		if got := endsWithin(t, m, v.ID, 15*time.Second); got != session.StatusCompleted {
			t.Fatalf("the parent is %s 15s after it delegated (the child's end was cut %d times), want completed; log:\n%s", got, st.cut.Load(), log)
		}
	})
}

// TestQueuedPromotedWhenReplyIsCut: the last commit of a session that
// lands while its worker is cancelled (as above) still starts the
// owner's queued session.
func TestQueuedPromotedWhenReplyIsCut(t *testing.T) {
	eachStore(t, func(t *testing.T, base store.Store) {
		st := &answerAfterNotify{Store: base, pick: func(*store.Session) bool { return true }}
		model := llmtest.NewModel(llmtest.Call("c1", "lookup", `{}`), llmtest.Text("first"), llmtest.Text("second"))
		m, log := newLogged(t, st, model, &session.Options{MaxActiveSessions: 1})
		start(t, m)
		a := create(t, m, transcriptAgent)
		(&follower{t: t, m: m, id: a.ID}).status(session.StatusAwaitingToolResults)
		b := create(t, m, transcriptAgent)
		if b.Status.Status != session.StatusQueued {
			t.Fatalf("the second session is %s, want queued", b.Status.Status)
		}
		st.armed.Store(true)
		req := session.ToolRequest{ToolName: "lookup", Args: json.RawMessage(`{}`), ID: "c1"}
		if err := m.PostToolResults(t.Context(), owner, a.ID, []session.ToolResult{{Kind: session.KindToolResult, ToolReq: req, Result: json.RawMessage(`"ok"`)}}); err != nil {
			t.Fatal(err)
		}
		if got := endsWithin(t, m, a.ID, 15*time.Second); got != session.StatusCompleted {
			t.Fatalf("the first session is %s, want completed; log:\n%s", got, log)
		}
		if got := endsWithin(t, m, b.ID, 15*time.Second); got != session.StatusCompleted {
			t.Fatalf("the queued session is %s 15s after the first ended (its end was cut %d times), want completed; log:\n%s", got, st.cut.Load(), log)
		}
	})
}
