package gemini

import (
	"bytes"
	"iter"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
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
// an event stream, writing and flushing one event at a time as a real
// server does. The requests it got are sent on the returned channel.
func serveSSE(t testing.TB, body []byte) (*httptest.Server, chan *http.Request) {
	t.Helper()
	got := make(chan *http.Request, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.Clone(r.Context()):
		default:
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("X-Request-Id", "req_123")
		rc := http.NewResponseController(w)
		for ev := range bytes.SplitAfterSeq(body, []byte("\n\n")) {
			if _, err := w.Write(ev); err != nil {
				return
			}
			rc.Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

// testClient returns a client for srv with a model set.
func testClient(srv *httptest.Server) *Client {
	return &Client{BaseURL: srv.URL, Model: "gemini-test", APIKey: "test-key", HTTPClient: srv.Client()}
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

// summary is what a stream yielded, in a form easy to compare.
type summary struct {
	text, reasoning string
	calls           []string // "index id name args" from the chunks
}

func summarize(chunks []llm.Chunk) summary {
	var s summary
	args := map[int]*strings.Builder{}
	var starts []llm.Chunk
	for _, c := range chunks {
		switch c.Kind {
		case llm.ChunkText:
			s.text += c.Text
		case llm.ChunkReasoning:
			s.reasoning += c.Text
		case llm.ChunkToolCallStart:
			starts = append(starts, c)
			args[c.Index] = &strings.Builder{}
		case llm.ChunkToolCallDelta:
			if b := args[c.Index]; b != nil {
				b.WriteString(c.Text)
			}
		}
	}
	for _, c := range starts {
		s.calls = append(s.calls, strings.Join([]string{string(rune('0' + c.Index)), c.ID, c.Name, args[c.Index].String()}, " "))
	}
	return s
}

func userRequest(text string) *llm.Request {
	return &llm.Request{Messages: []llm.Message{llm.UserMessage(text)}}
}
