package gemini

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/gemini/geminitest"
	"github.com/hrns-dev/hrns/llm"
)

// TestRoundTrip runs two turns against the scripted server: the first
// thinks and calls a tool with a signature (no call id, as Gemini 2.5
// does), the second answers. The second request must carry the call back
// with its signature on the functionCall part and the result matched by
// name.
func TestRoundTrip(t *testing.T) {
	srv := geminitest.NewServer(
		geminitest.Reply{Thoughts: "I should look it up.", ToolCalls: []llm.ToolCall{geminitest.ToolCall("", "lookup", `{"id":"42"}`)}, Signature: "c2lnLTE="},
		geminitest.Reply{Text: "Project 42 is hrns.", Signature: "c2lnLTI=", Usage: &llm.Usage{InputTokens: 100, OutputTokens: 10, CacheReadTokens: 64, ReasoningTokens: 4}},
	)
	defer srv.Close()
	c := &Client{BaseURL: srv.URL(), APIKey: "k-1", Model: "gemini-test", Headers: http.Header{"X-Extra": {"yes"}}}

	msgs := []llm.Message{llm.SystemMessage("Be brief."), llm.UserMessage("What is project 42?")}
	tools := []llm.ToolSpec{{Name: "lookup", InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`)}}
	resp, err := llm.Collect(c.Stream(t.Context(), &llm.Request{Messages: msgs, Tools: tools}))
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.Message.ToolCalls()
	if len(calls) != 1 || calls[0].Signature != "c2lnLTE=" || calls[0].Name != "lookup" || resp.FinishReason != llm.FinishToolCalls {
		t.Fatalf("response %+v", resp)
	}
	msgs = append(msgs, resp.Message, llm.Message{Role: llm.RoleTool, Parts: []llm.Part{{Kind: llm.PartToolResult,
		ToolResult: &llm.ToolResult{CallID: calls[0].ID, Content: []llm.Part{llm.TextPart("hrns")}}}}})
	resp, err = llm.Collect(c.Stream(t.Context(), &llm.Request{Messages: msgs, Tools: tools}))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Text() != "Project 42 is hrns." || resp.FinishReason != llm.FinishStop ||
		resp.Usage != (llm.Usage{InputTokens: 100, OutputTokens: 10, CacheReadTokens: 64, ReasoningTokens: 4}) {
		t.Fatalf("response %+v", resp)
	}
	if last := resp.Message.Parts[len(resp.Message.Parts)-1]; last.Reasoning == nil || last.Reasoning.Signature != "c2lnLTI=" {
		t.Errorf("text signature not kept: %+v", resp.Message.Parts)
	}

	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	for _, r := range reqs {
		if r.Model != "gemini-test" || r.Header.Get("X-Goog-Api-Key") != "k-1" || r.Header.Get("X-Extra") != "yes" ||
			r.Header.Get("Accept") != "text/event-stream" || r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("request %s %v", r.Model, r.Header)
		}
	}
	var body struct {
		Contents []content
	}
	if err := json.Unmarshal(reqs[1].Body, &body); err != nil {
		t.Fatal(err)
	}
	want := []content{
		{Role: "user", Parts: []part{textPart("What is project 42?")}},
		{Role: "model", Parts: []part{
			{Text: ptr("I should look it up."), Thought: true},
			{FunctionCall: &functionCall{Name: "lookup", Args: json.RawMessage(`{"id":"42"}`)}, ThoughtSignature: "c2lnLTE="},
		}},
		{Role: "user", Parts: []part{{FunctionResponse: &functionResponse{Name: "lookup", Response: map[string]string{"output": "hrns"}}}}},
	}
	if diff := cmp.Diff(want, body.Contents); diff != "" {
		t.Errorf("second request contents (-want +got):\n%s", diff)
	}
}

func ptr(s string) *string { return &s }

// TestCallIDsGoBack checks that ids the API gave travel back on the call
// and its response.
func TestCallIDsGoBack(t *testing.T) {
	srv := geminitest.NewServer(
		geminitest.Reply{ToolCalls: []llm.ToolCall{geminitest.ToolCall("fc-9", "f", `{}`), geminitest.ToolCall("fc-10", "f", `{"a":1}`)}, Signature: "s"},
		geminitest.Reply{Text: "ok"},
	)
	defer srv.Close()
	c := &Client{BaseURL: srv.URL(), Model: "gemini-test"}
	msgs := []llm.Message{llm.UserMessage("go")}
	resp, err := llm.Collect(c.Stream(t.Context(), &llm.Request{Messages: msgs}))
	if err != nil {
		t.Fatal(err)
	}
	msgs = append(msgs, resp.Message, llm.Message{Role: llm.RoleTool, Parts: []llm.Part{
		{Kind: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "fc-9", Content: []llm.Part{llm.TextPart("one")}}},
		{Kind: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "fc-10", IsError: true, Content: []llm.Part{llm.TextPart("two")}}},
	}})
	if _, err := llm.Collect(c.Stream(t.Context(), &llm.Request{Messages: msgs})); err != nil {
		t.Fatal(err)
	}
	var body struct{ Contents []content }
	json.Unmarshal(srv.Requests()[1].Body, &body)
	got := body.Contents[2].Parts
	if len(got) != 2 || got[0].FunctionResponse.ID != "fc-9" || got[1].FunctionResponse.ID != "fc-10" || got[1].FunctionResponse.Response["error"] != "two" {
		t.Errorf("responses %+v", got)
	}
	if calls := body.Contents[1].Parts; calls[0].FunctionCall.ID != "fc-9" || calls[0].ThoughtSignature != "s" || calls[1].ThoughtSignature != "" {
		t.Errorf("calls %+v", calls)
	}
}

func TestModelPath(t *testing.T) {
	for model, want := range map[string]string{
		"gemini-2.5-flash":        "models/gemini-2.5-flash",
		"models/gemini-2.5-flash": "models/gemini-2.5-flash",
		"tunedModels/my model":    "tunedModels/my%20model",
	} {
		got, err := modelResource(model)
		if err != nil || got != want {
			t.Errorf("modelResource(%q) = %q, %v; want %q", model, got, err, want)
		}
	}
	for _, bad := range []string{"", "a/", "/a", "../x", "a?b", "a#b", "x:streamGenerateContent"} {
		if _, err := modelResource(bad); err == nil {
			t.Errorf("modelResource(%q) accepted", bad)
		}
	}
}

func TestListModels(t *testing.T) {
	srv := geminitest.NewServer()
	defer srv.Close()
	models, err := (&Client{BaseURL: srv.URL() + "/"}).ListModels(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]llm.ModelInfo{{ID: "gemini-test", OwnedBy: "google"}}, models); diff != "" {
		t.Error(diff)
	}
}

func TestNewFromEnv(t *testing.T) {
	t.Setenv("GEMINI_API_KEY", "")
	t.Setenv("GOOGLE_API_KEY", "google")
	t.Setenv("GEMINI_BASE_URL", "http://x")
	t.Setenv("GEMINI_MODEL", "m")
	if c := NewFromEnv(); c.APIKey != "google" || c.BaseURL != "http://x" || c.Model != "m" {
		t.Errorf("%+v", c)
	}
	t.Setenv("GEMINI_API_KEY", "gemini")
	if c := NewFromEnv(); c.APIKey != "gemini" {
		t.Errorf("%+v", c)
	}
	h := http.Header{"A": {"1"}}
	c := New(&Options{APIKey: "k", Headers: h, IncludeThoughts: true})
	h.Set("A", "2")
	if c.APIKey != "k" || c.Headers.Get("A") != "1" || !c.IncludeThoughts || New(nil) == nil {
		t.Errorf("%+v", c)
	}
}

// TestCancel stops a stream when the context ends, with the context's
// error.
func TestCancel(t *testing.T) {
	srv := geminitest.NewServer(geminitest.Reply{Text: "one two three four five six seven eight nine ten"})
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c := &Client{BaseURL: srv.URL(), Model: "gemini-test"}
	var err error
	for ch, e := range c.Stream(ctx, userRequest("hi")) {
		if e != nil {
			err = e
			break
		}
		if ch.Kind == llm.ChunkText {
			cancel()
		}
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}
