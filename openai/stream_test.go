package openai

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hrns-dev/hrns/llm"
)

func TestStreamRecorded(t *testing.T) {
	t.Parallel()
	const gpt41 = "gpt-4.1-2025-04-14"
	tests := []struct {
		file    string
		want    []llm.Chunk
		wantErr error // matched with errors.Is; nil means success
	}{
		{
			file: "text.sse",
			want: []llm.Chunk{
				textChunk("Hello"), textChunk("!"), textChunk(" How"), textChunk(" can"), textChunk(" I"),
				textChunk(" help"), textChunk(" you"), textChunk(" today"), textChunk("? é—😀"),
				doneChunk(llm.Response{
					ID: "chatcmpl-C3Ax9T0qPmZr2VbN7kLwYh4s", Model: gpt41,
					Message:      assistant(llm.TextPart("Hello! How can I help you today? é—😀")),
					Usage:        llm.Usage{InputTokens: 19, OutputTokens: 10},
					FinishReason: llm.FinishStop,
				}),
			},
		},
		{
			file: "tool_call.sse",
			want: []llm.Chunk{
				startChunk(0, "call_DdmO9pD3xa9XTPNJ32zg2hcA", "get_weather"),
				argsChunk(0, `{"`), argsChunk(0, "location"), argsChunk(0, `":"`), argsChunk(0, "Paris"),
				argsChunk(0, ","), argsChunk(0, " France"), argsChunk(0, `"}`),
				doneChunk(llm.Response{
					ID: "chatcmpl-C3B2kW8vQ1nT5xRz0aLp6sEd", Model: gpt41,
					Message:      assistant(callPart("call_DdmO9pD3xa9XTPNJ32zg2hcA", "get_weather", `{"location":"Paris, France"}`)),
					Usage:        llm.Usage{InputTokens: 81, OutputTokens: 17},
					FinishReason: llm.FinishToolCalls,
				}),
			},
		},
		{
			file: "parallel_tool_calls.sse",
			want: []llm.Chunk{
				startChunk(0, "call_9ptQcT4vXm2Lk8Wq0rNs1yFa", "get_weather"),
				argsChunk(0, `{"location": `),
				startChunk(1, "call_Hr3sW7nQ0bZk5Tm1xPv8cLdE", "get_time"),
				argsChunk(1, `{"tz": `),
				argsChunk(0, `"Paris"}`),
				argsChunk(1, `"Europe/Paris"}`),
				startChunk(2, "call_Zq1Xw2Ec3Rv4Tb5Yn6Um7Io8", "get_weather"),
				argsChunk(2, `{"location": "Rome"}`),
				doneChunk(llm.Response{
					ID: "chatcmpl-C3C7pQ2mZx9LkW4nB8vT1rYe", Model: gpt41,
					Message: assistant(
						callPart("call_9ptQcT4vXm2Lk8Wq0rNs1yFa", "get_weather", `{"location": "Paris"}`),
						callPart("call_Hr3sW7nQ0bZk5Tm1xPv8cLdE", "get_time", `{"tz": "Europe/Paris"}`),
						callPart("call_Zq1Xw2Ec3Rv4Tb5Yn6Um7Io8", "get_weather", `{"location": "Rome"}`),
					),
					Usage:        llm.Usage{InputTokens: 120, OutputTokens: 61},
					FinishReason: llm.FinishToolCalls,
				}),
			},
		},
		{
			file: "usage.sse",
			want: []llm.Chunk{
				textChunk("42"), textChunk("."),
				doneChunk(llm.Response{
					ID: "chatcmpl-C3D0aZ8bY7cX6dW5eV4fU3gT", Model: "o4-mini-2025-04-16",
					Message:      assistant(llm.TextPart("42.")),
					Usage:        llm.Usage{InputTokens: 2006, OutputTokens: 300, CacheReadTokens: 1920, ReasoningTokens: 192},
					FinishReason: llm.FinishLength,
				}),
			},
		},
		{
			file: "reasoning_content.sse",
			want: []llm.Chunk{
				reasoningChunk("The user"), reasoningChunk(" asks 9.11 vs 9.8."), reasoningChunk(" 9.8 = 9.80 > 9.11."),
				textChunk("9.8"), textChunk(" is larger."),
				doneChunk(llm.Response{
					ID: "5f0c2a1e-8b7d-4e3f-9a6c-1d2e3f4a5b6c", Model: "deepseek-reasoner",
					Message: assistant(
						reasoningPart("The user asks 9.11 vs 9.8. 9.8 = 9.80 > 9.11."),
						llm.TextPart("9.8 is larger."),
					),
					Usage:        llm.Usage{InputTokens: 15, OutputTokens: 40, CacheReadTokens: 8, ReasoningTokens: 28},
					FinishReason: llm.FinishStop,
				}),
			},
		},
		{
			file: "reasoning_openrouter.sse",
			want: []llm.Chunk{
				reasoningChunk("Okay, "), reasoningChunk("a greeting."), textChunk("Hi"), textChunk(" there!"),
				doneChunk(llm.Response{
					ID: "gen-1754000200-Qm3VnB8xZc2LkP0wRt5Y", Model: "qwen/qwen3-32b",
					Message:      assistant(reasoningPart("Okay, a greeting."), llm.TextPart("Hi there!")),
					Usage:        llm.Usage{InputTokens: 20, OutputTokens: 35, ReasoningTokens: 22},
					FinishReason: llm.FinishStop,
				}),
			},
		},
		{
			file: "reasoning_ollama.sse",
			want: []llm.Chunk{
				reasoningChunk("Two"), reasoningChunk(" plus two."), textChunk("4"),
				doneChunk(llm.Response{
					ID: "chatcmpl-412", Model: "qwen3:8b",
					Message:      assistant(reasoningPart("Two plus two."), llm.TextPart("4")),
					Usage:        llm.Usage{InputTokens: 11, OutputTokens: 7},
					FinishReason: llm.FinishStop,
				}),
			},
		},
		{
			file:    "stream_error.sse",
			want:    []llm.Chunk{textChunk("The"), textChunk(" question")},
			wantErr: llm.ErrOverloaded,
		},
		{
			file: "quirk_missing_index.sse",
			want: []llm.Chunk{
				startChunk(0, "call_0", "get_weather"), argsChunk(0, `{"city":"Paris"}`),
				startChunk(1, "call_1", "get_weather"), argsChunk(1, `{"city":"Rome"}`),
				startChunk(2, "call_2", "get_time"), argsChunk(2, `{}`),
				doneChunk(llm.Response{
					ID: "QK2vaJ3xLZmP8wTbYcRfEg", Model: "gemini-2.5-flash",
					Message: assistant(
						callPart("call_0", "get_weather", `{"city":"Paris"}`),
						callPart("call_1", "get_weather", `{"city":"Rome"}`),
						callPart("call_2", "get_time", `{}`),
					),
					Usage:        llm.Usage{InputTokens: 60, OutputTokens: 18},
					FinishReason: llm.FinishToolCalls, // the server said "stop"
				}),
			},
		},
		{
			file: "quirk_missing_index_split.sse",
			want: []llm.Chunk{
				startChunk(0, "function-call-1", "get_weather"), argsChunk(0, `{"location"`), argsChunk(0, `:"Sydney"}`),
				startChunk(1, "function-call-2", "get_time"), argsChunk(1, `{"tz":`), argsChunk(1, `"AEST"}`),
				doneChunk(llm.Response{
					ID: "gen-split-1", Model: "gemini-2.5-pro",
					Message: assistant(
						callPart("function-call-1", "get_weather", `{"location":"Sydney"}`),
						callPart("function-call-2", "get_time", `{"tz":"AEST"}`),
					),
					FinishReason: llm.FinishToolCalls,
				}),
			},
		},
		{
			file: "quirk_reused_index.sse",
			want: []llm.Chunk{
				startChunk(0, "toolu_01A", "read_file"), argsChunk(0, `{"path":`), argsChunk(0, `"a.txt"}`),
				startChunk(1, "toolu_01B", "read_file"), argsChunk(1, `{"path":"b.txt"}`),
				doneChunk(llm.Response{
					ID: "cmpl-7a1b", Model: "some-proxy-model",
					Message: assistant(
						callPart("toolu_01A", "read_file", `{"path":"a.txt"}`),
						callPart("toolu_01B", "read_file", `{"path":"b.txt"}`),
					),
					FinishReason: llm.FinishToolCalls,
				}),
			},
		},
		{
			file: "quirk_repeated_id.sse",
			want: []llm.Chunk{
				startChunk(0, "chatcmpl-tool-5d1e", "search"), argsChunk(0, `{"q": `), argsChunk(0, `"go iter"}`),
				doneChunk(llm.Response{
					ID: "chatcmpl-rep", Model: "Qwen/Qwen2.5-7B-Instruct",
					Message:      assistant(callPart("chatcmpl-tool-5d1e", "search", `{"q": "go iter"}`)),
					FinishReason: llm.FinishToolCalls,
				}),
			},
		},
		{
			file: "quirk_empty_id.sse",
			want: []llm.Chunk{
				textChunk("Checking both."),
				startChunk(0, "call_0", "ls"), argsChunk(0, `{"dir":`), argsChunk(0, `"/tmp"}`),
				startChunk(1, "call_1", "pwd"),
				doneChunk(llm.Response{
					ID: "chatcmpl-empty", Model: "local-model",
					Message: assistant(
						llm.TextPart("Checking both."),
						callPart("call_0", "ls", `{"dir":"/tmp"}`),
						callPart("call_1", "pwd", `{}`),
					),
					FinishReason: llm.FinishToolCalls,
				}),
			},
		},
		{
			// Calls interleaved on index 0, told apart by the id on every
			// delta: two calls, not four.
			file: "quirk_interleaved_ids.sse",
			want: []llm.Chunk{
				startChunk(0, "call_A", "read_file"), startChunk(1, "call_B", "list_dir"),
				argsChunk(0, `{"path":`), argsChunk(1, `{"dir":`), argsChunk(0, `"a.txt"}`), argsChunk(1, `"src"}`),
				doneChunk(llm.Response{
					ID: "cmpl-inter", Model: "proxy-model",
					Message: assistant(
						callPart("call_A", "read_file", `{"path":"a.txt"}`),
						callPart("call_B", "list_dir", `{"dir":"src"}`),
					),
					FinishReason: llm.FinishToolCalls,
				}),
			},
		},
		{
			// Index 1 arrives first: the chunks number calls as they are
			// announced, the response orders them by index.
			file: "quirk_index_order.sse",
			want: []llm.Chunk{
				startChunk(0, "call_second", "get_time"), argsChunk(0, `{"tz":"UTC"}`),
				startChunk(1, "call_first", "get_weather"), argsChunk(1, `{"city":`), argsChunk(1, `"Oslo"}`),
				doneChunk(llm.Response{
					ID: "cmpl-order", Model: "local-model",
					Message: assistant(
						callPart("call_first", "get_weather", `{"city":"Oslo"}`),
						callPart("call_second", "get_time", `{"tz":"UTC"}`),
					),
					FinishReason: llm.FinishToolCalls,
				}),
			},
		},
		{
			// Ids that come after a call was announced are the calls' ids
			// in the response; the second is not given the id announced
			// for the first.
			file: "quirk_late_id.sse",
			want: []llm.Chunk{
				startChunk(0, "call_0", "search"), argsChunk(0, `{"q":`), argsChunk(0, `"go"}`),
				startChunk(1, "call_1", "search"), argsChunk(1, `{"q":"rust"}`),
				doneChunk(llm.Response{
					ID: "cmpl-late", Model: "local-model",
					Message: assistant(
						callPart("call_late_7", "search", `{"q":"go"}`),
						callPart("call_0_2", "search", `{"q":"rust"}`),
					),
					FinishReason: llm.FinishToolCalls,
				}),
			},
		},
		{
			file: "quirk_full_args.sse",
			want: []llm.Chunk{
				startChunk(0, "call_r2k3z9xa", "get_weather"), argsChunk(0, `{"city":"Toronto"}`),
				doneChunk(llm.Response{
					ID: "chatcmpl-817", Model: "llama3.1",
					Message:      assistant(callPart("call_r2k3z9xa", "get_weather", `{"city":"Toronto"}`)),
					Usage:        llm.Usage{InputTokens: 88, OutputTokens: 22},
					FinishReason: llm.FinishToolCalls,
				}),
			},
		},
		{
			file: "sse_format.sse",
			want: []llm.Chunk{
				textChunk("A"), textChunk("B"), textChunk("C"),
				doneChunk(llm.Response{
					ID: "chatcmpl-fmt", Model: "framing",
					Message:      assistant(llm.TextPart("ABC")),
					FinishReason: llm.FinishStop,
				}),
			},
		},
		{
			file: "no_done.sse",
			want: []llm.Chunk{
				textChunk("Done"),
				doneChunk(llm.Response{
					ID: "chatcmpl-nodone", Model: "local",
					Message:      assistant(llm.TextPart("Done")),
					FinishReason: llm.FinishStop,
				}),
			},
		},
		{
			file:    "truncated.sse",
			want:    []llm.Chunk{textChunk("Half"), textChunk(" an answ")},
			wantErr: io.ErrUnexpectedEOF,
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
		Provider: "openai",
		Type:     "server_error",
		Message:  "The server had an error while processing your request. Sorry about that!",
	}
	apiErr, ok := errors.AsType[*llm.APIError](err)
	if !ok {
		t.Fatalf("error %v (%T) is not an *llm.APIError", err, err)
	}
	if diff := cmp.Diff(want, apiErr); diff != "" {
		t.Errorf("APIError mismatch (-want +got):\n%s", diff)
	}
}

func TestStreamLongText(t *testing.T) {
	t.Parallel()
	srv := serveSSE(t, readTestdata(t, "text_long.sse"))
	chunks, err := collect(testClient(srv).Stream(context.Background(), userRequest("hi")))
	if err != nil {
		t.Fatal(err)
	}
	var streamed strings.Builder
	for _, c := range chunks[:len(chunks)-1] {
		if c.Kind != llm.ChunkText {
			t.Fatalf("chunk kind %v, want text", c.Kind)
		}
		streamed.WriteString(c.Text)
	}
	if got, want := len(chunks), 197; got != want {
		t.Errorf("got %d chunks, want %d", got, want)
	}
	want := string(readTestdata(t, "text_long.txt"))
	if streamed.String() != want {
		t.Errorf("streamed text = %q, want %q", streamed.String(), want)
	}
	resp := chunks[len(chunks)-1].Response
	if resp == nil || resp.Message.Text() != want {
		t.Fatalf("final response text differs from the streamed text")
	}
	if diff := cmp.Diff(llm.Usage{InputTokens: 40, OutputTokens: 196}, resp.Usage); diff != "" {
		t.Errorf("usage mismatch (-want +got):\n%s", diff)
	}
}

// decodeAll runs the decoder over a body, without HTTP.
func decodeAll(body io.Reader, jsonBody bool) ([]llm.Chunk, error) {
	var d decoder
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

func TestDecoder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		body     string
		jsonBody bool
		want     []llm.Chunk
		wantErr  error
	}{
		{
			name: "refusal is text",
			body: `data: {"id":"r","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":null}]}` + "\n\n" +
				`data: {"id":"r","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n",
			want: []llm.Chunk{
				textChunk("I can't help with that."),
				doneChunk(llm.Response{ID: "r", Model: "m", Message: assistant(llm.TextPart("I can't help with that.")), FinishReason: llm.FinishStop}),
			},
		},
		{
			name:     "non-streamed completion",
			body:     `{"id":"chatcmpl-1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi","reasoning_content":"think","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},{"id":"c2","type":"function","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`,
			jsonBody: true,
			want: []llm.Chunk{
				reasoningChunk("think"), textChunk("Hi"),
				startChunk(0, "c1", "f"), argsChunk(0, `{"a":1}`),
				startChunk(1, "c2", "g"), argsChunk(1, `{}`),
				doneChunk(llm.Response{
					ID: "chatcmpl-1", Model: "m",
					Message:      assistant(reasoningPart("think"), llm.TextPart("Hi"), callPart("c1", "f", `{"a":1}`), callPart("c2", "g", `{}`)),
					Usage:        llm.Usage{InputTokens: 3, OutputTokens: 4},
					FinishReason: llm.FinishToolCalls,
				}),
			},
		},
		{
			name:     "non-streamed error",
			body:     `{"error":{"message":"bad","type":"invalid_request_error"}}`,
			jsonBody: true,
			wantErr:  &llm.APIError{Provider: "openai", Type: "invalid_request_error", Message: "bad"},
		},
		{
			name:    "top-level error object",
			body:    `data: {"object":"error","message":"Engine overloaded","type":"ServiceUnavailableError","code":503}` + "\n\n",
			wantErr: &llm.APIError{Provider: "openai", Type: "ServiceUnavailableError", Code: "503", Message: "Engine overloaded"},
		},
		{
			name:    "error as a string",
			body:    `data: {"error":"model not loaded"}` + "\n\n",
			wantErr: &llm.APIError{Provider: "openai", Message: "model not loaded"},
		},
		{
			name:    "context length error in stream",
			body:    `data: {"error":{"message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","code":400}}` + "\n\n",
			wantErr: &llm.APIError{Provider: "openai", Type: "BadRequestError", Code: "context_length_exceeded", Message: "This model's maximum context length is 4096 tokens."},
		},
		{
			name: "null fields and extra choices",
			body: `data: {"id":null,"model":null,"choices":null,"usage":null,"error":null}` + "\n\n" +
				`data: {"id":"x","model":"m","choices":[{"index":1,"delta":{"content":"other"}},{"index":0,"delta":{"content":"mine","reasoning":null,"tool_calls":null},"finish_reason":null}]}` + "\n\n" +
				`data: {"choices":[{"index":0,"delta":{"content":null},"finish_reason":"content_filter"}]}` + "\n\n" +
				"data: [DONE]\n\n",
			want: []llm.Chunk{
				textChunk("mine"),
				doneChunk(llm.Response{ID: "x", Model: "m", Message: assistant(llm.TextPart("mine")), FinishReason: llm.FinishContentFilter}),
			},
		},
		{
			name: "both reasoning fields",
			body: `data: {"choices":[{"index":0,"delta":{"reasoning":"r","reasoning_content":"r"}}]}` + "\n\n" +
				`data: {"choices":[{"index":0,"delta":{},"finish_reason":"weird"}]}` + "\n\n" + "data: [DONE]\n\n",
			want: []llm.Chunk{
				reasoningChunk("r"),
				doneChunk(llm.Response{Message: assistant(reasoningPart("r")), FinishReason: llm.FinishOther}),
			},
		},
		{
			name: "done without finish reason",
			body: `data: {"choices":[{"index":0,"delta":{"content":"x"}}]}` + "\n\ndata: [DONE]\n\n",
			want: []llm.Chunk{
				textChunk("x"),
				doneChunk(llm.Response{Message: assistant(llm.TextPart("x")), FinishReason: llm.FinishStop}),
			},
		},
		{
			name: "length with a tool call stays length",
			body: `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{\"x"}}]},"finish_reason":"length"}]}` + "\n\ndata: [DONE]\n\n",
			want: []llm.Chunk{
				startChunk(0, "a", "f"), argsChunk(0, `{"x`),
				doneChunk(llm.Response{Message: assistant(callPart("a", "f", `{"x`)), FinishReason: llm.FinishLength}),
			},
		},
		{
			name: "function_call finish reason",
			body: `data: {"choices":[{"index":0,"delta":{},"finish_reason":"function_call"}]}` + "\n\n",
			want: []llm.Chunk{
				doneChunk(llm.Response{Message: assistant(), FinishReason: llm.FinishToolCalls}),
			},
		},
		{
			name:    "empty stream",
			body:    "",
			wantErr: io.ErrUnexpectedEOF,
		},
		{
			name:    "cut inside an event",
			body:    `data: {"choices":[{"index":0,"delta":{"content":"x"}}]}` + "\n\n" + `data: {"choices":[{"ind`,
			want:    []llm.Chunk{textChunk("x")},
			wantErr: io.ErrUnexpectedEOF,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := decodeAll(strings.NewReader(tt.body), tt.jsonBody)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("chunks mismatch (-want +got):\n%s", diff)
			}
			if want, ok := tt.wantErr.(*llm.APIError); ok {
				apiErr, ok := errors.AsType[*llm.APIError](err)
				if !ok {
					t.Fatalf("err = %v, want an *llm.APIError", err)
				}
				if diff := cmp.Diff(want, apiErr); diff != "" {
					t.Errorf("APIError mismatch (-want +got):\n%s", diff)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestDecoderMalformedEvent(t *testing.T) {
	t.Parallel()
	_, err := decodeAll(strings.NewReader("data: {not json}\n\n"), false)
	var syntaxErr *json.SyntaxError
	if !errors.As(err, &syntaxErr) {
		t.Fatalf("err = %v, want a *json.SyntaxError", err)
	}
	if llm.IsRetryable(err) {
		t.Errorf("a malformed event is reported as retryable")
	}
	if !strings.Contains(err.Error(), "{not json}") {
		t.Errorf("error %q does not quote the event", err)
	}
}

func TestNormalizeFinish(t *testing.T) {
	t.Parallel()
	tests := []struct {
		reason   string
		hasCalls bool
		want     llm.FinishReason
	}{
		{"stop", false, llm.FinishStop},
		{"stop", true, llm.FinishToolCalls},
		{"", false, llm.FinishStop},
		{"", true, llm.FinishToolCalls},
		{"tool_calls", true, llm.FinishToolCalls},
		{"tool_calls", false, llm.FinishToolCalls},
		{"function_call", true, llm.FinishToolCalls},
		{"length", false, llm.FinishLength},
		{"length", true, llm.FinishLength},
		{"content_filter", false, llm.FinishContentFilter},
		{"error", false, llm.FinishOther},
		{"eos", true, llm.FinishOther},
	}
	for _, tt := range tests {
		if got := normalizeFinish(tt.reason, tt.hasCalls); got != tt.want {
			t.Errorf("normalizeFinish(%q, %v) = %q, want %q", tt.reason, tt.hasCalls, got, tt.want)
		}
	}
}

func TestRawString(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`"abc"`, "abc"},
		{`"a\"b\u00e9"`, `a"bé`},
		{`""`, ""},
		{`null`, ""},
		{``, ""},
		{`12`, ""},
		{`"bad\x"`, ""},
	}
	for _, tt := range tests {
		if got := rawString(json.RawMessage(tt.in)); got != tt.want {
			t.Errorf("rawString(%s) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestOptInt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    optInt
		wantErr bool
	}{
		{`0`, optInt{0, true}, false},
		{`17`, optInt{17, true}, false},
		{`-2`, optInt{-2, true}, false},
		{`null`, optInt{}, false},
		{`1.5`, optInt{}, true},
		{`"1"`, optInt{}, true},
		{`-`, optInt{}, true},
		{`1234567890`, optInt{}, true},
	}
	for _, tt := range tests {
		var got optInt
		err := got.UnmarshalJSON([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("UnmarshalJSON(%s) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}
