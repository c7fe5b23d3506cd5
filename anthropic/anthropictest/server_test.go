package anthropictest_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/anthropic"
	"github.com/hrns-dev/hrns/anthropic/anthropictest"
	"github.com/hrns-dev/hrns/llm"
)

// TestRoundTrip checks that what the server encodes, the client decodes
// into the scripted reply.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	calls := []llm.ToolCall{
		anthropictest.ToolCall("toolu_1", "read_file", `{"path": "a very long file name, longer than one delta.txt"}`),
		anthropictest.ToolCall("toolu_2", "list", ``),
	}
	srv := anthropictest.NewServer(
		anthropictest.Reply{
			RedactedThinking: "cmVkYWN0ZWQ=",
			Thinking:         "Two files to look at, é—😀 and more.",
			Signature:        "c2lnbmF0dXJl",
			Text:             "Reading <both> & listing.",
			ToolCalls:        calls,
			Usage:            &llm.Usage{InputTokens: 1000, OutputTokens: 50, CacheReadTokens: 900, CacheWriteTokens: 60},
		},
		anthropictest.Reply{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"4"}}, Body: anthropictest.ErrorBody("rate_limit_error", "slow down")},
	)
	defer srv.Close()
	c := &anthropic.Client{BaseURL: srv.URL(), Model: "claude-test", HTTPClient: srv.Client()}
	resp, err := llm.Collect(c.Stream(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserMessage("go")}}))
	if err != nil {
		t.Fatal(err)
	}
	want := &llm.Response{
		ID: "msg_test", Model: "claude-test",
		Message: llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{
			{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{Redacted: "cmVkYWN0ZWQ="}},
			{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{Text: "Two files to look at, é—😀 and more.", Signature: "c2lnbmF0dXJl"}},
			llm.TextPart("Reading <both> & listing."),
			{Kind: llm.PartToolCall, ToolCall: &calls[0]},
			{Kind: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "toolu_2", Name: "list", Arguments: llm.Arguments("{}")}},
		}},
		Usage:        llm.Usage{InputTokens: 1000, OutputTokens: 50, CacheReadTokens: 900, CacheWriteTokens: 60},
		FinishReason: llm.FinishToolCalls,
	}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response mismatch (-want +got):\n%s", diff)
	}

	_, err = llm.Collect(c.Stream(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserMessage("again")}}))
	if !errors.Is(err, llm.ErrRateLimited) || llm.RetryAfter(err) != 4e9 {
		t.Errorf("err = %v, want a rate limit asking to wait 4s", err)
	}
	_, err = llm.Collect(c.Stream(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserMessage("more")}}))
	if !errors.Is(err, llm.ErrOverloaded) {
		t.Errorf("err = %v past the script, want a server error", err)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("server recorded %d requests, want 3", n)
	}
	models, err := c.ListModels(context.Background())
	if err != nil || len(models) != 1 || models[0].ID != "claude-test" {
		t.Errorf("ListModels = %v, %v", models, err)
	}
}
