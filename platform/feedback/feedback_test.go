package feedback_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/platform/feedback"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// newSession is a manager (not started: the session stays queued or
// pending) with one session of alice.
func newSession(t *testing.T) (*session.Manager, string) {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := session.New(st, llmtest.NewModel(), &session.Options{Agents: map[string]*session.AgentConfig{"a": {}}})
	body := `{"agent":"a","messages":"hi"}`
	var req session.Request
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	v, _, err := m.Create(t.Context(), &session.CreateParams{Owner: "alice", Request: &req, Raw: json.RawMessage(body)})
	if err != nil {
		t.Fatal(err)
	}
	return m, v.ID
}

// TestFeedbackKept: the owner's feedback on the session and on an event
// is listed; another key's is refused as not found, and an event the
// session does not have as invalid.
func TestFeedbackKept(t *testing.T) {
	m, id := newSession(t)
	f := feedback.New(m)
	ctx := t.Context()
	msg := "good"
	if err := f.SetFeedback(ctx, "alice", id, session.Feedback{Success: true, Message: &msg}); err != nil {
		t.Fatal(err)
	}
	if err := f.SetEventFeedback(ctx, "alice", id, 0, session.Feedback{Success: false}); err != nil {
		t.Fatal(err)
	}
	if err := f.SetEventFeedback(ctx, "alice", id, 1<<40, session.Feedback{}); !errors.As(err, new(*session.ValidationError)) {
		t.Errorf("feedback on a missing event: %v, want a validation error", err)
	}
	if err := f.SetFeedback(ctx, "bob", id, session.Feedback{}); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("bob's feedback: %v, want ErrNotFound", err)
	}
	long := strings.Repeat("x", 64<<10+1)
	if err := f.SetFeedback(ctx, "alice", id, session.Feedback{Message: &long}); !errors.As(err, new(*session.ValidationError)) {
		t.Errorf("a message over 64 KiB: %v, want a validation error", err)
	}
	l, err := f.Feedback(ctx, "alice", id)
	if err != nil {
		t.Fatal(err)
	}
	if l.Session == nil || !l.Session.Success || *l.Session.Message != "good" || len(l.Events) != 1 || l.Events[0].EventIndex != 0 || l.Events[0].Feedback.Success {
		t.Errorf("Feedback = %+v", l)
	}
	if _, err := f.Feedback(ctx, "bob", id); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("bob's list: %v, want ErrNotFound", err)
	}
}

// TestShareToken: a session shared is read with its token (the same token
// when shared again), by no other, and not after Unshare.
func TestShareToken(t *testing.T) {
	m, id := newSession(t)
	f := feedback.New(m)
	ctx := t.Context()
	token, err := f.Share(ctx, "alice", id)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := f.Share(ctx, "alice", id); err != nil || again != token {
		t.Errorf("Share again = %q, %v; want %q", again, err, token)
	}
	if _, err := f.Share(ctx, "bob", id); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("bob shares alice's session: %v, want ErrNotFound", err)
	}
	if v, err := f.Shared(ctx, token); err != nil || v.ID != id {
		t.Errorf("Shared = %+v, %v", v, err)
	}
	if page, err := f.SharedEvents(ctx, token, &session.EventsParams{Page: 1, Size: 10}); err != nil || len(page.Items) == 0 {
		t.Errorf("SharedEvents = %+v, %v", page, err)
	}
	for _, bad := range []string{id, id + ".", id + ".00", "nope." + token} {
		if _, err := f.Shared(ctx, bad); !errors.Is(err, session.ErrNotFound) {
			t.Errorf("Shared(%q) = %v, want ErrNotFound", bad, err)
		}
	}
	if err := f.Unshare(ctx, "alice", id); err != nil {
		t.Fatal(err)
	}
	if err := f.Unshare(ctx, "alice", id); err != nil {
		t.Errorf("Unshare twice: %v", err)
	}
	if _, err := f.Shared(ctx, token); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("Shared after Unshare = %v, want ErrNotFound", err)
	}
	if _, err := f.SharedEvents(ctx, token, &session.EventsParams{Page: 1, Size: 10}); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("SharedEvents after Unshare = %v, want ErrNotFound", err)
	}
}
