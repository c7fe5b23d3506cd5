package openai_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai"
)

// fakeOpenAI starts a loopback server that answers chat completions with
// the given event stream and lists two models.
func fakeOpenAI(events ...string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"object":"list","data":[{"id":"gpt-4.1","object":"model","created":1744316542,"owned_by":"system"},{"id":"gpt-4.1-mini","object":"model","created":1744318173,"owned_by":"system"}]}`)
		case "/v1/chat/completions":
			w.Header().Set("Content-Type", "text/event-stream")
			for _, ev := range events {
				fmt.Fprintf(w, "data: %s\n\n", ev)
			}
			fmt.Fprint(w, "data: [DONE]\n\n")
		default:
			http.NotFound(w, r)
		}
	}))
}

// Streaming a text answer and printing it as it arrives.
func Example() {
	srv := fakeOpenAI(
		`{"id":"chatcmpl-1","model":"gpt-4.1","choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"},"finish_reason":null}]}`,
		`{"id":"chatcmpl-1","model":"gpt-4.1","choices":[{"index":0,"delta":{"content":", world!"},"finish_reason":"stop"}]}`,
		`{"id":"chatcmpl-1","model":"gpt-4.1","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}}`,
	)
	defer srv.Close()

	client := &openai.Client{BaseURL: srv.URL + "/v1", APIKey: "sk-example", Model: "gpt-4.1"}
	req := &llm.Request{Messages: []llm.Message{
		openai.SystemMessage("You are friendly."),
		openai.UserMessage("Greet the world."),
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

// Collecting a response with tool calls, then answering them.
func ExampleClient_Stream_toolCalls() {
	srv := fakeOpenAI(
		`{"id":"chatcmpl-2","model":"gpt-4.1","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}`,
		`{"id":"chatcmpl-2","model":"gpt-4.1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}]}`,
		`{"id":"chatcmpl-2","model":"gpt-4.1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"finish_reason":"tool_calls"}]}`,
	)
	defer srv.Close()

	client := &openai.Client{BaseURL: srv.URL + "/v1", Model: "gpt-4.1"}
	history := []llm.Message{openai.UserMessage("Weather in Paris?")}
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
	history = append(history, resp.Message)
	for _, call := range resp.Message.ToolCalls() {
		fmt.Printf("call %s: %s(%s)\n", call.ID, call.Name, call.Arguments)
		history = append(history, openai.ToolMessage(call.ID, "18°C and cloudy"))
	}
	fmt.Println("messages for the next turn:", len(history))
	// Output:
	// finish: tool_calls
	// call call_1: get_weather({"city":"Paris"})
	// messages for the next turn: 3
}

// Telling failures apart with the sentinels of package llm.
func ExampleClient_Stream_errors() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "2")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`)
	}))
	defer srv.Close()

	client := &openai.Client{BaseURL: srv.URL, Model: "gpt-4.1"}
	_, err := llm.Collect(client.Stream(context.Background(), &llm.Request{
		Messages: []llm.Message{openai.UserMessage("Hi")},
	}))
	fmt.Println(err)
	fmt.Println("rate limited:", errors.Is(err, llm.ErrRateLimited))
	fmt.Println("retry:", llm.IsRetryable(err), "after", llm.RetryAfter(err))

	// Content the endpoint cannot take fails before anything is sent.
	_, err = llm.Collect(client.Stream(context.Background(), &llm.Request{
		Messages: []llm.Message{{Role: llm.RoleTool, Parts: []llm.Part{{
			Kind: llm.PartToolResult,
			ToolResult: &llm.ToolResult{CallID: "call_1", Content: []llm.Part{
				{Kind: llm.PartDocument, Media: &llm.Media{URL: "https://example.org/report.pdf"}},
			}},
		}}}},
	}))
	fmt.Println("unsupported:", errors.Is(err, llm.ErrUnsupported))
	// Output:
	// openai: HTTP 429 requests: Rate limit reached for requests
	// rate limited: true
	// retry: true after 2s
	// unsupported: true
}

func ExampleClient_ListModels() {
	srv := fakeOpenAI()
	defer srv.Close()

	client := &openai.Client{BaseURL: srv.URL + "/v1"}
	models, err := client.ListModels(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range models {
		fmt.Println(m.ID, m.OwnedBy)
	}
	// Output:
	// gpt-4.1 system
	// gpt-4.1-mini system
}

// Pointing the client at a local server such as Ollama, vLLM or llama.cpp.
func ExampleNew() {
	client := openai.New(&openai.Options{
		BaseURL: "http://localhost:11434/v1", // Ollama
		Model:   "qwen3:8b",
		Headers: http.Header{"X-Title": {"hrns"}},
	})
	fmt.Println(client.BaseURL, client.Model)
	// Output:
	// http://localhost:11434/v1 qwen3:8b
}

// Configuring the client from OPENAI_API_KEY, OPENAI_BASE_URL and
// OPENAI_MODEL.
func ExampleNewFromEnv() {
	client := openai.NewFromEnv()
	if client.Model == "" {
		client.Model = "gpt-4.1-mini"
	}
	resp, err := llm.Collect(client.Stream(context.Background(), &llm.Request{
		Messages: []llm.Message{openai.UserMessage("Say hi")},
	}))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.TrimSpace(resp.Message.Text()))
}

// A conversation of several turns, each request carrying the conversation
// so that the client encodes only the messages new since the last turn
// (the agent loop does this for each run). The bodies sent are the same as
// without it.
func ExampleClient_Stream_conversation() {
	srv := fakeOpenAI(
		`{"id":"chatcmpl-1","model":"gpt-4.1","choices":[{"index":0,"delta":{"role":"assistant","content":"Noted."},"finish_reason":"stop"}]}`,
	)
	defer srv.Close()

	client := &openai.Client{BaseURL: srv.URL + "/v1", Model: "gpt-4.1"}
	conv := new(llm.Conversation) // one per conversation, never shared between two
	msgs := []llm.Message{openai.SystemMessage("Take notes.")}
	for _, note := range []string{"first", "second", "third"} {
		msgs = append(msgs, openai.UserMessage("Note: "+note))
		resp, err := llm.Collect(client.Stream(context.Background(), &llm.Request{Messages: msgs, Conversation: conv}))
		if err != nil {
			log.Fatal(err)
		}
		msgs = append(msgs, resp.Message)
		fmt.Println(resp.Message.Text())
	}
	// Output:
	// Noted.
	// Noted.
	// Noted.
}
