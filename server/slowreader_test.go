package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// bigLog makes a completed session of key's and appends to its log, in
// one commit straight to the store, posts events of size bytes each (far
// more than a stalled client's socket takes in); it returns its id.
func (e *env) bigLog(key string, posts, size int) string {
	e.t.Helper()
	id := e.create(key, `{"agent":{"name":"a"},"messages":"hi"}`)
	e.follow(key, id).status(session.StatusCompleted)
	s, err := e.st.GetSession(e.t.Context(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	events := make([]store.Event, posts)
	for i := range events {
		data, _ := json.Marshal(map[string]string{"kind": "note", "text": fmt.Sprintf("%04d", i) + strings.Repeat("x", size)})
		events[i] = store.Event{Type: "AgentEvent", Data: data}
	}
	if err := e.st.UpdateSession(e.t.Context(), s, events, nil); err != nil {
		e.t.Fatal(err)
	}
	return id
}

// stalledGet sends GET path with key (and header, name and value pairs)
// on a connection whose client reads nothing (its receive buffer as
// small as the kernel allows), and returns the connection, to read the
// answer from later.
func (e *env) stalledGet(path, key string, header ...string) net.Conn {
	e.t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return err
	}}
	addr := strings.TrimPrefix(e.url, "http://")
	conn, err := d.DialContext(e.t.Context(), "tcp", addr)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close() })
	var h strings.Builder
	for i := 0; i+1 < len(header); i += 2 {
		fmt.Fprintf(&h, "%s: %s\r\n", header[i], header[i+1])
	}
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n%s\r\n", path, addr, key, h.String())
	return conn
}

// TestSlowPageReaderHoldsNoRead: a page of events asked by number (given
// whole, in pieces) to a client that stops reading holds no read slot
// while its pieces wait to be sent: with one read slot in the server
// (MaxReads 1), another key's reads, and the same key's, are answered
// while the stalled page is being sent; the stalled client, when it
// reads again, receives the page whole. Before, the page kept its slot
// until it was sent, so every other read waited for it (here 429 after
// MaxReadWait), and a few stalled clients stalled everyone's reads.
func TestSlowPageReaderHoldsNoRead(t *testing.T) {
	const (
		posts = 160
		size  = 64 << 10 // 10 MiB of events: more than the sockets hold
	)
	ps := &pieceStore{}
	e := newEnv(t, &envOptions{
		session: &session.Options{MaxReadBytes: 64 << 10, MaxReadsPerOwner: 1, MaxReads: 1, MaxReadWait: 5 * time.Second},
		wrap:    func(st store.Store) store.Store { ps.Store = st; return ps },
	}, openaitest.Reply{Text: "a"}, openaitest.Reply{Text: "b"})
	alice := e.bigLog(keyAlice, posts, size)
	bob := e.create(keyBob, `{"agent":{"name":"a"},"messages":"hi"}`)
	e.follow(keyBob, bob).status(session.StatusCompleted)

	ps.id.Store(&alice)
	conn := e.stalledGet("/api/v2/sessions/"+alice+"/events?size=200", keyAlice)
	for { // the page's reading has begun (a hang check: the test's deadline)
		ps.mu.Lock()
		n := ps.calls
		ps.mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	for _, tc := range []struct{ path, key string }{
		{"/api/v2/sessions/" + bob + "/events", keyBob},
		{"/api/v2/sessions/" + bob + "/changes?from_index=0", keyBob},
		{"/api/v2/sessions/" + alice + "/events?size=2", keyAlice},
		{"/api/v2/sessions/" + alice + "/events?size=2&from_index=0", keyAlice},
	} {
		e.expect(e.do("GET", tc.path, tc.key, nil), http.StatusOK)
	}
	// The stalled client reads on: the page is whole.
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("the stalled page, after %d bytes: %v", len(body), err)
	}
	var page session.Page[session.Event]
	if err := json.Unmarshal(body, &page); err != nil || resp.StatusCode != http.StatusOK || page.Total < posts || len(page.Items) != page.Total {
		t.Fatalf("the stalled page: %d, %v, %d events of %d", resp.StatusCode, err, len(page.Items), page.Total)
	}
	if len(body) < 8<<20 {
		t.Fatalf("the page was %d bytes: too few to fill the sockets", len(body))
	}
}

