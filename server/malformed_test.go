package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// A model that writes malformed arguments, over the real Chat Completions
// wire format, does not take the server down: the session reads the error,
// goes on and completes, and another session runs beside it.
func TestMalformedArgumentsSessionCompletes(t *testing.T) {
	e := newEnv(t, nil,
		openaitest.Reply{ToolCalls: []llm.ToolCall{
			openaitest.ToolCall("c1", "get_order_status", `{"order_id": "4242"`),
			openaitest.ToolCall("c2", "get_order_status", "[\"4242\"]"),
		}},
		openaitest.Reply{Text: "Sorry, I could not look it up."},
	)
	id := e.create(keyAlice, orderAgent)
	f := e.follow(keyAlice, id)
	c := f.status(session.StatusCompleted)
	var answer string
	json.Unmarshal(c.Answer, &answer)
	if answer != "Sorry, I could not look it up." {
		t.Errorf("answer %q", answer)
	}
	// The model read what was wrong with each call.
	reqs := e.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	body := string(reqs[1].Body)
	if !strings.Contains(body, "not valid JSON") || !strings.Contains(body, "must be a JSON object") {
		t.Errorf("the second request does not tell the model: %s", body)
	}
	for _, ev := range f.events {
		if b, err := json.Marshal(ev); err != nil || !json.Valid(b) {
			t.Fatalf("event %+v does not encode: %v", ev, err)
		}
	}
	// The server is alive and serves the session and others.
	e.expect(e.do("GET", "/api/v2/sessions/"+id, keyAlice, nil), http.StatusOK)
	e.model.Push(openaitest.Reply{Text: "fine"})
	other := e.create(keyAlice, `{"agent":{"name":"a","description":"d","environments":[],"tools":[]},"messages":"hi"}`)
	e.follow(keyAlice, other).status(session.StatusCompleted)
}
