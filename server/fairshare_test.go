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

// countAllStore counts the event counts read, of every session: each
// long-poll that waits reads one before it waits.
type countAllStore struct {
	store.Store
	counts atomic.Int64
}

func (c *countAllStore) EventCount(ctx context.Context, id string) (string, int64, error) {
	c.counts.Add(1)
	return c.Store.EventCount(ctx, id)
}

// Three keys that each take all they may (hogs), and three that ask for
// one (quiet).
var (
	hogKeys   = []string{"sk-hog-1", "sk-hog-2", "sk-hog-3"}
	quietKeys = []string{"sk-quiet-1", "sk-quiet-2", "sk-quiet-3"}
)

// sessionsOf creates a completed session for each key (one scripted
// reply each) and returns their ids and their events' counts, by key.
func (e *env) sessionsOf(keys ...string) (ids map[string]string, counts map[string]int) {
	e.t.Helper()
	ids, counts = map[string]string{}, map[string]int{}
	for _, k := range keys {
		ids[k] = e.create(k, `{"agent":{"name":"a"},"messages":"hi"}`)
		f := e.follow(k, ids[k])
		f.status(session.StatusCompleted)
		counts[k] = len(f.events)
	}
	return ids, counts
}

// startWait sends GET path with key in a goroutine whose status goes to
// ended, and reports 0 once waiting() says the request waits, or the
// status it answered at once.
func (e *env) startWait(ctx context.Context, path, key string, ended chan int, waiting func() bool) int {
	e.t.Helper()
	go e.getStatus(ctx, path, key, ended)
	for { // a hang check: the test's deadline
		select {
		case s := <-ended:
			return s
		default:
		}
		if waiting() {
			return 0
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLongPollsFairShare: keys that each open all the long-polls they
// may, over HTTP, cannot fill the server's bound (16 here, 8 a key): its
// last quarter (4) is kept for keys with fewer than 1 waiting (the floor
// of so small a bound), so the first hog takes 8, the second 4 (three
// quarters taken), the third 1, each then refused with 429 and
// "Hrns-Quota: long-polls", as over its own bound; a quiet key's
// long-poll still waits, its second is 429 too, and two more quiet
// keys' wait. The bound still holds: with all 16 taken, a long-poll or
// stream of any key is 503. Before, the first two hogs took all 16 and
// every other key got 503.
func TestLongPollsFairShare(t *testing.T) {
	cs := &countAllStore{}
	var replies []openaitest.Reply
	for range len(hogKeys) + len(quietKeys) {
		replies = append(replies, openaitest.Reply{Text: "a"})
	}
	e := newEnv(t, &envOptions{
		server: &server.Options{MaxLongPollsPerKey: 8, MaxLongPolls: 16},
		keys:   append(append([]string{}, hogKeys...), quietKeys...),
		wrap:   func(st store.Store) store.Store { cs.Store = st; return cs },
	}, replies...)
	ids, counts := e.sessionsOf(append(append([]string{}, hogKeys...), quietKeys...)...)
	poll := func(k string) string {
		return fmt.Sprintf("/api/v2/sessions/%s/changes?from_index=%d&wait_for_seconds=25", ids[k], counts[k])
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ended := make(chan int, 64)
	waiting := 0
	wait := func(k string) int {
		before := cs.counts.Load()
		s := e.startWait(ctx, poll(k), k, ended, func() bool { return cs.counts.Load() > before })
		if s == 0 {
			waiting++
		}
		return s
	}
	for i, k := range hogKeys {
		n := 0
		for wait(k) == 0 {
			n++
		}
		if want := []int{8, 4, 1}[i]; n != want {
			t.Fatalf("hog %d waits %d long-polls, want %d", i+1, n, want)
		}
		r := e.do("GET", poll(k), k, nil)
		if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" || r.header.Get("Hrns-Quota") != "long-polls" {
			t.Errorf("hog %d's long-poll past its share: %d, Retry-After %q, Hrns-Quota %q, %s", i+1, r.status,
				r.header.Get("Retry-After"), r.header.Get("Hrns-Quota"), r.body)
		}
	}
	for i, k := range quietKeys {
		if s := wait(k); s != 0 {
			t.Fatalf("quiet key %d's long-poll with the hogs waiting: %d, want it to wait", i+1, s)
		}
		if i == 0 {
			r := e.do("GET", poll(k), k, nil)
			if r.status != http.StatusTooManyRequests || r.header.Get("Hrns-Quota") != "long-polls" {
				t.Errorf("quiet key 1's second long-poll: %d, Hrns-Quota %q, %s", r.status, r.header.Get("Hrns-Quota"), r.body)
			}
		}
	}
	for _, tc := range []struct{ path, key, accept string }{
		{poll(quietKeys[2]), quietKeys[2], ""},
		{"/api/v2/sessions/" + ids[quietKeys[2]] + "/events", quietKeys[2], "text/event-stream"},
		{poll(hogKeys[2]), hogKeys[2], ""},
	} {
		r := e.do("GET", tc.path, tc.key, nil, "Accept", tc.accept)
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || r.header.Get("Hrns-Quota") != "" ||
			!strings.Contains(string(r.body), "all keys together") {
			t.Errorf("GET %s (%s, Accept %q) with the server's 16 waiting: %d, Retry-After %q, Hrns-Quota %q, %s", tc.path, tc.key, tc.accept,
				r.status, r.header.Get("Retry-After"), r.header.Get("Hrns-Quota"), r.body)
		}
	}
	cancel()
	for range waiting {
		<-ended
	}
}

// TestEventReadsFairShare: keys that each queue all the reads of events
// they may, over HTTP, while the server's one read slot is taken, cannot
// fill the server's queue (16 here, 8 a key): its last quarter is kept
// for keys with fewer than 1 waiting, so the first hog queues 8, the
// second 4, the third 1, each then refused with 429 and "Hrns-Quota:
// reads"; three quiet keys' reads still queue (a quiet key's second is
// 429), and all are answered in turn. The bound still holds: with 16
// waiting, a read of any key is 503. Before, the first two hogs filled
// the queue and every other key's read got 503.
func TestEventReadsFairShare(t *testing.T) {
	g := &gatedStore{entered: make(chan struct{}), release: make(chan struct{})}
	var replies []openaitest.Reply
	for range len(hogKeys) + len(quietKeys) {
		replies = append(replies, openaitest.Reply{Text: "a"})
	}
	e := newEnv(t, &envOptions{
		session: &session.Options{MaxReadsPerOwner: 1, MaxReads: 1, MaxReadQueue: 8, MaxReadQueueTotal: 16, MaxReadWait: time.Minute},
		keys:    append(append([]string{}, hogKeys...), quietKeys...),
		wrap:    func(st store.Store) store.Store { g.Store = st; return g },
	}, replies...)
	ids, _ := e.sessionsOf(append(append([]string{}, hogKeys...), quietKeys...)...)
	read := func(k string) string { return "/api/v2/sessions/" + ids[k] + "/events" }

	// The server's one slot: the first hog's read, held in the store.
	first := ids[hogKeys[0]]
	g.id.Store(&first)
	g.n.Store(1)
	statuses := make(chan int, 64)
	go e.getStatus(t.Context(), read(hogKeys[0]), hogKeys[0], statuses)
	select {
	case <-g.entered:
	case <-t.Context().Done():
		t.Fatal("the read never reached the store")
	}
	queued := 0
	queue := func(k string) int {
		_, before := e.m.Reads()
		s := e.startWait(t.Context(), read(k), k, statuses, func() bool { _, n := e.m.Reads(); return n > before })
		if s == 0 {
			queued++
		}
		return s
	}
	for i, k := range hogKeys {
		n := 0
		for queue(k) == 0 {
			n++
		}
		if want := []int{8, 4, 1}[i]; n != want {
			t.Fatalf("hog %d queues %d reads, want %d", i+1, n, want)
		}
		r := e.do("GET", read(k), k, nil)
		if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" || r.header.Get("Hrns-Quota") != "reads" {
			t.Errorf("hog %d's read past its share: %d, Retry-After %q, Hrns-Quota %q, %s", i+1, r.status,
				r.header.Get("Retry-After"), r.header.Get("Hrns-Quota"), r.body)
		}
	}
	for i, k := range quietKeys {
		if s := queue(k); s != 0 {
			t.Fatalf("quiet key %d's read with the hogs' queued: %d, want it to wait", i+1, s)
		}
		if i == 0 {
			r := e.do("GET", read(k), k, nil)
			if r.status != http.StatusTooManyRequests || r.header.Get("Hrns-Quota") != "reads" {
				t.Errorf("quiet key 1's second read: %d, Hrns-Quota %q, %s", r.status, r.header.Get("Hrns-Quota"), r.body)
			}
		}
	}
	for _, k := range []string{quietKeys[2], hogKeys[2]} {
		r := e.do("GET", read(k), k, nil)
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || r.header.Get("Hrns-Quota") != "" ||
			!strings.Contains(string(r.body), "all keys") {
			t.Errorf("a read of %s with the server's 16 waiting: %d, Retry-After %q, Hrns-Quota %q, %s",
				k, r.status, r.header.Get("Retry-After"), r.header.Get("Hrns-Quota"), r.body)
		}
	}
	close(g.release)
	for range queued + 1 {
		if s := <-statuses; s != http.StatusOK {
			t.Errorf("a queued read answered %d, want 200", s)
		}
	}
}
