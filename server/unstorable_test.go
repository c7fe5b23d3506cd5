package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/postgres"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// TestUnstorableTextRefused sends text no store can hold as text: the
// NUL character (JSON's \u0000, or %00 in the URL) and bytes that are
// not UTF-8, in a body, a query, a path and the Idempotency-Key. Each
// is a 4xx naming where, on SQLite as on PostgreSQL (whose text columns
// refuse both: they were 500s there, "internal error"), and nothing of
// a refused request is kept. A share link's token holding either names
// nothing (404).
func TestUnstorableTextRefused(t *testing.T) {
	stores := map[string]func() store.Store{
		"sqlite": func() store.Store {
			st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
		"postgres": func() store.Store {
			st, err := postgres.Open(t.Context(), postgrestest.DSN(t), &postgres.Options{MaxConns: 4})
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			st := open()
			t.Cleanup(func() { st.Close() })
			m := session.New(st, llmtest.NewModel(), nil)
			srv := httptest.NewServer(newServer(m, &server.Options{APIKeys: []string{keyAlice, keyBob}}))
			t.Cleanup(srv.Close)
			e := &env{t: t, url: srv.URL, st: st}

			const agent = `{"name":"a","description":"d","environments":[]}`
			for _, tt := range []struct {
				method, path, body string
				header             []string
				status             int
				loc                string
			}{
				{"POST", "/api/v2/sessions", `{"agent":` + agent + `,"messages":"a\u0000b"}`, nil, 422, "body.messages"},
				{"POST", "/api/v2/sessions", `{"agent":` + agent + `,"messages":[{"message":"ok"},{"message":"a\u0000b"}]}`, nil, 422, "body.messages.1.message"},
				{"POST", "/api/v2/sessions", `{"agent":` + agent + `,"group_id":"a\u0000b"}`, nil, 422, "body.group_id"},
				{"POST", "/api/v2/sessions", `{"agent":{"name":"a\u0000b","description":"d","environments":[]}}`, nil, 422, "body.agent.name"},
				{"POST", "/api/v2/skills", `{"name":"nul","description":"d","body":"b","files":{"k\u0000":"v"}}`, nil, 422, "body.files.k\x00"},
				{"POST", "/api/v2/sessions", "{\"agent\":" + agent + ",\"messages\":\"caf\xe9\"}", nil, 422, "body"},
				{"POST", "/api/v2/sessions", `{"agent":` + agent + `}`, []string{"Idempotency-Key", "caf\xe9"}, 422, "header.Idempotency-Key"},
				{"POST", "/api/v2/sessions", `{"agent":` + agent + `}`, []string{"Idempotency-Key", "a\tb"}, 422, "header.Idempotency-Key"},
				{"POST", "/api/v2/agents", `{"name":"nul","description":"a\u0000b","environments":[]}`, nil, 422, "body.description"},
				{"POST", "/api/v2/skills", `{"name":"nul","description":"d","body":"a\u0000b"}`, nil, 422, "body.body"},
				{"GET", "/api/v2/sessions?search=a%00b", "", nil, 422, "query.search"},
				{"GET", "/api/v2/sessions?group_id=a%00b", "", nil, 422, "query.group_id"},
				{"GET", "/api/v2/sessions?agent=caf%E9", "", nil, 422, "query.agent"},
				{"GET", "/api/v2/agents/a%00b", "", nil, 422, "path"},
				{"GET", "/api/v2/skills/caf%E9", "", nil, 422, "path"},
			} {
				r := e.do(tt.method, tt.path, keyAlice, nilIfEmpty(tt.body), tt.header...)
				if r.status != tt.status {
					t.Errorf("%s %s %q: %d %s, want %d", tt.method, tt.path, tt.body, r.status, r.body, tt.status)
					continue
				}
				var v struct{ Detail []session.FieldError }
				r.json(&v)
				if len(v.Detail) == 0 || locString(v.Detail[0].Loc) != tt.loc || v.Detail[0].Msg == "" {
					t.Errorf("%s %s %q: %s, want the first error at %s", tt.method, tt.path, tt.body, r.body, tt.loc)
				}
			}
			// A share link's token is public: one holding such text is a
			// token that names nothing (404, as an unknown one), not a 500.
			for _, p := range []string{"/api/v2/shared/a%00b.c", "/api/v2/shared/caf%E9.x/events"} {
				if r := e.do("GET", p, "", nil); r.status != http.StatusNotFound || !strings.Contains(string(r.body), "Session not found") {
					t.Errorf("GET %s: %d %s, want 404 as an unknown token", p, r.status, r.body)
				}
			}
			// An escaped backslash before u0000 is no NUL: taken.
			e.expect(e.do("POST", "/api/v2/skills", keyAlice, `{"name":"slash","description":"d","body":"a\\u0000b"}`), http.StatusCreated)
			// Nothing of the refused requests was kept.
			for p, want := range map[string]string{"/api/v2/sessions": `"total":0`, "/api/v2/agents": `"nul"`, "/api/v2/skills": `"nul"`} {
				r := e.expect(e.do("GET", p, keyAlice, nil), http.StatusOK)
				if strings.Contains(string(r.body), want) != (p == "/api/v2/sessions") {
					t.Errorf("GET %s after the refused requests: %s", p, r.body)
				}
			}
		})
	}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func locString(loc []any) string {
	var parts []string
	for _, l := range loc {
		parts = append(parts, fmt.Sprint(l))
	}
	return strings.Join(parts, ".")
}
