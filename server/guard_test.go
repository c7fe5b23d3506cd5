package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// browserEnv is a server as hrns serve runs it without keys: on
// loopback, answering only loopback Host names at its own port.
type browserEnv struct {
	url   string // http://127.0.0.1:PORT
	port  string
	model *openaitest.Server
}

func newBrowserEnv(t *testing.T, keys, corsOrigins []string) *browserEnv {
	t.Helper()
	model := openaitest.NewServer()
	t.Cleanup(model.Close)
	for range 100 {
		model.Push(openaitest.Reply{Text: "done"})
	}
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, nil)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	srv.Config.Handler = contractHandler(t, newServer(m, &server.Options{
		APIKeys:      keys,
		AllowedHosts: []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port},
		CORSOrigins:  corsOrigins,
	}))
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		m.Stop(context.Background())
	})
	return &browserEnv{url: srv.URL, port: port, model: model}
}

// send sends a raw request to the server, as a browser or curl would,
// with the Host header host (empty: the URL's).
func (e *browserEnv) send(t *testing.T, method, path, host string, header map[string]string, body string) (int, http.Header, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, e.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// sessions returns how many sessions the server holds.
func (e *browserEnv) sessions(t *testing.T) int {
	t.Helper()
	status, _, body := e.send(t, "GET", "/api/v2/sessions?size=100", "", nil, "")
	if status != http.StatusOK {
		t.Fatalf("listing sessions: %d %s", status, body)
	}
	var page struct{ Total int }
	json.Unmarshal([]byte(body), &page)
	return page.Total
}

const createBody = `{"agent":{"name":"a"},"messages":"hi"}`

// TestCrossSiteRequests performs the attack of issue 13, break 8, on a
// keyless loopback server: a web page posting text/plain with its own
// Origin and a rebinding Host must not create a session. Each defence
// (Host, Origin, Content-Type) must stop it on its own, and the
// requests of curl, the Go SDK and a same-origin page must still work.
func TestCrossSiteRequests(t *testing.T) {
	e := newBrowserEnv(t, nil, nil)
	evil := "evil.example:" + e.port
	jsonCT := map[string]string{"Content-Type": "application/json"}
	with := func(kv ...string) map[string]string {
		h := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			h[kv[i]] = kv[i+1]
		}
		return h
	}
	tests := []struct {
		name   string
		method string
		path   string
		host   string
		header map[string]string
		body   string
		want   int
	}{
		// The attack as it was made: a page of evil.example, rebound to
		// 127.0.0.1, posts a "simple" request (no preflight).
		{"attack: text/plain, foreign Origin, rebinding Host", "POST", "/api/v2/sessions", evil,
			with("Content-Type", "text/plain;charset=UTF-8", "Origin", "http://"+evil), createBody, 403},
		// Each defence alone.
		{"rebinding Host, same-origin Origin, JSON", "POST", "/api/v2/sessions", evil,
			with("Content-Type", "application/json", "Origin", "http://"+evil), createBody, 403},
		{"rebinding Host without Origin", "POST", "/api/v2/sessions", evil, jsonCT, createBody, 403},
		{"rebinding Host, GET", "GET", "/api/v2/sessions", evil, nil, "", 403},
		{"loopback IP at another port", "GET", "/api/v2/sessions", "127.0.0.1:1", nil, "", 403},
		{"no port", "GET", "/api/v2/sessions", "localhost", nil, "", 403},
		{"foreign Origin, loopback Host, JSON", "POST", "/api/v2/sessions", "",
			with("Content-Type", "application/json", "Origin", "http://evil.example"), createBody, 403},
		{"foreign Origin, text/plain", "POST", "/api/v2/sessions", "",
			with("Content-Type", "text/plain", "Origin", "https://evil.example"), createBody, 403},
		{"foreign Origin on loopback at another port", "POST", "/api/v2/sessions", "",
			with("Content-Type", "application/json", "Origin", "http://127.0.0.1:3000"), createBody, 403},
		{"Origin null (sandboxed frame, file://)", "POST", "/api/v2/sessions", "",
			with("Content-Type", "application/json", "Origin", "null"), createBody, 403},
		{"foreign Origin, GET", "GET", "/api/v2/sessions", "", with("Origin", "http://evil.example"), "", 403},
		{"cross-site fetch without Origin", "GET", "/api/v2/sessions", "", with("Sec-Fetch-Site", "cross-site"), "", 403},
		{"text/plain without Origin", "POST", "/api/v2/sessions", "", with("Content-Type", "text/plain"), createBody, 415},
		{"form without Origin", "POST", "/api/v2/sessions", "", with("Content-Type", "application/x-www-form-urlencoded"), createBody, 415},
		{"multipart without Origin", "POST", "/api/v2/sessions", "", with("Content-Type", "multipart/form-data; boundary=x"), createBody, 415},
		{"no Content-Type", "POST", "/api/v2/sessions", "", nil, createBody, 415},
		{"JSON look-alike", "POST", "/api/v2/sessions", "", with("Content-Type", "application/jsonx"), createBody, 415},
		{"messages as text/plain", "POST", "/api/v2/sessions/00000000-0000-0000-0000-000000000000/messages", "",
			with("Content-Type", "text/plain"), `{"message":"hi"}`, 415},
		{"tool_results as text/plain", "POST", "/api/v2/sessions/00000000-0000-0000-0000-000000000000/tool_results", "",
			with("Content-Type", "text/plain"), `{}`, 415},
		{"approvals as text/plain", "POST", "/api/v2/sessions/00000000-0000-0000-0000-000000000000/approvals", "",
			with("Content-Type", "text/plain"), `{"id":"c","approved":true}`, 415},
		{"pause as text/plain", "POST", "/api/v2/sessions/00000000-0000-0000-0000-000000000000/pause", "",
			with("Content-Type", "text/plain"), "x", 415},
		{"pause with a foreign Origin and no body", "POST", "/api/v2/sessions/00000000-0000-0000-0000-000000000000/pause", "",
			with("Origin", "http://evil.example"), "", 403},

		// What must keep working.
		{"curl: JSON, no Origin", "POST", "/api/v2/sessions", "", jsonCT, createBody, 201},
		{"JSON with charset", "POST", "/api/v2/sessions", "", with("Content-Type", "application/json; charset=utf-8"), createBody, 201},
		{"JSON in capitals", "POST", "/api/v2/sessions", "", with("Content-Type", "Application/JSON"), createBody, 201},
		{"Host localhost", "POST", "/api/v2/sessions", "localhost:" + e.port, jsonCT, createBody, 201},
		{"Host [::1]", "POST", "/api/v2/sessions", "[::1]:" + e.port, jsonCT, createBody, 201},
		{"same-origin page", "POST", "/api/v2/sessions", "",
			with("Content-Type", "application/json", "Origin", e.url, "Sec-Fetch-Site", "same-origin"), createBody, 201},
		{"same-origin page at localhost", "POST", "/api/v2/sessions", "localhost:" + e.port,
			with("Content-Type", "application/json", "Origin", "http://localhost:"+e.port), createBody, 201},
		{"typed URL", "GET", "/api/v2/sessions", "", with("Sec-Fetch-Site", "none"), "", 200},
		{"pause without a body (curl -X POST)", "POST", "/api/v2/sessions/00000000-0000-0000-0000-000000000000/pause", "", nil, "", 404},
		{"pause with JSON", "POST", "/api/v2/sessions/00000000-0000-0000-0000-000000000000/pause", "", jsonCT, "{}", 404},
		{"health check by IP", "GET", "/healthz", "10.1.2.3:8080", nil, "", 200},
	}
	created := 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := e.send(t, tt.method, tt.path, tt.host, tt.header, tt.body)
			if status != tt.want {
				t.Fatalf("status %d, want %d; body %s", status, tt.want, body)
			}
			if status == http.StatusCreated {
				created++
			}
			var detail struct{ Detail any }
			if err := json.Unmarshal([]byte(body), &detail); status >= 400 && (err != nil || detail.Detail == nil) {
				t.Errorf("error body %q is not {\"detail\": ...}", body)
			}
		})
	}
	if n := e.sessions(t); n != created {
		t.Errorf("%d sessions exist, want the %d created by allowed requests", n, created)
	}

	// The Go SDK, body-less POSTs included.
	c := client.New(e.url, "", nil)
	h, err := c.StartSession(t.Context(), &client.SessionRequest{Agent: client.AgentRef{Inline: &client.Agent{Name: "sdk"}}, Messages: client.Text("hi")})
	if err != nil {
		t.Fatalf("SDK: %v", err)
	}
	if err := h.Pause(t.Context()); err != nil && !strings.Contains(err.Error(), "409") {
		t.Errorf("SDK pause: %v", err)
	}
	if err := h.Resume(t.Context()); err != nil && !strings.Contains(err.Error(), "409") {
		t.Errorf("SDK resume: %v", err)
	}
	if _, err := h.WaitForCompletion(t.Context()); err != nil {
		t.Errorf("SDK: %v", err)
	}
}

