package server

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The browser defences: a web page the user visits must not be able to
// drive the API, neither by a cross-site request (a form or fetch
// posting to 127.0.0.1) nor by DNS rebinding (a name of the attacker's
// that resolves to this server, so that the browser sees the page and
// the API as one origin).
//
//   - Host: when [Options.AllowedHosts] is set, a request whose Host
//     header is not in it is refused (403). This is what stops DNS
//     rebinding: the rebound request carries the attacker's name.
//   - Origin: a request whose Origin is neither this server's (same
//     scheme-less host and port as its Host) nor one of
//     [Options.CORSOrigins] is refused (403), and so is one that a
//     browser marks "Sec-Fetch-Site: cross-site" or "same-site" without
//     an Origin. Clients that are not browsers send neither header.
//   - Content-Type: bodies must be declared application/json (415
//     otherwise), so that no "simple" cross-site request (a form, or a
//     fetch with text/plain) reaches a handler.

// guard holds the Host and Origin rules; fixed at creation.
type guard struct {
	hosts   []hostPort // empty: any Host
	origins map[string]bool
}

// hostPort is an allowed Host: a port of "" matches any port.
type hostPort struct{ host, port string }

func newGuard(o *Options) *guard {
	g := &guard{origins: map[string]bool{}}
	for _, h := range o.AllowedHosts {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" {
			continue
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			host, port = strings.Trim(h, "[]"), ""
		}
		g.hosts = append(g.hosts, hostPort{host, port})
	}
	for _, o := range o.CORSOrigins {
		if n, ok := normalOrigin(o); ok {
			g.origins[n] = true
		}
	}
	return g
}

// hostAllowed reports whether the request's Host header names this
// server.
func (g *guard) hostAllowed(r *http.Request) bool {
	if len(g.hosts) == 0 {
		return true
	}
	host, port, err := net.SplitHostPort(strings.ToLower(r.Host))
	if err != nil {
		host, port = strings.Trim(strings.ToLower(r.Host), "[]"), "80"
	}
	return slices.ContainsFunc(g.hosts, func(a hostPort) bool {
		return a.host == host && (a.port == "" || a.port == port)
	})
}

// normalOrigin returns origin as scheme://host:port, lower-case, with
// the scheme's default port made explicit; ok is false for anything but
// an http or https origin (including "null").
func normalOrigin(origin string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(origin))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") {
		return "", false
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port), true
}

// sameOrigin reports whether origin is the origin of a page this server
// (the request's Host) served, over http or https (a proxy may terminate
// TLS in front of it).
func sameOrigin(origin string, r *http.Request) bool {
	n, ok := normalOrigin(origin)
	if !ok {
		return false
	}
	u, _ := url.Parse(n)
	host, port, err := net.SplitHostPort(strings.ToLower(r.Host))
	if err != nil {
		host, port = strings.Trim(strings.ToLower(r.Host), "[]"), map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Hostname() == host && u.Port() == port
}

// corsAllowed reports whether origin may call the API from a browser.
func (g *guard) corsAllowed(origin string) bool {
	n, ok := normalOrigin(origin)
	return ok && g.origins[n]
}

// The CORS answers: what a configured origin's pages may send and read.
const (
	corsMethods       = "GET, POST, PUT, PATCH, DELETE"
	corsHeaders       = "Authorization, Content-Type, Idempotency-Key, Last-Event-ID"
	corsExposeHeaders = "ETag, Location, Idempotent-Replayed, Retry-After, WWW-Authenticate, Hrns-Lease, Hrns-Not-Honoured, Hrns-Quota, Hrns-Events"
)

// check applies the Host and Origin rules to r. It answers the request
// itself, and returns false, when r is refused or is a CORS preflight.
func (g *guard) check(w http.ResponseWriter, r *http.Request) bool {
	if !g.hostAllowed(r) {
		writeError(w, http.StatusForbidden, "Host "+quote(r.Host)+" is not allowed: this server answers only the names it was configured with (hrns serve --allowed-host)")
		return false
	}
	origin, hasOrigin := r.Header["Origin"]
	if !hasOrigin {
		switch r.Header.Get("Sec-Fetch-Site") {
		case "cross-site", "same-site":
			writeError(w, http.StatusForbidden, "cross-origin request refused")
			return false
		}
		return true
	}
	o := strings.Join(origin, ",")
	w.Header().Add("Vary", "Origin")
	if g.corsAllowed(o) {
		w.Header().Set("Access-Control-Allow-Origin", o)
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h := w.Header()
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
			h.Set("Access-Control-Allow-Methods", corsMethods)
			h.Set("Access-Control-Allow-Headers", corsHeaders)
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return false
		}
		w.Header().Set("Access-Control-Expose-Headers", corsExposeHeaders)
		return true
	}
	if len(origin) == 1 && sameOrigin(o, r) {
		return true
	}
	writeError(w, http.StatusForbidden, "cross-origin request refused: Origin "+quote(o)+" is not this server's (hrns serve --cors-origin allows a web app's origin)")
	return false
}

// checkJSON refuses a body that is not declared as JSON (415). When
// optional, a request without a body and without a Content-Type passes.
func checkJSON(w http.ResponseWriter, r *http.Request, optional bool) bool {
	ct := r.Header.Get("Content-Type")
	if ct == "" && optional && r.ContentLength == 0 {
		return true
	}
	if ct == "application/json" {
		return true // what clients send: no parse (and its map) for it
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "application/json" {
		return true
	}
	got := "none"
	if ct != "" {
		got = quote(ct)
	}
	writeError(w, http.StatusUnsupportedMediaType, "Content-Type must be application/json (got "+got+")")
	return false
}

// quote quotes a header value for an error message, cut to 200 bytes.
func quote(s string) string {
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return strconv.Quote(s)
}
