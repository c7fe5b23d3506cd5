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
		go e.getStatus(ctx, poll, keyAlice, ended)
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

// TestLongPollsAllKeys: the long-polls and streams waiting on a server,
// all keys together, are bounded (Options.MaxLongPolls, 2 here, with 2 a
// key): with alice's two waiting, bob's wait and stream are 503 with
// Retry-After and no Hrns-Quota (the server's bound, not bob's), before
// they wait; alice's third is still 429 "Hrns-Quota: long-polls"; polls
// that do not wait are served; once alice's end, bob waits. Before, each
// key's waits were bounded but not their sum.
func TestLongPollsAllKeys(t *testing.T) {
	cs := &countStore{}
	e := newEnv(t, &envOptions{
		server: &server.Options{MaxLongPollsPerKey: 2, MaxLongPolls: 2},
		wrap:   func(st store.Store) store.Store { cs.Store = st; return cs },
	}, openaitest.Reply{Text: "a"}, openaitest.Reply{Text: "b"})
	alice := e.create(keyAlice, `{"agent":{"name":"a"},"messages":"hi"}`)
	f := e.follow(keyAlice, alice)
	f.status(session.StatusCompleted)
	bob := e.create(keyBob, `{"agent":{"name":"a"},"messages":"hi"}`)
	e.follow(keyBob, bob).status(session.StatusCompleted)
	poll := fmt.Sprintf("/api/v2/sessions/%s/changes?from_index=%d&wait_for_seconds=25", alice, len(f.events))

	cs.id.Store(&alice)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ended := make(chan int, 2)
	for range 2 {
		go e.getStatus(ctx, poll, keyAlice, ended)
	}
	for cs.counts.Load() < 2 { // both wait (a hang check: the test's deadline)
		select {
		case s := <-ended:
			t.Fatalf("a long-poll ended (%d) instead of waiting", s)
		default:
		}
		time.Sleep(time.Millisecond)
	}
	bobPoll := fmt.Sprintf("/api/v2/sessions/%s/changes?from_index=1000&wait_for_seconds=1", bob)
	for _, tc := range []struct{ path, accept string }{
		{bobPoll, ""},
		{"/api/v2/sessions/" + bob + "/events", "text/event-stream"},
	} {
		r := e.do("GET", tc.path, keyBob, nil, "Accept", tc.accept)
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || r.header.Get("Hrns-Quota") != "" ||
			!strings.Contains(string(r.body), "all keys together") {
			t.Errorf("GET %s (Accept %q) with the server's waits taken: %d, Retry-After %q, Hrns-Quota %q, body %s", tc.path, tc.accept,
				r.status, r.header.Get("Retry-After"), r.header.Get("Hrns-Quota"), r.body)
		}
	}
	if r := e.do("GET", poll, keyAlice, nil); r.status != http.StatusTooManyRequests || r.header.Get("Hrns-Quota") != "long-polls" {
		t.Errorf("alice's third wait: %d, Hrns-Quota %q, want 429 long-polls", r.status, r.header.Get("Hrns-Quota"))
	}
	e.expect(e.do("GET", fmt.Sprintf("/api/v2/sessions/%s/changes?from_index=0", bob), keyBob, nil), http.StatusOK)

	cancel()
	<-ended
	<-ended
	for i := 0; ; i++ {
		r := e.do("GET", bobPoll, keyBob, nil)
		if r.status == http.StatusNoContent {
			break
		}
		if r.status != http.StatusServiceUnavailable || i > 1000 {
			t.Fatalf("bob's wait after alice's ended: %d %s", r.status, r.body)
		}
	}
}

// TestEventReadsAllKeysQueue: a read of events that would wait when the
// server's reads waiting, all keys together, are at their bound
// (session.Options.MaxReadQueueTotal; none may wait here) is 503 with
// Retry-After and no Hrns-Quota: the server is full, not the key over
// its bound.
func TestEventReadsAllKeysQueue(t *testing.T) {
	g := &gatedStore{entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, &envOptions{
		session: &session.Options{MaxReadsPerOwner: 1, MaxReads: 1, MaxReadQueueTotal: -1},
		wrap:    func(st store.Store) store.Store { g.Store = st; return g },
	}, openaitest.Reply{Text: "a"}, openaitest.Reply{Text: "b"})
	alice := e.create(keyAlice, `{"agent":{"name":"a"},"messages":"hi"}`)
	e.follow(keyAlice, alice).status(session.StatusCompleted)
	bob := e.create(keyBob, `{"agent":{"name":"a"},"messages":"hi"}`)
	e.follow(keyBob, bob).status(session.StatusCompleted)
	g.id.Store(&alice)
	g.n.Store(1)
	status := make(chan int, 1)
	go e.getStatus(t.Context(), "/api/v2/sessions/"+alice+"/events", keyAlice, status)
	select {
	case <-g.entered:
	case <-t.Context().Done():
		t.Fatal("the read never reached the store")
	}
	for _, path := range []string{"/api/v2/sessions/" + bob + "/events", "/api/v2/sessions/" + bob + "/changes?from_index=0"} {
		r := e.do("GET", path, keyBob, nil)
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || r.header.Get("Hrns-Quota") != "" ||
			!strings.Contains(string(r.body), "all keys") {
			t.Errorf("GET %s with the server's slot taken: %d, Retry-After %q, Hrns-Quota %q, body %s", path, r.status,
				r.header.Get("Retry-After"), r.header.Get("Hrns-Quota"), r.body)
		}
	}
	close(g.release)
	if s := <-status; s != http.StatusOK {
		t.Errorf("the held read answered %d", s)
	}
	e.expect(e.do("GET", "/api/v2/sessions/"+bob+"/events", keyBob, nil), http.StatusOK)
}
