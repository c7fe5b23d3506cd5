package server_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// TestUserDesktopAccepted is the validator-level check of issue 37: a
// desktop environment (host user_device) in a session request is
// accepted, inline with or without its host, named by the kind, and as an
// environment the key registered; a desktop anywhere else is 422 at its
// host.
func TestUserDesktopAccepted(t *testing.T) {
	e := regEnv(t, openaitest.Reply{Text: "a"}, openaitest.Reply{Text: "b"}, openaitest.Reply{Text: "c"}, openaitest.Reply{Text: "d"})
	e.call("POST", "/api/v2/environments", keyAlice, `{"id":"my-mac","kind":"desktop","host":"user_device"}`, http.StatusCreated, "Environment")
	for _, body := range []string{
		`{"agent":{"name":"a","environments":[{"kind":"desktop","host":"user_device","id":"laptop"}]},"messages":"x"}`,
		`{"agent":{"name":"a","environments":[{"kind":"desktop"}]},"messages":"x"}`,
		`{"agent":{"name":"a","environments":["desktop"]},"messages":"x"}`,
		`{"agent":{"name":"a","environments":["my-mac"]},"messages":"x"}`,
	} {
		r := e.call("POST", "/api/v2/sessions", keyAlice, body, http.StatusCreated, "")
		if h := r.header.Get("Hrns-Not-Honoured"); strings.Contains(h, "host") {
			t.Errorf("%s: Hrns-Not-Honoured %q lists the host it honours", body, h)
		}
	}
	r := e.call("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":[{"kind":"desktop","host":"cloud"}]},"messages":"x"}`, http.StatusUnprocessableEntity, "")
	if !hasDetail(r.body, "body.agent.environments.0.host", `runs on the caller's device here (host "user_device")`) {
		t.Errorf("a desktop on the server: %s", r.body)
	}
}

// pngOf is a small PNG of one colour.
func pngOf(t *testing.T, c color.Color) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 8, 4))
	for y := range 4 {
		for x := range 8 {
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestUserDesktopComputerCalls: the agent of a session with the user's
// desktop gets the computer tool (a function tool on Chat Completions);
// its calls wait in awaiting_tool_results as the caller's; a result that
// inlines a screenshot as base64 reaches the model as an image (Chat
// Completions: in a user message after the tool message), and the log
// keeps the result without it followed by an observation_event carrying
// it. An image that is not what it says is 422 and records nothing.
func TestUserDesktopComputerCalls(t *testing.T) {
	e := newEnv(t, nil,
		calls(openaitest.ToolCall("call_1", "computer", `{"action":"screenshot"}`)),
		openaitest.Reply{Text: "The screen is red."},
	)
	id := e.create(keyAlice, `{"agent":{"name":"a","environments":[{"kind":"desktop","host":"user_device","id":"laptop"}]},"messages":"What colour is my screen?"}`)
	f := e.follow(keyAlice, id)
	f.status(session.StatusAwaitingToolResults)
	if p := f.pending(); len(p) != 1 || p[0].ToolName != "computer" || string(p[0].Args) != `{"action":"screenshot"}` {
		t.Fatalf("pending %+v", p)
	}
	first := string(e.model.Requests()[0].Body)
	if !strings.Contains(first, `"name":"computer"`) || !strings.Contains(first, `"left_click"`) || !strings.Contains(first, "1280x800") {
		t.Fatalf("the first request does not offer the computer tool:\n%s", first)
	}
	path := "/api/v2/sessions/" + id + "/tool_results"
	red := base64.StdEncoding.EncodeToString(pngOf(t, color.RGBA{255, 0, 0, 255}))
	// A PNG that is not one: 422, nothing recorded.
	bad := `{"kind":"tool_result","tool_req":{"tool_name":"computer","id":"call_1"},"result":{"text":"Screenshot.","image":{"type":"base64","media_type":"image/png","source":"` + base64.StdEncoding.EncodeToString([]byte("GIF89a not a png")) + `"}}}`
	r := e.expect(e.do("POST", path, keyAlice, bad), http.StatusUnprocessableEntity)
	if !hasDetail(r.body, "body.results.0.result.image", "the image's bytes are not image/png") {
		t.Fatalf("a bad image: %s", r.body)
	}
	good := `{"kind":"tool_result","tool_req":{"tool_name":"computer","id":"call_1"},"result":{"text":"Screenshot (8x4).","image":{"type":"base64","media_type":"image/png","source":"` + red + `"}}}`
	e.expect(e.do("POST", path, keyAlice, good), http.StatusAccepted)
	c := f.status(session.StatusCompleted)
	if string(c.Answer) != `"The screen is red."` {
		t.Fatalf("answer %s", c.Answer)
	}
	reqs := e.model.Requests()
	second := string(reqs[1].Body)
	for _, s := range []string{`"tool_call_id":"call_1"`, `Screenshot (8x4).`, `data:image/png;base64,` + red} {
		if !strings.Contains(second, s) {
			t.Errorf("the second request lacks %s:\n%.2000s", s, second)
		}
	}
	var result, obs *session.AgentEventData
	for _, ev := range f.events {
		var d session.AgentEventData
		if ev.Type != session.EventAgent || json.Unmarshal(ev.Data, &d) != nil {
			continue
		}
		switch d.Kind {
		case session.KindToolResult:
			result = &d
		case session.KindObservation:
			obs = &d
		}
	}
	if result == nil || string(result.Result) != `{"text":"Screenshot (8x4)."}` {
		t.Fatalf("tool_result %+v", result)
	}
	if obs == nil || obs.ObservationType != "desktop" || obs.Image == nil || obs.Image.Source != red || obs.ToolReq == nil || obs.ToolReq.ID != "call_1" {
		t.Fatalf("observation %+v", obs)
	}
	// The screenshot is a resource of the session, as a browser's are.
	var idx int64 = -1
	for _, ev := range f.events {
		if bytes.Contains(ev.Data, []byte(`"observation_event"`)) {
			idx = ev.Index
		}
	}
	got := e.expect(e.do("GET", "/api/v2/sessions/"+id+"/resources/events/"+jsonNumber(idx), keyAlice, nil), http.StatusOK)
	if got.header.Get("Content-Type") != "image/png" || base64.StdEncoding.EncodeToString(got.body) != red {
		t.Errorf("resource: %s, %d bytes", got.header.Get("Content-Type"), len(got.body))
	}
}

func jsonNumber(n int64) string { b, _ := json.Marshal(n); return string(b) }