// TestCrossSiteKeyed checks that a keyed server refuses other origins and
// non-JSON bodies too, before or after authentication.
func TestCrossSiteKeyed(t *testing.T) {
	e := newBrowserEnv(t, []string{"sk-k"}, nil)
	for _, tt := range []struct {
		name   string
		host   string
		header map[string]string
		want   int
	}{
		{"foreign Origin", "", map[string]string{"Authorization": "Bearer sk-k", "Content-Type": "application/json", "Origin": "http://evil.example"}, 403},
		{"rebinding Host", "evil.example:" + e.port, map[string]string{"Authorization": "Bearer sk-k", "Content-Type": "application/json"}, 403},
		{"text/plain", "", map[string]string{"Authorization": "Bearer sk-k", "Content-Type": "text/plain"}, 415},
		{"text/plain without a key", "", map[string]string{"Content-Type": "text/plain"}, 401},
		{"curl", "", map[string]string{"Authorization": "Bearer sk-k", "Content-Type": "application/json"}, 201},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if status, _, body := e.send(t, "POST", "/api/v2/sessions", tt.host, tt.header, createBody); status != tt.want {
				t.Errorf("status %d, want %d; body %s", status, tt.want, body)
			}
		})
	}
}

// TestCORSAllowsEveryMethod checks that a preflight allows every method
// the server routes (read from its sources, so that a new route with a new
// method cannot be left out): a browser client of another origin could not
// send it otherwise.
func TestCORSAllowsEveryMethod(t *testing.T) {
	const app = "https://app.example"
	e := newBrowserEnv(t, []string{"sk-k"}, []string{app})
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	route := regexp.MustCompile(`"(GET|HEAD|POST|PUT|PATCH|DELETE) /api/`)
	methods := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range route.FindAllSubmatch(b, -1) {
			methods[string(m[1])] = true
		}
	}
	if len(methods) < 5 {
		t.Fatalf("found only the methods %v in the routes", methods)
	}
	for m := range methods {
		preflight := map[string]string{"Origin": app, "Access-Control-Request-Method": m, "Access-Control-Request-Headers": "authorization,content-type"}
		status, h, body := e.send(t, "OPTIONS", "/api/v2/sessions", "", preflight, "")
		allowed := strings.Split(h.Get("Access-Control-Allow-Methods"), ", ")
		if status != http.StatusNoContent || m != "HEAD" && !slices.Contains(allowed, m) {
			t.Errorf("preflight for %s: %d, allowed %q %s", m, status, allowed, body)
		}
	}
}

