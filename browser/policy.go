package browser

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hrns-dev/hrns/internal/netpolicy"
)

// The address policy of the browser is internal/netpolicy's, the one
// web_fetch applies, enforced twice:
//
//   - every request a tab makes is paused by the DevTools Fetch domain and
//     judged (the host resolved, each address judged) before it goes on;
//     a refused one fails with BlockedByClient and is reported to the
//     model (guard.go);
//   - every connection the browser opens goes through a proxy of ours on
//     loopback, which dials with netpolicy.Control: the address judged is
//     the address connected to, so a DNS answer that changes between the
//     check above and Chromium's own lookup (DNS rebinding) is still
//     refused, as are requests the Fetch domain does not see (WebSocket
//     handshakes, service workers, tabs not yet attached).

// policy judges hosts and addresses for one browser.
type policy struct {
	allowPrivate bool
	allow        func(netip.AddrPort) bool // may be nil
	// log receives the refusals with the address refused, which the
	// model's notes leave out; nil discards them.
	log *slog.Logger

	mu      sync.Mutex
	refused []string // what was refused since the last take, bounded
	dropped int      // refusals beyond the bound
}

const maxRefusals = 20

// allowed reports whether the policy lets a connection to ap through, and
// why not.
func (p *policy) reason(ap netip.AddrPort) string {
	if p.allowPrivate || (p.allow != nil && p.allow(ap)) {
		return ""
	}
	return netpolicy.Reason(ap.Addr())
}

// logRefusal writes a refusal, with the address refused, to the log.
func (p *policy) logRefusal(what string, err error) {
	if p.log != nil {
		p.log.Info("browser: the address policy refused "+what, "err", err)
	}
}

// note records a refusal for the next tool result.
func (p *policy) note(what string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.refused) >= maxRefusals {
		p.dropped++
		return
	}
	if len(p.refused) > 0 && p.refused[len(p.refused)-1] == what {
		return
	}
	p.refused = append(p.refused, what)
}

// take returns and forgets the refusals recorded so far.
func (p *policy) take() ([]string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, d := p.refused, p.dropped
	p.refused, p.dropped = nil, 0
	return r, d
}

// checkURL judges a URL before any request: the scheme, credentials, a
// host in a loose numeric notation, and then every address the host
// resolves to. The judgement is repeated at connect time by the proxy.
func (p *policy) checkURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a valid URL: %v", err)
	}
	switch u.Scheme {
	case "http", "https", "ws", "wss":
	default:
		return fmt.Errorf("the scheme %q is not allowed (only http and https)", u.Scheme+":")
	}
	host := u.Hostname()
	if host == "" {
		return errors.New("the URL has no host")
	}
	if err := netpolicy.CheckHost(host); err != nil {
		return err
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" || u.Scheme == "wss" {
			port = "443"
		}
	}
	addrs, err := p.resolve(ctx, host, port)
	if err != nil {
		return err
	}
	for _, ap := range addrs {
		if r := p.reason(ap); r != "" {
			return &netpolicy.BlockedError{Addr: ap.Addr().Unmap(), Reason: r}
		}
	}
	return nil
}

// resolve returns the addresses of host, with port.
func (p *policy) resolve(ctx context.Context, host, port string) ([]netip.AddrPort, error) {
	pn, err := net.LookupPort("tcp", port)
	if err != nil {
		return nil, fmt.Errorf("bad port %q", port)
	}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return []netip.AddrPort{netip.AddrPortFrom(a.Unmap(), uint16(pn))}, nil
	}
	if p.allowPrivate {
		return nil, nil // nothing to judge; Chromium resolves it
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %v", host, err)
	}
	out := make([]netip.AddrPort, 0, len(ips))
	for _, ip := range ips {
		out = append(out, netip.AddrPortFrom(ip.Unmap(), uint16(pn)))
	}
	return out, nil
}

// A proxy is the browser's only way out: an HTTP proxy on loopback that
// dials with the address policy checked at connect time. Chromium is told
// to use it for every host, loopback included (--proxy-bypass-list=<-loopback>).
type proxy struct {
	p      *policy
	ln     net.Listener
	srv    *http.Server
	dialer *net.Dialer
	rp     *httputil.ReverseProxy

	served atomic.Int64 // requests and tunnels served, for tests

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // hijacked tunnels, closed with the proxy
	closed bool
}

