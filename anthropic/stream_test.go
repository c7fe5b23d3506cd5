package anthropic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hrns-dev/hrns/llm"
)

func TestStreamRecorded(t *testing.T) {
	t.Parallel()
	const sonnet = "claude-sonnet-4-5-20250929"
	const sig = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds5Nq2ulv9Lq7KQmwZX8yD3Tz0ypXv8Rz7hqxZ3tgJwZGq0Ql9a1tYc="
	tests := []struct {
		file    string
		want    []llm.Chunk
		wantErr error // matched with errors.Is; nil means success
	}{
		{
			file: "text.sse",
			want: []llm.Chunk{
				textChunk("Hello"), textChunk("! How can I help"), textChunk(" you today? é—😀"),
				doneChunk(llm.Response{
					ID: "msg_01XFDUDYJgAACzvnptvVoYEL", Model: sonnet,
					Message:      assistant(llm.TextPart("Hello! How can I help you today? é—😀")),
					Usage:        llm.Usage{InputTokens: 21, OutputTokens: 14},
					FinishReason: llm.FinishStop,
				}),
			},
		},
		{
			file: "tool_use.sse",
			want: []llm.Chunk{
				textChunk("Let me check"), textChunk(" the weather."),
				startChunk(0, "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather"),
				argsChunk(0, `{"location":`), argsChunk(0, ` "San Francisco`),
				argsChunk(0, `, CA", "unit": "f`), argsChunk(0, `ahrenheit"}`),
				doneChunk(llm.Response{
					ID: "msg_014p7gG3wDgGV9EUtLvnow3U", Model: sonnet,
					Message: assistant(
						llm.TextPart("Let me check the weather."),
						callPart("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", `{"location": "San Francisco, CA", "unit": "fahrenheit"}`),
					),
					Usage:        llm.Usage{InputTokens: 472, OutputTokens: 89},
					FinishReason: llm.FinishToolCalls,
				}),
			},
		},
		{
			file: "parallel_tool_use.sse",
			want: []llm.Chunk{
				startChunk(0, "toolu_01A09q90qw90lq917835lq9", "get_weather"),
				argsChunk(0, `{"location": "Paris"}`),
				startChunk(1, "toolu_01B2zKfW2sLg6DqfHn4y7aQm", "get_weather"),
				argsChunk(1, `{"location"`), argsChunk(1, `: "Rome"}`),
				startChunk(2, "toolu_01C7vR3mXq2NpT8wYs5Lk1Jd", "get_time"),
				doneChunk(llm.Response{
					ID: "msg_01Aq9w938a90dw8q8fD9kkJt", Model: "claude-opus-4-1-20250805",
					Message: assistant(
						callPart("toolu_01A09q90qw90lq917835lq9", "get_weather", `{"location": "Paris"}`),
						callPart("toolu_01B2zKfW2sLg6DqfHn4y7aQm", "get_weather", `{"location": "Rome"}`),
						callPart("toolu_01C7vR3mXq2NpT8wYs5Lk1Jd", "get_time", `{}`),
					),
					Usage:        llm.Usage{InputTokens: 610, OutputTokens: 121},
					FinishReason: llm.FinishToolCalls,
				}),
			},
		},
		{
			file: "thinking.sse",
			want: []llm.Chunk{
				reasoningChunk("The user asks for 27 * 453."),
				reasoningChunk("\n27 * 453 = 27 * 400 + 27 * 53 = 10800 + 1431 = 12231."),
				textChunk("27 × 453 = "), textChunk("12,231"),
				doneChunk(llm.Response{
					ID: "msg_01DdP3zYqrk5wdgAZTiNLyKc", Model: sonnet,
					Message: assistant(
						thinkingPart("The user asks for 27 * 453.\n27 * 453 = 27 * 400 + 27 * 53 = 10800 + 1431 = 12231.", sig),
						llm.TextPart("27 × 453 = 12,231"),
					),
					Usage:        llm.Usage{InputTokens: 52, OutputTokens: 186},
					FinishReason: llm.FinishStop,
				}),
			},
		},
		{
			file: "redacted_thinking.sse",
			want: []llm.Chunk{
				reasoningChunk("Some of my reasoning was flagged; answer plainly."),
				textChunk("I can help with that."),
				doneChunk(llm.Response{
					ID: "msg_01Rk8pXhE2Hn3yVw5Zq7TbGc", Model: "claude-3-7-sonnet-20250219",
					Message: assistant(
						redactedPart("EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB8URj2pLmN3kGSt=="),
						thinkingPart("Some of my reasoning was flagged; answer plainly.", "ErUBCkYIBRgCIkDx5cQ"),
						llm.TextPart("I can help with that."),
					),
					Usage:        llm.Usage{InputTokens: 98, OutputTokens: 77},
					FinishReason: llm.FinishStop,
				}),
			},
		},
		{
			file: "thinking_tool_use.sse",
			want: []llm.Chunk{
				reasoningChunk("I need the weather in Paris first."),
				startChunk(0, "toolu_01CswdEQBMshySk6Y9DFKrfq", "get_weather"),
				argsChunk(0, `{"city": "Paris"}`),
				doneChunk(llm.Response{
					ID: "msg_01WkT9gQm4pZ8xRvN2cLhY6s", Model: "claude-opus-4-6",
					Message: assistant(
						thinkingPart("I need the weather in Paris first.", "EuYBCkQYAiJAgCs1le6/Pol5Z4/JMomVOouGrWdhYNsH3ukzUECbB6iWrSQtsQuRHJID6lWV7wLA=="),
						callPart("toolu_01CswdEQBMshySk6Y9DFKrfq", "get_weather", `{"city": "Paris"}`),
					),
					Usage:        llm.Usage{InputTokens: 1204, OutputTokens: 64},
					FinishReason: llm.FinishToolCalls,
				}),
			},
		},
		{
			file: "cache_usage.sse",
			want: []llm.Chunk{
				textChunk("Cached."),
				doneChunk(llm.Response{
					ID: "msg_01Ca9hE7Jk2LmN4pQ6rS8tUv", Model: sonnet,
					Message: assistant(llm.TextPart("Cached.")),
					// 12 uncached + 1830 read + 248 written.
					Usage:        llm.Usage{InputTokens: 2090, OutputTokens: 5, CacheReadTokens: 1830, CacheWriteTokens: 248},
					FinishReason: llm.FinishStop,
				}),
			},
		},
		{
			file: "max_tokens.sse",
			want: []llm.Chunk{
				startChunk(0, "toolu_01Mx4a", "write_file"),
				argsChunk(0, `{"path": "notes.md", "text": "Once upon`),
				doneChunk(llm.Response{
					ID: "msg_01Mx4Tk9Lp2Wq7Zr5Vn3Bc8D", Model: "claude-haiku-4-5-20251001",
					// The arguments are cut short; the loop reports them to
					// the model as invalid.
					Message:      assistant(callPart("toolu_01Mx4a", "write_file", `{"path": "notes.md", "text": "Once upon`)),
					Usage:        llm.Usage{InputTokens: 380, OutputTokens: 16},
					FinishReason: llm.FinishLength,
				}),
			},
		},
		{
			file: "refusal.sse",
			want: []llm.Chunk{
				textChunk("I can't"),
				doneChunk(llm.Response{
					ID: "msg_01Rf2Hs8Kd4Lq6Wz9Xc1Vb3N", Model: sonnet,
					Message:      assistant(llm.TextPart("I can't")),
					Usage:        llm.Usage{InputTokens: 44, OutputTokens: 3},
					FinishReason: llm.FinishContentFilter,
				}),
			},
		},
		{
			file: "unknown_blocks.sse",
			want: []llm.Chunk{
				textChunk("Go 1.26 is out."),
				doneChunk(llm.Response{
					ID: "msg_01Un5Kw3Jp8Lz2Qx6Tr9Vm4B", Model: sonnet,
					Message:      assistant(llm.TextPart("Go 1.26 is out.")),
					Usage:        llm.Usage{InputTokens: 2100, OutputTokens: 40},
					FinishReason: llm.FinishStop,
				}),
			},
		},
		{
			file: "sse_format.sse",
			want: []llm.Chunk{
				textChunk("A"), textChunk("B"), textChunk("C"),
				doneChunk(llm.Response{
					ID: "msg_fmt", Model: "framing",
					Message:      assistant(llm.TextPart("ABC")),
					Usage:        llm.Usage{InputTokens: 3, OutputTokens: 3},
					FinishReason: llm.FinishStop,
				}),
			},
		},
		{
			file: "no_message_stop.sse",
			want: []llm.Chunk{
				textChunk("Done"),
				doneChunk(llm.Response{
					ID: "msg_nostop", Model: "proxy-model",
					Message:      assistant(llm.TextPart("Done")),
					Usage:        llm.Usage{InputTokens: 5, OutputTokens: 2},
					FinishReason: llm.FinishStop,
				}),
			},
		},
		{
			file:    "stream_error.sse",
			want:    []llm.Chunk{textChunk("The"), textChunk(" answer")},
			wantErr: llm.ErrOverloaded,
		},
		{
			file:    "truncated.sse",
			want:    []llm.Chunk{textChunk("Half"), textChunk(" an answ")},
			wantErr: io.ErrUnexpectedEOF,
		},
		{
			// Indexes at both ends of int64, out of order, and events after
			// message_stop (ignored): the chunks number calls as they start,
			// the response orders blocks by index.
			file: "odd_indexes.sse",
			want: []llm.Chunk{
				startChunk(0, "toolu_big", "read_file"),
				textChunk("Reading."),
				startChunk(1, "toolu_neg", "list_dir"),
				argsChunk(0, `{"path":`), argsChunk(1, `{"dir":"."}`), argsChunk(0, `"a.txt"}`),
				doneChunk(llm.Response{
					ID: "msg_odd", Model: "gateway-model",
					Message: assistant(
						llm.TextPart("Reading."),
						callPart("toolu_neg", "list_dir", `{"dir":"."}`),
						callPart("toolu_big", "read_file", `{"path":"a.txt"}`),
					),
					Usage:        llm.Usage{InputTokens: 10, OutputTokens: 30},
					FinishReason: llm.FinishToolCalls,
				}),
			},
		},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.file, ".sse"), func(t *testing.T) {
			t.Parallel()
			srv := serveSSE(t, readTestdata(t, tt.file))
			got, err := collect(testClient(srv).Stream(context.Background(), userRequest("hi")))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("chunks mismatch (-want +got):\n%s", diff)
			}
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("Stream error: %v", err)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Fatalf("Stream error = %v, want one matching %v", err, tt.wantErr)
			case tt.wantErr != nil && !llm.IsRetryable(err):
				t.Errorf("IsRetryable(%v) = false, want true", err)
			}
		})
	}
}

