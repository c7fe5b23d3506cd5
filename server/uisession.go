package server

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hrns-dev/hrns/server/ui"
)

// The web page (package server/ui) is served at /ui/. A browser logs in
// with an API key (POST /ui/login) and receives a session cookie: an
// opaque random token, HttpOnly and SameSite=Strict (and Secure over
// TLS), that this server maps to the key's owner. Its path is the
// page's directory (PREFIX/ui: the cookie has no Path attribute, so the
// browser takes the login URL's), so a browser sends it to the page and
// to nothing else on its host: the page calls the API as ui/api/v2/...,
// which ServeHTTP serves as /api/v2/... The API accepts that cookie in
// place of the bearer key, and on a request that changes
// anything (any method but GET and HEAD) only together with the header
// X-CSRF-Token carrying the cookie session's CSRF token, which the page
// reads from GET /ui/session. The cookie sessions live in this process's
// memory (at most uiMaxSessionsPerKey per key): a restart or another
// replica logs the page out.

const (
	uiCookie = "hrns_ui"
	// uiAPIPrefix is where the page calls the API: under its own path,
	// where its cookie goes.
	uiAPIPrefix  = "/ui/api/"
	uiCSRFHeader = "X-CSRF-Token"
	uiSessionTTL = 12 * time.Hour
	// uiMaxSessionsPerKey bounds the cookie sessions of one API key: a
	// key's login beyond it ends that key's oldest, never another key's.
	// All keys together hold at most this times the number of keys.
	uiMaxSessionsPerKey = 20
	uiMaxLoginBody      = 4 << 10
)

// uiSessions are the page's logged-in browsers, by the SHA-256 of their
// cookie token.
type uiSessions struct {
	mu sync.Mutex
	m  map[[32]byte]*uiSession
	// byOwner lists each owner's sessions in m, oldest first (and some
	// that left m since, dropped at the owner's next login).
	byOwner map[string][][32]byte
}

type uiSession struct {
	owner, csrf string
	expires     time.Time
}

func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// add returns a new session's cookie token. The owner's expired sessions
// go, and at uiMaxSessionsPerKey its oldest: the sessions of other
// owners are never touched.
func (u *uiSessions) add(owner string, now time.Time) (token string, s *uiSession) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[[32]byte]*uiSession{}
		u.byOwner = map[string][][32]byte{}
	}
	live := u.byOwner[owner][:0]
	for _, k := range u.byOwner[owner] {
		if v, ok := u.m[k]; ok && v.expires.After(now) {
			live = append(live, k)
		} else {
			delete(u.m, k)
		}
	}
	for len(live) >= uiMaxSessionsPerKey {
		delete(u.m, live[0])
		live = live[1:]
	}
	token = randomToken()
	s = &uiSession{owner: owner, csrf: randomToken(), expires: now.Add(uiSessionTTL)}
	k := sha256.Sum256([]byte(token))
	u.m[k] = s
	u.byOwner[owner] = append(live, k)
	return token, s
}

// get returns the live session of a cookie token.
func (u *uiSessions) get(token string, now time.Time) (*uiSession, bool) {
	if token == "" {
		return nil, false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	k := sha256.Sum256([]byte(token))
	s, ok := u.m[k]
	if ok && !s.expires.After(now) {
		delete(u.m, k)
		return nil, false
	}
	return s, ok
}

func (u *uiSessions) remove(token string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.m, sha256.Sum256([]byte(token)))
}

// cookieSession returns the request's cookie session, if any.
func (s *Server) cookieSession(r *http.Request) (*uiSession, bool) {
	c, err := r.Cookie(uiCookie)
	if err != nil {
		return nil, false
	}
	return s.ui.get(c.Value, time.Now())
}

// csrfOK reports whether a request may change state on a cookie
// session's behalf: safe methods always; others with the session's
// X-CSRF-Token.
func csrfOK(r *http.Request, us *uiSession) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		return true
	}
	got := r.Header.Get(uiCSRFHeader)
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(us.csrf)) == 1
}

