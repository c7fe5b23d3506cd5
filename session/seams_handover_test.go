package session_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// TestHandOverEmptyImage: a message whose image is a data URI with no
// data ("data:image/png;base64,", which userMessages accepts), sent to a
// session that has answered, claims the session and hands its state over
// to the worker (see handOver), which must be the state decoding its
// encoding gives (TestMain compares them). The image's bytes decode to an empty slice, not nil, which the
// state's encoding leaves out (media.data is omitempty): decoded, they
// are nil.
func TestHandOverEmptyImage(t *testing.T) {
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m := session.New(db, turnsModel{turns: 1}, &session.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Stop(context.Background())
	body := `{"agent":{"name":"a","system":"You read files.","tools":[{"name":"read_file","description":"Reads a file."}]},"max_steps":10,"messages":"Read a.txt."}`
	var req session.Request
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	v, _, err := m.Create(ctx, &session.CreateParams{Owner: owner, Request: &req, Raw: json.RawMessage(body)})
	if err != nil {
		t.Fatal(err)
	}
	for from := int64(0); ; {
		c, _, err := m.Changes(ctx, owner, v.ID, &session.ChangesParams{From: from, Wait: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if c == nil {
			continue
		}
		from += int64(len(c.NewEvents))
		if c.Status.Terminal() || c.Status == session.StatusIdle {
			break // answered
		}
	}
	// As a request's JSON gives it: {"message": "", "images": ["data:image/png;base64,"]}.
	var msg session.UserMessage
	if err := json.Unmarshal([]byte(`{"type":"user_message","message":"look","images":["data:image/png;base64,"]}`), &msg); err != nil {
		t.Fatal(err)
	}
	n0, differ0 := session.HandOvers()
	if err := m.SendMessages(ctx, owner, v.ID, []session.UserMessage{msg}); err != nil {
		t.Fatal(err)
	}
	n, differ := session.HandOvers()
	for deadline := time.Now().Add(10 * time.Second); n == n0 && time.Now().Before(deadline); n, differ = session.HandOvers() {
		time.Sleep(time.Millisecond) // the worker takes it when it starts
	}
	if n == n0 {
		t.Fatal("no state handed over: the message claimed the session")
	}
	if differ != differ0 {
		t.Fatalf("%d of %d states handed over differ from their encoding decoded (see the end of the test's output)", differ-differ0, n-n0)
	}
}
