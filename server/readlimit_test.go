package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// TestEventReadsBounded: a session whose log holds many large events
// (errors posted to it while it waits for a tool result) is read, over
// HTTP, through every path that lists its events: a page of 200, newest
// first, filtered by type, the changes from the start, and the share
// link with no key. Each answer loads at most the read budget (64 KiB
// here) plus one event: its body and what the process allocates for the
// request stay within a small multiple of the budget, far below the log
// (issue 32, finding 6: a page loaded the whole log per request). Every
// event is still read, by following next_index (from_index for the
// changes).
func TestEventReadsBounded(t *testing.T) {
	const (
		budget = 256 << 10
		posts  = 24
		size   = 96 << 10
	)
	e := newEnv(t, &envOptions{session: &session.Options{MaxReadBytes: budget}}, calls(openaitest.ToolCall("call_1", "get_order_status", `{"order_id":"4242"}`)),
		openaitest.Reply{Text: "done"})
	id := e.create(keyAlice, orderAgent)
	e.follow(keyAlice, id).status(session.StatusAwaitingToolResults)
	for i := range posts {
		body, _ := json.Marshal(map[string]string{"kind": "error_event", "error": fmt.Sprintf("%04d", i) + strings.Repeat("x", size), "origin": "custom_tools"})
		e.expect(e.do("POST", "/api/v2/sessions/"+id+"/tool_results", keyAlice, body), http.StatusAccepted)
	}
	// The agent reads them and ends: the session holds little, its log
	// a lot.
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/tool_results", keyAlice,
		`{"kind":"tool_result","tool_req":{"id":"call_1","tool_name":"get_order_status","args":{"order_id":"4242"}},"result":"shipped"}`), http.StatusAccepted)
	e.follow(keyAlice, id).status(session.StatusCompleted)
	var link struct {
		ShareURL string `json:"share_url"`
	}
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/share", keyAlice, nil), http.StatusOK).json(&link)
	shared := link.ShareURL[strings.Index(link.ShareURL, "/api/v2/shared/"):]
	// get reads path and checks what the request cost.
	get := func(path, key string) *response {
		t.Helper()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r := e.do("GET", path, key, nil)
		if r.status != http.StatusNoContent {
			e.expect(r, http.StatusOK)
		}
		runtime.ReadMemStats(&after)
		if len(r.body) > 2*budget+4*size {
			t.Errorf("GET %s: a body of %d bytes, budget %d", path, len(r.body), budget)
		}
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("GET %s: %d bytes, %d allocated", path, len(r.body), alloc)
		if alloc > 24*budget {
			t.Errorf("GET %s: %d bytes allocated, budget %d (the log: %d)", path, alloc, budget, posts*size)
		}
		return r
	}
	for _, tc := range []struct {
		name, path, key string
		descending      bool
	}{
		// Pages asked by number are given whole (TestEventPagesByNumber);
		// those asked from an index stop at the budget.
		{"page", "/api/v2/sessions/" + id + "/events?size=200&from_index=0", keyAlice, false},
		{"newest first", "/api/v2/sessions/" + id + "/events?size=200&sort=-timestamp&from_index=1000000", keyAlice, true},
		{"by type", "/api/v2/sessions/" + id + "/events?size=200&type=AgentEvent&from_index=0", keyAlice, false},
		{"shared", shared + "/events?size=200&from_index=0", "", false},
		{"shared newest first", shared + "/events?size=200&sort=-timestamp&from_index=1000000", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := map[string]bool{}
			var last int64 = -1
			path, pages := tc.path, 0
			for {
				var page session.Page[session.Event]
				get(path, tc.key).json(&page)
				if pages++; pages > posts+10 {
					t.Fatalf("%d pages", pages)
				}
				for _, ev := range page.Items {
					if last >= 0 && (ev.Index > last) == tc.descending {
						t.Fatalf("event %d after %d", ev.Index, last)
					}
					last = ev.Index
					if i := strings.Index(string(ev.Data), `"error":"`); i >= 0 {
						seen[string(ev.Data)[i+9:i+13]] = true
					}
				}
				if page.NextIndex == nil {
					break
				}
				path = fmt.Sprintf("%s&from_index=%d", tc.path[:strings.LastIndex(tc.path, "&from_index=")], *page.NextIndex)
			}
			if pages < 2 || len(seen) != posts {
				t.Errorf("%d pages, %d of %d errors read", pages, len(seen), posts)
			}
		})
	}
	t.Run("changes", func(t *testing.T) {
		seen := 0
		for from, turns := int64(0), 0; ; turns++ {
			if turns > posts+10 {
				t.Fatalf("%d turns", turns)
			}
			r := get(fmt.Sprintf("/api/v2/sessions/%s/changes?from_index=%d", id, from), keyAlice)
			if r.status == http.StatusNoContent {
				break
			}
			var c session.Changes
			r.json(&c)
			if len(c.NewEvents) == 0 {
				break
			}
			for _, ev := range c.NewEvents {
				if ev.Index != from {
					t.Fatalf("event %d at cursor %d", ev.Index, from)
				}
				from++
				if strings.Contains(string(ev.Data), `"error_event"`) {
					seen++
				}
			}
		}
		if seen != posts {
			t.Errorf("%d of %d errors read", seen, posts)
		}
	})
}

