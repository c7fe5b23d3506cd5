package gemini

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
)

func reasoningPart(text, sig string) llm.Part {
	return llm.Part{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{Text: text, Signature: sig}}
}

func callPart(id, name, args, sig string) llm.Part {
	return llm.Part{Kind: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: id, Name: name, Arguments: llm.Arguments(args), Signature: sig}}
}

// TestStreamTestdata decodes the recorded wire streams under testdata
// through a real client over loopback.
func TestStreamTestdata(t *testing.T) {
	tests := []struct {
		file    string
		want    summary
		parts   []llm.Part
		finish  llm.FinishReason
		usage   llm.Usage
		id      string
		model   string
		wantErr error  // a class the error must match
		errText string // a substring of the error
	}{
		{file: "text.sse", want: summary{text: "Hello, world!"},
			parts: []llm.Part{llm.TextPart("Hello, world!")}, finish: llm.FinishStop,
			usage: llm.Usage{InputTokens: 12, OutputTokens: 4}, id: "r1abc", model: "gemini-2.5-flash"},
		{file: "function_call.sse",
			want: summary{text: "Let me check.", calls: []string{`0 gemini_call_r2_0 get_weather {"city":"Paris","unit":"celsius"}`}},
			parts: []llm.Part{llm.TextPart("Let me check."),
				callPart("gemini_call_r2_0", "get_weather", `{"city":"Paris","unit":"celsius"}`, "CiQBjz1rX2sig1==")},
			finish: llm.FinishToolCalls, usage: llm.Usage{InputTokens: 40, OutputTokens: 18}, id: "r2", model: "gemini-2.5-flash"},
		{file: "parallel_calls.sse",
			want: summary{calls: []string{`0 fc-a1 get_weather {"city":"Tokyo"}`, `1 fc-b2 get_weather {"city":"Lima"}`, `2 fc-c3 get_time {}`}},
			parts: []llm.Part{
				callPart("fc-a1", "get_weather", `{"city":"Tokyo"}`, "c2lnLXBhcmFsbGVs"),
				callPart("fc-b2", "get_weather", `{"city":"Lima"}`, ""),
				callPart("fc-c3", "get_time", `{}`, ""),
			},
			finish: llm.FinishToolCalls, usage: llm.Usage{InputTokens: 50, OutputTokens: 30}, id: "r3", model: "gemini-3-pro-preview"},
		{file: "thinking.sse",
			want: summary{reasoning: "**Weighing the options**\n\nThe user wants a short answer.", text: "Forty-two."},
			parts: []llm.Part{reasoningPart("**Weighing the options**\n\nThe user wants a short answer.", ""),
				llm.TextPart("Forty-two."), reasoningPart("", "dGV4dC1zaWc=")},
			finish: llm.FinishStop, usage: llm.Usage{InputTokens: 30, OutputTokens: 123, ReasoningTokens: 120}, id: "r4", model: "gemini-2.5-pro"},
		{file: "usage_cache.sse", want: summary{text: "Cached."}, parts: []llm.Part{llm.TextPart("Cached.")}, finish: llm.FinishStop,
			usage: llm.Usage{InputTokens: 5010, OutputTokens: 42, CacheReadTokens: 4096, ReasoningTokens: 40}, id: "r5", model: "gemini-2.5-flash"},
		{file: "max_tokens.sse", want: summary{text: "The list is long: one, two,"}, parts: []llm.Part{llm.TextPart("The list is long: one, two,")},
			finish: llm.FinishLength, usage: llm.Usage{InputTokens: 8, OutputTokens: 8}, id: "r6", model: "gemini-2.5-flash"},
		{file: "lf_no_final_blank.sse", want: summary{text: "LF framing."}, parts: []llm.Part{llm.TextPart("LF framing.")},
			finish: llm.FinishStop, usage: llm.Usage{InputTokens: 3, OutputTokens: 3}, id: "r8", model: "gemini-2.0-flash"},
		{file: "safety_block.sse", wantErr: llm.ErrContentFiltered, errText: "the prompt was blocked (SAFETY)"},
		{file: "safety_finish.sse", want: summary{text: "Here is how"}, wantErr: llm.ErrContentFiltered, errText: "finishReason SAFETY"},
		{file: "stream_error.sse", want: summary{text: "Partial"}, wantErr: llm.ErrOverloaded, errText: "UNAVAILABLE"},
		{file: "truncated.sse", want: summary{text: "Cut"}, wantErr: io.ErrUnexpectedEOF, errText: "ended inside an event"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			srv, _ := serveSSE(t, readTestdata(t, tt.file))
			chunks, err := collect(testClient(srv).Stream(t.Context(), userRequest("hi")))
			if got := summarize(chunks); !cmp.Equal(got, tt.want, cmp.AllowUnexported(summary{})) {
				t.Errorf("chunks: %s", cmp.Diff(tt.want, got, cmp.AllowUnexported(summary{})))
			}
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.errText) {
					t.Fatalf("err = %v, want %v containing %q", err, tt.wantErr, tt.errText)
				}
				if llm.IsRetryable(err) != (tt.wantErr == llm.ErrOverloaded || tt.wantErr == io.ErrUnexpectedEOF) {
					t.Errorf("IsRetryable(%v) = %v", err, llm.IsRetryable(err))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			last := chunks[len(chunks)-1]
			if last.Kind != llm.ChunkDone {
				t.Fatalf("last chunk %v", last.Kind)
			}
			r := last.Response
			if diff := cmp.Diff(tt.parts, r.Message.Parts); diff != "" {
				t.Errorf("parts (-want +got):\n%s", diff)
			}
			if r.FinishReason != tt.finish || r.Usage != tt.usage || r.ID != tt.id || r.Model != tt.model {
				t.Errorf("finish %q usage %+v id %q model %q", r.FinishReason, r.Usage, r.ID, r.Model)
			}
		})
	}
}

