package responses

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
)

func TestStreamTestdata(t *testing.T) {
	tests := []struct {
		file   string
		want   summary
		parts  []llm.Part
		usage  llm.Usage
		finish llm.FinishReason
	}{
		{
			file:   "text.sse",
			want:   summary{text: "Hello, wörld!"},
			parts:  []llm.Part{llm.TextPart("Hello, wörld!")},
			usage:  llm.Usage{InputTokens: 12, OutputTokens: 5},
			finish: llm.FinishStop,
		},
		{
			file:   "tool_call.sse",
			want:   summary{calls: []string{`0 call_abc get_weather {"city":"Paris"}`}},
			parts:  []llm.Part{callPart("call_abc", "get_weather", `{"city":"Paris"}`)},
			usage:  llm.Usage{InputTokens: 50, OutputTokens: 18},
			finish: llm.FinishToolCalls,
		},
		{
			file: "parallel_tool_calls.sse",
			want: summary{text: "Checking both.", calls: []string{
				`0 call_1 get_weather {"city":"Paris"}`,
				`1 call_2 get_time {"tz":"CET"}`,
			}},
			parts: []llm.Part{
				llm.TextPart("Checking both."),
				callPart("call_1", "get_weather", `{"city":"Paris"}`),
				callPart("call_2", "get_time", `{"tz":"CET"}`),
			},
			usage:  llm.Usage{InputTokens: 80, OutputTokens: 40, CacheReadTokens: 64},
			finish: llm.FinishToolCalls,
		},
		{
			file: "reasoning.sse",
			want: summary{
				reasoning: "**Planning**\n\nI should check the weather.\n\n**Calling** the tool.",
				calls:     []string{`0 call_w get_weather {"city":"Oslo"}`},
			},
			parts: []llm.Part{
				{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{
					Text:     "**Planning**\n\nI should check the weather.\n\n**Calling** the tool.",
					Redacted: "gAAAAABpENCRYPTED==",
				}},
				callPart("call_w", "get_weather", `{"city":"Oslo"}`),
			},
			usage:  llm.Usage{InputTokens: 1200, OutputTokens: 300, CacheReadTokens: 1024, ReasoningTokens: 256},
			finish: llm.FinishToolCalls,
		},
		{
			// The call is closed, and listed in the final response, under
			// other item ids than the one it started with: its call_id
			// says it is the same call, made once.
			file:   "call_id_identity.sse",
			want:   summary{calls: []string{`0 call_abc get_weather {"city":"Paris"}`}},
			parts:  []llm.Part{callPart("call_abc", "get_weather", `{"city":"Paris"}`)},
			usage:  llm.Usage{InputTokens: 50, OutputTokens: 18},
			finish: llm.FinishToolCalls,
		},
		{
			file:   "refusal.sse",
			want:   summary{text: "I can't help with that."},
			parts:  []llm.Part{llm.TextPart("I can't help with that.")},
			usage:  llm.Usage{InputTokens: 9, OutputTokens: 7},
			finish: llm.FinishContentFilter,
		},
		{
			file:   "incomplete.sse",
			want:   summary{text: "The answer is"},
			parts:  []llm.Part{llm.TextPart("The answer is")},
			usage:  llm.Usage{InputTokens: 10, OutputTokens: 16, ReasoningTokens: 12},
			finish: llm.FinishLength,
		},
		{
			file: "whole_items.sse",
			want: summary{reasoning: "a\n\nb", text: "Hi", calls: []string{"0 call_x noop {}"}},
			parts: []llm.Part{
				{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{Text: "a\n\nb", Redacted: "enc"}},
				llm.TextPart("Hi"),
				callPart("call_x", "noop", "{}"),
			},
			usage:  llm.Usage{InputTokens: 3, OutputTokens: 4},
			finish: llm.FinishToolCalls,
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			srv := serveSSE(t, readTestdata(t, tt.file))
			chunks, err := collect(testClient(srv).Stream(t.Context(), userRequest("hi")))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, summarize(chunks), cmp.AllowUnexported(summary{})); diff != "" {
				t.Errorf("chunks (-want +got):\n%s", diff)
			}
			last := chunks[len(chunks)-1]
			if last.Kind != llm.ChunkDone {
				t.Fatalf("last chunk is %v", last.Kind)
			}
			resp := last.Response
			if diff := cmp.Diff(tt.parts, resp.Message.Parts); diff != "" {
				t.Errorf("parts (-want +got):\n%s", diff)
			}
			if resp.Usage != tt.usage {
				t.Errorf("usage = %+v, want %+v", resp.Usage, tt.usage)
			}
			if resp.FinishReason != tt.finish {
				t.Errorf("finish = %q, want %q", resp.FinishReason, tt.finish)
			}
			if resp.ID != "resp_01" || resp.Model != "gpt-5-2025-08-07" || resp.Message.Role != llm.RoleAssistant {
				t.Errorf("id %q, model %q, role %q", resp.ID, resp.Model, resp.Message.Role)
			}
		})
	}
}

func callPart(id, name, args string) llm.Part {
	return llm.Part{Kind: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: id, Name: name, Arguments: llm.Arguments(args)}}
}