func (s *Server) uiRoutes() {
	// The root and /ui lead to the page. Relative, so that it works
	// behind a path prefix. (http.Redirect would make it absolute.)
	toPage := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "ui/")
		w.WriteHeader(http.StatusFound)
	}
	s.mux.HandleFunc("GET /{$}", toPage)
	s.mux.HandleFunc("GET /ui", toPage)
	s.mux.Handle("GET /ui/", ui.Handler())
	s.mux.HandleFunc("GET /ui/session", s.uiSession)
	s.mux.HandleFunc("POST /ui/login", s.uiLogin)
	s.mux.HandleFunc("POST /ui/logout", s.uiLogout)
}

func uiJSON(w http.ResponseWriter, status int, v any) {
	ui.SetHeaders(w.Header())
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, v)
}

// uiSession answers GET /ui/session: whether the page must log in, and
// the CSRF token of its cookie session.
func (s *Server) uiSession(w http.ResponseWriter, r *http.Request) {
	if len(s.keys) == 0 {
		uiJSON(w, http.StatusOK, map[string]any{"auth_required": false, "logged_in": true, "csrf": ""})
		return
	}
	us, ok := s.cookieSession(r)
	if !ok {
		uiJSON(w, http.StatusOK, map[string]any{"auth_required": true, "logged_in": false})
		return
	}
	uiJSON(w, http.StatusOK, map[string]any{"auth_required": true, "logged_in": true, "csrf": us.csrf})
}

// uiLogin answers POST /ui/login {"key": "..."}: a key the server
// accepts gets a session cookie and the CSRF token.
func (s *Server) uiLogin(w http.ResponseWriter, r *http.Request) {
	if !checkJSON(w, r, false) {
		return
	}
	var body struct {
		Key string `json:"key"`
	}
	limitBody(w, r, uiMaxLoginBody)
	if err := decode(r, &body); err != nil {
		s.writeErr(w, r, err)
		return
	}
	if len(s.keys) == 0 {
		uiJSON(w, http.StatusOK, map[string]any{"auth_required": false, "logged_in": true, "csrf": ""})
		return
	}
	// Every key is checked, whatever the address has failed before (see
	// uilimit.go): a right key always gets in.
	now := s.now()
	owner, ok := s.keys[sha256.Sum256([]byte(strings.TrimSpace(body.Key)))]
	if !ok {
		if wait := s.logins.failed(r.RemoteAddr, now); wait > 0 {
			secs := int64((wait + time.Second - 1) / time.Second)
			w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
			writeError(w, http.StatusTooManyRequests, fmt.Sprintf("Too many failed logins: try again in %d seconds", secs))
			return
		}
		writeError(w, http.StatusUnauthorized, "Unknown API key")
		return
	}
	token, us := s.ui.add(owner, now)
	// No Path: the browser scopes the cookie to the login URL's directory
	// (RFC 6265 5.1.4, default-path), PREFIX/ui, under whatever prefix a
	// proxy serves hrns at, which the server does not see. Never Path=/:
	// on a host shared with other apps, the token would go to all of them.
	http.SetCookie(w, &http.Cookie{
		Name: uiCookie, Value: token, MaxAge: int(uiSessionTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https"),
	})
	uiJSON(w, http.StatusOK, map[string]any{"auth_required": true, "logged_in": true, "csrf": us.csrf})
}

// uiLogout answers POST /ui/logout (with the CSRF header): the cookie
// session ends.
func (s *Server) uiLogout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(uiCookie); err == nil {
		if us, ok := s.ui.get(c.Value, time.Now()); ok {
			if !csrfOK(r, us) {
				writeError(w, http.StatusForbidden, "missing or wrong X-CSRF-Token")
				return
			}
			s.ui.remove(c.Value)
		}
	}
	// Scoped as the login's (the same directory, PREFIX/ui), so that it
	// replaces it.
	http.SetCookie(w, &http.Cookie{Name: uiCookie, Value: "", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")})
	w.WriteHeader(http.StatusNoContent)
}