// TestStreamBlockedErrors checks the error values of safety blocks.
func TestStreamBlockedErrors(t *testing.T) {
	srv, _ := serveSSE(t, readTestdata(t, "safety_block.sse"))
	_, err := collect(testClient(srv).Stream(t.Context(), userRequest("hi")))
	apiErr, ok := errors.AsType[*llm.APIError](err)
	if !ok || apiErr.Provider != "gemini" || apiErr.Code != "SAFETY" || apiErr.StatusCode != 0 || apiErr.RequestID != "req_123" {
		t.Fatalf("err = %#v", err)
	}
	if errors.Is(err, llm.ErrBadRequest) || errors.Is(err, llm.ErrOverloaded) || llm.IsRetryable(err) {
		t.Errorf("a block is in the wrong class: %v", err)
	}
}

// TestStreamProtocol covers streams that break the protocol or end in
// unusual ways.
func TestStreamProtocol(t *testing.T) {
	const ok = `{"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":"STOP"}]}`
	tests := []struct {
		name, body string
		errText    string // empty: success
		finish     llm.FinishReason
	}{
		{"no finish", "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}]}}]}\n\n", "ended before the response was complete", ""},
		{"empty body", "", "ended before the response was complete", ""},
		{"not JSON", "data: {oops}\n\n", "decoding stream event", ""},
		{"content after finish", "data: " + ok + "\n\ndata: " + ok + "\n\n", "content after the candidate finished", ""},
		{"empty part after finish", "data: " + ok + "\n\ndata: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"\"}]}}]}\n\n", "", llm.FinishStop},
		{"usage after finish", "data: " + ok + "\n\ndata: {\"usageMetadata\":{\"promptTokenCount\":1}}\n\n", "", llm.FinishStop},
		{"other candidates ignored", "data: {\"candidates\":[{\"index\":1,\"content\":{\"parts\":[{\"text\":\"b\"}]}},{\"index\":0,\"content\":{\"parts\":[{\"text\":\"a\"}]},\"finishReason\":\"STOP\"}]}\n\n", "", llm.FinishStop},
		{"malformed call", "data: {\"candidates\":[{\"finishReason\":\"MALFORMED_FUNCTION_CALL\",\"finishMessage\":\"bad\"}]}\n\n", "", llm.FinishOther},
		{"done marker and comments", ": keep-alive\n\ndata: [DONE]\n\ndata: " + ok + "\n\n", "", llm.FinishStop},
		{"rate limit in stream", "data: {\"error\":{\"code\":429,\"message\":\"slow\",\"status\":\"RESOURCE_EXHAUSTED\"}}\n\n", "RESOURCE_EXHAUSTED", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := serveSSE(t, []byte(tt.body))
			resp, err := llm.Collect(testClient(srv).Stream(t.Context(), userRequest("hi")))
			if tt.errText != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errText) {
					t.Fatalf("err = %v, want %q", err, tt.errText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.FinishReason != tt.finish || resp.Message.Text() != "a" && tt.finish != llm.FinishOther {
				t.Errorf("response %+v", resp)
			}
		})
	}
}

// TestStreamCallIDs checks the IDs given to calls: the API's when unique,
// made up otherwise, unique within the response.
func TestStreamCallIDs(t *testing.T) {
	body := "data: {\"responseId\":\"x/y z\",\"candidates\":[{\"content\":{\"parts\":[" +
		`{"functionCall":{"name":"a"}},{"functionCall":{"id":"k","name":"b","args":null}},{"functionCall":{"id":"k","name":"c","args":{"n":1}}},{"functionCall":{"id":"gemini_call_xyz_0","name":"d"}}` +
		"]},\"finishReason\":\"STOP\"}]}\n\n"
	srv, _ := serveSSE(t, []byte(body))
	chunks, err := collect(testClient(srv).Stream(t.Context(), userRequest("hi")))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"0 gemini_call_xyz_0 a {}", "1 k b {}", `2 gemini_call_xyz_2 c {"n":1}`, "3 gemini_call_xyz_3 d {}"}
	if diff := cmp.Diff(want, summarize(chunks).calls); diff != "" {
		t.Error(diff)
	}
}

// TestJSONBody reads an answer sent as JSON (an array of responses, as
// streamGenerateContent gives without alt=sse, or one response).
func TestJSONBody(t *testing.T) {
	for _, body := range []string{
		`[{"candidates":[{"content":{"parts":[{"text":"Hel"}]}}]},{"candidates":[{"content":{"parts":[{"text":"lo"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":2,"candidatesTokenCount":1}}]`,
		`{"candidates":[{"content":{"parts":[{"text":"Hello"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":2,"candidatesTokenCount":1}}`,
	} {
		var d decoder
		chunks, err := decodeAll(&d, strings.NewReader(body), true)
		if err != nil {
			t.Fatal(err)
		}
		r := chunks[len(chunks)-1].Response
		if r == nil || r.Message.Text() != "Hello" || r.Usage.InputTokens != 2 {
			t.Errorf("%s: %+v", body, r)
		}
	}
	var d decoder
	if _, err := decodeAll(&d, strings.NewReader(`{"error":{"code":400,"message":"bad","status":"INVALID_ARGUMENT"}}`), true); !errors.Is(err, llm.ErrBadRequest) && err == nil {
		t.Errorf("err = %v", err)
	}
}
