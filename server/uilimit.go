package server

import (
	"net/netip"
	"sync"
	"time"
)

// The web page's login (POST /ui/login) takes an API key. A right key is
// never refused: every key sent is checked (a SHA-256 of at most 4 KiB
// and one lookup of the digest, the same work whatever the key), and a
// success takes nothing from any bound. Failed logins are bounded per
// client address (an IPv6 client by its /64, which one machine usually
// holds whole), as a bucket of failures that refills at a steady rate:
// once an address's bucket is empty, its wrong keys are answered 429 with
// Retry-After instead of 401. There is no bound across addresses, so that
// failures from some addresses never lock out the others (a bound for the
// whole server let eleven addresses lock the login for every key).
//
// The bound limits what one address's failures cost the server and its
// logs. It is not what keeps keys from being guessed: the bearer API
// takes keys without a limit, and a right key gets in from an address
// that has failed; keys must be long random strings.
//
// The client address is the connection's: behind a reverse proxy every
// client has the proxy's, and the bound is then shared by all (X-
// Forwarded-For is not trusted: any client can write it); a right key
// still gets in.
const (
	loginBurstPerAddr  = 10          // failures an address may make at once
	loginRefillPerAddr = time.Minute // then one more each
	loginMaxAddrs      = 10000       // addresses tracked at most
)

// A bucket counts failures as the time at which it will be empty: each
// failure adds refill to it, and it drains at the clock's pace (the
// generic cell rate algorithm, in whole nanoseconds).
type bucket struct {
	empty time.Time
}

// add records a failure at now.
func (b bucket) add(now time.Time, refill time.Duration) bucket {
	if b.empty.Before(now) {
		b.empty = now
	}
	return bucket{empty: b.empty.Add(refill)}
}

// drained reports whether the bucket is empty at now.
func (b bucket) drained(now time.Time) bool { return !b.empty.After(now) }

// wait returns how long until the bucket, full at burst failures, takes
// one more; 0 means now.
func (b bucket) wait(now time.Time, burst int, refill time.Duration) time.Duration {
	if b.drained(now) {
		return 0
	}
	return max(0, b.empty.Sub(now)-time.Duration(burst-1)*refill)
}

// loginLimiter bounds failed logins per client address. Its zero value
// is ready.
type loginLimiter struct {
	mu    sync.Mutex
	addrs map[netip.Prefix]bucket
}

// clientKey is the bucket of a connection's remote address ("ip:port"):
// the IPv4 address, or the IPv6 /64. An address that does not parse
// shares one bucket with the others that do not.
func clientKey(remote string) netip.Prefix {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Prefix{}
	}
	a := ap.Addr().Unmap()
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.WithZone("").Prefix(bits)
	return p
}

// failed records a failed login of the client at remote and returns 0,
// or, when the client's bucket is full, records nothing and returns how
// long until it takes one more failure. Concurrent failures are counted
// one at a time: no more than the burst are answered 401 together.
func (l *loginLimiter) failed(remote string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := clientKey(remote)
	b := l.addrs[k]
	if w := b.wait(now, loginBurstPerAddr, loginRefillPerAddr); w > 0 {
		return w
	}
	if l.addrs == nil {
		l.addrs = map[netip.Prefix]bucket{}
	}
	if _, ok := l.addrs[k]; !ok && len(l.addrs) >= loginMaxAddrs {
		l.prune(now)
	}
	l.addrs[k] = b.add(now, loginRefillPerAddr)
	return 0
}

// prune makes room for an address: the drained buckets go, and if none
// has drained, the one nearest to it. (An attacker who owns many
// addresses can push its own buckets out this way, and so fail more: a
// cost to the server bounded by the addresses it owns, never a lockout
// of others.)
func (l *loginLimiter) prune(now time.Time) {
	var oldest netip.Prefix
	var at time.Time
	for k, b := range l.addrs {
		if b.drained(now) {
			delete(l.addrs, k)
			continue
		}
		if at.IsZero() || b.empty.Before(at) {
			oldest, at = k, b.empty
		}
	}
	if len(l.addrs) >= loginMaxAddrs {
		delete(l.addrs, oldest)
	}
}
