package openai

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hrns-dev/hrns/llm"
)

// toolCallStream returns a stream of one tool call whose arguments arrive
// in n deltas.
func toolCallStream(n int) []byte {
	var b bytes.Buffer
	const head = `"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1754000000,"model":"gpt-4.1-2025-04-14","service_tier":"default","system_fingerprint":"fp_51e1070cf2"`
	fmt.Fprintf(&b, `data: {%s,"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_bench","type":"function","function":{"name":"write_file","arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n", head)
	fmt.Fprintf(&b, `data: {%s,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"text\":\""}}]},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n", head)
	for i := range n - 2 {
		fmt.Fprintf(&b, `data: {%s,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"word%d "}}]},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n", head, i)
	}
	fmt.Fprintf(&b, `data: {%s,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"}"}}]},"logprobs":null,"finish_reason":null}],"usage":null}`+"\n\n", head)
	fmt.Fprintf(&b, `data: {%s,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}`+"\n\n", head)
	b.WriteString("data: [DONE]\n\n")
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

// BenchmarkDecodeStream parses recorded streams from memory, without HTTP:
// the cost of SSE framing, JSON decoding and accumulation.
func BenchmarkDecodeStream(b *testing.B) {
	streams := []struct {
		name string
		body []byte
	}{
		{"text200", readTestdata(b, "text_long.sse")},
		{"toolcall200", toolCallStream(200)},
	}
	for _, s := range streams {
		b.Run(s.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(s.body)))
			r := bytes.NewReader(s.body)
			for b.Loop() {
				r.Reset(s.body)
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
	body := readTestdata(b, "text_long.sse")
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
		if n != 196 {
			b.Fatalf("got %d text chunks, want 196", n)
		}
	}
}