func TestStreamErrorEvent(t *testing.T) {
	t.Parallel()
	srv := serveSSE(t, readTestdata(t, "stream_error.sse"))
	_, err := collect(testClient(srv).Stream(context.Background(), userRequest("hi")))
	want := &llm.APIError{
		Provider:  "anthropic",
		Type:      "overloaded_error",
		Message:   "Overloaded",
		RequestID: "req_stream",
	}
	apiErr, ok := errors.AsType[*llm.APIError](err)
	if !ok {
		t.Fatalf("error %v (%T) is not an *llm.APIError", err, err)
	}
	if diff := cmp.Diff(want, apiErr); diff != "" {
		t.Errorf("APIError mismatch (-want +got):\n%s", diff)
	}
	if got, want := err.Error(), "anthropic: stream error overloaded_error: Overloaded"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// eventStream renders events as an Anthropic event stream: each event is
// the JSON of its data, and its type names the event.
func eventStream(events ...string) string {
	var b strings.Builder
	for _, ev := range events {
		typ := ev
		if i := strings.Index(ev, `"type":"`); i >= 0 {
			typ = ev[i+8:]
			typ = typ[:strings.IndexByte(typ, '"')]
		}
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", typ, ev)
	}
	return b.String()
}

const (
	evStart     = `{"type":"message_start","message":{"id":"msg_1","model":"m","usage":{"input_tokens":1}}}`
	evTextStart = `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`
	evStop      = `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}`
	evEnd       = `{"type":"message_stop"}`
)

func TestStreamProtocolErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		stream string
		want   string // in the error
	}{
		{"delta before start", eventStream(evStart, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`), "content block 0, which was not started"},
		{"stop before start", eventStream(evStart, `{"type":"content_block_stop","index":3}`), "content block 3 stopped, but was not started"},
		{"started twice", eventStream(evStart, evTextStart, evTextStart), "content block 0 started twice"},
		{"delta of the wrong type", eventStream(evStart, evTextStart, `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{}"}}`), "input_json_delta for content block 0 of type text"},
		{"not JSON", "event: ping\ndata: {not json}\n\n", "decoding stream event"},
		{"two values", "data: {\"type\":\"ping\"} {}\n\n", "data after its JSON value"},
		{"error event without error", eventStream(`{"type":"error"}`), "error event without an error object"},
		{"empty stream", "", "stream ended before the response was complete"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var d decoder
			_, err := decodeAll(&d, strings.NewReader(tt.stream), false)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "anthropic: ") {
				t.Errorf("error %q does not name the provider", err)
			}
		})
	}
}

