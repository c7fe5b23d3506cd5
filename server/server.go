// Package server serves the hrns sessions API over HTTP: the /api/v2
// sessions endpoints of the public Agents API (same paths, bodies, states,
// event types and status codes), on top of a [session.Manager].
//
//	m := session.New(st, model, nil)
//	m.Start(ctx)
//	h, err := server.New(m, &server.Options{
//		APIKeys:      keys,
//		AllowedHosts: []string{"localhost:8080", "127.0.0.1:8080", "[::1]:8080"},
//	})
//	if err != nil {
//		return err
//	}
//	srv := &http.Server{Addr: "127.0.0.1:8080", Handler: h}
//	srv.ListenAndServe()
//
// # Routes
//
//	GET    /healthz                              this replica's health (200 or 503;
//	                                             with an operator key, which
//	                                             replica, why, and counts of MCP
//	                                             definitions that do not decrypt)
//	GET    /api/v2/replicas                      the replicas sharing the store
//	                                             (hrns addition; operator keys
//	                                             only, 404 to others)
//	POST   /api/v2/sessions                      create (201; Idempotency-Key)
//	GET    /api/v2/sessions                      list (paged, filtered)
//	GET    /api/v2/sessions/quota                the key's concurrent-session quota
//	GET    /api/v2/quota/tokens                  the key's token quota (429 once spent)
//	GET    /api/v2/sessions/{id}                 the session
//	DELETE /api/v2/sessions/{id}                 cancel (204)
//	GET    /api/v2/sessions/{id}/status          live status
//	GET    /api/v2/sessions/{id}/changes         long-poll (200, or 204 + ETag)
//	POST   /api/v2/sessions/{id}/files/list_files  a directory of the
//	                                             session's workspace
//	POST   /api/v2/sessions/{id}/files/read_file   a file, base64
//	POST   /api/v2/sessions/{id}/files/write_file  create or replace a file
//	GET    /api/v2/sessions/{id}/resources/{bucket}/{key}  an event's image
//	                                             (bucket events, key its
//	                                             index) or a workspace file
//	                                             (bucket files, key its path)
//	GET    /api/v2/sessions/{id}/events          history (paged), or a
//	                                             Server-Sent Events stream
//	                                             with Accept: text/event-stream
//	POST   /api/v2/sessions/{id}/messages        202
//	POST   /api/v2/sessions/{id}/tool_results    202; 409 once finished
//	POST   /api/v2/sessions/{id}/approvals       202 (hrns addition)
//	POST   /api/v2/sessions/{id}/pause           202
//	POST   /api/v2/sessions/{id}/resume          202
//	POST   /api/v2/sessions/{id}/force_answer    202
//	POST   /api/v2/sessions/{id}/feedback        204
//	PUT    /api/v2/sessions/{id}/events/{i}/feedback  204
//	GET    /api/v2/sessions/{id}/feedback        the feedback given (hrns
//	                                             addition)
//	POST   /api/v2/sessions/{id}/share           {share_url}
//	DELETE /api/v2/sessions/{id}/share           204
//	GET    /api/v2/shared/{token}                a shared session, without
//	                                             authentication (hrns's
//	                                             share_url)
//	GET    /api/v2/shared/{token}/events         its events (paged), without
//	                                             authentication (hrns
//	                                             addition)
//	GET    /ui/                                  the web page (package
//	                                             server/ui)
//	GET    /ui/session                           the page's login state and
//	                                             CSRF token
//	POST   /ui/login                             {"key"}: a session cookie
//	POST   /ui/logout                            204
//	*      /ui/api/...                           /api/..., for the page (its
//	                                             cookie is scoped to /ui)
//
// the schedules, when [Options.Schedules] is set (server/schedules.go):
//
//	POST   /api/v2/schedules                     create (201)
//	GET    /api/v2/schedules                     list (paged)
//	GET    /api/v2/schedules/{id}                one
//	PATCH  /api/v2/schedules/{id}                change the fields given
//	DELETE /api/v2/schedules/{id}                204
//	POST   /api/v2/schedules/{id}/pause          pause, with an optional note
//	POST   /api/v2/schedules/{id}/resume         resume from now
//	POST   /api/v2/schedules/{id}/trigger        fire once now (the run; Idempotency-Key)
//	GET    /api/v2/schedules/{id}/runs           the runs (paged)
//
// and the registries of agents, environments and skills (server/registry.go):
//
//	POST   /api/v2/{agents,environments,skills}          register (201)
//	GET    /api/v2/{agents,environments,skills}          list (paged)
//	GET    /api/v2/{agents,environments,skills}/{name}   one (a name may hold a /)
//	PUT    /api/v2/{agents,environments,skills}/{name}   replace
//	PATCH  /api/v2/{agents,environments,skills}/{name}   change the fields given
//	DELETE /api/v2/{agents,environments,skills}/{name}   204
//
// the browser profiles (server/profiles.go), kept in the store:
//
//	GET    /api/v2/browser-profiles                          list (limit, offset)
//	POST   /api/v2/browser-profiles/initiate-upload          a pending profile, its upload URL
//	POST   /api/v2/browser-profiles/{profile_id}/upload      the upload target (multipart,
//	                                                         the token of upload_fields)
//	POST   /api/v2/browser-profiles/{profile_id}/complete-upload  check and store (201)
//	GET    /api/v2/browser-profiles/default?browser_name=    the key's default (404 if none)
//	PUT    /api/v2/browser-profiles/{profile_id}/default     make it the default
//	DELETE /api/v2/browser-profiles/{profile_id}/default     unmark it
//	GET    /api/v2/browser-profiles/{profile_id}             one
//	DELETE /api/v2/browser-profiles/{profile_id}             204
//
// the vaults (server/vaults.go; 501 without [Options.Vaults]):
// /api/v2/vaults, /api/v2/vaults/{vault_id}, .../token and .../health.
// and the webhooks of [Options.Webhooks] (server/webhooks.go lists them).
//
// # Conventions
//
// Requests carry an API key as "Authorization: Bearer KEY"; a key sees
// only the sessions created with it, and another key's session is 404.
// The operator's routes take an operator key instead
// ([Options.OperatorKeys]), which opens nothing else.
// The web page's requests carry instead the session cookie of a login
// (POST /ui/login), and, when they change anything, its X-CSRF-Token
// header (403 without).
// Bodies are declared "Content-Type: application/json" (415 otherwise) and
// limited to 5 MB (413 beyond). Errors are JSON objects {"detail": ...}: a
// string, or for 422 a list of {"loc", "msg", "type"}.
//
// # Browsers
//
// A web page the user visits must not drive a server on their machine.
// Requests whose Host is not one of [Options.AllowedHosts] (when set) are
// refused, which defeats DNS rebinding; requests from another origin are
// refused unless [Options.CORSOrigins] lists it; and bodies must be
// declared JSON, which no plain form or simple cross-site request can do.
package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hrns-dev/hrns/api"
	"github.com/hrns-dev/hrns/platform/feedback"
	"github.com/hrns-dev/hrns/platform/schedule"
	"github.com/hrns-dev/hrns/platform/vault"
	"github.com/hrns-dev/hrns/platform/webhook"
	"github.com/hrns-dev/hrns/session"
)

