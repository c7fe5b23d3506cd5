package server

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// FuzzCheckURLQuery checks that checkURL refuses exactly the queries with
// a key or value no store can hold, as it did when it parsed every query
// (its shortcut for a query without escapes must not change that).
func FuzzCheckURLQuery(f *testing.F) {
	for _, q := range []string{"", "a=1", "from_index=3&wait_for_seconds=25", "a=%00", "a=caf%E9", "caf\xe9=1", "a=b;c", "a%3Bb=1", "a=%zz&b=%00", "+=+", "a&b&&c=", "a=\x00"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		want := true
		vals, _ := url.ParseQuery(q)
		for k, vs := range vals {
			bad := unstorable(k)
			for _, v := range vs {
				bad = bad || unstorable(v)
			}
			if bad {
				want = false
			}
		}
		r := &http.Request{URL: &url.URL{Path: "/api/v2/sessions", RawQuery: q}}
		w := httptest.NewRecorder()
		if got := checkURL(w, r); got != want {
			t.Fatalf("checkURL(?%s) = %v, want %v", q, got, want)
		}
		if !want && w.Code != http.StatusUnprocessableEntity {
			t.Fatalf("checkURL(?%s) answered %d", q, w.Code)
		}
	})
}

// BenchmarkFrontDoorNop measures the server's part of an API request
// alone: ServeHTTP (routing, the Host and Origin rules), the api wrapper
// (the key, the path's checks, the body's limit) and the write deadlines,
// around a handler that answers 204 at once, on a route of the sessions
// API's form added for it.
func BenchmarkFrontDoorNop(b *testing.B) {
	st, err := sqlite.Open(filepath.Join(b.TempDir(), "hrns.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	m := session.New(st, &openai.Client{BaseURL: "http://127.0.0.1:1", Model: "test-model"}, nil)
	s, err := New(m, &Options{APIKeys: []string{"sk-alice"}})
	if err != nil {
		b.Fatal(err)
	}
	s.mux.Handle("GET /api/v2/sessions/{id}/nop", s.api(bodyNone, func(w http.ResponseWriter, r *http.Request, owner string) error {
		if r.PathValue("id") == "" {
			panic("no path value")
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}))
	s.mux.Handle("POST /api/v2/sessions/{id}/nop", s.api(bodyJSON, func(w http.ResponseWriter, r *http.Request, owner string) error {
		var in struct{ Message string }
		if err := decode(r, &in); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}))
	const path = "/api/v2/sessions/0b6c1e3e-5d7a-4f7e-9a51-2f8f3c1d9e47/nop?from_index=3&wait_for_seconds=25"
	const body = `{"message":"ping"}`
	for _, method := range []string{"GET", "POST"} {
		b.Run("handler/"+method, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(method, path, nil)
				if method == "POST" {
					r = httptest.NewRequest(method, path, strings.NewReader(body))
					r.Header.Set("Content-Type", "application/json")
				}
				r.Header.Set("Authorization", "Bearer sk-alice")
				w := deadlineRecorder{httptest.NewRecorder()}
				s.ServeHTTP(w, r)
				if w.Code != http.StatusNoContent {
					b.Fatal(w.Code, w.Body.String())
				}
			}
		})
	}
	b.Run("loopback/GET", func(b *testing.B) {
		srv := httptest.NewServer(s)
		b.Cleanup(srv.Close)
		c := srv.Client()
		req, err := http.NewRequest("GET", srv.URL+path, nil)
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer sk-alice")
		b.ReportAllocs()
		for b.Loop() {
			resp, err := c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				b.Fatal(resp.StatusCode)
			}
		}
	})
}

// deadlineRecorder is a recorder that takes deadlines, as net/http's
// writer does (httptest's answers an error, which costs a fmt.Errorf).
type deadlineRecorder struct{ *httptest.ResponseRecorder }

func (deadlineRecorder) SetReadDeadline(time.Time) error  { return nil }
func (deadlineRecorder) SetWriteDeadline(time.Time) error { return nil }