func TestStreamToolInputEdgeCases(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		block string   // the content_block_start event of the call
		delta []string // its partial_json fragments
		want  []llm.Chunk
		args  string
	}{
		{
			name:  "no deltas",
			block: `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"f","input":{}}}`,
			want:  []llm.Chunk{startChunk(0, "t1", "f")},
			args:  `{}`,
		},
		{
			name:  "only empty deltas",
			block: `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"f","input":{}}}`,
			delta: []string{"", ""},
			want:  []llm.Chunk{startChunk(0, "t1", "f")},
			args:  `{}`,
		},
		{
			name:  "whole input in the start event",
			block: `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"f","input":{"a": [1, 2]}}}`,
			want:  []llm.Chunk{startChunk(0, "t1", "f"), argsChunk(0, `{"a": [1, 2]}`)},
			args:  `{"a": [1, 2]}`,
		},
		{
			name:  "deltas win over a start input",
			block: `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"f","input":{"stale":true}}}`,
			delta: []string{`{"a":1}`},
			want:  []llm.Chunk{startChunk(0, "t1", "f"), argsChunk(0, `{"a":1}`)},
			args:  `{"a":1}`,
		},
		{
			name:  "missing id",
			block: `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","name":"f","input":{}}}`,
			delta: []string{`{}`},
			want:  []llm.Chunk{startChunk(0, "call_0", "f"), argsChunk(0, `{}`)},
			args:  `{}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			events := []string{evStart, tt.block}
			for _, d := range tt.delta {
				events = append(events, fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":%q}}`, d))
			}
			events = append(events, `{"type":"content_block_stop","index":0}`, evStop, evEnd)
			var d decoder
			chunks, err := decodeAll(&d, strings.NewReader(eventStream(events...)), false)
			if err != nil {
				t.Fatal(err)
			}
			done := chunks[len(chunks)-1]
			if diff := cmp.Diff(tt.want, chunks[:len(chunks)-1]); diff != "" {
				t.Errorf("chunks mismatch (-want +got):\n%s", diff)
			}
			calls := done.Response.Message.ToolCalls()
			if len(calls) != 1 || string(calls[0].Arguments) != tt.args {
				t.Errorf("calls = %+v, want one with arguments %s", calls, tt.args)
			}
		})
	}
}

