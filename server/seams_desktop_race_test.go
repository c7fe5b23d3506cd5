package server_test

import (
	"encoding/base64"
	"encoding/json"
	"image/color"
	"net/http"
	"sync"
	"testing"

	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// TestSeamsDesktopRaces: a screenshot's result racing a cancel, a
// force_answer or a second post of itself, on a session waiting for its
// computer call: every request is answered with its documented status
// (never 500), the session ends, and its log has at most one
// observation, after the result it belongs to.
func TestSeamsDesktopRaces(t *testing.T) {
	red := base64.StdEncoding.EncodeToString(pngOf(t, color.RGBA{255, 0, 0, 255}))
	result := `{"kind":"tool_result","tool_req":{"tool_name":"computer","id":"call_1"},"result":{"text":"Screenshot.","image":{"type":"base64","media_type":"image/png","source":"` + red + `"}}}`
	for _, other := range []struct {
		name, method, path, body string
		ok                       []int
	}{
		{"cancel", "DELETE", "", "", []int{http.StatusOK, http.StatusAccepted, http.StatusNoContent}},
		{"force_answer", "POST", "/force_answer", "", []int{http.StatusOK, http.StatusAccepted, http.StatusNoContent, http.StatusConflict}},
		{"the same result", "POST", "/tool_results", result, []int{http.StatusAccepted, http.StatusConflict}},
	} {
		t.Run(other.name, func(t *testing.T) {
			e := newEnv(t, nil,
				calls(openaitest.ToolCall("call_1", "computer", `{"action":"screenshot"}`)),
				openaitest.Reply{Text: "Red."}, openaitest.Reply{Text: "Red."},
			)
			id := e.create(keyAlice, `{"agent":{"name":"a","environments":["desktop"]},"messages":"What colour?"}`)
			f := e.follow(keyAlice, id)
			f.status(session.StatusAwaitingToolResults)
			base := "/api/v2/sessions/" + id
			var wg sync.WaitGroup
			statuses := make([]*response, 2)
			wg.Go(func() { statuses[0] = e.do("POST", base+"/tool_results", keyAlice, result) })
			wg.Go(func() {
				var body any
				if other.body != "" {
					body = other.body
				}
				statuses[1] = e.do(other.method, base+other.path, keyAlice, body)
			})
			wg.Wait()
			if s := statuses[0].status; s != http.StatusAccepted && s != http.StatusConflict {
				t.Errorf("the result: %d %s", s, statuses[0].body)
			}
			if s := statuses[1].status; !containsInt(other.ok, s) {
				t.Errorf("%s: %d %s", other.name, s, statuses[1].body)
			}
			f.until(func(c *changes) bool {
				return c.Status == session.StatusCompleted || c.Status == session.StatusInterrupted || c.Status == session.StatusFailed
			})
			results, obs := 0, 0
			for _, ev := range f.events {
				var d session.AgentEventData
				if ev.Type != session.EventAgent || json.Unmarshal(ev.Data, &d) != nil {
					continue
				}
				switch d.Kind {
				case session.KindToolResult:
					results++
				case session.KindObservation:
					obs++
					if results == 0 {
						t.Errorf("an observation before its result:\n%s", f.dump())
					}
				}
			}
			if obs > 1 || results > 1 || obs != results {
				t.Errorf("%d results, %d observations:\n%s", results, obs, f.dump())
			}
		})
	}
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
