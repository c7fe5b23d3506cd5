package server_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// order numbers what the server does, in the order it does it.
type order struct {
	n      atomic.Int64
	mu     sync.Mutex
	writes map[string][]int64 // by status line: when an answer was written
}

func (o *order) wrote(b []byte) {
	n := o.n.Add(1)
	line, _, _ := bytes.Cut(b, []byte("\r\n"))
	o.mu.Lock()
	o.writes[string(line)] = append(o.writes[string(line)], n)
	o.mu.Unlock()
}

// last returns when the last answer with the status line was written.
func (o *order) last(line string) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	w := o.writes[line]
	if len(w) == 0 {
		return 0
	}
	return w[len(w)-1]
}

type orderListener struct {
	net.Listener
	o *order
}

func (l orderListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return orderConn{c, l.o}, nil
}

type orderConn struct {
	net.Conn
	o *order
}

func (c orderConn) Write(b []byte) (int, error) {
	c.o.wrote(b)
	return c.Conn.Write(b)
}

// orderTransport numbers the model requests as they start.
type orderTransport struct {
	o       *order
	started chan int64
}

func (t orderTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.started <- t.o.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// countWaits signals each read of a session's event count: a long-poll
// that read it, with nothing new, goes on to wait.
type countWaits struct {
	store.Store
	counted chan struct{}
}

func (c countWaits) EventCount(ctx context.Context, id string) (string, int64, error) {
	defer func() {
		select {
		case c.counted <- struct{}{}:
		default:
		}
	}()
	return c.Store.EventCount(ctx, id)
}

// TestWokenRunsFirst: on one P, as a server pinned to one CPU runs, the
// goroutines a caller's input makes runnable run before the input's 202
// is written: the long-poll a message wakes writes its answer first, and
// the worker that a tool result's commit claims starts its model request
// first. Before, both waited until the 202 was written and the
// connection's next read parked the handler.
func TestWokenRunsFirst(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	o := &order{writes: map[string][]int64{}}
	model := openaitest.NewServer()
	t.Cleanup(model.Close)
	call := openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_1", "get_order_status", `{"order_id":"1"}`)}}
	for range 64 {
		model.Push(call)
	}
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	counted := make(chan struct{}, 1)
	started := make(chan int64, 64)
	hc := &http.Client{Transport: orderTransport{o, started}}
	m := session.New(countWaits{st, counted}, &openai.Client{BaseURL: model.URL(), Model: "test-model", HTTPClient: hc}, &session.Options{MaxSteps: 1 << 20})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(newServer(m, &server.Options{APIKeys: []string{keyAlice}}))
	srv.Listener = orderListener{srv.Listener, o}
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		m.Stop(context.Background())
	})
	e := &env{t: t, model: model, url: srv.URL, st: st}
	f := e.follow(keyAlice, e.create(keyAlice, orderAgent))
	<-started
	f.status(session.StatusAwaitingToolResults)

	const n = 20
	first := 0
	for range n {
		body := `{"kind":"tool_result","tool_req":{"tool_name":"get_order_status","id":"` + f.pending()[0].ID + `"},"result":"ok"}`
		e.expect(e.do("POST", "/api/v2/sessions/"+f.id+"/tool_results", keyAlice, body), http.StatusAccepted)
		if <-started < o.last("HTTP/1.1 202 Accepted") {
			first++
		}
		f.status(session.StatusAwaitingToolResults)
	}
	t.Logf("model requests started before the 202: %d of %d", first, n)
	// A scheduler may take another goroutine first now and then (the
	// race detector's, at random): most, not all (before, none).
	if first < n/2 {
		t.Errorf("the model request started before the tool result's 202 was written %d times in %d, want at least %d", first, n, n/2)
	}

	e.expect(e.do("POST", "/api/v2/sessions/"+f.id+"/pause", keyAlice, nil), http.StatusAccepted)
	f.status(session.StatusPaused)
	first = 0
	for range n {
		select {
		case <-counted:
		default:
		}
		done := make(chan struct{})
		go func() {
			f.poll(25)
			close(done)
		}()
		<-counted // the long-poll found nothing new: it waits
		e.expect(e.do("POST", "/api/v2/sessions/"+f.id+"/messages", keyAlice, `{"message":"ping"}`), http.StatusAccepted)
		<-done
		if o.last("HTTP/1.1 200 OK") < o.last("HTTP/1.1 202 Accepted") {
			first++
		}
	}
	t.Logf("long-polls answered before the 202: %d of %d", first, n)
	if first < n/2 {
		t.Errorf("the woken long-poll wrote its answer before the message's 202 %d times in %d, want at least %d", first, n, n/2)
	}
}