func TestStreamDuplicateToolIDs(t *testing.T) {
	t.Parallel()
	// Results are matched to calls by id: ids repeated by a server are
	// replaced, so that those of a response are distinct.
	start := func(i int, id string) string {
		return fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%q,"name":"f","input":{}}}`, i, id)
	}
	stream := eventStream(evStart, start(0, "call_1"), start(1, "call_1"), start(2, "toolu_a"), start(3, "toolu_a"), start(4, ""), evEnd)
	var d decoder
	chunks, err := decodeAll(&d, strings.NewReader(stream), false)
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.Chunk{
		startChunk(0, "call_1", "f"), startChunk(1, "call_1_", "f"), startChunk(2, "toolu_a", "f"),
		startChunk(3, "call_3", "f"), startChunk(4, "call_4", "f"),
	}
	if diff := cmp.Diff(want, chunks[:len(chunks)-1]); diff != "" {
		t.Errorf("chunks mismatch (-want +got):\n%s", diff)
	}
}

func TestStreamBlocksOutOfOrder(t *testing.T) {
	t.Parallel()
	// Blocks are assembled in index order, whatever order they arrive in.
	stream := eventStream(evStart,
		`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
		`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"answer"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"thought"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}`,
		evStop, evEnd)
	var d decoder
	chunks, err := decodeAll(&d, strings.NewReader(stream), false)
	if err != nil {
		t.Fatal(err)
	}
	want := assistant(thinkingPart("thought", "sig"), llm.TextPart("answer"))
	if diff := cmp.Diff(want, chunks[len(chunks)-1].Response.Message); diff != "" {
		t.Errorf("message mismatch (-want +got):\n%s", diff)
	}
}

