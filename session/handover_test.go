package session_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// TestHandOverOddInput checks the state a caller's input hands over to the
// worker it claims (see handOver) against a decoding of its encoding when
// the input holds what JSON does not keep as it is: text that is not
// UTF-8 in a message and in a result, posted through the Go API, not
// decoded from a request (a state holding text that is not UTF-8 is not
// handed over: the worker decodes it). Every test of the package checks
// the states handed over in it (TestMain); this one fails at once.
func TestHandOverOddInput(t *testing.T) {
	m, v := turnsSession(t, 3)
	ctx := context.Background()
	n0, differ0 := session.HandOvers()
	wait := func(steps int) *session.Changes {
		t.Helper()
		return waitChanges(t, m, v.ID, func(c *session.Changes) bool {
			return c.Status.Terminal() || c.Status == session.StatusAwaitingToolResults && c.Metrics.Steps >= steps
		})
	}
	wait(1)
	if err := m.SendMessages(ctx, owner, v.ID, []session.UserMessage{{Message: "not UTF-8: \xff\xfe, a lone surrogate \xed\xa0\x80, a NUL \x00"}}); err != nil {
		t.Fatal(err)
	}
	if err := m.PostToolResults(ctx, owner, v.ID, []session.ToolResult{{Kind: "tool_result", ToolReq: session.ToolRequest{ID: "call_0"}, Result: json.RawMessage("\"\xff\xfe \\ud800\"")}}); err != nil {
		t.Fatal(err)
	}
	wait(2)
	if err := m.PostToolResults(ctx, owner, v.ID, []session.ToolResult{{Kind: "error_event", ToolReq: session.ToolRequest{ID: "call_1"}, Error: "failed: \xff"}}); err != nil {
		t.Fatal(err)
	}
	if c := wait(3); c.Status != session.StatusCompleted {
		t.Fatalf("status %s, want completed", c.Status)
	}
	n, differ := session.HandOvers()
	if n == n0 {
		t.Fatal("no state handed over: the posted results claimed the session")
	}
	if differ != differ0 {
		t.Fatalf("%d of %d states handed over differ from their encoding decoded (see the end of the test's output)", differ-differ0, n-n0)
	}
}

// TestWorkerGoroutinesReused checks that the sessions a manager runs one
// after another run on the goroutine of the worker that ran the last one
// (see Manager.worker), and that a parked session holds no goroutine once
// the workers are idle.
func TestWorkerGoroutinesReused(t *testing.T) {
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	base := runtime.NumGoroutine()
	m := session.New(db, turnsModel{turns: 6}, &session.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	session.SetWorkerIdle(m, 200*time.Millisecond)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Stop(context.Background())
	body := `{"agent":{"name":"a","system":"You read files.","tools":[{"name":"read_file","description":"Reads a file."}]},"max_steps":10,"messages":"Read a.txt."}`
	var req session.Request
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		runLong(t, context.Background(), m, &req, json.RawMessage(body), 6, json.RawMessage(`"ok"`))
	}
	if n := session.WorkerGoroutines(m); n >= 18 {
		t.Errorf("%d worker goroutines started for 18 runs of a session, one after another: none reused", n)
	}
	// A session parked: once the workers are idle, no goroutine of theirs.
	v, _, err := m.Create(context.Background(), &session.CreateParams{Owner: owner, Request: &req, Raw: json.RawMessage(body)})
	if err != nil {
		t.Fatal(err)
	}
	for {
		c, _, err := m.Changes(context.Background(), owner, v.ID, &session.ChangesParams{Wait: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if c != nil && c.Status == session.StatusAwaitingToolResults {
			break
		}
	}
	var now int
	for range 500 {
		// The manager's own: the dispatcher, the long-polls' ends.
		if now = runtime.NumGoroutine(); now <= base+2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if now > base+2 {
		t.Errorf("%d goroutines with a session parked and the workers idle, %d before the manager", now, base)
	}
}

// TestInputsKeepTheirState checks that a caller's input whose commit
// claims no worker (a pause, then a message to the paused session) keeps
// the state it committed, as decoding would give it, for the next commit
// of the session: the message starts from the pause's state instead of
// decoding the session's (TestMain checks the state taken against its
// encoding).
func TestInputsKeepTheirState(t *testing.T) {
	m, v := turnsSession(t, 3)
	ctx := context.Background()
	waitChanges(t, m, v.ID, func(c *session.Changes) bool { return c.Status == session.StatusAwaitingToolResults })
	if err := m.Pause(ctx, owner, v.ID); err != nil {
		t.Fatal(err)
	}
	if !session.HasKeptState(m, v.ID) {
		t.Fatal("the pause, which claimed no worker, kept no state for the next input")
	}
	if err := m.SendMessages(ctx, owner, v.ID, []session.UserMessage{{Message: "go on"}}); err != nil {
		t.Fatal(err)
	}
}

// turnsSession starts a manager on a SQLite file with turnsModel, and a
// session of it that reads a file (a client-side tool) turns-1 times.
func turnsSession(t *testing.T, turns int) (*session.Manager, *session.View) {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	m := session.New(db, turnsModel{turns: turns}, &session.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(context.Background()) })
	body := `{"agent":{"name":"a","system":"You read files.","tools":[{"name":"read_file","description":"Reads a file."}]},"max_steps":10,"max_time_s":3600,"messages":"Read a.txt."}`
	var req session.Request
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	v, _, err := m.Create(context.Background(), &session.CreateParams{Owner: owner, Request: &req, Raw: json.RawMessage(body)})
	if err != nil {
		t.Fatal(err)
	}
	return m, v
}

// waitChanges long-polls the session's changes from its first event until
// done says so of a long-poll's answer, which it returns.
func waitChanges(t *testing.T, m *session.Manager, id string, done func(*session.Changes) bool) *session.Changes {
	t.Helper()
	for from := int64(0); ; {
		c, _, err := m.Changes(context.Background(), owner, id, &session.ChangesParams{From: from, Wait: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if c == nil {
			continue
		}
		from += int64(len(c.NewEvents))
		if done(c) {
			return c
		}
	}
}