// Options configure a [Server]. A nil *Options means the defaults.
type Options struct {
	// APIKeys are the accepted bearer keys. Each key is its own owner:
	// it sees the sessions created with it and no others. Empty means no
	// authentication: every request owns every session (for a server
	// only its own machine can reach).
	APIKeys []string
	// OperatorKeys are the operator's bearer keys: they open the
	// operator's routes (GET /api/v2/replicas, the details of GET
	// /healthz) and nothing else: an operator key is no API key, owns
	// no session and does not log in to the web page. A key in both
	// lists makes New fail. To a request without an operator key, an
	// operator route answers as a route that does not exist (404), so
	// that tenants are not told it is there. Empty means the operator
	// routes answer nobody, unless APIKeys is empty too: a server
	// without any key has one user, who is its operator as well.
	OperatorKeys []string
	// AllowedHosts are the Host headers the API answers: "host" (any
	// port) or "host:port", names or IP addresses ("[::1]:8080"). A
	// request naming another host is refused with 403, which defeats DNS
	// rebinding. Empty means any Host: a handler does not know the
	// addresses it is reached at, so whoever listens sets them (hrns
	// serve does). GET /healthz answers any Host, for health checks
	// that address replicas by IP.
	AllowedHosts []string
	// CORSOrigins are the origins ("https://app.example.com") whose web
	// pages may call the API: preflight requests from them are answered
	// and their responses carry Access-Control-Allow-Origin. A request
	// with any other Origin that is not this server's own (the scheme's
	// host and port equal to the Host header) is refused with 403. Empty
	// means no cross-origin access.
	CORSOrigins []string
	// Workspaces is the directory that holds the sessions' workspaces,
	// one directory each, named by [session.Manager.WorkspaceName] and
	// made (mode 0700) when first used: the session files operations
	// serve them. Empty means none: those operations answer 501.
	Workspaces string
	// Webhooks serves /api/v2/webhooks (server/webhooks.go); nil answers
	// those routes with 501.
	Webhooks *webhook.Service
	// MaxBodyBytes bounds request bodies; 0 means 5 MB.
	MaxBodyBytes int64
	// Vaults serves /api/v2/vaults (server/vaults.go); nil, or a service
	// without keys, means those routes answer 501 and say why.
	Vaults *vault.Service
	// Logger receives request errors; nil discards them.
	Logger *slog.Logger
	// PublicURL is the server's address as its clients reach it
	// ("https://hrns.example.com", with the path prefix of a proxy if
	// any): the share URLs it gives are made from it. Empty means each
	// request's own: https when it came over TLS or through a proxy that
	// says X-Forwarded-Proto: https, http otherwise, and its Host (which
	// AllowedHosts checked).
	PublicURL string
	// Schedules, when set, serves the /api/v2/schedules routes with it
	// (a scheduler of the same store as the manager's); nil leaves them
	// out.
	Schedules *schedule.Scheduler
	// Profiles bound the browser profiles callers upload
	// (server/profiles.go); the zero value means the defaults.
	Profiles ProfileOptions
	// LiveFrame, when set, gives the latest picture of a session's
	// browser while the session runs (a JPEG, and when it was taken), or
	// an error when there is none: GET /api/v2/sessions/{id}/live (an
	// hrns addition; server/live.go). hrns serve sets it to
	// browser.Live's Frame. Nil answers that route with 404.
	LiveFrame func(ctx context.Context, session string) (jpeg []byte, at time.Time, err error)
	// LiveDesktopFrame is LiveFrame for a session's desktop (the
	// computer tool's screen, as the model sees it): GET
	// /api/v2/sessions/{id}/live/desktop. hrns serve sets it to
	// desktop.Live's Frame. Nil answers that route with 404.
	LiveDesktopFrame func(ctx context.Context, session string) (jpeg []byte, at time.Time, err error)
	// MaxLongPollsPerKey bounds the long-polls (GET .../changes with
	// wait_for_seconds above 0) and event streams one API key has
	// waiting at once on this server: one more is 429 with Retry-After
	// and "Hrns-Quota: long-polls". 0 means [MaxLongPollsPerKey], a
	// negative value no bound.
	MaxLongPollsPerKey int
	// MaxLongPolls bounds the long-polls and event streams waiting at
	// once on this server, all keys together: one more is 503 with
	// Retry-After. 0 means [MaxLongPolls], a negative value no bound.
	MaxLongPolls int
}

// Server is the sessions API as an [http.Handler].
type Server struct {
	// fixed at creation
	m    *session.Manager
	opts Options
	keys map[[32]byte]string // sha256 of a key -> owner
	// opKeys are the sha256 of the operator keys.
	opKeys map[[32]byte]struct{}
	mux    router
	log    *slog.Logger
	g      *guard
	ui     uiSessions // the web page's cookie sessions
	// logins bounds the web page's failed logins; now is its clock
	// (time.Now; tests set another).
	logins loginLimiter
	now    func() time.Time
	// popts are Options.Profiles with defaults; profileSlots bounds the
	// profile uploads and completions in progress.
	popts        ProfileOptions
	profileSlots chan struct{}
	// polls counts the long-polls and streams each key has waiting.
	polls pollSlots
}

var _ http.Handler = (*Server)(nil)

// New returns the API of the sessions of m.
// It fails on Options that cannot work: no manager, or a key that is
// both an API key and an operator key.
func New(m *session.Manager, opts *Options) (*Server, error) {
	if m == nil {
		return nil, errors.New("server.New: nil manager")
	}
	s := &Server{m: m, keys: map[[32]byte]string{}, opKeys: map[[32]byte]struct{}{}, mux: router{http.NewServeMux()}, now: time.Now}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.MaxBodyBytes <= 0 {
		s.opts.MaxBodyBytes = 5 << 20
	}
	if s.opts.Logger == nil {
		s.opts.Logger = slog.New(slog.DiscardHandler)
	}
	s.log = s.opts.Logger
	s.g = newGuard(&s.opts)
	for _, k := range s.opts.APIKeys {
		sum := sha256.Sum256([]byte(k))
		s.keys[sum] = "key:" + hex.EncodeToString(sum[:8])
	}
	for _, k := range s.opts.OperatorKeys {
		sum := sha256.Sum256([]byte(k))
		if _, both := s.keys[sum]; both {
			return nil, errors.New("server.New: a key is both an API key and an operator key (Options.APIKeys and Options.OperatorKeys): give each key one role")
		}
		s.opKeys[sum] = struct{}{}
	}
	for _, r := range []struct {
		pattern string
		body    body
		h       func(w http.ResponseWriter, r *http.Request, owner string) error
	}{
		{"POST /api/v2/sessions", bodyFiles, s.create},
		{"GET /api/v2/sessions", bodyNone, s.list},
		{"GET /api/v2/sessions/quota", bodyNone, s.quota},
		{"GET /api/v2/sessions/{id}", bodyNone, s.get},
		{"DELETE /api/v2/sessions/{id}", bodyNone, s.cancel},
		{"GET /api/v2/sessions/{id}/status", bodyNone, s.status},
		{"GET /api/v2/sessions/{id}/changes", bodyNone, s.changes},
		{"GET /api/v2/sessions/{id}/events", bodyNone, s.events},
		{"GET /api/v2/sessions/{id}/resources/{bucket}/{key...}", bodyNone, s.resource},
		{"POST /api/v2/sessions/{id}/messages", bodyFiles, s.messages},
		{"POST /api/v2/sessions/{id}/tool_results", bodyJSON, s.toolResults},
		{"POST /api/v2/sessions/{id}/approvals", bodyJSON, s.approvals},
		{"POST /api/v2/sessions/{id}/pause", bodyIgnored, s.control((*session.Manager).Pause)},
		{"POST /api/v2/sessions/{id}/resume", bodyIgnored, s.control((*session.Manager).Resume)},
		{"POST /api/v2/sessions/{id}/force_answer", bodyIgnored, s.control((*session.Manager).ForceAnswer)},
		{"POST /api/v2/sessions/{id}/feedback", bodyJSON, s.feedback},
		{"PUT /api/v2/sessions/{id}/events/{event_index}/feedback", bodyJSON, s.feedback},
		{"GET /api/v2/sessions/{id}/feedback", bodyNone, s.listFeedback},
		{"POST /api/v2/sessions/{id}/share", bodyIgnored, s.share},
		{"DELETE /api/v2/sessions/{id}/share", bodyNone, s.unshare},
		{"GET /api/v2/quota/tokens", bodyNone, s.tokenQuota},
		{"POST /api/v2/sessions/{id}/files/list_files", bodyJSON, s.listFiles},
		{"POST /api/v2/sessions/{id}/files/read_file", bodyJSON, s.readFile},
		{"POST /api/v2/sessions/{id}/files/write_file", bodyJSON, s.writeFile},
	} {
		s.mux.Handle(r.pattern, s.api(r.body, r.h))
	}
	s.registryRoutes()
	s.scheduleRoutes()
	s.vaultRoutes()
	s.webhookRoutes()
	s.profileRoutes()
	s.liveRoutes()
	s.uiRoutes()
	s.mux.HandleFunc("GET /healthz", s.health)
	// An operator route, for every method: to others it is a route that
	// does not exist, whatever the method.
	s.mux.HandleFunc("/api/v2/replicas", s.replicas)
	// A shared session is public: its token is the capability.
	s.mux.HandleFunc("GET /api/v2/shared/{token}", s.shared)
	s.mux.HandleFunc("GET /api/v2/shared/{token}/events", s.sharedEvents)
	return s, nil
}