func TestStreamJSONResponse(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"msg_json","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[` +
			`{"type":"thinking","thinking":"Hmm.","signature":"c2ln"},` +
			`{"type":"text","text":"Checking."},` +
			`{"type":"tool_use","id":"toolu_1","name":"lookup","input":{"id":"42"}}],` +
			`"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":7}}`))
	}))
	defer srv.Close()
	got, err := collect(testClient(srv).Stream(context.Background(), userRequest("hi")))
	if err != nil {
		t.Fatal(err)
	}
	want := []llm.Chunk{
		reasoningChunk("Hmm."),
		textChunk("Checking."),
		startChunk(0, "toolu_1", "lookup"),
		argsChunk(0, `{"id":"42"}`),
		doneChunk(llm.Response{
			ID: "msg_json", Model: "claude-sonnet-4-5",
			Message: assistant(thinkingPart("Hmm.", "c2ln"), llm.TextPart("Checking."), callPart("toolu_1", "lookup", `{"id":"42"}`)),
			Usage:   llm.Usage{InputTokens: 15, OutputTokens: 7, CacheReadTokens: 5},
			// A JSON body is one whole message.
			FinishReason: llm.FinishToolCalls,
		}),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("chunks mismatch (-want +got):\n%s", diff)
	}
}

func TestStreamJSONErrorWithStatus200(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`))
	}))
	defer srv.Close()
	_, err := collect(testClient(srv).Stream(context.Background(), userRequest("hi")))
	if !errors.Is(err, llm.ErrOverloaded) || !llm.IsRetryable(err) {
		t.Fatalf("err = %v, want a retryable overload", err)
	}
}

func TestStreamJSONMalformed(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"msg_json","content":[{"type":"text","text":`))
	}))
	defer srv.Close()
	_, err := collect(testClient(srv).Stream(context.Background(), userRequest("hi")))
	if err == nil || !strings.Contains(err.Error(), "anthropic: decoding response") {
		t.Fatalf("err = %v, want a decoding error", err)
	}
}

func TestNormalizeFinish(t *testing.T) {
	t.Parallel()
	tests := []struct {
		reason   string
		hasCalls bool
		want     llm.FinishReason
	}{
		{"end_turn", false, llm.FinishStop},
		{"stop_sequence", false, llm.FinishStop},
		{"tool_use", true, llm.FinishToolCalls},
		{"max_tokens", false, llm.FinishLength},
		{"max_tokens", true, llm.FinishLength},
		{"model_context_window_exceeded", false, llm.FinishLength},
		{"refusal", false, llm.FinishContentFilter},
		{"pause_turn", false, llm.FinishOther},
		{"something_new", false, llm.FinishOther},
		{"", false, llm.FinishStop},
		{"", true, llm.FinishToolCalls},
	}
	for _, tt := range tests {
		if got := normalizeFinish(tt.reason, tt.hasCalls); got != tt.want {
			t.Errorf("normalizeFinish(%q, %v) = %q, want %q", tt.reason, tt.hasCalls, got, tt.want)
		}
	}
}

func TestDecoderReuse(t *testing.T) {
	t.Parallel()
	// A decoder reset by init decodes a second stream as if it were new.
	var d decoder
	first, err := decodeAll(&d, bytes.NewReader(readTestdata(t, "tool_use.sse")), false)
	if err != nil {
		t.Fatal(err)
	}
	second, err := decodeAll(&d, bytes.NewReader(readTestdata(t, "thinking.sse")), false)
	if err != nil {
		t.Fatal(err)
	}
	var fresh decoder
	want, err := decodeAll(&fresh, bytes.NewReader(readTestdata(t, "thinking.sse")), false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, second); diff != "" {
		t.Errorf("reused decoder differs (-fresh +reused):\n%s", diff)
	}
	if len(first[len(first)-1].Response.Message.ToolCalls()) != 1 {
		t.Error("first stream lost its tool call")
	}
}

// decodeAll decodes a whole stream with d and returns its chunks.
func decodeAll(d *decoder, body io.Reader, jsonBody bool) ([]llm.Chunk, error) {
	d.init(body, jsonBody)
	var out []llm.Chunk
	for {
		chunks, err := d.next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, chunks...)
	}
}

