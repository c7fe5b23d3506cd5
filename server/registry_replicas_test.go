package server_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/postgres"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
)

// Two replicas sharing a PostgreSQL store see each other's registry
// changes at once: nothing is cached in a process.
func TestRegistryReplicas(t *testing.T) {
	dsn := postgrestest.DSN(t)
	replica := func() *env {
		st, err := postgres.Open(t.Context(), dsn, &postgres.Options{MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		m := session.New(st, llmtest.NewModel(), nil)
		srv := httptest.NewServer(newServer(m, &server.Options{APIKeys: []string{keyAlice, keyBob}}))
		t.Cleanup(srv.Close)
		return &env{t: t, url: srv.URL, st: st}
	}
	a, b := replica(), replica()
	a.call("POST", "/api/v2/skills", keyAlice, `{"name":"lookup","description":"Looks orders up.","body":"v1"}`, http.StatusCreated, "Skill")
	if r := b.call("GET", "/api/v2/skills/lookup", keyAlice, nil, http.StatusOK, "Skill"); !strings.Contains(string(r.body), `"body":"v1"`) {
		t.Errorf("replica b reads %s", r.body)
	}
	b.call("PATCH", "/api/v2/skills/lookup", keyAlice, `{"body":"v2"}`, http.StatusOK, "Skill")
	if r := a.call("GET", "/api/v2/skills/lookup", keyAlice, nil, http.StatusOK, "Skill"); !strings.Contains(string(r.body), `"body":"v2"`) {
		t.Errorf("replica a reads %s after b's patch", r.body)
	}
	a.call("POST", "/api/v2/agents", keyAlice, `{"name":"support","description":"Answers.","environments":[],"skills":["lookup"]}`, http.StatusCreated, "Agent")
	b.call("POST", "/api/v2/agents", keyAlice, `{"name":"support","description":"Again.","environments":[]}`, http.StatusConflict, "")
	b.call("GET", "/api/v2/agents/support", keyBob, nil, http.StatusNotFound, "")
	// A session created through b names the agent registered through a.
	b.expect(b.do("POST", "/api/v2/sessions", keyAlice, `{"agent":"support","messages":"hi"}`), http.StatusCreated)
	a.call("DELETE", "/api/v2/agents/support", keyAlice, nil, http.StatusNoContent, "")
	b.call("GET", "/api/v2/agents/support", keyAlice, nil, http.StatusNotFound, "")
	b.call("POST", "/api/v2/sessions", keyAlice, `{"agent":"support","messages":"hi"}`, http.StatusUnprocessableEntity, "")
}
