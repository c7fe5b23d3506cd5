package client_test

import (
	"testing"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm"
)

// TestResultWithImage: a tool's output with an image is posted with the
// image inlined as the reference's ImageContent (the first only, the text
// saying how many were left out); without one, as a JSON string.
func TestResultWithImage(t *testing.T) {
	if got := string(client.ResultWithImage("plain", []llm.Part{llm.TextPart("plain")})); got != `"plain"` {
		t.Errorf("text only: %s", got)
	}
	got := string(client.ResultWithImage("Screenshot.", []llm.Part{llm.TextPart("Screenshot."), llm.ImagePart("image/png", []byte("png1")), llm.ImagePart("image/png", []byte("png2"))}))
	if want := `{"text":"Screenshot. (1 more images were left out.)","image":{"source":"cG5nMQ==","type":"base64","media_type":"image/png"}}`; got != want {
		t.Errorf("with images:\n got %s\nwant %s", got, want)
	}
}