// body says what a route does with a request body.
type body int

const (
	bodyNone    body = iota // a GET or DELETE: not read
	bodyJSON                // read: must be declared application/json
	bodyIgnored             // a POST without input: none, or declared JSON
	// bodyFiles is bodyJSON whose messages may carry files: base64
	// (a third more than their 7 MB) is allowed beyond MaxBodyBytes, up
	// to filesBodyBytes.
	bodyFiles
)

// filesBodyBytes bounds the bodies of requests whose messages carry
// files: 7 MB of files in base64, and the rest of the request.
const filesBodyBytes = 12 << 20

// ServeHTTP implements [http.Handler]. Unknown paths and methods get JSON
// errors too. Every request but GET /healthz passes the Host and Origin
// rules first (see [Options.AllowedHosts] and [Options.CORSOrigins]).
func (s *Server) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	bodyDeadline(rw, r)
	d := &dispatchWriter{}
	d.w.init(rw)
	w := &d.w
	defer w.finish()
	if rest, ok := strings.CutPrefix(r.URL.Path, uiAPIPrefix); ok {
		// The page's calls to the API, under its own path, where its
		// cookie is scoped (uisession.go): served as the API's, the
		// cookie accepted (on /api/v2 itself it is not).
		r2 := *r.WithContext(context.WithValue(r.Context(), fromPageKey{}, true))
		u := *r.URL
		u.Path = "/api/" + rest
		raw, ok := strings.CutPrefix(u.RawPath, uiAPIPrefix)
		u.RawPath = ""
		if ok {
			u.RawPath = "/api/" + raw
		}
		r2.URL = &u
		r = &r2
	}
	if r.URL.Path != "/healthz" && !s.g.check(w, r) {
		return
	}
	// One lookup: the mux routes r and sets its pattern and path values;
	// a route of the server's takes w (router). Anything else answered
	// into d: the mux's own answers, for a request no route takes.
	s.mux.ServeHTTP(d, r)
	if d.routed {
		return
	}
	if _, pattern := s.mux.Handler(r); pattern != "" {
		// A redirect to a route (a trailing slash, a cleaned path):
		// the mux's answer as it is.
		maps.Copy(w.Header(), d.header)
		w.WriteHeader(d.status)
		if len(d.body) > 0 {
			w.Write(d.body)
		}
		return
	}
	if allow := d.header.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	writeError(w, d.status, http.StatusText(d.status))
}

// router is the server's ServeMux: every handler registered is told, when
// it is routed a request, that the request is the server's (see
// dispatchWriter).
type router struct{ *http.ServeMux }

func (m router) Handle(pattern string, h http.Handler) {
	m.ServeMux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d, ok := w.(*dispatchWriter); ok {
			d.routed = true
			w = &d.w
		}
		h.ServeHTTP(w, r)
	}))
}

func (m router) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(h))
}

// dispatchWriter is what ServeHTTP gives the mux: a route of the server's
// (router) takes its boundedWriter, w; the mux's own handlers (404, 405
// with its Allow, redirects) write their answer into it, which ServeHTTP
// then answers in JSON or passes on.
type dispatchWriter struct {
	w      boundedWriter
	routed bool
	// the mux's own answer
	header http.Header
	status int
	body   []byte
}

func (d *dispatchWriter) Header() http.Header {
	if d.header == nil {
		d.header = http.Header{}
	}
	return d.header
}

func (d *dispatchWriter) Write(b []byte) (int, error) {
	d.WriteHeader(http.StatusOK)
	d.body = append(d.body, b...)
	return len(b), nil
}

func (d *dispatchWriter) WriteHeader(code int) {
	if d.status == 0 {
		d.status = code
	}
}

// api wraps a handler with authentication, the Content-Type rule, the
// body limit and error mapping.
func (s *Server) api(b body, h func(w http.ResponseWriter, r *http.Request, owner string) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		owner, ok, csrf := s.authenticate(r)
		if !csrf {
			writeError(w, http.StatusForbidden, "missing or wrong X-CSRF-Token (the web page's session cookie needs it on requests that change state)")
			return
		}
		if !ok {
			// The reference's words and header (its HTTPBearer scheme).
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeError(w, http.StatusUnauthorized, "Not authenticated")
			return
		}
		if b != bodyNone && !checkJSON(w, r, b == bodyIgnored) {
			return
		}
		if !checkURL(w, r) {
			return
		}
		if id := r.PathValue("id"); id != "" && !validUUID(id) {
			writeError(w, http.StatusUnprocessableEntity, []session.FieldError{{Loc: []any{"path", "id"}, Msg: "Input should be a valid UUID", Type: "uuid_parsing", Input: id}})
			return
		}
		limit := s.opts.MaxBodyBytes
		if b == bodyFiles {
			limit = max(limit, filesBodyBytes)
		}
		limitBody(w, r, limit)
		if err := h(w, r, owner); err != nil {
			s.writeErr(w, r, err)
		}
	})
}

