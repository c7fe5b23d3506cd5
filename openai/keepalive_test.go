package openai_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// A finished stream gives its connection back to the pool: successive
// requests reuse one connection (a new one would cost a TLS handshake
// against a real provider).
func TestStreamsReuseTheConnection(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(openaitest.Encode(openaitest.Reply{Text: "hello there, this is a streamed answer"}, "m"))
		w.(http.Flusher).Flush() // chunked, as providers stream
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := &openai.Client{BaseURL: srv.URL, Model: "m", HTTPClient: &http.Client{Transport: &http.Transport{}}}
	for range 5 {
		if _, err := llm.Collect(c.Stream(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}})); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("5 streams used %d connections, want 1", n)
	}
}
