package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// TestSessionUnreadBounded: errors posted without a call to a session
// waiting for a tool result pile up in its state until its agent runs;
// past the bound (16 MiB by default; 64 KiB here) the next post is
// refused with 413 and
// nothing of it is kept (issue 32, finding 6: thirty 4 MiB posts grew the
// server to 2.1 GiB). Messages count in the same bound. Once the agent has
// read them, the session takes input again.
func TestSessionUnreadBounded(t *testing.T) {
	const limit = 64 << 10
	e := newEnv(t, &envOptions{session: &session.Options{MaxUnreadBytes: limit}}, calls(openaitest.ToolCall("call_1", "get_order_status", `{"order_id":"4242"}`)),
		openaitest.Reply{Text: "done"}, openaitest.Reply{Text: "again"})
	id := e.create(keyAlice, orderAgent)
	e.follow(keyAlice, id).status(session.StatusAwaitingToolResults)
	post := func(text string) *response {
		body, _ := json.Marshal(map[string]string{"kind": "error_event", "error": text, "origin": "custom_tools"})
		return e.do("POST", "/api/v2/sessions/"+id+"/tool_results", keyAlice, body)
	}
	chunk := strings.Repeat("x", 16<<10-64)
	accepted := 0
	for range 30 {
		r := post(chunk)
		if r.status == http.StatusRequestEntityTooLarge {
			if !strings.Contains(string(r.body), "has not read") {
				t.Errorf("413 body: %s", r.body)
			}
			break
		}
		e.expect(r, http.StatusAccepted)
		accepted++
	}
	if want := limit / len(chunk); accepted != want {
		t.Fatalf("%d posts of %d bytes accepted, want %d", accepted, len(chunk), want)
	}
	msg, _ := json.Marshal(map[string]any{"message": strings.Repeat("y", 32<<10)})
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/messages", keyAlice, msg), http.StatusRequestEntityTooLarge)
	// The refused posts left nothing: the log has the accepted ones.
	var page session.Page[session.Event]
	e.expect(e.do("GET", "/api/v2/sessions/"+id+"/events?type=AgentEvent&size=200", keyAlice, nil), http.StatusOK).json(&page)
	errs := 0
	for _, ev := range page.Items {
		if strings.Contains(string(ev.Data), `"error_event"`) {
			errs++
		}
	}
	if errs != accepted {
		t.Errorf("%d error events logged, want %d", errs, accepted)
	}
	// The result lets the agent run and read them; then input is taken.
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/tool_results", keyAlice,
		`{"kind":"tool_result","tool_req":{"id":"call_1","tool_name":"get_order_status","args":{"order_id":"4242"}},"result":"shipped"}`), http.StatusAccepted)
	e.follow(keyAlice, id).status(session.StatusCompleted)
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/messages", keyAlice, string(msg)), http.StatusAccepted)
}