func startProxy(p *policy) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("browser: starting the address-policy proxy: %w", err)
	}
	x := &proxy{p: p, ln: ln, conns: map[net.Conn]struct{}{}}
	x.dialer = &net.Dialer{Timeout: 30 * time.Second}
	if !p.allowPrivate {
		x.dialer.Control = netpolicy.Control(p.allow)
	}
	transport := &http.Transport{
		Proxy:                 nil, // never another proxy: it would connect unchecked
		DialContext:           x.dialer.DialContext,
		ForceAttemptHTTP2:     false,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		MaxIdleConns:          16,
		IdleConnTimeout:       30 * time.Second,
	}
	x.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL = r.In.URL // an absolute URL, as a client of a proxy sends
			r.Out.Host = r.In.Host
			r.Out.Header.Del("Proxy-Connection")
			r.Out.Header.Del("Proxy-Authorization")
		},
		Transport: transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			x.refuse(w, r.URL.Host, err)
		},
	}
	x.srv = &http.Server{Handler: x, ReadHeaderTimeout: 30 * time.Second}
	go x.srv.Serve(ln)
	return x, nil
}

func (x *proxy) addr() string { return x.ln.Addr().String() }

func (x *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x.served.Add(1)
	if r.Method == http.MethodConnect {
		x.tunnel(w, r)
		return
	}
	if !r.URL.IsAbs() || (r.URL.Scheme != "http" && r.URL.Scheme != "ws") {
		http.Error(w, "this proxy only forwards absolute http URLs", http.StatusBadRequest)
		return
	}
	if err := netpolicy.CheckHost(r.URL.Hostname()); err != nil {
		x.refuse(w, r.URL.Host, err)
		return
	}
	x.rp.ServeHTTP(w, r)
}

// refuse answers a request the policy (or the network) refused, noting a
// refusal of the policy for the model.
func (x *proxy) refuse(w http.ResponseWriter, host string, err error) {
	if be, ok := errors.AsType[*netpolicy.BlockedError](err); ok {
		x.p.logRefusal("a connection to "+host, err)
		x.p.note(fmt.Sprintf("a connection to %s: %s", host, netpolicy.Refusal))
		http.Error(w, "refused by the address policy: "+be.Reason, http.StatusForbidden)
		return
	}
	http.Error(w, "proxy: "+err.Error(), http.StatusBadGateway)
}

// tunnel serves CONNECT (https and wss): the target is dialled, checked,
// and bytes are copied both ways until either side closes.
func (x *proxy) tunnel(w http.ResponseWriter, r *http.Request) {
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		http.Error(w, "CONNECT needs host:port", http.StatusBadRequest)
		return
	}
	if err := netpolicy.CheckHost(host); err != nil {
		x.refuse(w, r.Host, err)
		return
	}
	up, err := x.dialer.DialContext(r.Context(), "tcp", r.Host)
	if err != nil {
		x.refuse(w, r.Host, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "cannot tunnel", http.StatusInternalServerError)
		return
	}
	down, rw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if !x.track(up, down) {
		up.Close()
		down.Close()
		return
	}
	defer x.untrack(up, down)
	if _, err := io.WriteString(down, "HTTP/1.1 200 Connection Established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() {
		// Bytes the client sent after the CONNECT header are buffered.
		if n := rw.Reader.Buffered(); n > 0 {
			b, _ := rw.Reader.Peek(n)
			up.Write(b)
		}
		io.Copy(up, down)
		done <- struct{}{}
	}()
	go func() {
		io.Copy(down, up)
		done <- struct{}{}
	}()
	<-done
}

func (x *proxy) track(cs ...net.Conn) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return false
	}
	for _, c := range cs {
		x.conns[c] = struct{}{}
	}
	return true
}

func (x *proxy) untrack(cs ...net.Conn) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(x.conns, c)
	}
}

// close stops the proxy and every tunnel through it.
func (x *proxy) close() {
	x.mu.Lock()
	x.closed = true
	for c := range x.conns {
		c.Close()
	}
	x.conns = map[net.Conn]struct{}{}
	x.mu.Unlock()
	x.srv.Close()
}
