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