// validUUID reports whether s is a UUID as the API takes one: 32 hex
// digits, either case, in groups of 8, 4, 4, 4 and 12, each pair of
// groups with or without a hyphen between (the language of
// ^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$,
// checked without a regular expression on every request's path).
func validUUID(s string) bool {
	if len(s) < 32 || len(s) > 36 {
		return false
	}
	i := 0
	for g, n := range [...]int{8, 4, 4, 4, 12} {
		if g > 0 && i < len(s) && s[i] == '-' {
			i++
		}
		if len(s)-i < n {
			return false
		}
		for _, c := range []byte(s[i : i+n]) {
			if !isHex(c) {
				return false
			}
		}
		i += n
	}
	return i == len(s)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// fromPageKey marks a request of the web page to the API, made under its
// path (ui/api/v2/...): the only ones the page's cookie authenticates.
type fromPageKey struct{}

// authenticate returns the request's owner: by its bearer key, or else,
// for a request of the web page (under its path, ui/api/v2/...), by the
// page's session cookie; csrf is false for a cookie-borne request that
// changes state without the session's X-CSRF-Token. On /api/v2 itself
// the cookie is no credential: the browser scopes it to the page's path
// and never sends it there, and a cookie that reached the API's own
// routes (another client's path rules, a proxy rewriting paths) would
// make them a target of cross-site requests.
func (s *Server) authenticate(r *http.Request) (owner string, ok, csrf bool) {
	if len(s.keys) == 0 {
		return "", true, true
	}
	auth := r.Header.Get("Authorization")
	if auth == "" {
		if page, _ := r.Context().Value(fromPageKey{}).(bool); !page {
			return "", false, true
		}
		us, ok := s.cookieSession(r)
		if !ok {
			return "", false, true
		}
		return us.owner, true, csrfOK(r, us)
	}
	sum, ok := bearerSum(auth)
	if !ok {
		return "", false, true
	}
	owner, ok = s.keys[sum]
	return owner, ok, true
}

// bearerSum is the sha256 of the key of an "Authorization: Bearer KEY"
// header's value, the form both key maps hold; false for another scheme.
func bearerSum(auth string) ([32]byte, bool) {
	scheme, key, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return [32]byte{}, false
	}
	return sha256.Sum256([]byte(strings.TrimSpace(key))), true
}

// errBodyTooLarge wraps a body over the limit.
var errBodyTooLarge = errors.New("request body too large")

func (s *Server) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	var ve *session.ValidationError
	switch {
	case errors.As(err, &ve):
		writeError(w, http.StatusUnprocessableEntity, ve.Fields)
	case errors.Is(err, errBodyTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, err.Error())
	case errors.Is(err, errBodyTimeout):
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusRequestTimeout, errBodyTimeout.Error())
	case errors.Is(err, session.ErrNotFound):
		writeError(w, http.StatusNotFound, "Session not found")
	case errors.Is(err, session.ErrResourceNotFound):
		writeError(w, http.StatusNotFound, "Resource not found")
	case errors.Is(err, session.ErrFinished):
		writeError(w, http.StatusConflict, err.Error())
	case errors.Is(err, session.ErrTokenQuotaExceeded):
		writeTokenQuotaError(w, err)
	case errors.Is(err, session.ErrQuotaExceeded):
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusTooManyRequests, "Concurrent session limit reached: retry later, or create the session with queue: true to wait in the queue")
	case errors.Is(err, session.ErrSessionFull), errors.Is(err, session.ErrFilesTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge, err.Error())
	case errors.Is(err, session.ErrReadBusy):
		w.Header().Set("Retry-After", "1")
		w.Header().Set(headerQuota, quotaReads)
		writeError(w, http.StatusTooManyRequests, err.Error())
	case errors.Is(err, session.ErrReadQueueFull):
		// The server's bound, all keys together, not the key's: no
		// Hrns-Quota.
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, err.Error())
	case errors.Is(err, session.ErrInFlight):
		// The reference gives no words for it; these are the IETF's
		// (draft-ietf-httpapi-idempotency-key-header: 409, "A request
		// is outstanding for this Idempotency-Key"). Creating a session
		// takes well under a second: retrying after one finds it made.
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusConflict, inFlightDetail)
	case errors.Is(err, session.ErrIdempotencyMismatch):
		writeError(w, http.StatusUnprocessableEntity, []session.FieldError{{Loc: []any{"header", "Idempotency-Key"}, Msg: err.Error(), Type: "value_error"}})
	case r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
	default:
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, "internal error")
	}
}

func writeError(w http.ResponseWriter, status int, detail any) {
	writeJSON(w, status, map[string]any{"detail": detail})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	// Encoded whole first (json.Encoder would too), so that the answer
	// is one write, with its Content-Length, whose write deadline is
	// for its size (boundedWriter).
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(http.ErrAbortHandler) // a value of the server's own: not expected
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// decode reads the JSON body into v.
func decode(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return fmt.Errorf("%w (limit %d bytes)", errBodyTooLarge, mbe.Limit)
		}
		return err
	}
	return decodeBytes(body, v)
}

// decodeBytes is decodeJSON, and refuses the NUL character in any string
// of the body (checkNUL).
func decodeBytes(body []byte, v any) error {
	if err := decodeJSON(body, v); err != nil {
		return err
	}
	return checkNUL(body)
}

// decodeJSON decodes a body that is UTF-8 JSON into v. It takes the NUL
// character: for the bodies whose strings the stores keep inside JSON
// (a tool's output), never as text.
func decodeJSON(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return &session.ValidationError{Fields: []session.FieldError{{Loc: []any{"body"}, Msg: "Field required", Type: "missing"}}}
	}
	if !utf8.Valid(body) {
		return errNotUTF8
	}
	if err := json.Unmarshal(body, v); err != nil {
		loc := []any{"body"}
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
			for _, f := range strings.Split(te.Field, ".") {
				loc = append(loc, f)
			}
			return &session.ValidationError{Fields: []session.FieldError{{Loc: loc, Msg: fmt.Sprintf("Input should be of type %s", te.Type), Type: "type_error"}}}
		}
		return &session.ValidationError{Fields: []session.FieldError{{Loc: loc, Msg: "JSON decode error: " + err.Error(), Type: "json_invalid"}}}
	}
	return nil
}

// errNotUTF8 refuses a body that is not UTF-8: encoding/json would take
// each bad byte as U+FFFD, the caller's text changed without a word.
var errNotUTF8 = &session.ValidationError{Fields: []session.FieldError{{Loc: []any{"body"}, Msg: "JSON decode error: the body is not UTF-8", Type: "json_invalid"}}}

// checkText refuses a JSON body that is not UTF-8 or holds the NUL
// character, for the routes that do not decode with decodeBytes.
func checkText(body []byte) error {
	if !utf8.Valid(body) {
		return errNotUTF8
	}
	return checkNUL(body)
}

func checkNUL(body []byte) error {
	if loc := nulAt(body); loc != nil {
		return &session.ValidationError{Fields: []session.FieldError{{Loc: loc, Msg: nulMsg, Type: "value_error"}}}
	}
	return nil
}

// nulMsg refuses the NUL character, which PostgreSQL's text cannot hold
// (it was an internal error there, and taken on SQLite): refused in every
// string of a body, key or value, and in URLs, whatever the store, so
// that both stores take the same requests.
const nulMsg = "the NUL character (\\u0000) is not allowed in text"

