package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

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
		{"page", "/api/v2/sessions/" + id + "/events?size=200", keyAlice, false},
		{"newest first", "/api/v2/sessions/" + id + "/events?size=200&sort=-timestamp", keyAlice, true},
		{"by type", "/api/v2/sessions/" + id + "/events?size=200&type=AgentEvent", keyAlice, false},
		{"shared", shared + "/events?size=200", "", false},
		{"shared newest first", shared + "/events?size=200&sort=-timestamp", "", true},
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
				path = fmt.Sprintf("%s&from_index=%d", tc.path, *page.NextIndex)
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
// changes, is 429 with Retry-After, and nothing of it is read. Another
// key's reads, and reads through the key's share links (counted apart),
// go on meanwhile; once the key's reads end, it reads again (issue 32,
// finding 6: what one key's requests make the server load).
func TestEventReadsPerKey(t *testing.T) {
	g := &gatedStore{entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, &envOptions{
		session: &session.Options{MaxReadsPerOwner: 2},
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
		go func() {
			req, _ := http.NewRequestWithContext(t.Context(), "GET", e.url+"/api/v2/sessions/"+alice+"/events", nil)
			req.Header.Set("Authorization", "Bearer "+keyAlice)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				statuses <- 0
				return
			}
			resp.Body.Close()
			statuses <- resp.StatusCode
		}()
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
		if r.header.Get("Retry-After") == "" || !strings.Contains(string(r.body), "reads of events") {
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
