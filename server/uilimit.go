package server

import (
	"net/netip"
	"sync"
	"time"
)

// The web page's login (POST /ui/login) takes an API key, so it is where
// keys can be guessed from a browser's reach. Failed logins are bounded
// per client address (an IPv6 client by its /64, which one machine
// usually holds whole) and for the whole server: each bound is a bucket
// of failures that refills at a steady rate. While either bucket of a
// request is empty, its login is refused with 429 and Retry-After before
// the key is looked at, so that a guess made then tells nothing, even
// when right. A successful login costs nothing.
//
// The client address is the connection's: behind a reverse proxy every
// client has the proxy's, and the per-address bound then acts as a
// second global one (X-Forwarded-For is not trusted: any client can
// write it).
const (
	loginBurstPerAddr  = 10              // failures an address may make at once
	loginRefillPerAddr = time.Minute     // then one more each
	loginBurstGlobal   = 100             // failures all addresses may make at once
	loginRefillGlobal  = 2 * time.Second // then one more each
	loginMaxAddrs      = 10000           // addresses tracked at most
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

// refund takes back a failure added at now.
func (b bucket) refund(now time.Time, refill time.Duration) bucket {
	b.empty = b.empty.Add(-refill)
	if b.empty.Before(now) {
		b.empty = now
	}
	return b
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

// loginLimiter bounds failed logins. Its zero value is ready.
type loginLimiter struct {
	mu     sync.Mutex
	global bucket
	addrs  map[netip.Prefix]bucket
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

// begin starts a login of the client at remote: it returns how long the
// client must wait, or 0 when it may try now. A login that may go on is
// counted as a failure at once, so that concurrent attempts cannot pass
// the bound together; [loginLimiter.succeeded] takes it back.
func (l *loginLimiter) begin(remote string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := clientKey(remote)
	b := l.addrs[k]
	if w := max(l.global.wait(now, loginBurstGlobal, loginRefillGlobal), b.wait(now, loginBurstPerAddr, loginRefillPerAddr)); w > 0 {
		return w
	}
	l.global = l.global.add(now, loginRefillGlobal)
	if l.addrs == nil {
		l.addrs = map[netip.Prefix]bucket{}
	}
	if _, ok := l.addrs[k]; !ok && len(l.addrs) >= loginMaxAddrs {
		l.prune(now)
	}
	l.addrs[k] = b.add(now, loginRefillPerAddr)
	return 0
}

// succeeded takes back the failure begin counted for a login that
// succeeded.
func (l *loginLimiter) succeeded(remote string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.global = l.global.refund(now, loginRefillGlobal)
	k := clientKey(remote)
	if b, ok := l.addrs[k]; ok {
		l.addrs[k] = b.refund(now, loginRefillPerAddr)
	}
}

// prune makes room for an address: the drained buckets go, and if none
// has drained, the one nearest to it. (An attacker who owns
// many addresses to push its own out is still held by the global
// bucket.)
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
