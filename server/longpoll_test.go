package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// countStore counts the event counts read of one session: each waiting
// long-poll reads it once before it waits.
type countStore struct {
	store.Store
	id     atomic.Pointer[string]
	counts atomic.Int32
}

func (c *countStore) EventCount(ctx context.Context, id string) (string, int64, error) {
	if p := c.id.Load(); p != nil && *p == id {
		c.counts.Add(1)
	}
	return c.Store.EventCount(ctx, id)
}

// TestLongPollsPerKey: a key that opens more long-polls (and event
// streams) than its bound (2 here) has waiting at once gets 429 with
// Retry-After and "Hrns-Quota: long-polls" for the one more, before it
// waits or streams anything; another key's long-polls, and the key's
// polls that do not wait, are served meanwhile; once one of its waits
// ends, the key may wait again. Before, nothing bounded them: a key
// could hold the server's goroutines, connections and subscriptions by
// the thousand.
func TestLongPollsPerKey(t *testing.T) {
	cs := &countStore{}
	e := newEnv(t, &envOptions{
		server: &server.Options{MaxLongPollsPerKey: 2},
		wrap:   func(st store.Store) store.Store { cs.Store = st; return cs },
	}, openaitest.Reply{Text: "a"}, openaitest.Reply{Text: "b"})
	alice := e.create(keyAlice, `{"agent":{"name":"a"},"messages":"hi"}`)
	f := e.follow(keyAlice, alice)
	f.status(session.StatusCompleted)
	bob := e.create(keyBob, `{"agent":{"name":"a"},"messages":"hi"}`)
	e.follow(keyBob, bob).status(session.StatusCompleted)
	end := len(f.events)
	poll := fmt.Sprintf("/api/v2/sessions/%s/changes?from_index=%d&wait_for_seconds=25", alice, end)

	cs.id.Store(&alice)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ended := make(chan int, 2)
	for range 2 {
		go func() {
			req, _ := http.NewRequestWithContext(ctx, "GET", e.url+poll, nil)
			req.Header.Set("Authorization", "Bearer "+keyAlice)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				ended <- 0
				return
			}
			resp.Body.Close()
			ended <- resp.StatusCode
		}()
	}
	for cs.counts.Load() < 2 { // both wait (a hang check: the test's deadline)
		select {
		case s := <-ended:
			t.Fatalf("a long-poll ended (%d) instead of waiting", s)
		default:
		}
		time.Sleep(time.Millisecond)
	}
	for _, tc := range []struct{ path, accept string }{
		{poll, ""},
		{"/api/v2/sessions/" + alice + "/events", "text/event-stream"},
	} {
		r := e.do("GET", tc.path, keyAlice, nil, "Accept", tc.accept)
		if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" || r.header.Get("Hrns-Quota") != "long-polls" ||
			!strings.Contains(string(r.body), "long-polls") {
			t.Errorf("GET %s (Accept %q), a third wait: %d, Retry-After %q, Hrns-Quota %q, body %s", tc.path, tc.accept,
				r.status, r.header.Get("Retry-After"), r.header.Get("Hrns-Quota"), r.body)
		}
	}
	// A poll that does not wait is served; so is another key's wait.
	e.expect(e.do("GET", fmt.Sprintf("/api/v2/sessions/%s/changes?from_index=0", alice), keyAlice, nil), http.StatusOK)
	e.expect(e.do("GET", fmt.Sprintf("/api/v2/sessions/%s/changes?from_index=1000&wait_for_seconds=1", bob), keyBob, nil), http.StatusNoContent)

	// One of alice's waits ends: she may wait again.
	cancel()
	<-ended
	<-ended
	for i := 0; ; i++ {
		r := e.do("GET", fmt.Sprintf("/api/v2/sessions/%s/changes?from_index=%d&wait_for_seconds=1", alice, end), keyAlice, nil)
		if r.status == http.StatusNoContent {
			break
		}
		if r.status != http.StatusTooManyRequests || i > 1000 {
			t.Fatalf("a wait after the others ended: %d %s", r.status, r.body)
		}
	}
}
