package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/hrns-dev/hrns/anthropic"
	"github.com/hrns-dev/hrns/anthropic/anthropictest"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// fakeAnthropic starts a loopback server that answers messages with the
// given events, as the Messages API streams them.
func fakeAnthropic(events ...string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range events {
			var head struct{ Type string }
			json.Unmarshal([]byte(ev), &head)
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", head.Type, ev)
		}
	}))
}

// Streaming a text answer and printing it as it arrives.
func Example() {
	srv := fakeAnthropic(
		`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":9,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":", world!"}}`,
		`{"type":"content_block_stop","index":0}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":4}}`,
		`{"type":"message_stop"}`,
	)
	defer srv.Close()

	client := &anthropic.Client{BaseURL: srv.URL, APIKey: "sk-ant-example", Model: "claude-sonnet-4-5"}
	req := &llm.Request{Messages: []llm.Message{
		llm.SystemMessage("You are friendly."),
		llm.UserMessage("Greet the world."),
	}}
	for chunk, err := range client.Stream(context.Background(), req) {
		if err != nil {
			log.Fatal(err)
		}
		switch chunk.Kind {
		case llm.ChunkText:
			fmt.Print(chunk.Text)
		case llm.ChunkDone:
			r := chunk.Response
			fmt.Printf("\n[%s after %d tokens]\n", r.FinishReason, r.Usage.TotalTokens())
		}
	}
	// Output:
	// Hello, world!
	// [stop after 13 tokens]
}

// Collecting a response with thinking and a tool call, then answering the
// call. The thinking part keeps its signature, so it can be sent back on
// the next turn as the API requires.
func ExampleClient_Stream_toolCalls() {
	srv := anthropictest.NewServer(anthropictest.Reply{
		Thinking:  "The user wants the weather in Paris.",
		Signature: "EqQBCgIYAhIM",
		ToolCalls: []llm.ToolCall{anthropictest.ToolCall("toolu_01", "get_weather", `{"city": "Paris"}`)},
	})
	defer srv.Close()

	client := &anthropic.Client{BaseURL: srv.URL(), Model: "claude-sonnet-4-5"}
	history := []llm.Message{llm.UserMessage("Weather in Paris?")}
	resp, err := llm.Collect(client.Stream(context.Background(), &llm.Request{
		Messages: history,
		Tools: []llm.ToolSpec{{
			Name:        "get_weather",
			Description: "Current weather for a city.",
			InputSchema: []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		}},
	}))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("finish:", resp.FinishReason)
	for _, p := range resp.Message.Parts {
		if p.Kind == llm.PartReasoning {
			fmt.Printf("thinking: %q (signed: %v)\n", p.Reasoning.Text, p.Reasoning.Signature != "")
		}
	}
	history = append(history, resp.Message)
	for _, call := range resp.Message.ToolCalls() {
		fmt.Printf("call %s: %s(%s)\n", call.ID, call.Name, call.Arguments)
		history = append(history, llm.ToolResultMessage(call.ID, "18°C and cloudy"))
	}
	fmt.Println("messages for the next turn:", len(history))
	// Output:
	// finish: tool_calls
	// thinking: "The user wants the weather in Paris." (signed: true)
	// call toolu_01: get_weather({"city": "Paris"})
	// messages for the next turn: 3
}

// Telling failures apart with the sentinels of package llm.
func ExampleClient_Stream_errors() {
	srv := anthropictest.NewServer(anthropictest.Reply{
		Status: 529,
		Header: http.Header{"Retry-After": {"2"}, "Request-Id": {"req_011CSHp3"}},
		Body:   anthropictest.ErrorBody("overloaded_error", "Overloaded"),
	})
	defer srv.Close()

	client := &anthropic.Client{BaseURL: srv.URL(), Model: "claude-sonnet-4-5"}
	_, err := llm.Collect(client.Stream(context.Background(), &llm.Request{
		Messages: []llm.Message{llm.UserMessage("Hi")},
	}))
	fmt.Println(err)
	fmt.Println("overloaded:", errors.Is(err, llm.ErrOverloaded))
	fmt.Println("retry:", llm.IsRetryable(err), "after", llm.RetryAfter(err))
	if apiErr, ok := errors.AsType[*llm.APIError](err); ok {
		fmt.Println("request id:", apiErr.RequestID)
	}

	// Content the API cannot take fails before anything is sent.
	_, err = llm.Collect(client.Stream(context.Background(), &llm.Request{
		Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{
			llm.DocumentPart("audio/wav", "memo.wav", []byte("RIFF")),
		}}},
	}))
	fmt.Println(err)
	fmt.Println("unsupported:", errors.Is(err, llm.ErrUnsupported))
	// Output:
	// anthropic: HTTP 529 overloaded_error: Overloaded
	// overloaded: true
	// retry: true after 2s
	// request id: req_011CSHp3
	// anthropic: message 0 (user): "audio/wav" documents are not supported by the Anthropic Messages API: unsupported feature
	// unsupported: true
}

