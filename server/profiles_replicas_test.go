package server_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/postgres"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
)

// Two replicas sharing a PostgreSQL store: an upload initiated through
// one is posted to and completed through the other, made the default
// through the first, and a session created through the second finds it;
// another key sees it on neither.
func TestProfileReplicas(t *testing.T) {
	dsn := postgrestest.DSN(t)
	open := func() *env {
		st, err := postgres.Open(t.Context(), dsn, &postgres.Options{MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		web := func(*session.EnvironmentParams) (*loop.Toolset, func(bool), error) { return &loop.Toolset{}, nil, nil }
		m := session.New(st, llmtest.NewModel(), &session.Options{SessionEnvironments: map[string]session.EnvironmentFunc{"web": web}})
		srv := httptest.NewServer(contractHandler(t, newServer(m, &server.Options{APIKeys: []string{keyAlice, keyBob}})))
		t.Cleanup(srv.Close)
		return &env{t: t, url: srv.URL, st: st}
	}
	a, b := open(), open()
	id, url, token := a.initiate(keyAlice)
	bURL := b.url + url[len(a.url):]
	if r := upload(t, bURL, token, profileZip(t, localState, cookiesDB)); r.status != http.StatusNoContent {
		t.Fatalf("upload through b: %d %s", r.status, r.body)
	}
	b.expect(b.do("POST", "/api/v2/browser-profiles/"+id+"/complete-upload", keyAlice,
		`{"name":"shop","browser_name":"chromium","browser_version":"140.0"}`), http.StatusCreated)
	a.expect(a.do("PUT", "/api/v2/browser-profiles/"+id+"/default", keyAlice, nil), http.StatusOK)
	var p profileView
	b.expect(b.do("GET", "/api/v2/browser-profiles/default?browser_name=chromium", keyAlice, nil), http.StatusOK).json(&p)
	if p.ID != id || !p.IsDefault {
		t.Errorf("b's default: %+v", p)
	}
	b.expect(b.do("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":[{"kind":"web","browser_profile_id":"`+id+`"}]}}`), http.StatusCreated)
	a.expect(a.do("POST", "/api/v2/sessions", keyBob, `{"agent":{"name":"a","environments":[{"kind":"web","browser_profile_id":"`+id+`"}]}}`), http.StatusUnprocessableEntity)
	a.expect(a.do("GET", "/api/v2/browser-profiles/"+id, keyBob, nil), http.StatusNotFound)
	b.expect(b.do("GET", "/api/v2/browser-profiles/"+id, keyBob, nil), http.StatusNotFound)
}
