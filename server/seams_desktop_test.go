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

// TestSeamsDesktopHostileImages posts hostile images as results of a
// pending computer call, from outside: each is 422 at the result's image
// and records nothing; another key can neither post the result nor read
// the observation; the good result posted twice reaches the model once.
func TestSeamsDesktopHostileImages(t *testing.T) {
	e := newEnv(t, nil,
		calls(openaitest.ToolCall("call_1", "computer", `{"action":"screenshot"}`)),
		openaitest.Reply{Text: "Red."},
	)
	id := e.create(keyAlice, `{"agent":{"name":"a","environments":["desktop"]},"messages":"What colour?"}`)
	f := e.follow(keyAlice, id)
	f.status(session.StatusAwaitingToolResults)
	path := "/api/v2/sessions/" + id + "/tool_results"
	red := base64.StdEncoding.EncodeToString(pngOf(t, color.RGBA{255, 0, 0, 255}))
	result := func(image string) string {
		return `{"kind":"tool_result","tool_req":{"tool_name":"computer","id":"call_1"},"result":{"text":"Screenshot.","image":` + image + `}}`
	}
	for _, c := range []struct{ name, image, msg string }{
		{"svg", `{"type":"base64","media_type":"image/svg+xml","source":"` + base64.StdEncoding.EncodeToString([]byte("<svg/>")) + `"}`, "must be image/png"},
		{"no media type, not an image", `{"type":"base64","media_type":null,"source":"` + base64.StdEncoding.EncodeToString([]byte("<svg/>")) + `"}`, "must be image/png"},
		{"url", `{"type":"url","media_type":"image/png","source":"http://127.0.0.1/x.png"}`, "must be inline"},
		{"not base64", `{"type":"base64","media_type":"image/png","source":"%%%%"}`, "must be base64"},
		{"empty", `{"type":"base64","media_type":"image/png","source":""}`, "the image is empty"},
		{"a string", `"` + red + `"`, "an image in a result must be"},
		{"an array", `[{"type":"base64","media_type":"image/png","source":"` + red + `"}]`, "an image in a result must be"},
		{"nested source", `{"type":"base64","media_type":"image/png","source":{"data":"` + red + `"}}`, "an image in a result must be"},
		{"unknown field", `{"type":"base64","media_type":"image/png","source":"` + red + `","url":"x"}`, "an image in a result must be"},
		{"a PNG cut short", `{"type":"base64","media_type":"image/png","source":"` + base64.StdEncoding.EncodeToString(pngOf(t, color.Black)[:20]) + `"}`, "is not a sound image/png"},
		{"a PNG signature and noise", `{"type":"base64","media_type":"image/png","source":"` + base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\nnot a png at all, only its signature")) + `"}`, "is not a sound image/png"},
		{"a JPEG signature and noise", `{"type":"base64","media_type":"image/jpeg","source":"` + base64.StdEncoding.EncodeToString([]byte("\xff\xd8\xff\xe0 noise noise")) + `"}`, "is not a sound image/jpeg"},
		{"a GIF signature and noise", `{"type":"base64","media_type":"image/gif","source":"` + base64.StdEncoding.EncodeToString([]byte("GIF89a")) + `"}`, "is not a sound image/gif"},
		{"a WebP signature and noise", `{"type":"base64","media_type":"image/webp","source":"` + base64.StdEncoding.EncodeToString([]byte("RIFF\x00\x10\x00\x00WEBPVP8 noise")) + `"}`, "is not a sound image/webp"},
		{"too wide", `{"type":"base64","media_type":"image/png","source":"` + base64.StdEncoding.EncodeToString(pngSized(t, 8001, 1)) + `"}`, "at most 8000 pixels wide and high"},
		{"jpeg said png", `{"type":"base64","media_type":"image/png","source":"` + base64.StdEncoding.EncodeToString([]byte("\xff\xd8\xff\xe0 jpeg")) + `"}`, "are not image/png"},
	} {
		r := e.expect(e.do("POST", path, keyAlice, result(c.image)), http.StatusUnprocessableEntity)
		if !hasDetail(r.body, "body.results.0.result.image", c.msg) {
			t.Errorf("%s: %s", c.name, r.body)
		}
	}
	// Nothing was recorded: the call still waits.
	if p := f.pending(); len(p) != 1 || p[0].ID != "call_1" {
		t.Fatalf("pending after refused images: %+v", p)
	}
	good := result(`{"type":"base64","media_type":"image/png","source":"` + red + `"}`)
	// Another key: as if there were no session.
	e.expect(e.do("POST", path, keyBob, good), http.StatusNotFound)
	e.expect(e.do("POST", path, keyAlice, `{"type":"batch","results":[`+good+`,`+good+`]}`), http.StatusAccepted) // twice: harmless
	if r := e.do("POST", path, keyAlice, good); r.status != http.StatusAccepted && r.status != http.StatusConflict {
		t.Fatalf("posted again: %d %s", r.status, r.body) // 409 once the session has finished
	}
	f.status(session.StatusCompleted)
	e.expect(e.do("POST", path, keyAlice, good), http.StatusConflict) // finished
	reqs := e.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	if n := strings.Count(string(reqs[1].Body), red); n != 1 {
		t.Errorf("the image is in the second request %d times", n)
	}
	var obsIdx []int64
	for _, ev := range f.events {
		var d session.AgentEventData
		if ev.Type == session.EventAgent && json.Unmarshal(ev.Data, &d) == nil && d.Kind == session.KindObservation {
			obsIdx = append(obsIdx, ev.Index)
		}
	}
	if len(obsIdx) != 1 {
		t.Fatalf("%d observation events:\n%s", len(obsIdx), f.dump())
	}
	res := "/api/v2/sessions/" + id + "/resources/events/" + jsonNumber(obsIdx[0])
	e.expect(e.do("GET", res, keyBob, nil), http.StatusNotFound)
	e.expect(e.do("GET", res, "", nil), http.StatusUnauthorized)
	e.expect(e.do("GET", res, keyAlice, nil), http.StatusOK)
}

// TestSeamsDesktopImageOfDeclaredTool: an image in the result of a tool
// the caller declared (not the computer tool) reaches the model, and the
// log's observation_event keeps the reference's shape.
func TestSeamsDesktopImageOfDeclaredTool(t *testing.T) {
	e := newEnv(t, nil,
		calls(openaitest.ToolCall("call_1", "snap", `{}`)),
		openaitest.Reply{Text: "Done."},
	)
	id := e.create(keyAlice, `{"agent":{"name":"a","tools":[{"name":"snap","description":"a picture","parameters":{"type":"object"}}]},"messages":"go"}`)
	f := e.follow(keyAlice, id)
	f.status(session.StatusAwaitingToolResults)
	red := base64.StdEncoding.EncodeToString(pngOf(t, color.RGBA{255, 0, 0, 255}))
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/tool_results", keyAlice,
		`{"kind":"tool_result","tool_req":{"tool_name":"snap","id":"call_1"},"result":{"text":"ok","image":{"type":"base64","media_type":"image/png","source":"`+red+`"}}}`), http.StatusAccepted)
	f.status(session.StatusCompleted)
	e.expect(e.do("GET", "/api/v2/sessions/"+id+"/events", keyAlice, nil), http.StatusOK)
	if n := strings.Count(string(e.model.Requests()[1].Body), red); n != 1 {
		t.Errorf("the image is in the second request %d times", n)
	}
}

// pngSized is a PNG of w×h black pixels (small: it compresses).
func pngSized(t *testing.T, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestSeamsDesktopImageWithoutMediaType: the reference's ImageContent has
// an optional media_type (null or absent); such an image is taken as the
// type its bytes read as, which the model and the observation get.
func TestSeamsDesktopImageWithoutMediaType(t *testing.T) {
	e := newEnv(t, nil,
		calls(openaitest.ToolCall("call_1", "computer", `{"action":"screenshot"}`), openaitest.ToolCall("call_2", "computer", `{"action":"screenshot"}`)),
		openaitest.Reply{Text: "Red."},
	)
	id := e.create(keyAlice, `{"agent":{"name":"a","environments":["desktop"]},"messages":"What colour?"}`)
	f := e.follow(keyAlice, id)
	f.status(session.StatusAwaitingToolResults)
	red := base64.StdEncoding.EncodeToString(pngOf(t, color.RGBA{255, 0, 0, 255}))
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/tool_results", keyAlice, `{"type":"batch","results":[`+
		`{"kind":"tool_result","tool_req":{"tool_name":"computer","id":"call_1"},"result":{"text":"one","image":{"type":"base64","source":"`+red+`"}}},`+
		`{"kind":"tool_result","tool_req":{"tool_name":"computer","id":"call_2"},"result":{"text":"two","image":{"type":"base64","media_type":null,"source":"`+red+`"}}}]}`), http.StatusAccepted)
	f.status(session.StatusCompleted)
	if n := strings.Count(string(e.model.Requests()[1].Body), "data:image/png;base64,"+red); n != 2 {
		t.Errorf("the images reach the model %d times, want 2", n)
	}
	var types []string
	for _, ev := range f.events {
		var d session.AgentEventData
		if ev.Type == session.EventAgent && json.Unmarshal(ev.Data, &d) == nil && d.Kind == session.KindObservation {
			types = append(types, d.Image.MediaType)
		}
	}
	if strings.Join(types, ",") != "image/png,image/png" {
		t.Errorf("observations' media types %q", types)
	}
}
