package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// TestResources: the image of an observation event is served as bytes
// under bucket "events" and the event's index; other buckets, keys,
// events without an image and other keys' sessions are 404.
func TestResources(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n fake image bytes")
	snap := &loop.ToolDef{
		Name:        "snap",
		Description: "Takes a picture.",
		InputSchema: json.RawMessage(`{"type":"object"}`),
		Handler: func(context.Context, *loop.Call) (*loop.Output, error) {
			return &loop.Output{Content: []llm.Part{llm.TextPart("a picture"), llm.ImagePart("image/png", png)}}, nil
		},
	}
	e := newEnv(t, &envOptions{session: &session.Options{
		Agents:   map[string]*session.AgentConfig{"cam": {Description: "Takes pictures.", Toolsets: []string{"cam"}}},
		Toolsets: map[string]*loop.Toolset{"cam": loop.MustToolset(snap)},
	}},
		calls(openaitest.ToolCall("call_1", "snap", `{}`)),
		openaitest.Reply{Text: "done"},
	)
	id := e.create(keyAlice, `{"agent":"cam","messages":"take a picture"}`)
	f := e.follow(keyAlice, id)
	f.status(session.StatusCompleted)
	obs, other := -1, -1
	for i, ev := range f.events {
		var d session.AgentEventData
		json.Unmarshal(ev.Data, &d)
		switch {
		case d.Kind == session.KindObservation && d.Image != nil:
			obs = i
		case other < 0:
			other = i
		}
	}
	if obs < 0 {
		t.Fatalf("no observation event with the image")
	}
	base := "/api/v2/sessions/" + id + "/resources/"
	r := e.expect(e.do("GET", base+"events/"+itoa(obs), keyAlice, nil), http.StatusOK)
	if !bytes.Equal(r.body, png) || r.header.Get("Content-Type") != "image/png" || r.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("resource = %q (%s)", r.body, r.header.Get("Content-Type"))
	}
	for _, path := range []string{
		"events/" + itoa(other), // an event without an image
		"events/99999", "events/-1", "events/01", "events/x", "screenshots/" + itoa(obs),
	} {
		e.expect(e.do("GET", base+path, keyAlice, nil), http.StatusNotFound)
	}
	// The Go SDK reads it too.
	data, mt, err := client.New(e.url, keyAlice, nil).Session(id).Resource(t.Context(), "events", itoa(obs))
	if err != nil || !bytes.Equal(data, png) || mt != "image/png" {
		t.Errorf("client: Resource = %q, %q, %v", data, mt, err)
	}
	// Another key's session does not exist for bob.
	e.expect(e.do("GET", base+"events/"+itoa(obs), keyBob, nil), http.StatusNotFound)
}

func itoa(i int) string { return strconv.Itoa(i) }