func TestStreamErrors(t *testing.T) {
	t.Run("error event", func(t *testing.T) {
		srv := serveSSE(t, readTestdata(t, "stream_error.sse"))
		chunks, err := collect(testClient(srv).Stream(t.Context(), userRequest("hi")))
		apiErr, ok := errors.AsType[*llm.APIError](err)
		if !ok {
			t.Fatalf("err = %v, want an *llm.APIError", err)
		}
		if apiErr.StatusCode != 0 || apiErr.Code != "server_error" || apiErr.RequestID != "req_123" || apiErr.Provider != "openai-responses" {
			t.Errorf("err = %+v", apiErr)
		}
		if !errors.Is(err, llm.ErrOverloaded) || !llm.IsRetryable(err) {
			t.Errorf("a server_error event is not overloaded and retryable: %v", err)
		}
		if s := summarize(chunks); s.text != "Partial" {
			t.Errorf("text before the error = %q", s.text)
		}
	})
	t.Run("response.failed", func(t *testing.T) {
		srv := serveSSE(t, readTestdata(t, "failed.sse"))
		_, err := collect(testClient(srv).Stream(t.Context(), userRequest("hi")))
		if !errors.Is(err, llm.ErrRateLimited) || !llm.IsRetryable(err) {
			t.Errorf("err = %v, want a retryable rate limit", err)
		}
		if !strings.Contains(err.Error(), "Rate limit reached") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("truncated", func(t *testing.T) {
		srv := serveSSE(t, readTestdata(t, "truncated.sse"))
		chunks, err := collect(testClient(srv).Stream(t.Context(), userRequest("hi")))
		if !errors.Is(err, io.ErrUnexpectedEOF) || !llm.IsRetryable(err) {
			t.Errorf("err = %v, want io.ErrUnexpectedEOF", err)
		}
		if s := summarize(chunks); len(s.calls) != 1 || s.calls[0] != `0 call_t get_weather {"city":` {
			t.Errorf("chunks before the cut: %+v", s)
		}
	})
	t.Run("no terminal event", func(t *testing.T) {
		body := readTestdata(t, "text.sse")
		cut := strings.Index(string(body), "event: response.completed")
		srv := serveSSE(t, body[:cut])
		_, err := collect(testClient(srv).Stream(t.Context(), userRequest("hi")))
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("err = %v, want io.ErrUnexpectedEOF", err)
		}
	})
	t.Run("context length in stream", func(t *testing.T) {
		srv := serveSSE(t, []byte(`data: {"type":"error","code":null,"message":"Your input exceeds the context window of this model."}`+"\n\n"))
		_, err := collect(testClient(srv).Stream(t.Context(), userRequest("hi")))
		if !errors.Is(err, llm.ErrContextLength) || llm.IsRetryable(err) {
			t.Errorf("err = %v, want a context length error", err)
		}
	})
	t.Run("arguments for an unknown item", func(t *testing.T) {
		srv := serveSSE(t, []byte(`data: {"type":"response.function_call_arguments.delta","item_id":"fc_9","output_index":0,"delta":"{}"}`+"\n\n"))
		_, err := collect(testClient(srv).Stream(t.Context(), userRequest("hi")))
		if err == nil || !strings.Contains(err.Error(), "fc_9") {
			t.Errorf("err = %v", err)
		}
	})
}

// Arguments given whole only in the done events are streamed as one delta;
// ids that repeat or are missing are made unique.
func TestStreamArgumentsAndIDs(t *testing.T) {
	body := `event: response.output_item.added
data: {"type":"response.output_item.added","output_index":0,"item":{"id":"fc_a","type":"function_call","arguments":"","call_id":"dup","name":"f"}}

event: response.output_item.added
data: {"type":"response.output_item.added","output_index":1,"item":{"id":"fc_b","type":"function_call","arguments":"","call_id":"dup","name":"g"}}

event: response.function_call_arguments.delta
data: {"type":"response.function_call_arguments.delta","item_id":"fc_b","output_index":1,"delta":"{\"x\""}

event: response.function_call_arguments.done
data: {"type":"response.function_call_arguments.done","item_id":"fc_b","output_index":1,"arguments":"{\"x\":1}"}

event: response.output_item.done
data: {"type":"response.output_item.done","output_index":0,"item":{"id":"fc_a","type":"function_call","arguments":"{\"y\":2}","call_id":"dup","name":"f"}}

event: response.output_item.added
data: {"type":"response.output_item.added","output_index":2,"item":{"id":"fc_c","type":"function_call","arguments":"","call_id":"","name":"h"}}

event: response.output_item.done
data: {"type":"response.output_item.done","output_index":2,"item":{"id":"fc_c","type":"function_call","arguments":"not json","call_id":"","name":"h"}}

event: response.completed
data: {"type":"response.completed","response":{"id":"r","status":"completed","output":[]}}

`
	srv := serveSSE(t, []byte(body))
	chunks, err := collect(testClient(srv).Stream(t.Context(), userRequest("hi")))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`0 dup f {"y":2}`, `1 call_1 g {"x":1}`, `2 call_2 h not json`}
	if diff := cmp.Diff(want, summarize(chunks).calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	resp := chunks[len(chunks)-1].Response
	var got []string
	for _, c := range resp.Message.ToolCalls() {
		got = append(got, c.ID+" "+string(c.Arguments))
	}
	if diff := cmp.Diff([]string{`dup {"y":2}`, `call_1 {"x":1}`, `call_2 not json`}, got); diff != "" {
		t.Errorf("response calls (-want +got):\n%s", diff)
	}
}

// A server that answers with one JSON response instead of a stream.
func TestJSONBody(t *testing.T) {
	srv := serveJSON(t, 200, `{"id":"resp_j","object":"response","status":"completed","model":"m","output":[{"id":"msg","type":"message","role":"assistant","content":[{"type":"output_text","text":"whole"}]}],"usage":{"input_tokens":1,"output_tokens":2}}`)
	resp, err := llm.Collect(testClient(srv).Stream(t.Context(), userRequest("hi")))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Text() != "whole" || resp.ID != "resp_j" || resp.Usage.OutputTokens != 2 || resp.FinishReason != llm.FinishStop {
		t.Errorf("resp = %+v", resp)
	}
}