func ExampleClient_ListModels() {
	srv := anthropictest.NewServer()
	defer srv.Close()

	client := &anthropic.Client{BaseURL: srv.URL(), APIKey: "sk-ant-example"}
	models, err := client.ListModels(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range models {
		fmt.Println(m.ID, m.Created)
	}
	// Output:
	// claude-test 1735689600
}

// Configuring prompt caching and thinking. By default the system prompt,
// the tools and the conversation are cached; here only the system prompt
// and tools are, for an hour, and the model thinks adaptively.
func ExampleClient_cacheAndThinking() {
	srv := anthropictest.NewServer(anthropictest.Reply{
		Text:  "Cached.",
		Usage: &llm.Usage{InputTokens: 5000, OutputTokens: 3, CacheReadTokens: 4800, CacheWriteTokens: 150},
	})
	defer srv.Close()

	client := &anthropic.Client{
		BaseURL:  srv.URL(),
		Model:    "claude-opus-4-6",
		Cache:    &anthropic.CachePolicy{System: true, Tools: true, TTL: "1h"},
		Thinking: &anthropic.Thinking{Type: anthropic.ThinkingAdaptive},
		Effort:   "medium",
	}
	resp, err := llm.Collect(client.Stream(context.Background(), &llm.Request{
		Messages: []llm.Message{llm.SystemMessage("A long, stable system prompt."), llm.UserMessage("Hi")},
	}))
	if err != nil {
		log.Fatal(err)
	}
	u := resp.Usage
	fmt.Printf("input %d = %d uncached + %d read + %d written\n", u.InputTokens,
		u.InputTokens-u.CacheReadTokens-u.CacheWriteTokens, u.CacheReadTokens, u.CacheWriteTokens)

	var sent struct {
		System   []json.RawMessage `json:"system"`
		Thinking json.RawMessage   `json:"thinking"`
	}
	json.Unmarshal(srv.Requests()[0].Body, &sent)
	fmt.Printf("system: %s\nthinking: %s\n", sent.System[0], sent.Thinking)
	// Output:
	// input 5000 = 50 uncached + 4800 read + 150 written
	// system: {"type":"text","text":"A long, stable system prompt.","cache_control":{"type":"ephemeral","ttl":"1h"}}
	// thinking: {"type":"adaptive"}
}

// Running the agent loop on Claude.
func ExampleClient_agent() {
	srv := anthropictest.NewServer(
		anthropictest.Reply{ToolCalls: []llm.ToolCall{anthropictest.ToolCall("toolu_01", "lookup_project", `{"id": "42"}`)}},
		anthropictest.Reply{Text: "Project 42 is hrns."},
	)
	defer srv.Close()

	type args struct {
		ID string `json:"id" jsonschema:"the project number"`
	}
	tools := loop.MustToolset(loop.NewTool("lookup_project", "Looks up a project name.",
		func(_ context.Context, in args) (string, error) { return "project-" + in.ID + ": hrns", nil }))
	client := &anthropic.Client{BaseURL: srv.URL(), Model: "claude-sonnet-4-5"}
	agent := loop.NewAgent(client, tools, nil)
	res, err := agent.Run(context.Background(), []llm.Message{
		llm.SystemMessage("You are a helpful assistant."),
		llm.UserMessage("What is project 42?"),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Answer)
	fmt.Println("turns:", len(res.Turns))
	// Output:
	// Project 42 is hrns.
	// turns: 2
}

// Pointing the client at a gateway that speaks the Messages API, with a
// beta flag.
func ExampleNew() {
	client := anthropic.New(&anthropic.Options{
		BaseURL:   "https://gateway.example.com/anthropic",
		Model:     "claude-sonnet-4-5",
		MaxTokens: 16000,
		Headers:   http.Header{"Anthropic-Beta": {"context-1m-2025-08-07"}},
	})
	fmt.Println(client.BaseURL, client.Model, client.MaxTokens)
	// Output:
	// https://gateway.example.com/anthropic claude-sonnet-4-5 16000
}

// Configuring the client from ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL and
// ANTHROPIC_MODEL.
func ExampleNewFromEnv() {
	client := anthropic.NewFromEnv()
	if client.Model == "" {
		client.Model = "claude-sonnet-4-5"
	}
	resp, err := llm.Collect(client.Stream(context.Background(), &llm.Request{
		Messages: []llm.Message{llm.UserMessage("Say hi")},
	}))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.TrimSpace(resp.Message.Text()))
}
