package server_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// The tests of this file steer sessions over HTTP while they run, and cut
// their steps: a restart of the server on the same database, a failed
// write, Cancel (issue 31, items 1 to 4).

// restartable is a server whose manager a test replaces, as a restart of
// hrns serve on the same database does: the URL stays, the manager
// serving it is stopped (cleanly, as on SIGTERM) and a new one started.
type restartable struct {
	*env
	opts func() *session.Options
	wrap func(store.Store) store.Store
	mu   sync.Mutex
	m    *session.Manager
	h    atomic.Pointer[http.Handler]
}

func newRestartable(t *testing.T, opts func() *session.Options, wrap func(store.Store) store.Store, replies ...openaitest.Reply) *restartable {
	t.Helper()
	model := openaitest.NewServer(replies...)
	t.Cleanup(model.Close)
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := &restartable{opts: opts, wrap: wrap}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { (*r.h.Load()).ServeHTTP(w, req) }))
	r.env = &env{t: t, model: model, url: srv.URL, st: st}
	r.start()
	t.Cleanup(func() {
		srv.Close()
		r.mu.Lock()
		defer r.mu.Unlock()
		r.m.Stop(context.Background())
	})
	return r
}

// start starts a manager on the store and serves it.
func (r *restartable) start() {
	o := r.opts()
	o.Logger = slog.New(slog.NewTextHandler(tLog{r.t}, nil))
	var st store.Store = r.st
	if r.wrap != nil {
		st = r.wrap(st)
	}
	m := session.New(st, &openai.Client{BaseURL: r.model.URL(), Model: "test-model"}, o)
	if err := m.Start(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	var h http.Handler = contractHandler(r.t, newServer(m, &server.Options{APIKeys: []string{keyAlice, keyBob}}))
	r.mu.Lock()
	r.m = m
	r.mu.Unlock()
	r.h.Store(&h)
}

// restart stops the manager and starts another on the same store.
func (r *restartable) restart() {
	r.mu.Lock()
	m := r.m
	r.mu.Unlock()
	if err := m.Stop(r.t.Context()); err != nil {
		r.t.Fatal(err)
	}
	r.start()
}

type tLog struct{ t testing.TB }

func (l tLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// gate is a server tool that reports each start of a call and waits for
// its context to end (cut) or for open (ran).
type gate struct {
	started  chan struct{}
	release  chan struct{}
	once     sync.Once
	ran, cut atomic.Int32
}

func newGate() *gate {
	return &gate{started: make(chan struct{}, 16), release: make(chan struct{})}
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

func (g *gate) options(o *session.Options) *session.Options {
	tool := loop.NewTool("slow", "Works for a while.", func(ctx context.Context, _ struct{}) (string, error) {
		g.started <- struct{}{}
		select {
		case <-ctx.Done():
			g.cut.Add(1)
			return "", ctx.Err()
		case <-g.release:
			g.ran.Add(1)
			return "the tool's output", nil
		}
	})
	o.Agents = map[string]*session.AgentConfig{"w": {Toolsets: []string{"t"}}}
	o.Toolsets = map[string]*loop.Toolset{"t": loop.MustToolset(tool)}
	return o
}

func (g *gate) waitStarted(t *testing.T) {
	t.Helper()
	select {
	case <-g.started:
	case <-time.After(20 * time.Second):
		t.Fatal("the call did not start")
	}
}

func (g *gate) waitCut(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for g.cut.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the call was not stopped")
		}
		time.Sleep(time.Millisecond)
	}
}

func lastRequest(e *env) string {
	reqs := e.model.Requests()
	if len(reqs) == 0 {
		return ""
	}
	return string(reqs[len(reqs)-1].Body)
}

// TestRejectedAnswerOverHTTP (item 1): a restart after an answer rejected
// by answer_format asks the model again, with the user's question.
func TestRejectedAnswerOverHTTP(t *testing.T) {
	stuck := make(chan struct{})
	asked := make(chan struct{}, 1)
	r := newRestartable(t, func() *session.Options { return &session.Options{} }, nil,
		openaitest.Reply{Text: "Yes, it is."},
		openaitest.Reply{Func: func([]byte) openaitest.Reply {
			asked <- struct{}{}
			<-stuck // the server stops meanwhile
			return openaitest.Reply{Text: "late"}
		}},
		openaitest.Reply{Text: `{"ok":true}`},
	)
	t.Cleanup(func() { close(stuck) }) // before the model server closes
	id := r.create(keyAlice, `{"agent":{"name":"judge","answer_format":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}},"messages":"Is the sky blue?"}`)
	select {
	case <-asked:
	case <-time.After(20 * time.Second):
		t.Fatal("the model was not asked again")
	}
	r.restart()
	f := r.follow(keyAlice, id)
	c := f.status(session.StatusCompleted)
	if string(c.Answer) != `{"ok":true}` {
		t.Errorf("answer %s, want {\"ok\":true}; events:\n%s", c.Answer, f.dump())
	}
	if got := lastRequest(r.env); !strings.Contains(got, "Is the sky blue?") || !strings.Contains(got, "was rejected") {
		t.Errorf("the request after the restart lacks the question or the rejection:\n%s", got)
	}
}

// failingStore fails the worker's progress commits fail says to.
type failingStore struct {
	store.Store
	fail func() bool
}

func (f *failingStore) UpdateSession(ctx context.Context, s *store.Session, events []store.Event, opts *store.UpdateOptions) error {
	if opts != nil && opts.ResetAttempts && f.fail() {
		return errors.New("disk I/O error")
	}
	return f.Store.UpdateSession(ctx, s, events, opts)
}

// TestCutCallEvaluatedOverHTTP (item 2): a call cut before its refusal was
// committed is evaluated again, never run as approved: after a failed
// write, the deny rule refuses it again; after a restart, the pre_tool
// hook is asked again.
func TestCutCallEvaluatedOverHTTP(t *testing.T) {
	t.Run("deny rule after a failed write", func(t *testing.T) {
		g := newGate()
		g.open()
		var commits atomic.Int32
		e := newEnv(t, &envOptions{
			session: g.options(&session.Options{LeaseTTL: 300 * time.Millisecond, Permissions: &loop.Permissions{Deny: []loop.Rule{{Tool: "slow"}}}}),
			wrap: func(st store.Store) store.Store {
				return &failingStore{Store: st, fail: func() bool { return commits.Add(1) == 2 }}
			},
		}, calls(openaitest.ToolCall("c1", "slow", `{}`)), openaitest.Reply{Text: "refused"}, openaitest.Reply{Text: "refused"})
		id := e.create(keyAlice, `{"agent":"w","messages":"go"}`)
		f := e.follow(keyAlice, id)
		f.status(session.StatusCompleted)
		if commits.Load() < 2 {
			t.Fatal("no write failed")
		}
		if len(g.started) != 0 || g.ran.Load() != 0 {
			t.Errorf("the call a deny rule refuses ran; events:\n%s", f.dump())
		}
		if !strings.Contains(f.dump(), "denied by the rule") {
			t.Errorf("the refusal is not in the events:\n%s", f.dump())
		}
	})
	t.Run("pre_tool hook after a restart", func(t *testing.T) {
		g := newGate()
		var restarted atomic.Bool
		var asked atomic.Int32
		first := make(chan struct{}, 1)
		hook := loop.Hook{Event: loop.HookPreTool, Func: func(ctx context.Context, _ *loop.HookInput) (*loop.HookOutput, error) {
			if !restarted.Load() {
				first <- struct{}{}
				<-ctx.Done() // a slow check, cut by the stop
				return nil, ctx.Err()
			}
			asked.Add(1)
			return &loop.HookOutput{Decision: loop.HookDeny, Reason: "not today"}, nil
		}}
		r := newRestartable(t, func() *session.Options { return g.options(&session.Options{Hooks: []loop.Hook{hook}}) }, nil,
			calls(openaitest.ToolCall("c1", "slow", `{}`)), openaitest.Reply{Text: "ok"})
		id := r.create(keyAlice, `{"agent":"w","messages":"go"}`)
		select {
		case <-first:
		case <-time.After(20 * time.Second):
			t.Fatal("the hook was not asked")
		}
		restarted.Store(true)
		g.open()
		r.restart()
		f := r.follow(keyAlice, id)
		f.status(session.StatusCompleted)
		if asked.Load() != 1 || len(g.started) != 0 {
			t.Errorf("after the restart the hook was asked %d times and the call started %d times; want 1 and 0", asked.Load(), len(g.started))
		}
	})
}

// TestCancelledCallNotRunAgainOverHTTP (item 3): a call stopped by Cancel
// is not run again when a message restarts the session: the model reads
// an error for it.
func TestCancelledCallNotRunAgainOverHTTP(t *testing.T) {
	g := newGate()
	e := newEnv(t, &envOptions{session: g.options(&session.Options{})}, calls(openaitest.ToolCall("c1", "slow", `{}`)), openaitest.Reply{Text: "sorry"})
	id := e.create(keyAlice, `{"agent":"w","messages":"go"}`)
	g.waitStarted(t)
	base := "/api/v2/sessions/" + id
	e.expect(e.do("DELETE", base, keyAlice, nil), http.StatusNoContent)
	f := e.follow(keyAlice, id)
	f.status(session.StatusInterrupted)
	g.waitCut(t)
	e.expect(e.do("POST", base+"/messages", keyAlice, `{"type":"user_message","message":"what happened?"}`), http.StatusAccepted)
	g.open()
	f.status(session.StatusCompleted)
	if len(g.started) != 0 {
		t.Errorf("the cancelled call ran again; events:\n%s", f.dump())
	}
	if got := lastRequest(e); !strings.Contains(got, "was cut before it finished") || !strings.Contains(got, "what happened?") {
		t.Errorf("the request after the restart lacks the call's error or the message:\n%s", got)
	}
}

// TestCancelThenMessageOverHTTP (item 4): Cancel followed at once by a
// message stops the running call, and its result does not land in the
// restarted session.
func TestCancelThenMessageOverHTTP(t *testing.T) {
	g := newGate()
	e := newEnv(t, &envOptions{session: g.options(&session.Options{})}, calls(openaitest.ToolCall("c1", "slow", `{}`)), openaitest.Reply{Text: "ok, stopped"})
	id := e.create(keyAlice, `{"agent":"w","messages":"go"}`)
	g.waitStarted(t)
	base := "/api/v2/sessions/" + id
	e.expect(e.do("DELETE", base, keyAlice, nil), http.StatusNoContent)
	e.expect(e.do("POST", base+"/messages", keyAlice, `{"type":"user_message","message":"what happened?"}`), http.StatusAccepted)
	deadline := time.Now().Add(10 * time.Second)
	for g.cut.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if g.cut.Load() == 0 {
		t.Error("the cancelled call was not stopped")
		g.open() // let it end, to see where its result lands
	}
	f := e.follow(keyAlice, id)
	f.status(session.StatusCompleted)
	if strings.Contains(f.dump(), "the tool's output") {
		t.Errorf("the cancelled call's result landed:\n%s", f.dump())
	}
	if got := lastRequest(e); !strings.Contains(got, "was cut before it finished") || strings.Contains(got, "the tool's output") {
		t.Errorf("the request after the restart lacks the call's error, or holds its output:\n%s", got)
	}
}