// gatedStore holds the first n bounded event reads of one session until
// release is closed, telling entered of each.
type gatedStore struct {
	store.Store
	id      atomic.Pointer[string]
	n       atomic.Int32
	entered chan struct{}
	release chan struct{}
}

func (g *gatedStore) EventsWithin(ctx context.Context, id string, from int64, limit int, maxBytes int64) ([]store.Event, error) {
	if p := g.id.Load(); p != nil && id == *p && g.n.Add(-1) >= 0 {
		g.entered <- struct{}{}
		select {
		case <-g.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.Store.EventsWithin(ctx, id, from, limit, maxBytes)
}

// TestEventReadsPerKey: one key's reads of events load at most
// MaxReadsPerOwner at once (2 here); one more, of the events or the
// changes, that may not wait (MaxReadWait < 0) is 429 with Retry-After
// and "Hrns-Quota: reads", and nothing of it is read. Another
// key's reads, and reads through the key's share links (counted apart),
// go on meanwhile; once the key's reads end, it reads again (issue 32,
// finding 6: what one key's requests make the server load).
func TestEventReadsPerKey(t *testing.T) {
	g := &gatedStore{entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, &envOptions{
		session: &session.Options{MaxReadsPerOwner: 2, MaxReadWait: -1},
		wrap:    func(st store.Store) store.Store { g.Store = st; return g },
	}, openaitest.Reply{Text: "a"}, openaitest.Reply{Text: "b"})
	alice := e.create(keyAlice, `{"agent":{"name":"a"},"messages":"hi"}`)
	e.follow(keyAlice, alice).status(session.StatusCompleted)
	bob := e.create(keyBob, `{"agent":{"name":"a"},"messages":"hi"}`)
	e.follow(keyBob, bob).status(session.StatusCompleted)
	var link struct {
		ShareURL string `json:"share_url"`
	}
	e.expect(e.do("POST", "/api/v2/sessions/"+alice+"/share", keyAlice, nil), http.StatusOK).json(&link)
	shared := link.ShareURL[strings.Index(link.ShareURL, "/api/v2/shared/"):]

	g.id.Store(&alice)
	g.n.Store(2)
	statuses := make(chan int, 2)
	for range 2 {
		go e.getStatus(t.Context(), "/api/v2/sessions/"+alice+"/events", keyAlice, statuses)
	}
	for range 2 {
		select {
		case <-g.entered:
		case <-t.Context().Done():
			t.Fatal("the reads never reached the store")
		}
	}
	for _, path := range []string{"/api/v2/sessions/" + alice + "/events", "/api/v2/sessions/" + alice + "/changes?from_index=0"} {
		r := e.expect(e.do("GET", path, keyAlice, nil), http.StatusTooManyRequests)
		if r.header.Get("Retry-After") == "" || r.header.Get("Hrns-Quota") != "reads" || !strings.Contains(string(r.body), "reads of events") {
			t.Errorf("GET %s: 429 with Retry-After %q, body %s", path, r.header.Get("Retry-After"), r.body)
		}
	}
	var page session.Page[session.Event]
	for _, tc := range []struct{ path, key string }{
		{"/api/v2/sessions/" + bob + "/events", keyBob},
		{"/api/v2/sessions/" + bob + "/changes?from_index=0", keyBob},
		{shared + "/events", ""},
	} {
		e.expect(e.do("GET", tc.path, tc.key, nil), http.StatusOK)
	}
	close(g.release)
	for range 2 {
		if s := <-statuses; s != http.StatusOK {
			t.Errorf("a held read answered %d", s)
		}
	}
	e.expect(e.do("GET", "/api/v2/sessions/"+alice+"/events", keyAlice, nil), http.StatusOK).json(&page)
	if len(page.Items) == 0 {
		t.Error("no events")
	}
}

// TestEventReadsQueue: a read that finds its key's read slots taken waits
// for one (Options.MaxReadWait) instead of answering 429 at once, so a
// client that follows many sessions of one key gets its events (before,
// the driver's 16 sessions on one key got 429s).
func TestEventReadsQueue(t *testing.T) {
	g := &gatedStore{entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, &envOptions{
		session: &session.Options{MaxReadsPerOwner: 2, MaxReadWait: time.Minute},
		wrap:    func(st store.Store) store.Store { g.Store = st; return g },
	}, openaitest.Reply{Text: "a"})
	alice := e.create(keyAlice, `{"agent":{"name":"a"},"messages":"hi"}`)
	e.follow(keyAlice, alice).status(session.StatusCompleted)
	g.id.Store(&alice)
	g.n.Store(2)
	statuses := make(chan int, 3)
	get := func() { e.getStatus(t.Context(), "/api/v2/sessions/"+alice+"/events", keyAlice, statuses) }
	for range 2 {
		go get()
	}
	for range 2 {
		select {
		case <-g.entered:
		case <-t.Context().Done():
			t.Fatal("the reads never reached the store")
		}
	}
	go get() // finds both slots taken: it waits
	select {
	case s := <-statuses:
		t.Fatalf("a read answered %d while the key's slots were taken", s)
	case <-time.After(200 * time.Millisecond): // a hang check, not a speed check
	}
	close(g.release)
	for range 3 {
		if s := <-statuses; s != http.StatusOK {
			t.Errorf("a read answered %d, want 200", s)
		}
	}
}

// pieceStore records what each bounded event read of one session loads,
// and can hold the read after the first of a request until the client
// has received what the first read gave.
type pieceStore struct {
	store.Store
	id atomic.Pointer[string]

	mu    sync.Mutex
	reads []int64 // the bytes of the events' data each read loaded, but its last event's
	calls int
	// gate, when set, holds the second read until it is closed.
	gate chan struct{}
}

func (s *pieceStore) EventsWithin(ctx context.Context, id string, from int64, limit int, maxBytes int64) ([]store.Event, error) {
	if p := s.id.Load(); p == nil || id != *p {
		return s.Store.EventsWithin(ctx, id, from, limit, maxBytes)
	}
	s.mu.Lock()
	s.calls++
	gate := s.gate
	if s.calls != 2 {
		gate = nil
	}
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	events, err := s.Store.EventsWithin(ctx, id, from, limit, maxBytes)
	var n int64
	for i, e := range events {
		if i < len(events)-1 {
			n += int64(len(e.Data))
		}
	}
	s.mu.Lock()
	s.reads = append(s.reads, n)
	s.mu.Unlock()
	return events, err
}

// TestEventPagesByNumber: a client that pages a session's events by
// number (page and size, as H's SDK does), over HTTP, receives every
// event exactly once, in order, though the pages hold more than the
// server's read budget: a page asked by number is given whole, with no
// next_index, newest first, filtered by type and through a share link
// too (issue 32, finding 6's caveat: such a client lost the events of a
// page cut at the budget). The server reads each page in pieces, none of
// which loads more than the budget plus one event, and sends each piece
// before it reads the next: the second read of a page waits here until
// the client has received the events of the first.
func TestEventPagesByNumber(t *testing.T) {
	const (
		budget = 64 << 10
		posts  = 16
		size   = 24 << 10
	)
	ps := &pieceStore{}
	e := newEnv(t, &envOptions{
		session: &session.Options{MaxReadBytes: budget},
		wrap:    func(st store.Store) store.Store { ps.Store = st; return ps },
	}, calls(openaitest.ToolCall("call_1", "get_order_status", `{"order_id":"4242"}`)), openaitest.Reply{Text: "done"})
	id := e.create(keyAlice, orderAgent)
	e.follow(keyAlice, id).status(session.StatusAwaitingToolResults)
	for i := range posts {
		body, _ := json.Marshal(map[string]string{"kind": "error_event", "error": fmt.Sprintf("%04d", i) + strings.Repeat("x", size), "origin": "custom_tools"})
		e.expect(e.do("POST", "/api/v2/sessions/"+id+"/tool_results", keyAlice, body), http.StatusAccepted)
	}
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/tool_results", keyAlice,
		`{"kind":"tool_result","tool_req":{"id":"call_1","tool_name":"get_order_status","args":{"order_id":"4242"}},"result":"shipped"}`), http.StatusAccepted)
	e.follow(keyAlice, id).status(session.StatusCompleted)
	var link struct {
		ShareURL string `json:"share_url"`
	}
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/share", keyAlice, nil), http.StatusOK).json(&link)
	shared := link.ShareURL[strings.Index(link.ShareURL, "/api/v2/shared/"):]
	ps.id.Store(&id)

	for _, tc := range []struct {
		name, path, key string
		descending      bool
	}{
		{"oldest first", "/api/v2/sessions/" + id + "/events?size=10", keyAlice, false},
		{"newest first", "/api/v2/sessions/" + id + "/events?size=10&sort=-timestamp", keyAlice, true},
		{"by type", "/api/v2/sessions/" + id + "/events?size=7&type=AgentEvent", keyAlice, false},
		{"shared", shared + "/events?size=10", "", false},
		{"shared newest first", shared + "/events?size=200&sort=-timestamp", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps.mu.Lock()
			ps.reads, ps.calls = nil, 0
			ps.mu.Unlock()
			seen := map[int64]int{}
			errors := 0
			var last int64 = -1
			total := -1
			for n := 1; total < 0 || (n-1)*pageSize(tc.path) < total; n++ {
				var page struct {
					session.Page[session.Event]
					NextIndex json.RawMessage `json:"next_index"`
				}
				e.expect(e.do("GET", fmt.Sprintf("%s&page=%d", tc.path, n), tc.key, nil), http.StatusOK).json(&page)
				if page.NextIndex != nil {
					t.Errorf("page %d has next_index %s", n, page.NextIndex)
				}
				total = page.Total
				if want := min(pageSize(tc.path), total-(n-1)*pageSize(tc.path)); len(page.Items) != want {
					t.Errorf("page %d: %d events, want %d", n, len(page.Items), want)
				}
				for _, ev := range page.Items {
					if last >= 0 && (ev.Index > last) == tc.descending {
						t.Fatalf("event %d after %d", ev.Index, last)
					}
					last = ev.Index
					seen[ev.Index]++
					if strings.Contains(string(ev.Data), `"error_event"`) {
						errors++
					}
				}
			}
			if len(seen) != total || errors != posts {
				t.Errorf("%d distinct events of %d, %d of %d errors", len(seen), total, errors, posts)
			}
			for i, n := range seen {
				if n != 1 {
					t.Errorf("event %d received %d times", i, n)
				}
			}
			ps.mu.Lock()
			defer ps.mu.Unlock()
			for _, n := range ps.reads {
				if n >= budget {
					t.Errorf("a read loaded %d bytes before its last event, budget %d", n, budget)
				}
			}
			if len(ps.reads) <= (total+pageSize(tc.path)-1)/pageSize(tc.path) {
				t.Errorf("%d reads for %d pages: the pages were not read in pieces", len(ps.reads), (total+pageSize(tc.path)-1)/pageSize(tc.path))
			}
		})
	}

	t.Run("sent before the next piece is read", func(t *testing.T) {
		gate := make(chan struct{})
		ps.mu.Lock()
		ps.reads, ps.calls, ps.gate = nil, 0, gate
		ps.mu.Unlock()
		defer func() {
			ps.mu.Lock()
			ps.gate = nil
			ps.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/api/v2/sessions/"+id+"/events?size=200", nil)
		req.Header.Set("Authorization", "Bearer "+keyAlice)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("no answer before the second read: %v", err)
		}
		defer resp.Body.Close()
		// The first piece: events up to the budget.
		var got bytes.Buffer
		buf := make([]byte, 32<<10)
		for got.Len() < budget {
			n, err := resp.Body.Read(buf)
			got.Write(buf[:n])
			if err != nil {
				t.Fatalf("after %d bytes: %v (the server held the page)", got.Len(), err)
			}
		}
		close(gate)
		if _, err := got.ReadFrom(resp.Body); err != nil {
			t.Fatal(err)
		}
		var page session.Page[session.Event]
		if err := json.Unmarshal(got.Bytes(), &page); err != nil || len(page.Items) != page.Total || page.NextIndex != nil {
			t.Fatalf("%v: %d of %d events", err, len(page.Items), page.Total)
		}
		for i, ev := range page.Items {
			if ev.Index != int64(i) {
				t.Fatalf("event %d at position %d", ev.Index, i)
			}
		}
	})
}

// pageSize is the size parameter of path.
func pageSize(path string) int {
	_, after, _ := strings.Cut(path, "size=")
	n, _ := strconv.Atoi(strings.SplitN(after, "&", 2)[0])
	return n
}

// getStatus sends GET path with key (as a bearer token) and sends its
// answer's status on statuses, 0 when there was none (ctx ended, the
// connection failed). Tests run it in a goroutine, for a request that
// waits.
func (e *env) getStatus(ctx context.Context, path, key string, statuses chan<- int) {
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		statuses <- 0
		return
	}
	resp.Body.Close()
	statuses <- resp.StatusCode
}
