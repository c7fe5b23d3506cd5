package tools_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/tools"
)

// testWeb is web_fetch allowed to reach httptest servers on 127.0.0.1.
func testWeb(opts *tools.WebOptions) *loop.Toolset {
	o := tools.WebOptions{AllowPrivate: true}
	if opts != nil {
		o = *opts
		o.AllowPrivate = true
	}
	return tools.Web(&o)
}

func fetch(t *testing.T, ts *loop.Toolset, u string) result {
	t.Helper()
	return callTool(t, t.Context(), ts, "web_fetch", map[string]any{"url": u})
}

func newSite(t *testing.T) *httptest.Server {
	t.Helper()
	page, err := os.ReadFile(filepath.Join("testdata", "page.html"))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/docs/guide.html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(page)
	})
	mux.HandleFunc("/plain.txt", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "just <b>text</b>\n")
	})
	mux.HandleFunc("/data.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	})
	mux.HandleFunc("/untyped", func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = nil // no sniffing by the server
		fmt.Fprint(w, "<html><body><h1>Sniffed</h1></body></html>")
	})
	mux.HandleFunc("/logo.png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG\r\n\x1a\n\x00\x00"))
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such page", http.StatusNotFound)
	})
	mux.HandleFunc("/broken", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, "<p>something <b>broke</b></p>")
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, strings.Repeat("x", 5000))
	})
	mux.HandleFunc("/old", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/plain.txt", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	mux.HandleFunc("/to-file", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
	})
	mux.HandleFunc("/ua", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.UserAgent())
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestWebFetch(t *testing.T) {
	srv := newSite(t)
	ts := testWeb(nil)
	tests := []struct {
		name    string
		path    string
		want    string // prefix of the output, after the URL line
		has     []string
		isError bool
	}{
		{name: "html", path: "/docs/guide.html",
			want: "Status: 200 OK\nContent-Type: text/html; charset=utf-8\nTitle: The hrns Guide\n\n# Getting started\n\nhrns is a **small**",
			has:  []string{"[introduction](" + srv.URL + "/docs/intro.html)", "```sh\ngo install", "- Toolsets with\n  \n  - stable order"}},
		{name: "plain text as it is", path: "/plain.txt", want: "Status: 200 OK\nContent-Type: text/plain\n\njust <b>text</b>"},
		{name: "json", path: "/data.json", want: "Status: 200 OK\nContent-Type: application/json\n\n{\"ok\":true}"},
		{name: "sniffed html", path: "/untyped", want: "Status: 200 OK\n\n# Sniffed"},
		{name: "binary refused", path: "/logo.png", want: "Status: 200 OK\nContent-Type: image/png\n\n[10 bytes of image/png content, which is not text; it was not returned]"},
		{name: "404", path: "/missing", want: "Status: 404 Not Found\nContent-Type: text/plain; charset=utf-8\n\nno such page", isError: true},
		{name: "500 html", path: "/broken", want: "Status: 500 Internal Server Error\nContent-Type: text/html\n\nsomething **broke**", isError: true},
		{name: "redirect followed", path: "/old", want: "Status: 200 OK", has: []string{"URL: " + srv.URL + "/plain.txt\n"}},
		{name: "user agent", path: "/ua", has: []string{"hrns-web-fetch/1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fetch(t, ts, srv.URL+tt.path)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.isError != tt.isError {
				t.Errorf("isError %v, want %v", r.isError, tt.isError)
			}
			_, rest, _ := strings.Cut(r.text, "\n")
			if !strings.HasPrefix(r.text, "URL: ") || !strings.HasPrefix(rest, tt.want) {
				t.Errorf("got\n%s\nwant after the URL line\n%s", r.text, tt.want)
			}
			for _, h := range tt.has {
				if !strings.Contains(r.text, h) {
					t.Errorf("output lacks %q:\n%s", h, r.text)
				}
			}
		})
	}
}

func TestWebFetchCaps(t *testing.T) {
	srv := newSite(t)
	r := fetch(t, testWeb(&tools.WebOptions{MaxBodyBytes: 1000}), srv.URL+"/big")
	if r.failed() || !strings.Contains(r.text, "\n"+strings.Repeat("x", 1000)+"\n\n[the response body was cut at 1000 bytes]") {
		t.Errorf("body cap: %v", r)
	}
	r = fetch(t, testWeb(&tools.WebOptions{MaxTextBytes: 100}), srv.URL+"/big")
	if r.failed() || !strings.HasSuffix(r.text, "\n"+strings.Repeat("x", 100)+"\n\n[text cut at 100 of 5000 bytes]") {
		t.Errorf("text cap: %v", r)
	}
}

func TestWebFetchRedirectLimits(t *testing.T) {
	srv := newSite(t)
	r := fetch(t, testWeb(nil), srv.URL+"/loop")
	if r.err == nil || !strings.Contains(r.err.Error(), "stopped after 5 redirects") {
		t.Errorf("redirect loop: %v", r)
	}
	r = fetch(t, testWeb(&tools.WebOptions{MaxRedirects: -1}), srv.URL+"/old")
	if r.err == nil || !strings.Contains(r.err.Error(), "stopped after 0 redirects") {
		t.Errorf("no redirects allowed: %v", r)
	}
	r = fetch(t, testWeb(nil), srv.URL+"/to-file")
	if r.err == nil || !strings.Contains(r.err.Error(), `only fetches http and https URLs, not "file:"`) {
		t.Errorf("redirect to file: %v", r)
	}
}

