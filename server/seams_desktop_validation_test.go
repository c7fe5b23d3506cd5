package server_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// TestSeamsDesktopHostNull: a desktop environment whose host is null is
// the user's desktop, as one without a host is, and the session keeps
// and shows it with its host, a valid Desktop of the reference (the
// contract handler checks every answer: the stored request echoed
// "host": null, which the reference's Desktop refuses).
func TestSeamsDesktopHostNull(t *testing.T) {
	e := newEnv(t, nil, calls(openaitest.ToolCall("call_1", "computer", `{"action":"screenshot"}`)))
	id := e.create(keyAlice, `{"agent":{"name":"a","environments":[{"kind":"desktop","host":null}]},"messages":"x"}`)
	e.follow(keyAlice, id).status(session.StatusAwaitingToolResults)
	var got struct {
		Request struct {
			Agent struct {
				Environments []map[string]any `json:"environments"`
			} `json:"agent"`
		} `json:"request"`
	}
	e.expect(e.do("GET", "/api/v2/sessions/"+id, keyAlice, nil), http.StatusOK).json(&got)
	if envs := got.Request.Agent.Environments; len(envs) != 1 || envs[0]["host"] != "user_device" {
		b, _ := json.Marshal(envs)
		t.Errorf("environments %s", b)
	}
}

// TestSeamsDesktopRegisteredAgentByKind: an agent registered with the
// environment "desktop" by name (as a session's agent may have it, and as
// H's SDK writes it) is accepted, and a session of it gets the user's
// desktop; the environments list shows the user's desktop as a read-only
// entry of the server, as it shows the web environment.
func TestSeamsDesktopRegisteredAgentByKind(t *testing.T) {
	e := regEnv(t, calls(openaitest.ToolCall("call_1", "computer", `{"action":"screenshot"}`)))
	e.call("POST", "/api/v2/agents", keyAlice, `{"name":"desk","description":"Uses my desktop.","environments":["desktop"]}`, http.StatusCreated, "")
	id := e.create(keyAlice, `{"agent":"desk","messages":"x"}`)
	f := e.follow(keyAlice, id)
	f.status(session.StatusAwaitingToolResults)
	if p := f.pending(); len(p) != 1 || p[0].ToolName != "computer" {
		t.Fatalf("pending %+v", p)
	}
	r := e.call("GET", "/api/v2/environments/desktop", keyBob, nil, http.StatusOK, "")
	var d map[string]any
	r.json(&d)
	if d["kind"] != "desktop" || d["host"] != "user_device" {
		t.Errorf("the desktop entry: %s", r.body)
	}
	e.call("DELETE", "/api/v2/environments/desktop", keyAlice, nil, http.StatusForbidden, "")
}
