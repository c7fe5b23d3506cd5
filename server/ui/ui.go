// Package ui is the web page of hrns serve: a session list with a form
// that starts sessions, a session page that shows a session as a
// conversation, live (its browser too), and steers it, views that manage
// the registries, webhooks and schedules, and a read-only view of a
// shared session's trajectory that needs no key, as plain HTML, CSS and
// JavaScript embedded in the binary (no build step).
//
// The page uses only the public /api/v2 endpoints, with relative URLs, so
// that it works behind a path prefix: it is served at PREFIX/ui/ and calls
// PREFIX/api/v2/. Package server mounts [Handler] and adds the login that
// turns an API key into a session cookie; see docs/serve.md.
//
// Everything the page shows from a session (model text, tool arguments
// and results) is set as text (textContent), never parsed as HTML:
// Markdown (messages and answers) is rendered by building elements, with
// links only to http, https and mailto URLs. The page runs under [CSP],
// which allows no inline script.
package ui

import (
	"embed"
	"net/http"
	"strings"
)

//go:embed static
var static embed.FS

// CSP is the Content-Security-Policy of every response of the page.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// files are the page's files and their types.
var files = map[string]string{
	"index.html": "text/html; charset=utf-8",
	"app.js":     "text/javascript; charset=utf-8",
	"app.css":    "text/css; charset=utf-8",
}

// SetHeaders sets the security headers of the page's responses.
func SetHeaders(h http.Header) {
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
}

// Handler serves the page's files by the request path's last element:
// "" and "index.html" are the page, "app.js" and "app.css" its script and
// style; anything else is 404. Mount it under a path ending in "/".
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		if name == "" {
			name = "index.html"
		}
		ct, ok := files[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		b, err := static.ReadFile("static/" + name)
		if err != nil {
			http.Error(w, "missing file", http.StatusInternalServerError)
			return
		}
		SetHeaders(w.Header())
		w.Header().Set("Content-Type", ct)
		if r.Method == http.MethodHead {
			return
		}
		w.Write(b)
	})
}
