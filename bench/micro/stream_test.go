package micro

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/bench/internal/mock"
	"github.com/hrns-dev/hrns/bench/internal/raw"
	"github.com/hrns-dev/hrns/bench/internal/task"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai"
)

// replay is an http.RoundTripper that answers every request with body, as
// an event stream, without a network.
type replay struct{ body []byte }

func (r *replay) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusOK,
		Status:     "200 OK",
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"text/event-stream"}},
		Body:    io.NopCloser(bytes.NewReader(r.body)),
		Request: req,
	}, nil
}

// streams are the bodies of BenchmarkStream, with the number of events
// each holds ([DONE] not counted).
func streams() []struct {
	name   string
	body   []byte
	events int
} {
	text := mock.TextStream(mock.FinalText(100))
	args := `{"path":"` + strings.Repeat("notes/deeply/nested/", 20) + `turn-1.txt"}`
	call := mock.ToolCallStream("call_1", task.ToolName, args, 100)
	// The same lines as the text stream, as comments: every line is
	// read and skipped, and nothing is decoded.
	comments := bytes.ReplaceAll(text.Whole, []byte("data: {"), []byte(": {"))
	return []struct {
		name   string
		body   []byte
		events int
	}{
		{"empty", []byte("data: [DONE]\n\n"), 1},
		{"sse-lines", comments, text.Chunks()},
		{"text", text.Whole, text.Chunks()},
		{"toolcall", call.Whole, call.Chunks()},
	}
}

// BenchmarkStream reads one streamed answer per op with the raw baseline and
// with hrns's OpenAI provider, from memory. "empty" is the fixed cost of a
// request whose answer holds no event; its ns/chunk is per request.
func BenchmarkStream(b *testing.B) {
	ctx := context.Background()
	for _, s := range streams() {
		hc := &http.Client{Transport: &replay{body: s.body}}
		b.Run(s.name+"/raw", func(b *testing.B) {
			c := &raw.Client{BaseURL: "http://bench.invalid/v1", Model: "bench-model", HTTPClient: hc}
			msgs := raw.FirstMessages()
			m := startMeter(b)
			for b.Loop() {
				if _, err := c.Turn(ctx, msgs); err != nil {
					b.Fatal(err)
				}
			}
			m.report(s.events, "chunk")
		})
		b.Run(s.name+"/hrns", func(b *testing.B) {
			c := &openai.Client{BaseURL: "http://bench.invalid/v1", Model: "bench-model", APIKey: "bench", HTTPClient: hc}
			req := &llm.Request{
				Messages: []llm.Message{llm.SystemMessage(task.System), llm.UserMessage(task.Prompt)},
				Tools:    []llm.ToolSpec{readSpec()},
			}
			m := startMeter(b)
			for b.Loop() {
				for _, err := range c.Stream(ctx, req) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			m.report(s.events, "chunk")
		})
	}
}

// BenchmarkDecodeChunk isolates the per-chunk cost. Each op reads a stream
// of the same chunk repeated 1000 times, so the request's fixed cost is
// spread thin; ns/chunk is ns/op divided by 1000. "raw-unmarshal" is the
// baseline's encoding/json decode of one chunk alone (its ns/chunk is its
// ns/op); "raw-stream" adds its line reading and accumulation; "hrns" is
// hrns's provider doing all of that through Client.Stream; "scan-sketch"
// is the baseline's line reading with a hand-written decoder that skips
// what it does not need (scan_test.go), a lower bound rather than a
// contender. "content" chunks
// carry text deltas, "args" chunks tool-call argument deltas.
func BenchmarkDecodeChunk(b *testing.B) {
	const n = 1000
	text := mock.TextStream(mock.FinalText(2))
	call := mock.ToolCallStream("call_1", task.ToolName, `{"path":"notes/turn-1.txt"}`, 8)
	kinds := []struct {
		name  string
		head  []byte // events before the repeated one
		event []byte
	}{
		{"content", nil, text.Events[1]},
		{"args", call.Events[1], call.Events[2]},
	}
	ctx := context.Background()
	for _, k := range kinds {
		data := bytes.TrimSuffix(bytes.TrimPrefix(k.event, []byte("data: ")), []byte("\n\n"))
		body := slices.Concat(k.head, bytes.Repeat(k.event, n), []byte("data: [DONE]\n\n"))
		b.Run(k.name+"/raw-unmarshal", func(b *testing.B) {
			m := startMeter(b)
			for b.Loop() {
				var acc raw.Accumulator
				if err := acc.Add(data); err != nil {
					b.Fatal(err)
				}
			}
			m.report(1, "chunk")
		})
		b.Run(k.name+"/raw-stream", func(b *testing.B) {
			r := bytes.NewReader(body)
			m := startMeter(b)
			for b.Loop() {
				r.Reset(body)
				var acc raw.Accumulator
				if err := raw.ReadStream(r, acc.Add); err != nil {
					b.Fatal(err)
				}
				acc.Finish()
			}
			m.report(n, "chunk")
		})
		b.Run(k.name+"/scan-sketch", func(b *testing.B) {
			r := bytes.NewReader(body)
			m := startMeter(b)
			for b.Loop() {
				r.Reset(body)
				var acc scanAcc
				if err := raw.ReadStream(r, func(data []byte) error { return scanChunk(data, &acc) }); err != nil {
					b.Fatal(err)
				}
			}
			m.report(n, "chunk")
		})
		b.Run(k.name+"/hrns", func(b *testing.B) {
			c := &openai.Client{BaseURL: "http://bench.invalid/v1", Model: "bench-model", HTTPClient: &http.Client{Transport: &replay{body: body}}}
			req := &llm.Request{Messages: []llm.Message{llm.UserMessage(task.Prompt)}}
			m := startMeter(b)
			for b.Loop() {
				for _, err := range c.Stream(ctx, req) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			m.report(n, "chunk")
		})
	}
}

func readSpec() llm.ToolSpec {
	return llm.ToolSpec{
		Name:        task.ToolName,
		Description: task.Description,
		InputSchema: []byte(`{"type":"object","properties":{"path":{"type":"string","description":"the file to read"}},"required":["path"],"additionalProperties":false}`),
	}
}
