package client_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/postgres"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// toolsModel calls the client tool "read_file" until the conversation
// has calls results, then answers: every session is the same task,
// whatever order the sessions' requests come in.
type toolsModel struct{ calls int }

func (m toolsModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		done := 0
		for _, msg := range req.Messages {
			for _, p := range msg.Parts {
				if p.Kind == llm.PartToolResult {
					done++
				}
			}
		}
		resp := &llm.Response{Model: req.Model, Usage: llm.Usage{InputTokens: 100, OutputTokens: 10}, Message: llm.Message{Role: llm.RoleAssistant}}
		if done < m.calls {
			call := llm.ToolCall{ID: fmt.Sprintf("call_%d", done), Name: "read_file", Arguments: llm.Arguments(`{"path":"a.txt"}`)}
			if !yield(llm.Chunk{Kind: llm.ChunkToolCallStart, ID: call.ID, Name: call.Name}, nil) ||
				!yield(llm.Chunk{Kind: llm.ChunkToolCallDelta, Text: string(call.Arguments)}, nil) {
				return
			}
			resp.Message.Parts = []llm.Part{{Kind: llm.PartToolCall, ToolCall: &call}}
			resp.FinishReason = llm.FinishToolCalls
		} else {
			if !yield(llm.Chunk{Kind: llm.ChunkText, Text: "done"}, nil) {
				return
			}
			resp.Message.Parts = []llm.Part{llm.TextPart("done")}
			resp.FinishReason = llm.FinishStop
		}
		yield(llm.Chunk{Kind: llm.ChunkDone, Response: resp}, nil)
	}
}

// answers counts the server's answers by status, and the 429s by path.
type answers struct {
	mu       sync.Mutex
	byStatus map[int]int
	paced    []string
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
	w.ResponseWriter.WriteHeader(s)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (a *answers) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		a.mu.Lock()
		defer a.mu.Unlock()
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		a.byStatus[sw.status]++
		if sw.status == http.StatusTooManyRequests {
			a.paced = append(a.paced, r.Method+" "+r.URL.Path)
		}
	})
}

// TestManySessionsOneKey: one API key follows 256 sessions at once
// through the SDK (RunSession: a long-poll each, its tool run here),
// against the real server over loopback, with the server's default
// bounds. Every session completes, the server answers no 429 (a key's
// reads queue for their turn, and its long-polls are within its bound),
// and at the end no read waits or loads and the goroutines are back
// where they were.
func TestManySessionsOneKey(t *testing.T) {
	for _, name := range []string{"sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			var st store.Store
			var err error
			if name == "sqlite" {
				st, err = sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
			} else {
				st, err = postgres.Open(t.Context(), postgrestest.DSN(t), nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			manySessions(t, st, 256, false)
		})
	}
}

// TestDefaultClientKeepsConnections: a client made without an
// HTTPClient follows many sessions at once over connections it keeps,
// not a new connection for most long-polls (net/http's default keeps 2
// idle connections a host: 64 sessions of 2 tool calls made about 4
// connections each).
func TestDefaultClientKeepsConnections(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	const n = 64
	if conns := manySessions(t, st, n, true); conns > 2*n {
		t.Errorf("%d sessions made %d connections; want at most %d", n, conns, 2*n)
	}
}

// readsStore counts the event reads that reach the store.
type readsStore struct {
	store.Store
	reads atomic.Int64
}

func (r *readsStore) EventsWithin(ctx context.Context, id string, from int64, limit int, maxBytes int64) ([]store.Event, error) {
	r.reads.Add(1)
	return r.Store.EventsWithin(ctx, id, from, limit, maxBytes)
}

// manySessions runs n sessions at once through RunSession and returns
// how many connections the server accepted; with defaultClient the
// client is made without an HTTPClient.
func manySessions(t *testing.T, st store.Store, n int, defaultClient bool) int64 {
	base := runtime.NumGoroutine()
	rs := &readsStore{Store: st}
	m := session.New(rs, toolsModel{calls: 2}, &session.Options{Workers: n})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	a := &answers{byStatus: map[int]int{}}
	srv := httptest.NewUnstartedServer(a.wrap(newServer(m, &server.Options{APIKeys: []string{apiKey}})))
	var conns atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer func() {
		srv.Close()
		m.Stop(context.Background())
		st.Close()
	}()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	defer hc.CloseIdleConnections()
	opts := &client.Options{HTTPClient: hc}
	if defaultClient {
		opts = nil
	}
	c := client.New(srv.URL, apiKey, opts)
	var runs atomic.Int32
	tool := loop.NewTool("read_file", "Read a file.", func(_ context.Context, in struct {
		Path string `json:"path"`
	}) (string, error) {
		runs.Add(1)
		return "the file", nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute) // a hang check
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			res, err := c.RunSession(ctx, inline("read a.txt twice"), tool)
			switch {
			case err != nil:
				errs <- err
			case res.Status != session.StatusCompleted || res.Answer != "done":
				errs <- fmt.Errorf("session %s ended %s (%s)", res.SessionID, res.Status, res.Error)
			}
		})
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if failed++; failed <= 5 {
			t.Error(err)
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d sessions failed", failed, n)
	}
	t.Logf("%d sessions, %d connections", n, conns.Load())
	if got := runs.Load(); got != int32(2*n) {
		t.Errorf("the tool ran %d times, want %d", got, 2*n)
	}
	a.mu.Lock()
	t.Logf("answers by status: %v; %d event reads reached the store", a.byStatus, rs.reads.Load())
	if len(a.paced) > 0 {
		t.Errorf("%d answers were 429: %v", len(a.paced), a.paced[:min(len(a.paced), 5)])
	}
	a.mu.Unlock()
	if loading, waiting := m.Reads(); loading != 0 || waiting != 0 {
		t.Errorf("%d reads loading, %d waiting at the end", loading, waiting)
	}
	// Nothing the sessions made stays: the goroutines come back to what
	// they were, give or take the server's own (a hang check, not a
	// timing).
	hc.CloseIdleConnections()
	srv.CloseClientConnections()
	var now int
	for range 500 {
		if now = runtime.NumGoroutine(); now <= base+40 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if now > base+40 {
		t.Errorf("%d goroutines after the sessions, %d before", now, base)
	}
	return conns.Load()
}

