package anthropic_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hrns-dev/hrns/anthropic"
	"github.com/hrns-dev/hrns/anthropic/anthropictest"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// Builders of expected wire messages, as decoded from a request body.

type obj = map[string]any

func wireMsg(role string, blocks ...obj) obj {
	content := make([]any, len(blocks))
	for i, b := range blocks {
		content[i] = b
	}
	return obj{"role": role, "content": content}
}
func wireText(s string) obj { return obj{"type": "text", "text": s} }
func wireThinking(text, sig string) obj {
	return obj{"type": "thinking", "thinking": text, "signature": sig}
}
func wireRedacted(data string) obj { return obj{"type": "redacted_thinking", "data": data} }
func wireToolUse(id, name string, input obj) obj {
	return obj{"type": "tool_use", "id": id, "name": name, "input": input}
}

// wireResult is a tool_result holding one text block. A text starting with
// "~" matches any text that contains the rest.
func wireResult(id string, isError bool, text string) obj {
	b := obj{"type": "tool_result", "tool_use_id": id, "content": []any{wireText(text)}}
	if isError {
		b["is_error"] = true
	}
	return b
}

// cached marks a block with a cache breakpoint, which the default client
// puts on the last block of the conversation and on the last block of the
// user turn where the previous request ended.
func cached(b obj) obj {
	b["cache_control"] = obj{"type": "ephemeral"}
	return b
}

// containsText compares strings, except that a string starting with "~"
// matches any string containing the rest.
var containsText = cmp.FilterValues(func(x, y string) bool {
	return strings.HasPrefix(x, "~") || strings.HasPrefix(y, "~")
}, cmp.Comparer(func(x, y string) bool {
	if strings.HasPrefix(y, "~") {
		x, y = y, x
	}
	return strings.Contains(y, x[1:])
}))