func TestWebFetchBadURLs(t *testing.T) {
	ts := testWeb(nil)
	for _, u := range []string{
		"file:///etc/passwd",
		"ftp://example.com/x",
		"javascript:alert(1)",
		"gopher://example.com/",
		"http://",
		"http://user:pass@example.com/",
		"not a url at all",
		"://x",
	} {
		if r := fetch(t, ts, u); r.err == nil {
			t.Errorf("%q was fetched: %v", u, r)
		}
	}
}

// TestWebFetchRefusesNonPublic checks the default policy: no request
// reaches a loopback, private, link-local or metadata address, whether
// the URL names it as an IP literal (refused before dialling), in a loose
// numeric notation, or by a host name resolved at connect time.
func TestWebFetchRefusesNonPublic(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "internal secret")
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()
	ts := tools.Web(nil)
	tests := []struct{ url, want string }{
		{srv.URL, "not on the public internet"},
		{fmt.Sprintf("http://localhost:%d/", port), "not on the public internet"}, // resolved, then refused at connect
		{fmt.Sprintf("http://[::1]:%d/", port), "not on the public internet"},
		{"http://[::ffff:127.0.0.1]/", "not on the public internet"},
		{fmt.Sprintf("http://0x7f000001:%d/", port), "non-standard notation (127.0.0.1)"},
		{"http://2130706433/", "non-standard notation (127.0.0.1)"},
		{"http://0177.0.0.1/", "non-standard notation (127.0.0.1)"},
		{"http://127.1/", "non-standard notation (127.0.0.1)"},
		{"http://169.254.169.254/latest/meta-data/", "not on the public internet"},
		{"http://[fd00:ec2::254]/latest/meta-data/", "not on the public internet"},
		{"http://100.100.100.200/", "not on the public internet"},
		{"http://10.0.0.1/", "not on the public internet"},
		{"http://192.168.1.1/", "not on the public internet"},
		{"http://172.16.0.1/", "not on the public internet"},
		{"http://[fc00::1]/", "not on the public internet"},
		{"http://169.254.1.1/", "not on the public internet"},
		{"http://[fe80::1%25lo]/", "not on the public internet"},
		{"http://[fe80::1%25no-such-if]/", "not on the public internet"},
		{"http://0.0.0.0/", "not on the public internet"},
		{"http://[::]/", "not on the public internet"},
		{"http://224.0.0.1/", "not on the public internet"},
		{"http://100.64.0.1/", "not on the public internet"},
		{"http://[64:ff9b::7f00:1]/", "not on the public internet"},
		// Every IPv4-embedding form of a refused address (issue 13).
		{"http://[::127.0.0.1]/", "not on the public internet"},
		{"http://[::ffff:0:127.0.0.1]/", "not on the public internet"},
		{"http://[64:ff9b:1::7f00:1]/", "not on the public internet"},
		{"http://[2002:7f00:1::1]/", "not on the public internet"},
		{"http://[2001:0:a9fe:a9fe::1]/", "not on the public internet"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			r := fetch(t, ts, tt.url)
			if r.err == nil || !strings.Contains(r.err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", r, tt.want)
			}
			// The model (working for an API key of hrns serve) is not told
			// what a name resolved to.
			if strings.HasPrefix(tt.url, "http://localhost") && r.err != nil && (strings.Contains(r.err.Error(), "127.0.0.1") || strings.Contains(r.err.Error(), "::1")) {
				t.Errorf("the refusal of a name shows the address it resolved to: %v", r.err)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the loopback server was reached %d times", n)
	}
}

// TestWebFetchRefusesRedirectToPrivate lets the first hop through to a
// server on 127.0.0.1 and checks that its redirects to other local
// addresses are refused, also when the target is a host name that only
// resolves at connect time.
func TestWebFetchRefusesRedirectToPrivate(t *testing.T) {
	var innerHits atomic.Int32
	inner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		innerHits.Add(1)
		fmt.Fprint(w, "internal secret")
	}))
	defer inner.Close()
	innerPort := inner.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()
	outer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ip":
			http.Redirect(w, r, inner.URL+"/", http.StatusFound)
		case "/name":
			http.Redirect(w, r, fmt.Sprintf("http://localhost:%d/", innerPort), http.StatusFound)
		case "/v6":
			http.Redirect(w, r, fmt.Sprintf("http://[::1]:%d/", innerPort), http.StatusFound)
		case "/metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		}
	}))
	defer outer.Close()
	outerAddr := outer.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort()
	outerAddr = netip.AddrPortFrom(outerAddr.Addr().Unmap(), outerAddr.Port())
	var outerHits atomic.Int32
	ts := tools.WebExempt(nil, func(ap netip.AddrPort) bool {
		if ap == outerAddr {
			outerHits.Add(1)
			return true
		}
		return false
	})

	for path, want := range map[string]string{
		"/ip":       "not on the public internet",
		"/name":     "not on the public internet",
		"/v6":       "not on the public internet",
		"/metadata": "not on the public internet",
	} {
		r := fetch(t, ts, outer.URL+path)
		if r.err == nil || !strings.Contains(r.err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", path, r, want)
		}
		if path == "/name" && r.err != nil && (strings.Contains(r.err.Error(), "127.0.0.1") || strings.Contains(r.err.Error(), "::1")) {
			t.Errorf("the refusal of a name shows the address it resolved to: %v", r.err)
		}
	}
	if n := innerHits.Load(); n != 0 {
		t.Errorf("the inner server was reached %d times", n)
	}
	if outerHits.Load() == 0 {
		t.Error("the outer server was never reached: the test proves nothing")
	}
}

func TestWebFlags(t *testing.T) {
	def, _ := tools.Web(nil).Lookup("web_fetch")
	if !def.Concurrent || def.RequiresApproval {
		t.Errorf("Concurrent %v RequiresApproval %v", def.Concurrent, def.RequiresApproval)
	}
}
