package server_test

import (
	"encoding/base64"
	"image/color"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// TestSeamsDesktopRestartAfterResult: a message sent while a computer
// call waits, then its result with a screenshot, then a restart while the
// model is asked: the request after the restart has the user's messages
// and the image, each once.
func TestSeamsDesktopRestartAfterResult(t *testing.T) {
	stuck := make(chan struct{})
	asked := make(chan struct{}, 1)
	r := newRestartable(t, func() *session.Options { return &session.Options{} }, nil,
		calls(openaitest.ToolCall("call_1", "computer", `{"action":"screenshot"}`)),
		openaitest.Reply{Func: func([]byte) openaitest.Reply {
			asked <- struct{}{}
			<-stuck
			return openaitest.Reply{Text: "late"}
		}},
		openaitest.Reply{Text: "Red."},
	)
	t.Cleanup(func() { close(stuck) })
	id := r.create(keyAlice, `{"agent":{"name":"a","environments":["desktop"]},"messages":"What colour is my screen?"}`)
	f := r.follow(keyAlice, id)
	f.status(session.StatusAwaitingToolResults)
	r.expect(r.do("POST", "/api/v2/sessions/"+id+"/messages", keyAlice, `{"type":"user_message","message":"Be quick about it."}`), http.StatusAccepted)
	red := base64.StdEncoding.EncodeToString(pngOf(t, color.RGBA{255, 0, 0, 255}))
	r.expect(r.do("POST", "/api/v2/sessions/"+id+"/tool_results", keyAlice,
		`{"kind":"tool_result","tool_req":{"tool_name":"computer","id":"call_1"},"result":{"text":"Screenshot.","image":{"type":"base64","media_type":"image/png","source":"`+red+`"}}}`), http.StatusAccepted)
	select {
	case <-asked:
	case <-time.After(20 * time.Second):
		t.Fatal("the model was not asked after the result")
	}
	r.restart()
	f = r.follow(keyAlice, id)
	c := f.status(session.StatusCompleted)
	if string(c.Answer) != `"Red."` {
		t.Fatalf("answer %s; events:\n%s", c.Answer, f.dump())
	}
	last := lastRequest(r.env)
	for s, want := range map[string]int{red: 1, "What colour is my screen?": 1, "Be quick about it.": 1, `"tool_call_id":"call_1"`: 1} {
		if n := strings.Count(last, s); n != want {
			t.Errorf("the request after the restart has %.40q %d times, want %d:\n%.3000s", s, n, want, last)
		}
	}
}