// weatherTools is the toolset of the scenarios: one typed tool.
func weatherTools(t *testing.T) *loop.Toolset {
	type in struct {
		City string `json:"city" jsonschema:"the city"`
	}
	ts, err := loop.NewToolset(loop.NewTool("get_weather", "Current weather for a city.",
		func(_ context.Context, in in) (string, error) { return "18°C in " + in.City, nil }))
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// TestLoopEndToEnd drives the agent loop through the client against a
// scripted loopback server, and checks what the server received on each
// turn: tool_use blocks with valid input, tool_result blocks answering
// them, thinking sent back first with its signature, and the cache
// breakpoint on the last block.
func TestLoopEndToEnd(t *testing.T) {
	t.Parallel()
	const prompt = "What's the weather in Paris?"
	user := wireMsg("user", wireText(prompt))
	userCached := wireMsg("user", cached(wireText(prompt)))
	tests := []struct {
		name    string
		replies []anthropictest.Reply
		answer  string
		// requests holds the expected "messages" of each request sent.
		requests [][]obj
	}{
		{
			name: "single tool call then answer, thinking sent back",
			replies: []anthropictest.Reply{
				{
					RedactedThinking: "EmwKAhgBEgy3va3p",
					Thinking:         "The user wants the weather; call the tool.",
					Signature:        "EqQBCgIYAhIM1gbcDa9GJwZA",
					Text:             "Let me check.",
					ToolCalls:        []llm.ToolCall{anthropictest.ToolCall("toolu_01", "get_weather", `{"city": "Paris"}`)},
				},
				{Text: "It is 18°C in Paris."},
			},
			answer: "It is 18°C in Paris.",
			requests: [][]obj{
				{userCached},
				{
					userCached,
					wireMsg("assistant",
						wireRedacted("EmwKAhgBEgy3va3p"),
						wireThinking("The user wants the weather; call the tool.", "EqQBCgIYAhIM1gbcDa9GJwZA"),
						wireText("Let me check."),
						wireToolUse("toolu_01", "get_weather", obj{"city": "Paris"})),
					wireMsg("user", cached(wireResult("toolu_01", false, "18°C in Paris"))),
				},
			},
		},
		{
			name: "two calls in one message",
			replies: []anthropictest.Reply{
				{ToolCalls: []llm.ToolCall{
					anthropictest.ToolCall("toolu_a", "get_weather", `{"city": "Paris"}`),
					anthropictest.ToolCall("toolu_b", "get_weather", `{"city": "Rome"}`),
				}},
				{Text: "Paris 18°C, Rome 18°C."},
			},
			answer: "Paris 18°C, Rome 18°C.",
			requests: [][]obj{
				{userCached},
				{
					userCached,
					wireMsg("assistant",
						wireToolUse("toolu_a", "get_weather", obj{"city": "Paris"}),
						wireToolUse("toolu_b", "get_weather", obj{"city": "Rome"})),
					wireMsg("user",
						wireResult("toolu_a", false, "18°C in Paris"),
						cached(wireResult("toolu_b", false, "18°C in Rome"))),
				},
			},
		},
		{
			name: "invalid arguments then recovery",
			replies: []anthropictest.Reply{
				{ToolCalls: []llm.ToolCall{anthropictest.ToolCall("toolu_x", "get_weather", `{"city": "Par`)}, StopReason: "max_tokens"},
				{ToolCalls: []llm.ToolCall{anthropictest.ToolCall("toolu_y", "get_weather", `{"town": "Paris"}`)}},
				{ToolCalls: []llm.ToolCall{anthropictest.ToolCall("toolu_z", "get_weather", `{"city": "Paris"}`)}},
				{Text: "18°C."},
			},
			answer: "18°C.",
			requests: [][]obj{
				{userCached},
				{
					userCached,
					// The malformed input goes back as an empty object.
					wireMsg("assistant", wireToolUse("toolu_x", "get_weather", obj{})),
					wireMsg("user", cached(wireResult("toolu_x", true, "~not valid JSON"))),
				},
				{
					user,
					wireMsg("assistant", wireToolUse("toolu_x", "get_weather", obj{})),
					wireMsg("user", cached(wireResult("toolu_x", true, "~not valid JSON"))),
					wireMsg("assistant", wireToolUse("toolu_y", "get_weather", obj{"town": "Paris"})),
					wireMsg("user", cached(wireResult("toolu_y", true, "~town"))),
				},
				{
					user,
					wireMsg("assistant", wireToolUse("toolu_x", "get_weather", obj{})),
					wireMsg("user", wireResult("toolu_x", true, "~not valid JSON")),
					wireMsg("assistant", wireToolUse("toolu_y", "get_weather", obj{"town": "Paris"})),
					wireMsg("user", cached(wireResult("toolu_y", true, "~town"))),
					wireMsg("assistant", wireToolUse("toolu_z", "get_weather", obj{"city": "Paris"})),
					wireMsg("user", cached(wireResult("toolu_z", false, "18°C in Paris"))),
				},
			},
		},
		{
			name: "unknown tool",
			replies: []anthropictest.Reply{
				{Text: "Forecasting.", ToolCalls: []llm.ToolCall{anthropictest.ToolCall("toolu_u", "get_forecast", `{"city": "Paris"}`)}},
				{Text: "I can only tell the current weather."},
			},
			answer: "I can only tell the current weather.",
			requests: [][]obj{
				{userCached},
				{
					userCached,
					wireMsg("assistant", wireText("Forecasting."), wireToolUse("toolu_u", "get_forecast", obj{"city": "Paris"})),
					wireMsg("user", cached(wireResult("toolu_u", true, `~unknown tool "get_forecast"`))),
				},
			},
		},
		{
			name: "overloaded, retried",
			replies: []anthropictest.Reply{
				{Status: 529, Header: http.Header{"Retry-After-Ms": {"1"}}, Body: anthropictest.ErrorBody("overloaded_error", "Overloaded")},
				{Text: "Sunny."},
			},
			answer:   "Sunny.",
			requests: [][]obj{{userCached}, {userCached}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := anthropictest.NewServer(tt.replies...)
			defer srv.Close()
			client := &anthropic.Client{BaseURL: srv.URL(), APIKey: "sk-ant-test", Model: "claude-test", HTTPClient: srv.Client()}
			agent := loop.NewAgent(client, weatherTools(t), nil)
			res, err := agent.Run(context.Background(), []llm.Message{
				llm.SystemMessage("You report the weather."),
				llm.UserMessage(prompt),
			})
			if err != nil {
				t.Fatalf("run failed: %v", err)
			}
			if res.Status != loop.StatusCompleted || res.Answer != tt.answer {
				t.Errorf("status %q, answer %q; want completed, %q", res.Status, res.Answer, tt.answer)
			}
			reqs := srv.Requests()
			if len(reqs) != len(tt.requests) {
				t.Fatalf("server received %d requests, want %d", len(reqs), len(tt.requests))
			}
			for i, r := range reqs {
				var body struct {
					System   []obj `json:"system"`
					Messages []obj `json:"messages"`
					Tools    []obj `json:"tools"`
				}
				if err := json.Unmarshal(r.Body, &body); err != nil {
					t.Fatalf("request %d: %v", i+1, err)
				}
				if diff := cmp.Diff(tt.requests[i], body.Messages, containsText); diff != "" {
					t.Errorf("request %d messages mismatch (-want +got):\n%s", i+1, diff)
				}
				wantSystem := []obj{cached(wireText("You report the weather."))}
				if diff := cmp.Diff(wantSystem, body.System); diff != "" {
					t.Errorf("request %d system mismatch (-want +got):\n%s", i+1, diff)
				}
				if len(body.Tools) != 1 || body.Tools[0]["name"] != "get_weather" {
					t.Errorf("request %d tools = %v, want get_weather", i+1, body.Tools)
				}
				if got := r.Header.Get("X-Api-Key"); got != "sk-ant-test" {
					t.Errorf("request %d x-api-key = %q", i+1, got)
				}
			}
		})
	}
}
