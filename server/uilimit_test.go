package server

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLoginLimiter: failures are bounded per address (an IPv6 client by
// its /64), each bucket refilling at its rate; concurrent failures cannot
// pass the bound together; the addresses tracked stay bounded.
func TestLoginLimiter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var l loginLimiter
	const a, b = "192.0.2.1:5000", "192.0.2.2:5000"
	for i := range loginBurstPerAddr {
		if w := l.failed(a, t0); w != 0 {
			t.Fatalf("failure %d: wait %v", i, w)
		}
	}
	if w := l.failed(a, t0); w != loginRefillPerAddr {
		t.Errorf("a full address waits %v, want %v", w, loginRefillPerAddr)
	}
	if w := l.failed("192.0.2.1:6000", t0); w == 0 {
		t.Error("another port of the address is not limited")
	}
	if w := l.failed(b, t0); w != 0 {
		t.Errorf("another address waits %v", w)
	}
	if w := l.failed(a, t0.Add(loginRefillPerAddr/2)); w != loginRefillPerAddr/2 {
		t.Errorf("half a refill later: wait %v, want %v", w, loginRefillPerAddr/2)
	}
	if w := l.failed(a, t0.Add(loginRefillPerAddr)); w != 0 {
		t.Errorf("a refill later: wait %v", w)
	}

	// Concurrent failures: the burst, no more.
	var lc loginLimiter
	var wg sync.WaitGroup
	var mu sync.Mutex
	passed := 0
	for range 5 * loginBurstPerAddr {
		wg.Go(func() {
			if lc.failed(a, t0) == 0 {
				mu.Lock()
				passed++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if passed != loginBurstPerAddr {
		t.Errorf("%d concurrent failures passed, want %d", passed, loginBurstPerAddr)
	}

	// IPv6: the /64 is the client; a mapped IPv4 address is the IPv4
	// one.
	var l6 loginLimiter
	for range loginBurstPerAddr {
		l6.failed("[2001:db8:1:2::1]:443", t0)
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
		if got := l6.failed(tc.remote, t0) > 0; got != tc.limited {
			t.Errorf("%s limited = %v, want %v", tc.remote, got, tc.limited)
		}
	}
	if clientKey("[::ffff:192.0.2.9]:1") != clientKey("192.0.2.9:2") {
		t.Error("a mapped IPv4 address is not its IPv4 address")
	}

	// No bound across addresses: a thousand addresses at their burst
	// leave the next one free.
	var lg loginLimiter
	for i := range 1000 {
		for range loginBurstPerAddr {
			lg.failed(fmt.Sprintf("198.51.%d.%d:1", i/250, i%250), t0)
		}
	}
	if w := lg.failed("203.0.113.7:1", t0); w != 0 {
		t.Errorf("a new address after others' failures waits %v", w)
	}

	// The addresses tracked stay bounded: drained ones go first, then
	// the one nearest to draining.
	var lb loginLimiter
	lb.addrs = map[netip.Prefix]bucket{}
	for i := range loginMaxAddrs {
		k, _ := netip.MustParseAddr(fmt.Sprintf("10.0.%d.%d", i>>8, i&255)).Prefix(32)
		lb.addrs[k] = bucket{empty: t0.Add(time.Hour + time.Duration(i)*time.Second)}
	}
	lb.failed("10.255.0.1:1", t0)
	first, _ := netip.MustParseAddr("10.0.0.0").Prefix(32)
	if _, kept := lb.addrs[first]; len(lb.addrs) != loginMaxAddrs || kept {
		t.Errorf("%d addresses tracked (the nearest to draining kept: %v), want %d", len(lb.addrs), kept, loginMaxAddrs)
	}
	lb.failed("10.255.0.2:1", t0.Add(24*time.Hour))
	if len(lb.addrs) != 1 {
		t.Errorf("%d addresses tracked after they all drained, want 1", len(lb.addrs))
	}
}

// clientFrom is an HTTP client whose connections leave from the loopback
// address ip (Linux routes all of 127.0.0.0/8 to lo).
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// TestLoginRateLimited: over loopback, an address that has failed too
// often gets 429 with Retry-After for its wrong keys, and its right key
// still gets in; failures from other addresses, however many, never lock
// a right key out (issue 32, finding 11: eleven addresses used to lock
// the login for everyone).
func TestLoginRateLimited(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	_, url := newLoginServer(t, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	for i := range loginBurstPerAddr {
		if code, _ := uiLogin(t, http.DefaultClient, url, fmt.Sprintf("sk-guess-%d", i)); code != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d", i, code)
		}
	}
	resp, err := http.Post(url+"/ui/login", "application/json", strings.NewReader(`{"key":"sk-guess-x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "60" {
		t.Errorf("a wrong key after the burst: %d, Retry-After %q; want 429 and 60", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if code, ck := uiLogin(t, http.DefaultClient, url, "sk-alice"); code != http.StatusOK || ck == nil {
		t.Errorf("the right key from the address that failed: %d", code)
	}

	// Twenty more addresses fail past their bounds; a right key from
	// any address, theirs included, gets in.
	for a := range 20 {
		c := clientFrom(fmt.Sprintf("127.0.1.%d", a+1))
		for i := range loginBurstPerAddr + 2 {
			uiLogin(t, c, url, fmt.Sprintf("sk-guess-%d-%d", a, i))
		}
	}
	for _, ip := range []string{"127.0.1.1", "127.0.2.1"} {
		if code, ck := uiLogin(t, clientFrom(ip), url, "sk-bob"); code != http.StatusOK || ck == nil {
			t.Errorf("the right key from %s after others' failures: %d", ip, code)
		}
	}
	if code, _ := uiLogin(t, clientFrom("127.0.2.1"), url, "sk-wrong"); code != http.StatusUnauthorized {
		t.Errorf("a wrong key from a fresh address: %d, want 401", code)
	}
}
