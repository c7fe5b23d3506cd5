package server_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// The tests of this file check the differences with the reference that
// issue 15 lists, one by one; every body they get is also validated by
// the contract (contract_test.go).

// webEnv has a "web" environment with no tools, so that inline agents
// can name it.
func webEnv(t *testing.T, replies ...openaitest.Reply) *env {
	return newEnv(t, &envOptions{session: &session.Options{Environments: map[string]*loop.Toolset{"web": {}}}}, replies...)
}

// TestRequestEchoNormalised: the session echoes its request as hrns
// understood it, a valid SessionRequest, even when the body left out what
// the reference requires (the guide's own create body has no description
// and its environment no id).
func TestRequestEchoNormalised(t *testing.T) {
	e := webEnv(t, openaitest.Reply{Text: "done"})
	body := `{"agent":{"name":"support-agent","environments":[{"kind":"web"}],"tools":[{"name":"get_order_status","input_schema":{"type":"object"}}]},"messages":"Check order 4242."}`
	r := e.expect(e.do("POST", "/api/v2/sessions", keyAlice, body), http.StatusCreated)
	var v struct {
		ID      string          `json:"id"`
		Request json.RawMessage `json:"request"`
	}
	r.json(&v)
	want := `{"agent":{"name":"support-agent","description":"support-agent","environments":[{"id":"web","kind":"web"}],"tools":[{"name":"get_order_status","description":"get_order_status","input_schema":{"type":"object"}}]},"messages":[{"type":"user_message","message":"Check order 4242.","caller_id":"user"}],"queue":true}`
	if diff := cmp.Diff(canonical(t, want), canonical(t, string(v.Request))); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	// GET shows the same.
	r = e.expect(e.do("GET", "/api/v2/sessions/"+v.ID, keyAlice, nil), http.StatusOK)
	r.json(&v)
	if diff := cmp.Diff(canonical(t, want), canonical(t, string(v.Request))); diff != "" {
		t.Errorf("request of GET (-want +got):\n%s", diff)
	}
}

func canonical(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	return v
}
