package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// TestLoginLimiter: logins are bounded per address (an IPv6 client by
// its /64) and globally, each bucket refilling at its rate; successes
// cost nothing; concurrent attempts cannot pass the bound together; and
// the addresses tracked stay bounded.
func TestLoginLimiter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var l loginLimiter
	const a, b = "192.0.2.1:5000", "192.0.2.2:5000"
	for i := range loginBurstPerAddr {
		if w := l.begin(a, t0); w != 0 {
			t.Fatalf("failure %d: wait %v", i, w)
		}
	}
	if w := l.begin(a, t0); w != loginRefillPerAddr {
		t.Errorf("a full address waits %v, want %v", w, loginRefillPerAddr)
	}
	if w := l.begin("192.0.2.1:6000", t0); w == 0 {
		t.Error("another port of the address is not limited")
	}
	if w := l.begin(b, t0); w != 0 {
		t.Errorf("another address waits %v", w)
	}
	if w := l.begin(a, t0.Add(loginRefillPerAddr/2)); w != loginRefillPerAddr/2 {
		t.Errorf("half a refill later: wait %v, want %v", w, loginRefillPerAddr/2)
	}
	if w := l.begin(a, t0.Add(loginRefillPerAddr)); w != 0 {
		t.Errorf("a refill later: wait %v", w)
	}

	// Successes cost nothing.
	var ls loginLimiter
	for i := range 3 * loginBurstPerAddr {
		if w := ls.begin(a, t0); w != 0 {
			t.Fatalf("login %d after successes: wait %v", i, w)
		}
		ls.succeeded(a, t0)
	}

	// Concurrent attempts: the burst, no more.
	var lc loginLimiter
	var wg sync.WaitGroup
	var mu sync.Mutex
	passed := 0
	for range 5 * loginBurstPerAddr {
		wg.Go(func() {
			if lc.begin(a, t0) == 0 {
				mu.Lock()
				passed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if passed != loginBurstPerAddr {
		t.Errorf("%d concurrent attempts passed, want %d", passed, loginBurstPerAddr)
	}

	// IPv6: the /64 is the client; a mapped IPv4 address is the IPv4
	// one.
	var l6 loginLimiter
	for range loginBurstPerAddr {
		l6.begin("[2001:db8:1:2::1]:443", t0)
	}
	for _, tc := range []struct {
		remote  string
		limited bool
	}{
		{"[2001:db8:1:2::ffff]:1", true},
		{"[2001:db8:1:2:a:b:c:d]:80", true},
		{"[2001:db8:1:3::1]:443", false},
		{"[::ffff:192.0.2.9]:1", false},
		{"not an address", false},
	} {
		if got := l6.begin(tc.remote, t0) > 0; got != tc.limited {
			t.Errorf("%s limited = %v, want %v", tc.remote, got, tc.limited)
		}
	}
	if clientKey("[::ffff:192.0.2.9]:1") != clientKey("192.0.2.9:2") {
		t.Error("a mapped IPv4 address is not its IPv4 address")
	}

	// The global bucket: many addresses, one attempt each.
	var lg loginLimiter
	for i := range loginBurstGlobal {
		if w := lg.begin(fmt.Sprintf("198.51.%d.%d:1", i/250, i%250), t0); w != 0 {
			t.Fatalf("address %d waits %v", i, w)
		}
	}
	if w := lg.begin("203.0.113.7:1", t0); w != loginRefillGlobal {
		t.Errorf("a new address after the global burst waits %v, want %v", w, loginRefillGlobal)
	}
	if w := lg.begin("203.0.113.7:1", t0.Add(loginRefillGlobal)); w != 0 {
		t.Errorf("a global refill later: wait %v", w)
	}

	// The addresses tracked stay bounded: drained ones go first, then
	// the one nearest to draining.
	var lb loginLimiter
	lb.addrs = map[netip.Prefix]bucket{}
	for i := range loginMaxAddrs {
		k, _ := netip.MustParseAddr(fmt.Sprintf("10.0.%d.%d", i>>8, i&255)).Prefix(32)
		lb.addrs[k] = bucket{empty: t0.Add(time.Hour + time.Duration(i)*time.Second)}
	}
	lb.begin("10.255.0.1:1", t0)
	first, _ := netip.MustParseAddr("10.0.0.0").Prefix(32)
	if _, kept := lb.addrs[first]; len(lb.addrs) != loginMaxAddrs || kept {
		t.Errorf("%d addresses tracked (the nearest to draining kept: %v), want %d", len(lb.addrs), kept, loginMaxAddrs)
	}
	lb.begin("10.255.0.2:1", t0.Add(24*time.Hour))
	if len(lb.addrs) != 1 {
		t.Errorf("%d addresses tracked after they all drained, want 1", len(lb.addrs))
	}
}

// TestLoginRateLimited: over loopback, the page's login answers 429 with
// Retry-After once an address has failed too often, then refuses even
// the right key until the wait is over (so that a guess made then tells
// nothing); a success costs nothing.
func TestLoginRateLimited(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m := session.New(st, llmtest.NewModel(), nil)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Stop(context.Background())
	s := New(m, &Options{APIKeys: []string{"sk-right"}})
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	srv := httptest.NewServer(s)
	defer srv.Close()
	login := func(key string) *http.Response {
		t.Helper()
		resp, err := http.Post(srv.URL+"/ui/login", "application/json", strings.NewReader(`{"key":"`+key+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for range 3 {
		if resp := login("sk-right"); resp.StatusCode != http.StatusOK {
			t.Fatalf("right key: %d", resp.StatusCode)
		}
	}
	for i := range loginBurstPerAddr {
		if resp := login(fmt.Sprintf("sk-guess-%d", i)); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d", i, resp.StatusCode)
		}
	}
	for _, key := range []string{"sk-guess-x", "sk-right"} {
		resp := login(key)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "60" {
			t.Errorf("%s after the burst: %d, Retry-After %q; want 429 and 60", key, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	mu.Lock()
	now = now.Add(loginRefillPerAddr - time.Second)
	mu.Unlock()
	if resp := login("sk-right"); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("a second early: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	if resp := login("sk-right"); resp.StatusCode != http.StatusOK {
		t.Errorf("after the wait, the right key: %d", resp.StatusCode)
	}
}
