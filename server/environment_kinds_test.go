package server_test

import (
	"net/http"
	"testing"
)

// TestEnvironmentKinds: the API's kinds workstation and android. A
// server that offers no workstation refuses one, saying how to get it;
// android is refused naming the kind, inline, by kind name and as a
// registered environment; both register (validated against the schema).
func TestEnvironmentKinds(t *testing.T) {
	e := regEnv(t)
	for _, tt := range []struct{ body, msg string }{
		{`{"agent":{"name":"a","environments":[{"kind":"workstation"}]},"messages":"x"}`, `environment kind "workstation" is not provided by this server: its operator did not enable it`},
		{`{"agent":{"name":"a","environments":["workstation"]},"messages":"x"}`, `environment kind "workstation" is not provided by this server`},
		{`{"agent":{"name":"a","environments":[{"kind":"android","image":"x"}]},"messages":"x"}`, `environment kind "android" is not available on this server`},
		{`{"agent":{"name":"a","environments":[{"id":"android"}]},"messages":"x"}`, `environment kind "android" is not available on this server`},
		{`{"agent":{"name":"a","environments":["android"]},"messages":"x"}`, `environment kind "android" is not available on this server`},
	} {
		r := e.call("POST", "/api/v2/sessions", keyAlice, tt.body, http.StatusUnprocessableEntity, "")
		if !hasDetail(r.body, "body.agent.environments.0", tt.msg) {
			t.Errorf("%s: %s, want %q", tt.body, r.body, tt.msg)
		}
	}
	e.call("POST", "/api/v2/environments", keyAlice, `{"id":"phone","kind":"android","image":"shop-app","lazy":true}`, http.StatusCreated, "Environment")
	e.call("POST", "/api/v2/environments", keyAlice, `{"id":"desk","kind":"workstation","host":"cloud","start_url":"https://dropped.example"}`, http.StatusCreated, "Environment")
	var got map[string]any
	e.call("GET", "/api/v2/environments/desk", keyAlice, nil, http.StatusOK, "Environment").json(&got)
	if _, ok := got["start_url"]; ok || got["kind"] != "workstation" {
		t.Errorf("registered workstation %v", got)
	}
	e.call("POST", "/api/v2/environments", keyAlice, `{"id":"bad","kind":"workstation","host":"moon"}`, http.StatusUnprocessableEntity, "")
	r := e.call("POST", "/api/v2/environments", keyAlice, `{"id":"bad","kind":"vr"}`, http.StatusUnprocessableEntity, "")
	if !hasDetail(r.body, "body.kind", "'web', 'desktop', 'android', 'workstation'") {
		t.Errorf("unknown kind: %s", r.body)
	}
	r = e.call("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":["phone"]},"messages":"x"}`, http.StatusUnprocessableEntity, "")
	if !hasDetail(r.body, "body.agent.environments.0", `environment kind "android" is not available on this server`) {
		t.Errorf("a registered android environment: %s", r.body)
	}
}
