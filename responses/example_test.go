package responses_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/responses"
	"github.com/hrns-dev/hrns/responses/responsestest"
)

// Streaming an answer, with the model's reasoning summary, and printing it
// as it arrives.
func Example() {
	srv := responsestest.NewServer(responsestest.Reply{
		Reasoning: "A greeting is asked for.",
		Encrypted: "gAAAAB-opaque",
		Text:      "Hello, world!",
		Usage:     &llm.Usage{InputTokens: 9, OutputTokens: 30, ReasoningTokens: 26},
	})
	defer srv.Close()

	client := &responses.Client{
		BaseURL:   srv.URL(), // empty for OpenAI itself
		APIKey:    "sk-example",
		Model:     "gpt-5",
		Reasoning: &responses.Reasoning{Effort: "low", Summary: "auto"},
	}
	req := &llm.Request{Messages: []llm.Message{
		llm.SystemMessage("You are friendly."),
		llm.UserMessage("Greet the world."),
	}}
	thinking := false
	for chunk, err := range client.Stream(context.Background(), req) {
		if err != nil {
			log.Fatal(err)
		}
		if thinking && chunk.Kind != llm.ChunkReasoning {
			fmt.Println(")")
			thinking = false
		}
		switch chunk.Kind {
		case llm.ChunkReasoning:
			if !thinking {
				fmt.Print("(")
				thinking = true
			}
			fmt.Print(chunk.Text)
		case llm.ChunkText:
			fmt.Print(chunk.Text)
		case llm.ChunkDone:
			r := chunk.Response
			fmt.Printf("\n[%s; %d output tokens, %d of them reasoning]\n", r.FinishReason, r.Usage.OutputTokens, r.Usage.ReasoningTokens)
			// The encrypted reasoning is kept in the message, to be sent
			// back on the next turn.
			fmt.Println(r.Message.Parts[0].Reasoning.Redacted)
		}
	}
	// Output:
	// (A greeting is asked for.)
	// Hello, world!
	// [stop; 30 output tokens, 26 of them reasoning]
	// gAAAAB-opaque
}

// An agent with a tool, on the Responses API.
func Example_agent() {
	srv := responsestest.NewServer(
		responsestest.Reply{ToolCalls: []llm.ToolCall{responsestest.ToolCall("call_1", "add", `{"a":2,"b":3}`)}},
		responsestest.Reply{Text: "2 + 3 = 5"},
	)
	defer srv.Close()

	add := loop.NewSimpleTool("Add two numbers.",
		[]loop.ToolArgument{{Name: "a", Type: "number"}, {Name: "b", Type: "number"}},
		func(args map[string]any) string { return fmt.Sprint(args["a"].(float64) + args["b"].(float64)) })
	agent := loop.New(&responses.Client{BaseURL: srv.URL(), Model: "gpt-5"}, map[string]loop.Tool{"add": add})
	res, err := agent.Run(context.Background(), []llm.Message{llm.UserMessage("What is 2 + 3?")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Answer)
	// Output: 2 + 3 = 5
}

// Errors are typed: a rate limit is llm.ErrRateLimited, with the wait the
// API asked for, and the loop retries it by itself.
func Example_errors() {
	srv := responsestest.NewServer(responsestest.Reply{
		Status: 429,
		Header: map[string][]string{"Retry-After": {"3"}},
		Body:   responsestest.ErrorBody("requests", "rate_limit_exceeded", "Rate limit reached"),
	})
	defer srv.Close()

	client := &responses.Client{BaseURL: srv.URL(), Model: "gpt-5"}
	_, err := llm.Collect(client.Stream(context.Background(), &llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}}))
	fmt.Println(errors.Is(err, llm.ErrRateLimited), llm.IsRetryable(err), llm.RetryAfter(err))
	// Output: true true 3s
}
