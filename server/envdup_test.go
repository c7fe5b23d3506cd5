package server_test

import (
	"net/http"
	"testing"
)

const dupMsg = "at most one environment per kind: environments[0] is also a"

// TestEnvironmentDuplicateKinds: an agent has at most one environment of
// each kind, whether named by the kind, defined inline or registered;
// the second is 422 at its place, in a session's agent, its subagents, and
// a registered agent (POST, PUT, PATCH), its inline subagents included.
func TestEnvironmentDuplicateKinds(t *testing.T) {
	e := regEnv(t)
	e.call("POST", "/api/v2/environments", keyAlice, `{"id":"shop","kind":"web","start_url":"https://shop.example"}`, http.StatusCreated, "Environment")
	e.call("POST", "/api/v2/environments", keyAlice, `{"id":"my-mac","kind":"desktop","host":"user_device"}`, http.StatusCreated, "Environment")
	for _, tt := range []struct{ agent, loc string }{
		{`{"name":"a","environments":["desktop","desktop"]}`, "body.agent.environments.1"},
		{`{"name":"a","environments":["web","web"]}`, "body.agent.environments.1"},
		{`{"name":"a","environments":["web",{"kind":"web","start_url":"https://x.example"}]}`, "body.agent.environments.1"},
		{`{"name":"a","environments":["shop",{"kind":"web"}]}`, "body.agent.environments.1"},
		{`{"name":"a","environments":["shop","web"]}`, "body.agent.environments.1"},
		{`{"name":"a","environments":["desktop",{"kind":"desktop","host":"user_device"}]}`, "body.agent.environments.1"},
		{`{"name":"a","environments":["my-mac",{"kind":"desktop"}]}`, "body.agent.environments.1"},
		{`{"name":"a","subagents":[{"name":"b","description":"b","environments":["web","shop"]}]}`, "body.agent.subagents.0.environments.1"},
	} {
		r := e.call("POST", "/api/v2/sessions", keyAlice, `{"agent":`+tt.agent+`,"messages":"x"}`, http.StatusUnprocessableEntity, "")
		if !hasDetail(r.body, tt.loc, dupMsg) {
			t.Errorf("%s: %s, want %q at %s", tt.agent, r.body, dupMsg, tt.loc)
		}
	}

	// Registered agents.
	for _, tt := range []struct{ body, loc string }{
		{`{"name":"r1","description":"d","environments":["desktop",{"id":"d","kind":"desktop","host":"user_device"}]}`, "body.environments.1"},
		{`{"name":"r2","description":"d","environments":["web","web"]}`, "body.environments.1"},
		{`{"name":"r3","description":"d","environments":["shop",{"id":"w","kind":"web"}]}`, "body.environments.1"},
		{`{"name":"r4","description":"d","environments":[],"subagents":[{"name":"s","description":"d","environments":[{"id":"w","kind":"web"},"shop"]}]}`, "body.subagents.0.environments.1"},
	} {
		r := e.call("POST", "/api/v2/agents", keyAlice, tt.body, http.StatusUnprocessableEntity, "")
		if !hasDetail(r.body, tt.loc, dupMsg) {
			t.Errorf("POST %s: %s, want %q at %s", tt.body, r.body, dupMsg, tt.loc)
		}
	}
	e.call("POST", "/api/v2/agents", keyAlice, `{"name":"ok","description":"d","environments":["shop","desktop"]}`, http.StatusCreated, "Agent")
	r := e.call("PUT", "/api/v2/agents/ok", keyAlice, `{"name":"ok","description":"d","environments":["shop","web"]}`, http.StatusUnprocessableEntity, "")
	if !hasDetail(r.body, "body.environments.1", dupMsg) {
		t.Errorf("PUT: %s", r.body)
	}
	r = e.call("PATCH", "/api/v2/agents/ok", keyAlice, `{"environments":["my-mac","desktop"]}`, http.StatusUnprocessableEntity, "")
	if !hasDetail(r.body, "body.environments.1", dupMsg) {
		t.Errorf("PATCH: %s", r.body)
	}
	// Nothing of the refused changes was kept: the agent still works.
	e.call("POST", "/api/v2/sessions", keyAlice, `{"agent":"ok","messages":"x"}`, http.StatusCreated, "")
}

// TestSubagentUserDesktopRefused: a subagent may not have the user's own
// desktop (its computer calls would wait in a child session no caller
// runs): 422 at its environment, inline, registered, named by the kind or
// by a registered environment's id; the session's own agent keeps it.
func TestSubagentUserDesktopRefused(t *testing.T) {
	e := regEnv(t)
	e.call("POST", "/api/v2/environments", keyAlice, `{"id":"my-mac","kind":"desktop","host":"user_device"}`, http.StatusCreated, "Environment")
	e.call("POST", "/api/v2/agents", keyAlice, `{"name":"deskbot","description":"Uses my desktop.","environments":["desktop"]}`, http.StatusCreated, "Agent")
	const msg = "a subagent cannot have the user's own desktop"
	for _, tt := range []struct{ agent, loc string }{
		{`{"name":"a","subagents":[{"name":"b","description":"b","environments":["desktop"]}]}`, "body.agent.subagents.0.environments.0"},
		{`{"name":"a","subagents":[{"name":"b","description":"b","environments":["web",{"kind":"desktop"}]}]}`, "body.agent.subagents.0.environments.1"},
		{`{"name":"a","subagents":[{"name":"b","description":"b","environments":["my-mac"]}]}`, "body.agent.subagents.0.environments.0"},
		{`{"name":"a","subagents":["deskbot"]}`, "body.agent.subagents.0.environments.0"},
		{`{"name":"a","subagents":[{"name":"b","description":"b","subagents":["deskbot"]}]}`, "body.agent.subagents.0.subagents.0.environments.0"},
	} {
		r := e.call("POST", "/api/v2/sessions", keyAlice, `{"agent":`+tt.agent+`,"messages":"x"}`, http.StatusUnprocessableEntity, "")
		if !hasDetail(r.body, tt.loc, msg) {
			t.Errorf("%s: %s, want %q at %s", tt.agent, r.body, msg, tt.loc)
		}
	}
	for _, tt := range []struct{ body, loc string }{
		{`{"name":"boss","description":"d","environments":[],"subagents":[{"name":"s","description":"d","environments":["desktop"]}]}`, "body.subagents.0.environments.0"},
		{`{"name":"boss","description":"d","environments":[],"subagents":[{"name":"s","description":"d","environments":[{"id":"d","kind":"desktop","host":"user_device"}]}]}`, "body.subagents.0.environments.0"},
		{`{"name":"boss","description":"d","environments":[],"subagents":[{"name":"s","description":"d","environments":["my-mac"]}]}`, "body.subagents.0.environments.0"},
	} {
		r := e.call("POST", "/api/v2/agents", keyAlice, tt.body, http.StatusUnprocessableEntity, "")
		if !hasDetail(r.body, tt.loc, msg) {
			t.Errorf("POST %s: %s, want %q at %s", tt.body, r.body, msg, tt.loc)
		}
	}
	// The session's own agent has it, registered or inline.
	e.call("POST", "/api/v2/sessions", keyAlice, `{"agent":"deskbot","messages":"x"}`, http.StatusCreated, "")
	e.call("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":["desktop"],"subagents":[{"name":"b","description":"b","environments":["web"]}]},"messages":"x"}`, http.StatusCreated, "")
}