// TestCORS checks the configured origin's preflight and responses, and
// that other origins still get nothing.
func TestCORS(t *testing.T) {
	const app = "https://app.example"
	e := newBrowserEnv(t, []string{"sk-k"}, []string{app})
	preflight := map[string]string{"Origin": app, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type"}
	status, h, body := e.send(t, "OPTIONS", "/api/v2/sessions", "", preflight, "")
	if status != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != app ||
		!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(h.Get("Access-Control-Allow-Headers"), "Authorization") ||
		!strings.Contains(h.Get("Access-Control-Allow-Headers"), "Content-Type") {
		t.Errorf("preflight: %d %v %s", status, h, body)
	}
	status, h, body = e.send(t, "POST", "/api/v2/sessions", "", map[string]string{"Origin": app, "Authorization": "Bearer sk-k", "Content-Type": "application/json"}, createBody)
	if status != http.StatusCreated || h.Get("Access-Control-Allow-Origin") != app || !strings.Contains(h.Get("Access-Control-Expose-Headers"), "Location") || !strings.Contains(h.Get("Access-Control-Expose-Headers"), "Hrns-Events") {
		t.Errorf("request: %d %v %s", status, h, body)
	}
	// Error answers carry the header too, so the page can read them.
	status, h, _ = e.send(t, "GET", "/api/v2/sessions", "", map[string]string{"Origin": app}, "")
	if status != http.StatusUnauthorized || h.Get("Access-Control-Allow-Origin") != app {
		t.Errorf("unauthenticated: %d %v", status, h)
	}
	for _, other := range []string{"https://evil.example", "http://app.example", "https://app.example:8443"} {
		preflight["Origin"] = other
		if status, h, _ := e.send(t, "OPTIONS", "/api/v2/sessions", "", preflight, ""); status != http.StatusForbidden || h.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight from %s: %d %v", other, status, h)
		}
		if status, _, _ := e.send(t, "POST", "/api/v2/sessions", "", map[string]string{"Origin": other, "Authorization": "Bearer sk-k", "Content-Type": "application/json"}, createBody); status != http.StatusForbidden {
			t.Errorf("request from %s: %d", other, status)
		}
	}
	// The configured origin does not lift the Content-Type rule.
	if status, _, _ := e.send(t, "POST", "/api/v2/sessions", "", map[string]string{"Origin": app, "Authorization": "Bearer sk-k", "Content-Type": "text/plain"}, createBody); status != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain from the configured origin: %d", status)
	}
}