// nulAt returns where the first string of a JSON document that holds the
// NUL character is, key or value (["body", "messages", 1, "message"]),
// or nil if none does. The document is valid JSON.
func nulAt(doc []byte) []any {
	if !bytes.Contains(doc, []byte(`\u0000`)) {
		return nil // the common case: no walk
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var walk func(path []any) []any
	walk = func(path []any) []any {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		switch t := tok.(type) {
		case string:
			if strings.ContainsRune(t, 0) {
				return path
			}
		case json.Delim:
			for i := 0; dec.More(); i++ {
				at := append(slices.Clip(path), any(i))
				if t == '{' {
					k, err := dec.Token()
					if err != nil {
						return nil
					}
					key, _ := k.(string)
					at[len(at)-1] = key
					if strings.ContainsRune(key, 0) {
						return at
					}
				}
				if loc := walk(at); loc != nil {
					return loc
				}
			}
			dec.Token() // the closing delimiter
		}
		return nil
	}
	return walk([]any{"body"})
}

// unstorable reports whether s is text no store can hold: not UTF-8, or
// holding the NUL character.
func unstorable(s string) bool {
	return !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0
}

// checkURL refuses a request whose path or query values are unstorable
// text (%00, %E9): 422 naming the parameter, before any store is asked.
func checkURL(w http.ResponseWriter, r *http.Request) bool {
	if unstorable(r.URL.Path) {
		writeError(w, http.StatusUnprocessableEntity, []session.FieldError{{Loc: []any{"path"}, Msg: "the path is not UTF-8 or holds the NUL character (%00)", Type: "value_error"}})
		return false
	}
	if q := r.URL.RawQuery; q == "" || !strings.Contains(q, "%") && !unstorable(q) {
		// No escape: each key and value is a piece of the query, with
		// '+' for ' ', as storable as the whole (no parse for it).
		return true
	}
	for k, vs := range r.URL.Query() {
		bad := unstorable(k)
		for _, v := range vs {
			bad = bad || unstorable(v)
		}
		if bad {
			writeError(w, http.StatusUnprocessableEntity, []session.FieldError{{Loc: []any{"query", strings.ToValidUTF8(strings.ReplaceAll(k, "\x00", ""), "")}, Msg: "the value is not UTF-8 or holds the NUL character (%00)", Type: "value_error"}})
			return false
		}
	}
	return true
}

// idempotencyKey returns the request's Idempotency-Key, empty when it
// has none, or a *session.ValidationError when the key is empty, longer
// than 255 bytes, sent more than once or has a byte that is not printable
// ASCII (space to tilde): it is kept as text with what it made, and HTTP
// lets a header hold tabs and bytes above 0x7f, which are not always
// UTF-8 (PostgreSQL's text refused them with an internal error).
func idempotencyKey(r *http.Request) (string, error) {
	vs, set := r.Header["Idempotency-Key"]
	if !set {
		return "", nil
	}
	invalid := func(msg, typ string) error {
		return &session.ValidationError{Fields: []session.FieldError{{Loc: []any{"header", "Idempotency-Key"}, Msg: msg, Type: typ}}}
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" || len(key) > 255 {
		return "", invalid("String should have 1 to 255 characters", "string_type")
	}
	if len(vs) > 1 {
		return "", invalid("Header should be sent once", "value_error")
	}
	for i := range len(key) {
		if key[i] < ' ' || key[i] > '~' {
			return "", invalid("String should have only printable ASCII characters", "string_pattern_mismatch")
		}
	}
	return key, nil
}

func (s *Server) create(w http.ResponseWriter, r *http.Request, owner string) error {
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return fmt.Errorf("%w (limit %d bytes)", errBodyTooLarge, mbe.Limit)
		}
		return err
	}
	var req api.Request
	if err := decodeBytes(body, &req); err != nil {
		return err
	}
	v, created, err := s.m.Create(r.Context(), &session.CreateParams{Owner: owner, Request: &req, Raw: body, IdempotencyKey: key})
	if err != nil {
		return err
	}
	if !created {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	if len(v.NotHonoured) > 0 {
		w.Header().Set("Hrns-Not-Honoured", strings.Join(v.NotHonoured, ", "))
	}
	w.Header().Set("Location", "/api/v2/sessions/"+v.ID)
	writeJSON(w, http.StatusCreated, v)
	return nil
}

// health answers a load balancer: 200 while this replica works, 503 when
// it cannot reach the store (other replicas take its sessions over). It
// is unauthenticated and cheap: the status alone. With an operator key
// it names the replica answering (its ID names its host) and why it is
// unhealthy.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	err := s.m.Health()
	status, body := http.StatusOK, map[string]any{"status": "ok"}
	if err != nil {
		status, body = http.StatusServiceUnavailable, map[string]any{"status": "unhealthy"}
	}
	if s.operator(r) {
		body["replica"] = s.m.ReplicaID()
		if err != nil {
			body["detail"] = err.Error()
		}
		// Counts of MCP definitions whose stored values no longer
		// decrypt (a vault key dropped too early): numbers only.
		body["mcp_secrets"] = s.m.MCPSecretsHealth()
	}
	writeJSON(w, status, body)
}

// operator reports whether r carries an operator key
// ([Options.OperatorKeys]) as its bearer key; on a server without any
// key, whether API key or operator key, every request does: its one
// user is its operator.
func (s *Server) operator(r *http.Request) bool {
	if len(s.opKeys) == 0 {
		return len(s.keys) == 0
	}
	sum, ok := bearerSum(r.Header.Get("Authorization"))
	if !ok {
		return false
	}
	_, ok = s.opKeys[sum]
	return ok
}

// replicas answers GET /api/v2/replicas, an operator route: the
// replicas' hosts, PIDs and loads are the operator's, and a request
// without an operator key gets what a route that does not exist gets
// (ServeHTTP's 404), for any method.
func (s *Server) replicas(w http.ResponseWriter, r *http.Request) {
	if !s.operator(r) {
		writeError(w, http.StatusNotFound, http.StatusText(http.StatusNotFound))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, http.StatusText(http.StatusMethodNotAllowed))
		return
	}
	rs, err := s.m.Replicas(r.Context())
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": rs})
}

func (s *Server) quota(w http.ResponseWriter, r *http.Request, owner string) error {
	q, err := s.m.Quota(r.Context(), owner)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, q)
	return nil
}