// TestStreamAdversarial decodes streams that no API sends but a gateway or a
// broken server might: each ends in a clear error or a best-effort
// response, never a panic.
func TestStreamAdversarial(t *testing.T) {
	t.Parallel()
	toolStart := func(i, id string) string {
		return `{"type":"content_block_start","index":` + i + `,"content_block":{"type":"tool_use","id":"` + id + `","name":"f","input":{}}}`
	}
	inputDelta := func(i, frag string) string {
		return `{"type":"content_block_delta","index":` + i + `,"delta":{"type":"input_json_delta","partial_json":"` + frag + `"}}`
	}
	textDelta := func(i, text string) string {
		return `{"type":"content_block_delta","index":` + i + `,"delta":{"type":"text_delta","text":"` + text + `"}}`
	}
	tests := []struct {
		name    string
		stream  string
		want    []llm.Part // the response's parts, when it succeeds
		wantErr string     // in the error, when it fails
		eof     bool       // the error wraps io.ErrUnexpectedEOF
	}{
		{
			name:   "indexes beyond int64",
			stream: eventStream(evStart, toolStart("99999999999999999999", "t"), evStop, evEnd),
			// The event is not the API's: its index does not decode.
			wantErr: "decoding stream event",
		},
		{
			name:    "fractional index",
			stream:  eventStream(evStart, toolStart("1.5", "t"), evStop, evEnd),
			wantErr: "decoding stream event",
		},
		{
			name:    "input_json_delta for a block never started",
			stream:  eventStream(evStart, toolStart("0", "t"), inputDelta("1", "{}"), evStop, evEnd),
			wantErr: "content block 1, which was not started",
		},
		{
			name:    "index repeated",
			stream:  eventStream(evStart, toolStart("-1", "a"), toolStart("-1", "b"), evStop, evEnd),
			wantErr: "content block -1 started twice",
		},
		{
			name:   "indexes far apart",
			stream: eventStream(evStart, toolStart("9223372036854775807", "max"), toolStart("-9223372036854775808", "min"), toolStart("0", "zero"), evStop, evEnd),
			want:   []llm.Part{callPart("min", "f", "{}"), callPart("zero", "f", "{}"), callPart("max", "f", "{}")},
		},
		{
			name:   "text and an error after message_stop are ignored",
			stream: eventStream(evStart, evTextStart, textDelta("0", "a"), evStop, evEnd, textDelta("0", "b"), `{"type":"error","error":{"type":"api_error","message":"late"}}`),
			want:   []llm.Part{llm.TextPart("a")},
		},
		{
			name:   "deltas after content_block_stop are kept",
			stream: eventStream(evStart, toolStart("0", "t"), inputDelta("0", "{"), `{"type":"content_block_stop","index":0}`, inputDelta("0", "}"), evStop, evEnd),
			want:   []llm.Part{callPart("t", "f", "{}")},
		},
		{
			name:    "truncated inside a tool call",
			stream:  eventStream(evStart, toolStart("0", "t"), inputDelta("0", `{\"a\":`)),
			wantErr: "stream ended before the response was complete",
			eof:     true,
		},
		{
			name:    "truncated inside an event",
			stream:  strings.TrimSuffix(eventStream(evStart, toolStart("0", "t")), "}}}\n\n"),
			wantErr: "stream ended inside an event",
			eof:     true,
		},
		{
			name:   "truncated after the stop reason",
			stream: eventStream(evStart, toolStart("0", "t"), inputDelta("0", `{\"a\":1}`), evStop),
			want:   []llm.Part{callPart("t", "f", `{"a":1}`)},
		},
		{
			name: "NUL and control characters are kept",
			stream: eventStream(evStart, `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t\u0000","name":"f\u0000\u0001","input":{}}}`,
				inputDelta("0", `{\"a\":\"\\u0000\"}\u0000`), evStop, evEnd),
			want: []llm.Part{callPart("t\x00", "f\x00\x01", "{\"a\":\"\\u0000\"}\x00")},
		},
		{
			// encoding/json decodes invalid UTF-8 in a string, and escaped
			// lone surrogates, as U+FFFD: the bytes are replaced, not kept.
			name: "invalid UTF-8 becomes U+FFFD",
			stream: eventStream(evStart, "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\xff\",\"name\":\"f\\ud800\",\"input\":{}}}",
				inputDelta("0", "\xfe{}"), evStop, evEnd),
			want: []llm.Part{callPart("t\uFFFD", "f\uFFFD", "\uFFFD{}")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var d decoder
			chunks, err := decodeAll(&d, strings.NewReader(tt.stream), false)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				if got := errors.Is(err, io.ErrUnexpectedEOF); got != tt.eof {
					t.Errorf("errors.Is(%v, io.ErrUnexpectedEOF) = %v, want %v", err, got, tt.eof)
				}
				checkContract(t, chunks, err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkContract(t, chunks, err)
			if diff := cmp.Diff(tt.want, chunks[len(chunks)-1].Response.Message.Parts); diff != "" {
				t.Errorf("parts mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
