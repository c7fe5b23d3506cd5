package server_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestUnknownEnvironmentLists: an unknown environment's 422 lists every
// name the caller may use: the server's kinds (the user's desktop too)
// and the key's registered environments (not another key's), bounded.
func TestUnknownEnvironmentLists(t *testing.T) {
	e := regEnv(t)
	e.call("POST", "/api/v2/environments", keyAlice, `{"id":"shop","kind":"web"}`, http.StatusCreated, "Environment")
	e.call("POST", "/api/v2/environments", keyBob, `{"id":"bobs","kind":"web"}`, http.StatusCreated, "Environment")
	r := e.call("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":["mars"]},"messages":"x"}`, http.StatusUnprocessableEntity, "")
	for _, want := range []string{`unknown environment "mars"`, "kinds of this server: desktop, web", `registered with this API key: "shop"`} {
		if !hasDetail(r.body, "body.agent.environments.0", want) {
			t.Errorf("%s, want %q", r.body, want)
		}
	}
	if strings.Contains(string(r.body), "bobs") {
		t.Errorf("another key's environment listed: %s", r.body)
	}
	for i := range 23 {
		e.call("POST", "/api/v2/environments", keyAlice, `{"id":"env-`+string(rune('a'+i))+`","kind":"web"}`, http.StatusCreated, "Environment")
	}
	r = e.call("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":["mars"]},"messages":"x"}`, http.StatusUnprocessableEntity, "")
	if !hasDetail(r.body, "body.agent.environments.0", `"env-a", "env-b"`) || !hasDetail(r.body, "body.agent.environments.0", "and 4 more (GET /api/v2/environments)") {
		t.Errorf("24 registered: %s", r.body)
	}
}
