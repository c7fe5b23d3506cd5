package server_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/server"
)

// TestUnroutedAnswers pins what the server answers a request that no
// route takes, or that net/http's ServeMux answers itself (404, 405 with
// its Allow, the redirects of a path to clean, a request for "*"), and
// that routed requests still reach their handler, their path values set:
// the server routes each request once.
func TestUnroutedAnswers(t *testing.T) {
	e := newEnv(t, nil)
	h := newServer(e.m, &server.Options{APIKeys: []string{keyAlice}})
	for _, c := range []struct {
		method, target string
		key            bool
		status         int
		allow          string
		location       string
		contentType    string
		body           string
	}{
		{"GET", "/nope", true, 404, "", "", "application/json", `{"detail":"Not Found"}`},
		{"GET", "/nope", false, 404, "", "", "application/json", `{"detail":"Not Found"}`},
		{"PUT", "/api/v2/sessions", true, 405, "GET, HEAD, POST", "", "application/json", `{"detail":"Method Not Allowed"}`},
		{"PUT", "/ui/api/v2/sessions", true, 405, "GET, HEAD, POST", "", "application/json", `{"detail":"Method Not Allowed"}`},
		{"GET", "/ui/api/v2/nope", true, 404, "", "", "application/json", `{"detail":"Not Found"}`},
		{"GET", "/api/v2/sessions/", true, 404, "", "", "application/json", `{"detail":"Not Found"}`},
		{"GET", "/api/v2//sessions?limit=1", true, 307, "", "/api/v2/sessions?limit=1", "text/html; charset=utf-8", `<a href="/api/v2/sessions?limit=1">Temporary Redirect</a>.`},
		{"HEAD", "/api/v2/./sessions", true, 307, "", "/api/v2/sessions", "text/html; charset=utf-8", ``},
		{"GET", "/api/v2//nope", true, 307, "", "", "application/json", `{"detail":"Temporary Redirect"}`},
		{"OPTIONS", "*", true, 400, "", "", "application/json", `{"detail":"Bad Request"}`},
		{"GET", "/api/v2/sessions/0b6c1e3e-5d7a-4f7e-9a51-2f8f3c1d9e47", true, 404, "", "", "application/json", `{"detail":"Session not found"}`},
		{"GET", "/api/v2/sessions/0b6c1e3e-5d7a-4f7e-9a51-2f8f3c1d9e4", true, 422, "", "", "application/json", `{"detail":[{"loc":["path","id"],"msg":"Input should be a valid UUID","type":"uuid_parsing","input":"0b6c1e3e-5d7a-4f7e-9a51-2f8f3c1d9e4"}]}`},
		{"GET", "/api/v2/sessions/0b6c1e3e-5d7a-4f7e-9a51-2f8f3c1d9e47", false, 401, "", "", "application/json", `{"detail":"Not authenticated"}`},
		{"HEAD", "/api/v2/sessions", true, 200, "", "", "application/json", `{"items":[],"total":0,"page":1}`}, // the recorder keeps a HEAD's body; net/http drops it
		{"GET", "/api/v2/replicas", true, 404, "", "", "application/json", `{"detail":"Not Found"}`},
	} {
		t.Run(c.method+" "+c.target, func(t *testing.T) {
			r := httptest.NewRequest(c.method, c.target, nil)
			if c.key {
				r.Header.Set("Authorization", "Bearer "+keyAlice)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			body := strings.TrimSpace(w.Body.String())
			if w.Code != c.status || w.Header().Get("Allow") != c.allow || w.Header().Get("Location") != c.location ||
				w.Header().Get("Content-Type") != c.contentType || body != c.body {
				t.Errorf("%s %s: %d, Allow %q, Location %q, Content-Type %q, body %s; want %d, %q, %q, %q, %s",
					c.method, c.target, w.Code, w.Header().Get("Allow"), w.Header().Get("Location"), w.Header().Get("Content-Type"), body,
					c.status, c.allow, c.location, c.contentType, c.body)
			}
		})
	}
}