// TestSlowLongPollHoldsNoWait: a long-poll (/changes with
// wait_for_seconds) whose answer is sent to a client that stops reading
// gives its key's long-poll back once it is answered, before the answer
// is sent: the key (at most one long-poll here) waits again while the
// stalled answer is still being sent. Before, the long-poll counted
// until its answer was sent, and a client that never read it held one
// of its key's, and of the server's, for good.
func TestSlowLongPollHoldsNoWait(t *testing.T) {
	const (
		posts = 160
		size  = 64 << 10
	)
	g := &gatedStore{entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, &envOptions{
		session: &session.Options{MaxReadBytes: 32 << 20},
		server:  &server.Options{MaxLongPollsPerKey: 1},
		wrap:    func(st store.Store) store.Store { g.Store = st; return g },
	}, openaitest.Reply{Text: "a"})
	alice := e.bigLog(keyAlice, posts, size)

	g.id.Store(&alice)
	g.n.Store(1)
	conn := e.stalledGet("/api/v2/sessions/"+alice+"/changes?from_index=0&wait_for_seconds=25", keyAlice)
	select {
	case <-g.entered: // the stalled long-poll reads its answer
	case <-t.Context().Done():
		t.Fatal("the long-poll never read")
	}
	poll := fmt.Sprintf("/api/v2/sessions/%s/changes?from_index=100000&wait_for_seconds=1", alice)
	e.expect(e.do("GET", poll, keyAlice, nil), http.StatusTooManyRequests)
	close(g.release)
	for i := 0; ; i++ {
		r := e.do("GET", poll, keyAlice, nil)
		if r.status == http.StatusNoContent {
			break
		}
		if r.status != http.StatusTooManyRequests || i > 500 {
			t.Fatalf("a long-poll while the stalled one's answer is sent: %d %s", r.status, r.body)
		}
		time.Sleep(20 * time.Millisecond) // while the stalled one reads (a hang check, not a speed check)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	var c session.Changes
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != http.StatusOK || len(c.NewEvents) < posts {
		t.Fatalf("the stalled answer: %d, %v, %d events", resp.StatusCode, err, len(c.NewEvents))
	}
}

// TestSlowStreamEnds: an event stream to a client that stops reading
// ends once a turn's events are not taken within the write timeout (a
// second here, a minute in the server), and gives back the long-poll it
// counts as: its key (at most one long-poll here) waits again. Before,
// nothing bounded its writes: the stream, and its key's long-poll and
// the server's, were held for as long as the client kept its socket
// open.
func TestSlowStreamEnds(t *testing.T) {
	const (
		posts = 160
		size  = 64 << 10
	)
	server.SetPageWriteTimeout(t, time.Second)
	g := &gatedStore{entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, &envOptions{
		server: &server.Options{MaxLongPollsPerKey: 1},
		wrap:   func(st store.Store) store.Store { g.Store = st; return g },
	}, openaitest.Reply{Text: "a"})
	alice := e.bigLog(keyAlice, posts, size)

	g.id.Store(&alice)
	g.n.Store(1)
	e.stalledGet("/api/v2/sessions/"+alice+"/events", keyAlice, "Accept", "text/event-stream")
	select {
	case <-g.entered: // the stream reads its first turn
	case <-t.Context().Done():
		t.Fatal("the stream never read")
	}
	poll := fmt.Sprintf("/api/v2/sessions/%s/changes?from_index=100000&wait_for_seconds=1", alice)
	e.expect(e.do("GET", poll, keyAlice, nil), http.StatusTooManyRequests) // the stream counts
	close(g.release)
	for i := 0; ; i++ {
		r := e.do("GET", poll, keyAlice, nil)
		if r.status == http.StatusNoContent {
			break // the stream ended
		}
		if r.status != http.StatusTooManyRequests || i > 2000 {
			t.Fatalf("a long-poll while the stalled stream is sent (%d tries): %d %s", i, r.status, r.body)
		}
		time.Sleep(10 * time.Millisecond) // a hang check, not a speed check
	}
}

// TestSlowAnswerClosed: a JSON answer of the sessions API (a page of
// events asked by from_index, the changes, a long-poll's answer) to a
// client that sends its request and never reads loses its connection
// once a write is not taken within its deadline (writeBudget: a minute a
// MiB begun in the server, a fifth of a second here): the server closes
// it, and what it held for it (the connection, the answer's bytes) is
// freed; the client, reading at last, finds the answer cut short. Before,
// these answers had no write deadline: the server held the connection
// and the answer for as long as the client kept its socket open (the
// wait for the close below fails at its bound).
func TestSlowAnswerClosed(t *testing.T) {
	const (
		posts = 160
		size  = 64 << 10 // 10 MiB: more than the sockets hold
	)
	server.SetPageWriteTimeout(t, 200*time.Millisecond)
	var mu sync.Mutex
	closed := map[string]chan struct{}{} // by the client's address
	closedCh := func(addr string) chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		if closed[addr] == nil {
			closed[addr] = make(chan struct{})
		}
		return closed[addr]
	}
	e := newEnv(t, &envOptions{
		session: &session.Options{MaxReadBytes: 32 << 20},
		connState: func(c net.Conn, s http.ConnState) {
			if s == http.StateClosed {
				close(closedCh(c.RemoteAddr().String()))
			}
		},
	}, openaitest.Reply{Text: "a"})
	alice := e.bigLog(keyAlice, posts, size)
	for _, path := range []string{
		"/api/v2/sessions/" + alice + "/events?size=200&from_index=0",
		"/api/v2/sessions/" + alice + "/changes?from_index=0",
		"/api/v2/sessions/" + alice + "/changes?from_index=0&wait_for_seconds=5",
	} {
		conn := e.stalledGet(path, keyAlice)
		select {
		case <-closedCh(conn.LocalAddr().String()):
		case <-time.After(2 * time.Minute): // a hang check, not a speed check
			t.Fatalf("%s: the server still holds the stalled connection", path)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			continue // cut before its head was read: cut short too
		}
		body, err := io.ReadAll(resp.Body)
		if err == nil || resp.StatusCode != http.StatusOK || int64(len(body)) >= resp.ContentLength {
			t.Fatalf("%s: %d, %d bytes of %d, %v: not cut short", path, resp.StatusCode, len(body), resp.ContentLength, err)
		}
	}
}