func (s *Server) get(w http.ResponseWriter, r *http.Request, owner string) error {
	v, err := s.m.Get(r.Context(), owner, r.PathValue("id"))
	if err != nil {
		return err
	}
	if v.Lease != nil {
		// Out of the reference's Session object. The replica's ID
		// names its host, which is the operator's: a tenant is told
		// until when the session is held, and only the one user of a
		// server without keys (its operator) which replica holds it.
		until := fmt.Sprintf("until=%q", v.Lease.Until.Format(time.RFC3339Nano))
		if len(s.keys) == 0 && len(s.opKeys) == 0 {
			until = fmt.Sprintf("replica=%q; ", v.Lease.Replica) + until
		}
		w.Header().Set("Hrns-Lease", until)
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) status(w http.ResponseWriter, r *http.Request, owner string) error {
	v, err := s.m.Status(r.Context(), owner, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request, owner string) error {
	if err := s.m.Cancel(r.Context(), owner, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// query reads typed query parameters, collecting errors.
type query struct {
	r      *http.Request
	vals   url.Values // r's, parsed once
	errors []session.FieldError
}

// get is the first value of the parameter, as r.URL.Query().Get gives it.
func (q *query) get(name string) string {
	if q.vals == nil {
		q.vals = q.r.URL.Query()
	}
	return q.vals.Get(name)
}

func (q *query) int(name string, def, lo, hi int) int {
	raw := q.get(name)
	if raw == "" {
		return def
	}
	n, err := strconv.Atoi(raw)
	switch {
	case err != nil:
		q.add(name, "Input should be a valid integer", raw)
	case n < lo:
		q.add(name, fmt.Sprintf("Input should be greater than or equal to %d", lo), raw)
	case n > hi:
		q.add(name, fmt.Sprintf("Input should be less than or equal to %d", hi), raw)
	}
	return n
}

func (q *query) bool(name string, def bool) bool {
	raw := q.get(name)
	if raw == "" {
		return def
	}
	switch strings.ToLower(raw) {
	case "true", "1", "yes", "on":
		return true
	case "false", "0", "no", "off":
		return false
	}
	q.add(name, "Input should be a valid boolean", raw)
	return def
}

// time reads an RFC 3339 date-time.
func (q *query) time(name string) time.Time {
	raw := q.get(name)
	if raw == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, raw)
	if err != nil {
		q.add(name, "Input should be a valid datetime (RFC 3339)", raw)
	}
	if err == nil && t.IsZero() {
		// 0001-01-01T00:00:00Z is the zero time, which means "no
		// filter" to the store: a nanosecond later compares the same
		// with every time a session can have.
		t = t.Add(time.Nanosecond)
	}
	return t
}

// maxSearch bounds a list's search text, in bytes: a search is matched
// against each of the key's entries, and SQLite refuses a LIKE pattern
// past 50,000 bytes (it was an internal error).
const maxSearch = 1000

// search reads a search text of at most maxSearch bytes.
func (q *query) search(name string) string {
	raw := q.get(name)
	if len(raw) > maxSearch {
		q.errors = append(q.errors, session.FieldError{Loc: []any{"query", name}, Msg: fmt.Sprintf("String should have at most %d bytes", maxSearch), Type: "string_too_long"})
		return ""
	}
	return raw
}

func (q *query) add(name, msg string, input any) {
	q.errors = append(q.errors, session.FieldError{Loc: []any{"query", name}, Msg: msg, Type: "value_error", Input: input})
}

func (q *query) err() error {
	if len(q.errors) == 0 {
		return nil
	}
	return &session.ValidationError{Fields: q.errors}
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, owner string) error {
	q := &query{r: r}
	p := &session.ListParams{Page: q.int("page", 1, 1, 1<<30), Size: q.int("size", 10, 1, 100)}
	for _, st := range r.URL.Query()["status"] {
		for _, one := range strings.Split(st, ",") {
			status := api.Status(one)
			switch status {
			case api.StatusQueued, api.StatusPending, api.StatusRunning, api.StatusPaused, api.StatusIdle,
				api.StatusAwaitingToolResults, api.StatusCompleted, api.StatusFailed, api.StatusTimedOut, api.StatusInterrupted:
				p.Statuses = append(p.Statuses, status)
			default:
				q.add("status", fmt.Sprintf("Input should be a session state, not %q", one), one)
			}
		}
	}
	vals := r.URL.Query()
	for _, a := range vals["agent"] {
		p.Agents = append(p.Agents, strings.Split(a, ",")...)
	}
	p.GroupID, p.ParentSessionID, p.Search = vals.Get("group_id"), vals.Get("parent_session_id"), q.search("search")
	if id := vals.Get("schedule_id"); id != "" {
		if !validUUID(id) {
			q.add("schedule_id", "Input should be a valid UUID", id)
		}
		p.ScheduleID = id
	}
	p.CreatedAfter, p.CreatedBefore = q.time("created_after"), q.time("created_before")
	p.FinishedAfter, p.FinishedBefore = q.time("finished_after"), q.time("finished_before")
	switch o := vals.Get("owner"); o {
	case "", "me", "me-in-organization", "organization", "me-or-organization":
		// hrns has no organizations: each API key is its own owner, and
		// every scope is the key's own sessions.
	default:
		q.add("owner", "Input should be 'me', 'me-in-organization', 'organization' or 'me-or-organization'", o)
	}
	for _, sort := range r.URL.Query()["sort"] {
		switch sort {
		case "created_at":
			p.Ascending = true
		case "-created_at":
		default:
			q.add("sort", "Input should be 'created_at' or '-created_at'", sort)
		}
	}
	if err := q.err(); err != nil {
		return err
	}
	page, err := s.m.List(r.Context(), owner, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) changes(w http.ResponseWriter, r *http.Request, owner string) error {
	q := &query{r: r}
	p := &session.ChangesParams{
		From:     int64(q.int("from_index", 0, -1<<62, 1<<62)),
		NoEvents: !q.bool("include_events", true),
		Wait:     time.Duration(q.int("wait_for_seconds", 0, 0, 25)) * time.Second,
	}
	if q.get("limit") != "" {
		p.Limit = new(q.int("limit", 0, 0, 1<<30))
	}
	if err := q.err(); err != nil {
		return err
	}
	var (
		c     *session.Changes
		count int64
		err   error
	)
	read := func() { c, count, err = s.m.Changes(r.Context(), owner, r.PathValue("id"), p) }
	if p.Wait == 0 {
		read()
	} else if !s.whilePolling(w, owner, read) {
		return nil
	}
	if err != nil {
		return err
	}
	// The reference's ETag is the bare event count.
	w.Header().Set("ETag", strconv.FormatInt(count, 10))
	if c == nil {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) events(w http.ResponseWriter, r *http.Request, owner string) error {
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		return s.stream(w, r, owner)
	}
	p, err := eventsParams(r)
	if err != nil {
		return err
	}
	if p.From == nil {
		// A page asked by number is given whole, in pieces.
		pr, err := s.m.EventPage(r.Context(), owner, r.PathValue("id"), p)
		if err != nil {
			return err
		}
		return s.writeEventPage(w, r, pr)
	}
	page, err := s.m.Events(r.Context(), owner, r.PathValue("id"), p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// writeEventPage answers a page of events asked by its number (page and
// size, as H's SDK pages): whole, {"items": [...], "total": N, "page":
// P}, however many bytes its events hold, since such a client has no
// other way to the events of a page cut short (it does not know
// next_index). The events are read a piece at a time, each piece at most
// the read budget plus one event ([session.EventPageReader]), encoded
// event by event to the response and flushed before the next is read:
// what the request makes the server hold is one piece, not the page. A
// read slot of the key (session.MaxReadsPerOwner, session.MaxReads) is
// held only while a piece is read, never while it is sent: a client
// that reads slowly, or not at all, delays no other read; it loses the
// answer when it takes no piece within pageWriteTimeout. A piece after
// the first waits for a slot as any read does, and again (pageReadRetry)
// when the key's or the server's reads are too many for it to wait. A
// read that fails once the answer has begun aborts it (the client sees a
// broken response, never a page short of events); before, it is an
// error answer as usual.
func (s *Server) writeEventPage(w http.ResponseWriter, r *http.Request, pr *session.EventPageReader) error {
	defer pr.Close()
	events, err := pr.Next()
	if err != nil {
		return err
	}
	ownWriteDeadline(w)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	buf.WriteString(`{"items":[`)
	n := 0
	for len(events) > 0 {
		rc.SetWriteDeadline(time.Now().Add(pageWriteTimeout))
		for _, e := range events {
			if n > 0 {
				buf.WriteByte(',')
			}
			n++
			if err := enc.Encode(e); err != nil {
				s.log.Error("encoding an event", "session", r.PathValue("id"), "index", e.Index, "err", err)
				panic(http.ErrAbortHandler)
			}
			buf.Truncate(buf.Len() - 1) // the encoder's newline
			if _, err := w.Write(buf.Bytes()); err != nil {
				return nil // the client went away
			}
			buf.Reset()
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
		if events, err = nextPiece(r.Context(), pr); err != nil {
			if r.Context().Err() == nil {
				s.log.Error("reading a page of events", "session", r.PathValue("id"), "err", err)
			}
			panic(http.ErrAbortHandler)
		}
	}
	fmt.Fprintf(&buf, `],"total":%d,"page":%d}`+"\n", pr.Total, pr.Page)
	rc.SetWriteDeadline(time.Now().Add(pageWriteTimeout)) // the last read may have waited
	w.Write(buf.Bytes())
	return nil
}

// pageReadRetry bounds how long the next piece of a page being sent is
// asked again after its read found the key's or the server's reads too
// many to wait for a slot (session.ErrReadBusy, ErrReadQueueFull), a
// second apart: the client already has the page's beginning, and a 429
// cannot be told any more.
const pageReadRetry = time.Minute

// nextPiece is pr.Next, asked again for pageReadRetry while the reads are
// busy, as long as ctx lasts.
func nextPiece(ctx context.Context, pr *session.EventPageReader) ([]session.Event, error) {
	deadline := time.Now().Add(pageReadRetry)
	for {
		events, err := pr.Next()
		if !errors.Is(err, session.ErrReadBusy) && !errors.Is(err, session.ErrReadQueueFull) || time.Now().After(deadline) {
			return events, err
		}
		t := time.NewTimer(time.Second)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

// eventsParams reads the query of an events listing.
func eventsParams(r *http.Request) (*session.EventsParams, error) {
	q := &query{r: r}
	p := &session.EventsParams{Page: q.int("page", 1, 1, 1<<30), Size: q.int("size", 50, 1, 200), Type: r.URL.Query().Get("type")}
	for _, sort := range r.URL.Query()["sort"] {
		switch sort {
		case "timestamp":
		case "-timestamp":
			p.Descending = true
		default:
			q.add("sort", "Input should be 'timestamp' or '-timestamp'", sort)
		}
	}
	if r.URL.Query().Get("from_index") != "" {
		p.From = new(int64(q.int("from_index", 0, 0, 1<<62)))
	}
	return p, q.err()
}

// resource serves a resource of the session: the bytes of an event's
// image (bucket "events", the event's index as key). The reference
// redirects to a presigned URL; hrns, which keeps the images in its
// store, answers 200 with the bytes, which is what a client following the
// redirect receives.
func (s *Server) resource(w http.ResponseWriter, r *http.Request, owner string) error {
	if r.PathValue("bucket") == resourceBucketFiles {
		return s.resourceFile(w, r, owner)
	}
	b, mediaType, err := s.m.Resource(r.Context(), owner, r.PathValue("id"), r.PathValue("bucket"), r.PathValue("key"))
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", mediaType)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, max-age=3600")
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(b)
	if err != nil && r.Context().Err() == nil {
		s.log.Debug("writing a resource", "err", err)
	}
	return nil
}

// streamDetail is what an event stream's error event says of err: a
// session gone is the caller's to know; any other error (the store's,
// whose text may name the database's host and user) goes to the log, and
// the caller is told "internal error", as writeErr tells it.
func (s *Server) streamDetail(r *http.Request, err error) string {
	if errors.Is(err, session.ErrNotFound) {
		return "Session not found"
	}
	s.log.Error("event stream failed", "path", r.URL.Path, "err", err)
	return "internal error"
}

// stream sends the session's events as Server-Sent Events, from
// from_index (or after the Last-Event-ID a reconnecting browser sends),
// until the session has ended and every event was sent.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, owner string) error {
	q := &query{r: r}
	from := int64(q.int("from_index", 0, 0, 1<<62))
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		if n, err := strconv.ParseInt(last, 10, 64); err == nil && n >= 0 {
			from = n + 1
		}
	}
	if err := q.err(); err != nil {
		return err
	}
	id := r.PathValue("id")
	if _, err := s.m.Status(r.Context(), owner, id); err != nil {
		return err
	}
	if !s.takePoll(w, owner) {
		return nil
	}
	defer s.polls.give(owner)
	rc := http.NewResponseController(w)
	// Each turn's writes have pageWriteTimeout to be taken: a client that
	// stops reading ends its stream then, and the long-poll it counts as
	// (its key's, and the server's) with it, rather than holding them for
	// good on its full socket.
	ownWriteDeadline(w)
	rc.SetWriteDeadline(time.Now().Add(pageWriteTimeout))
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc.Flush()
	for {
		c, count, err := s.m.Changes(r.Context(), owner, id, &session.ChangesParams{From: from, Wait: 15 * time.Second})
		rc.SetWriteDeadline(time.Now().Add(pageWriteTimeout))
		if errors.Is(err, session.ErrReadBusy) || errors.Is(err, session.ErrReadQueueFull) {
			// The key's other reads are loading, or the server's: wait
			// for them, as a client told 429 or 503 would.
			select {
			case <-time.After(time.Second):
				continue
			case <-r.Context().Done():
				return nil
			}
		}
		if err != nil {
			if r.Context().Err() == nil {
				fmt.Fprintf(w, "event: error\ndata: %s\n\n", mustJSON(map[string]string{"detail": s.streamDetail(r, err)}))
				rc.Flush()
			}
			return nil
		}
		status := api.Status("")
		if c == nil {
			fmt.Fprint(w, ": keep-alive\n\n")
			if st, err := s.m.Status(r.Context(), owner, id); err == nil {
				status = st.Status
			}
			if status.Terminal() {
				// count was read before the status: the events that
				// ended the session may have come between. Read them
				// now, after it, rather than end without them.
				if c, count, err = s.m.Changes(r.Context(), owner, id, &session.ChangesParams{From: from}); err != nil {
					continue // as the next long-poll's error says
				}
			}
		}
		if c != nil {
			for _, e := range c.NewEvents {
				fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.Index, e.Type, mustJSON(e))
			}
			from += int64(len(c.NewEvents))
			status = c.Status
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
		if status.Terminal() && from >= count {
			fmt.Fprintf(w, "event: end\ndata: %s\n\n", mustJSON(map[string]any{"status": status}))
			rc.Flush()
			return nil
		}
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request, owner string) error {
	var body struct {
		Type     string            `json:"type"`
		Messages []api.UserMessage `json:"messages"`
		api.UserMessage
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	msgs := body.Messages
	if body.Type != "batch" {
		body.UserMessage.Type = body.Type
		msgs = []api.UserMessage{body.UserMessage}
	} else if len(msgs) == 0 {
		return &session.ValidationError{Fields: []session.FieldError{{Loc: []any{"body", "messages"}, Msg: "List should have at least 1 item", Type: "too_short"}}}
	}
	if err := s.m.SendMessages(r.Context(), owner, r.PathValue("id"), msgs); err != nil {
		return err
	}
	yieldToWoken()
	w.WriteHeader(http.StatusAccepted)
	return nil
}

// resultInput is a tool_result or error_event body, or a batch of them.
type resultInput struct {
	Type    string            `json:"type"`
	Results []json.RawMessage `json:"results"`
}

func (s *Server) toolResults(w http.ResponseWriter, r *http.Request, owner string) error {
	// A tool's output may hold the NUL character (a binary file read as
	// text): the session keeps results inside JSON, which both stores
	// hold, so it is taken (TestToolResultWithNUL).
	body, err := io.ReadAll(r.Body)
	if err != nil {
		if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return fmt.Errorf("%w (limit %d bytes)", errBodyTooLarge, mbe.Limit)
		}
		return err
	}
	var in resultInput
	if err := decodeJSON(body, &in); err != nil {
		return err
	}
	items := []json.RawMessage{body}
	batch := in.Type == "batch"
	if batch {
		items = in.Results
		if len(items) == 0 {
			return &session.ValidationError{Fields: []session.FieldError{{Loc: []any{"body", "results"}, Msg: "List should have at least 1 item", Type: "too_short"}}}
		}
	}
	var results []api.ToolResult
	var fields []session.FieldError
	for i, raw := range items {
		loc := []any{"body"}
		if batch {
			loc = append(loc, "results", i)
		}
		res, errs := parseResult(raw, loc)
		fields = append(fields, errs...)
		results = append(results, res)
	}
	if len(fields) > 0 {
		return &session.ValidationError{Fields: fields}
	}
	appended, err := s.m.PostToolResultsRange(r.Context(), owner, r.PathValue("id"), results)
	if err != nil {
		return err
	}
	yieldToWoken()
	// An hrns addition: the events the results appended to the log (see
	// docs/sessions-api.md), so that a caller can go on from there.
	w.Header().Set(api.HeaderEvents, api.FormatEventRange(appended.From, appended.To))
	w.WriteHeader(http.StatusAccepted)
	return nil
}

// parseResult reads one result, telling the kinds apart as the API does:
// by "kind", else by its fields.
func parseResult(raw json.RawMessage, loc []any) (api.ToolResult, []session.FieldError) {
	var res api.ToolResult
	var probe struct {
		Kind    string           `json:"kind"`
		ToolReq *json.RawMessage `json:"tool_req"`
		Error   *string          `json:"error"`
		Origin  *string          `json:"origin"`
	}
	at := func(f ...any) []any { return append(append([]any{}, loc...), f...) }
	if err := json.Unmarshal(raw, &probe); err != nil {
		return res, []session.FieldError{{Loc: loc, Msg: "Input should be a tool_result or error_event object", Type: "model_type"}}
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return res, []session.FieldError{{Loc: loc, Msg: err.Error(), Type: "value_error"}}
	}
	if res.Kind == "" {
		res.Kind = api.KindToolResult
		if probe.ToolReq == nil && probe.Error != nil || probe.Error != nil && probe.Origin != nil {
			res.Kind = api.KindError
		}
	}
	var errs []session.FieldError
	switch res.Kind {
	case api.KindToolResult:
	case api.KindError:
		if probe.Error == nil {
			errs = append(errs, session.FieldError{Loc: at("error"), Msg: "Field required", Type: "missing"})
		}
		if probe.Origin == nil {
			errs = append(errs, session.FieldError{Loc: at("origin"), Msg: "Field required", Type: "missing"})
		}
	default:
		errs = append(errs, session.FieldError{Loc: at("kind"), Msg: "Input should be 'tool_result' or 'error_event'", Type: "literal_error", Input: res.Kind})
	}
	// An error_event may come without tool_req (the reference allows
	// it): the agent reads it as a message (see Manager.PostToolResults).
	if res.Kind == api.KindToolResult && (probe.ToolReq == nil || res.ToolReq.ID == "") {
		errs = append(errs, session.FieldError{Loc: at("tool_req", "id"), Msg: "Field required: the id of the pending call", Type: "missing"})
	}
	return res, errs
}

func (s *Server) approvals(w http.ResponseWriter, r *http.Request, owner string) error {
	var body struct {
		Type      string         `json:"type"`
		Decisions []api.Decision `json:"decisions"`
		api.Decision
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	ds := body.Decisions
	if body.Type != "batch" {
		ds = []api.Decision{body.Decision}
	}
	var fields []session.FieldError
	for i, d := range ds {
		if d.ID == "" {
			loc := []any{"body", "id"}
			if body.Type == "batch" {
				loc = []any{"body", "decisions", i, "id"}
			}
			fields = append(fields, session.FieldError{Loc: loc, Msg: "Field required", Type: "missing"})
		}
	}
	if len(ds) == 0 {
		fields = append(fields, session.FieldError{Loc: []any{"body", "decisions"}, Msg: "List should have at least 1 item", Type: "too_short"})
	}
	if len(fields) > 0 {
		return &session.ValidationError{Fields: fields}
	}
	if err := s.m.Decide(r.Context(), owner, r.PathValue("id"), ds); err != nil {
		return err
	}
	yieldToWoken()
	w.WriteHeader(http.StatusAccepted)
	return nil
}

func (s *Server) feedback(w http.ResponseWriter, r *http.Request, owner string) error {
	var body struct {
		Success *bool   `json:"success"`
		Message *string `json:"message"`
	}
	if err := decode(r, &body); err != nil {
		return err
	}
	if body.Success == nil {
		return &session.ValidationError{Fields: []session.FieldError{{Loc: []any{"body", "success"}, Msg: "Field required", Type: "missing"}}}
	}
	fb := api.Feedback{Success: *body.Success, Message: body.Message}
	var err error
	if raw := r.PathValue("event_index"); raw != "" {
		i, perr := strconv.ParseInt(raw, 10, 64)
		if perr != nil || i < 0 {
			return &session.ValidationError{Fields: []session.FieldError{{Loc: []any{"path", "event_index"}, Msg: "Input should be a valid event index", Type: "int_parsing", Input: raw}}}
		}
		err = feedback.New(s.m).SetEventFeedback(r.Context(), owner, r.PathValue("id"), i, fb)
	} else {
		err = feedback.New(s.m).SetFeedback(r.Context(), owner, r.PathValue("id"), fb)
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) share(w http.ResponseWriter, r *http.Request, owner string) error {
	token, err := feedback.New(s.m).Share(r.Context(), owner, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"share_url": s.publicBase(r) + "/api/v2/shared/" + token})
	return nil
}

// inFlightDetail is the detail of the 409 answered while a request with
// the same Idempotency-Key is being processed.
const inFlightDetail = "A request with the same Idempotency-Key for the same operation is being processed or is outstanding: retry after Retry-After seconds to get its result."

// publicBase is the absolute URL of the server's root, without a final
// slash: Options.PublicURL, or the request's scheme and Host.
func (s *Server) publicBase(r *http.Request) string {
	if s.opts.PublicURL != "" {
		return strings.TrimRight(s.opts.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func (s *Server) unshare(w http.ResponseWriter, r *http.Request, owner string) error {
	if err := feedback.New(s.m).Unshare(r.Context(), owner, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// shared answers GET /api/v2/shared/{token}: the session, read-only, to
// anyone with its share token.
func (s *Server) shared(w http.ResponseWriter, r *http.Request) {
	v, err := feedback.New(s.m).Shared(r.Context(), r.PathValue("token"))
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) control(op func(m *session.Manager, ctx context.Context, owner, id string) error) func(http.ResponseWriter, *http.Request, string) error {
	return func(w http.ResponseWriter, r *http.Request, owner string) error {
		if err := op(s.m, r.Context(), owner, r.PathValue("id")); err != nil {
			return err
		}
		yieldToWoken()
		w.WriteHeader(http.StatusAccepted)
		return nil
	}
}
