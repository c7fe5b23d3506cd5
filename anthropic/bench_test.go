package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
)

// benchStream returns a stream of one block of the given kind whose content
// arrives in n deltas: "text", "thinking" or "tool_use".
func benchStream(kind string, n int) []byte {
	var b bytes.Buffer
	ev := func(typ, data string) { fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", typ, data) }
	ev("message_start", `{"type":"message_start","message":{"id":"msg_bench","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":2000,"cache_creation_input_tokens":0,"cache_read_input_tokens":1800,"output_tokens":1,"service_tier":"standard"}}}`)
	switch kind {
	case "text":
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		ev("ping", `{"type": "ping"}`)
		for i := range n {
			ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" word%d and more"}}`, i))
		}
	case "thinking":
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`)
		for i := range n - 1 {
			ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":" step %d, then"}}`, i))
		}
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"`+strings.Repeat("EqQBCgIYAhIM", 40)+`"}}`)
	case "tool_use":
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_bench","name":"write_file","input":{}}}`)
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"text\": \""}}`)
		for i := range n - 2 {
			ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"word%d "}}`, i))
		}
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"}"}}`)
	}
	ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
	ev("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":%d}}`, n))
	ev("message_stop", `{"type":"message_stop"}`)
	return b.Bytes()
}

// decodeCount decodes a whole stream and returns its number of chunks.
func decodeCount(d *decoder, body io.Reader) (int, error) {
	d.init(body, false)
	n := 0
	for {
		chunks, err := d.next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n += len(chunks)
	}
}

// BenchmarkDecodeStream parses streams of 200 deltas from memory, without
// HTTP: the cost of SSE framing, JSON decoding and block assembly.
func BenchmarkDecodeStream(b *testing.B) {
	for _, kind := range []string{"text", "thinking", "tool_use"} {
		body := benchStream(kind, 200)
		b.Run(kind+"200", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			r := bytes.NewReader(body)
			for b.Loop() {
				r.Reset(body)
				var d decoder
				if _, err := decodeCount(&d, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStreamLoopback runs whole requests against a loopback server.
func BenchmarkStreamLoopback(b *testing.B) {
	body := benchStream("text", 200)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(body)
	}))
	defer srv.Close()
	c := testClient(srv)
	req := userRequest("Tell me about Go iterators.")
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		n := 0
		for c, err := range c.Stream(ctx, req) {
			if err != nil {
				b.Fatal(err)
			}
			if c.Kind == llm.ChunkText {
				n++
			}
		}
		if n != 200 {
			b.Fatalf("got %d text chunks, want 200", n)
		}
	}
}

// BenchmarkMarshalRequest renders the request of a late turn of an agent
// loop: 40 tool round trips with thinking, and 10 tools.
func BenchmarkMarshalRequest(b *testing.B) {
	req := &llm.Request{Messages: []llm.Message{SystemMessage("You are a coding agent."), UserMessage("Fix the bug.")}}
	for i := range 40 {
		id := fmt.Sprintf("toolu_%02d", i)
		req.Messages = append(req.Messages,
			assistant(thinkingPart(strings.Repeat("Reasoning about the next step. ", 10), "EqQBCgIYAhIM"), llm.TextPart("Reading a file."),
				callPart(id, "read_file", `{"path": "internal/pkg/file.go", "limit": 200}`)),
			ToolMessage(id, strings.Repeat("package pkg // a line of Go source\n", 50)))
	}
	for i := range 10 {
		req.Tools = append(req.Tools, llm.ToolSpec{
			Name: fmt.Sprintf("tool_%d", i), Description: "Does a thing to a file.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"the file"},"limit":{"type":"integer","default":100}},"required":["path"]}`),
		})
	}
	c := &Client{Model: "claude-sonnet-4-5"}
	b.ReportAllocs()
	for b.Loop() {
		body, err := c.marshalRequest(req)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(body)))
	}
}
