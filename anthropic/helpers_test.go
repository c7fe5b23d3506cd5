package anthropic

import (
	"bytes"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
)

// readTestdata returns the bytes of a file under testdata.
func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// serveSSE starts a loopback server answering every request with body as
// an event stream, writing and flushing one event at a time as the API
// does.
func serveSSE(t testing.TB, body []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		w.Header().Set("Request-Id", "req_stream")
		rc := http.NewResponseController(w)
		for ev := range bytes.SplitAfterSeq(body, []byte("\n\n")) {
			if _, err := w.Write(ev); err != nil {
				return
			}
			rc.Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// serveRecorded starts a loopback server answering every request with the
// HTTP response recorded in testdata/name: status line, headers and body.
func serveRecorded(t testing.TB, name string) *httptest.Server {
	t.Helper()
	return llmtest.ServeRecorded(t, "testdata/"+name, readTestdata(t, name))
}

// testClient returns a client for srv with a model set and caching off.
func testClient(srv *httptest.Server) *Client {
	return &Client{BaseURL: srv.URL, Model: "test-model", HTTPClient: srv.Client(), Cache: &CachePolicy{}}
}

// collect drains a stream, returning the chunks before any error.
func collect(seq iter.Seq2[llm.Chunk, error]) ([]llm.Chunk, error) {
	var out []llm.Chunk
	for c, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
	return out, nil
}

// userRequest is a one-message request.
func userRequest(text string) *llm.Request {
	return &llm.Request{Messages: []llm.Message{llm.UserMessage(text)}}
}

// Chunk and part constructors that keep the expectations short.

func textChunk(s string) llm.Chunk      { return llm.Chunk{Kind: llm.ChunkText, Text: s} }
func reasoningChunk(s string) llm.Chunk { return llm.Chunk{Kind: llm.ChunkReasoning, Text: s} }
func startChunk(i int, id, name string) llm.Chunk {
	return llm.Chunk{Kind: llm.ChunkToolCallStart, Index: i, ID: id, Name: name}
}
func argsChunk(i int, s string) llm.Chunk {
	return llm.Chunk{Kind: llm.ChunkToolCallDelta, Index: i, Text: s}
}
func doneChunk(r llm.Response) llm.Chunk { return llm.Chunk{Kind: llm.ChunkDone, Response: &r} }

func callPart(id, name, args string) llm.Part {
	return llm.Part{Kind: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: id, Name: name, Arguments: []byte(args)}}
}
func thinkingPart(text, signature string) llm.Part {
	return llm.Part{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{Text: text, Signature: signature}}
}
func redactedPart(data string) llm.Part {
	return llm.Part{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{Redacted: data}}
}
func assistant(parts ...llm.Part) llm.Message {
	return llm.Message{Role: llm.RoleAssistant, Parts: parts}
}