// pacer answers the first n long-polls (GET .../changes) with 429, as
// the server paces a key's reads, with the Retry-After it is given; it
// records when each long-poll came.
type pacer struct {
	h          http.Handler
	n          atomic.Int32
	retryAfter string
	quota      string
	mu         sync.Mutex
	polls      []time.Time
	paced      int
}

func (p *pacer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == "GET" && strings.HasSuffix(r.URL.Path, "/changes") {
		p.mu.Lock()
		p.polls = append(p.polls, time.Now())
		p.mu.Unlock()
		if p.n.Add(-1) >= 0 {
			p.mu.Lock()
			p.paced++
			p.mu.Unlock()
			w.Header().Set("Retry-After", p.retryAfter)
			w.Header().Set("Hrns-Quota", p.quota)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"detail":"too many event reads at once"}`))
			return
		}
	}
	p.h.ServeHTTP(w, r)
}

func startPaced(t *testing.T, p *pacer) string {
	t.Helper()
	url, _ := startServer(t, nil, calls("call_1", "get_order_status", `{"order_id":"1"}`), openaitest.Reply{Text: "done"})
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	p.h = httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestPacedReadsRetried: a key whose long-polls the server paces (429,
// Hrns-Quota: reads) more times than MaxAttempts still has its session
// followed to the end: the pacing does not count as failures (before,
// RunSession failed with the 429 after 8 attempts). With MaxAttempts 1
// (no retries) the 429 reaches the caller as ErrBusy, not as the
// concurrent-session quota.
func TestPacedReadsRetried(t *testing.T) {
	for _, quota := range []string{"reads", "long-polls"} {
		t.Run(quota, func(t *testing.T) {
			p := &pacer{retryAfter: "0", quota: quota}
			p.n.Store(12)
			url := startPaced(t, p)
			c := client.New(url, apiKey, &client.Options{RetryDelay: time.Millisecond})
			res, err := c.RunSession(t.Context(), inline("go"), orderTool())
			if err != nil {
				t.Fatalf("RunSession: %v", err)
			}
			if res.Status != session.StatusCompleted {
				t.Fatalf("result = %+v", res)
			}
			if p.paced != 12 {
				t.Errorf("%d long-polls paced, want 12", p.paced)
			}
		})
	}
	p := &pacer{retryAfter: "0", quota: "reads"}
	p.n.Store(1)
	url := startPaced(t, p)
	c := client.New(url, apiKey, &client.Options{MaxAttempts: 1})
	h, err := c.StartSession(t.Context(), inline("go"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Changes(t.Context(), nil)
	var ae *client.APIError
	if !errors.Is(err, client.ErrBusy) || errors.Is(err, client.ErrQuotaExceeded) || !errors.As(err, &ae) || ae.StatusCode != http.StatusTooManyRequests {
		t.Errorf("Changes with MaxAttempts 1: %v, want ErrBusy and not ErrQuotaExceeded", err)
	}
}

// TestRetryAfterHonoured: the SDK asks again no sooner than the
// Retry-After of a 429 said (a lower bound, which load cannot break); a
// Retry-After that would outlast the context's deadline returns the 429
// at once, and a context cancelled while waiting ends the wait.
func TestRetryAfterHonoured(t *testing.T) {
	p := &pacer{retryAfter: "1", quota: "reads"}
	p.n.Store(1)
	url := startPaced(t, p)
	c := client.New(url, apiKey, &client.Options{RetryDelay: time.Millisecond})
	h, err := c.StartSession(t.Context(), inline("go"), orderTool())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Changes(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	if len(p.polls) != 2 {
		t.Fatalf("%d long-polls, want 2", len(p.polls))
	}
	if gap := p.polls[1].Sub(p.polls[0]); gap < time.Second {
		t.Errorf("asked again after %s, before the Retry-After of 1s", gap)
	}
	p.mu.Unlock()

	// An hour's wait against a context of a minute: the 429, at once.
	p.retryAfter = "3600"
	p.n.Store(1)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err = h.Changes(ctx, nil)
	if !errors.Is(err, client.ErrBusy) || ctx.Err() != nil {
		t.Errorf("Changes against a wait past the deadline: %v (context: %v), want ErrBusy at once", err, ctx.Err())
	}

	// Cancelled while it waits (a minute: a longer Retry-After is not
	// waited, TestHostileRetryAfter): the context's error.
	p.retryAfter = "60"
	p.n.Store(1)
	ctx, cancel = context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := h.Changes(ctx, nil)
		done <- err
	}()
	for {
		p.mu.Lock()
		n := len(p.polls)
		p.mu.Unlock()
		if n == 4 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	// The server has the 4th poll; its 429 reaches the client, which
	// then waits the Retry-After (60 s). Cancelled before the answer
	// arrived, the call returns the answer's error instead (CI saw
	// "429 ... too many event reads at once" once): let it arrive.
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Changes cancelled while waiting: %v", err)
		}
	case <-time.After(time.Minute): // a hang check
		t.Fatal("Changes waited on after its context was cancelled")
	}
}

func orderTool() *loop.ToolDef {
	return loop.NewTool("get_order_status", "Look up the status of an order.", func(context.Context, orderArgs) (string, error) {
		return "shipped", nil
	})
}
