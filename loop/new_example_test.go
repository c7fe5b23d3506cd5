package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
)

// A run that fails (here the provider refuses the API key) has no answer:
// the error is in the end chunk's Result, and Run returns it. Check it, or
// a failed run looks like an empty answer.
func ExampleNew_error() {
	refused := &llm.APIError{Provider: "openai", StatusCode: 401, Type: "invalid_request_error", Message: "Incorrect API key provided."}
	model := llmtest.NewModel(llmtest.Fail(refused))
	agent := loop.New(model, nil)
	msgs := []llm.Message{llm.UserMessage("hi")}

	// Ranging over the chunks: the end chunk holds the error.
	for chunk := range agent.RunLoop(context.Background(), msgs) {
		if chunk.Type == loop.ChunkEnd && chunk.Result.Err != nil {
			fmt.Println("run failed:", errors.Is(chunk.Result.Err, llm.ErrAuth))
		}
	}

	// Or without chunks: Run returns the error.
	model.Push(llmtest.Fail(refused))
	if _, err := agent.Run(context.Background(), msgs); err != nil {
		fmt.Println("error:", err)
	}
	// Output:
	// run failed: true
	// error: openai: HTTP 401 invalid_request_error: Incorrect API key provided.
}

// New takes options: toolsets (built-in tools, skills, MCP servers) next to
// the simple tools of its map, and the same Options as NewAgent.
func ExampleNew_options() {
	model := llmtest.NewModel(
		llmtest.Call("c1", "lookup_project", `{"id":"7"}`),
		llmtest.Call("c2", "get_weather", `{"city":"Oslo"}`),
		llmtest.Text("Done."),
	)
	lookup := loop.NewSimpleTool("Looks up a project name",
		[]loop.ToolArgument{{Name: "id", Type: "string"}},
		func(args map[string]any) string { return "project-" + args["id"].(string) })
	type WeatherArgs struct {
		City string `json:"city"`
	}
	weather := loop.MustToolset(loop.NewTool("get_weather", "Current weather.",
		func(ctx context.Context, in WeatherArgs) (string, error) { return "4°C in " + in.City, nil }))

	agent := loop.New(model, map[string]loop.Tool{"lookup_project": lookup},
		loop.WithToolsets(weather),
		loop.WithOptions(&loop.Options{MaxTurns: 10, MaxParallel: 2}),
	)
	fmt.Println(agent.Tools().Names())
	res, err := agent.Run(context.Background(), []llm.Message{llm.UserMessage("go")})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(res.Answer, len(res.Turns), "turns")
	// Output:
	// [lookup_project get_weather]
	// Done. 3 turns
}

// Request knobs the loop passes through: every request carries them,
// except ToolChoice, which only the first one does.
func ExampleOptions_requestKnobs() {
	model := llmtest.NewModel(llmtest.Call("c1", "search", `{"q":"hrns"}`), llmtest.Text("Found it."))
	type SearchArgs struct {
		Q string `json:"q"`
	}
	search := loop.NewTool("search", "Searches.", func(ctx context.Context, in SearchArgs) (string, error) { return "1 hit", nil })
	topP, seed := 0.9, int64(42)
	agent := loop.NewAgent(model, loop.MustToolset(search), &loop.Options{
		TopP:          &topP,
		Seed:          &seed,
		StopSequences: []string{"\n\nUser:"},
		ToolChoice:    llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "search"}, // search first
		Reasoning:     &llm.ReasoningConfig{Effort: "low", BudgetTokens: 2048},
		Cache:         &llm.CacheHint{Key: "docs-bot", Long: true},
		Extra:         map[string]json.RawMessage{"metadata": json.RawMessage(`{"team":"docs"}`)},
	})
	if _, err := agent.Run(context.Background(), []llm.Message{llm.UserMessage("Find hrns.")}); err != nil {
		fmt.Println("error:", err)
		return
	}
	for i, r := range model.Requests() {
		fmt.Printf("request %d: top_p %v, seed %d, effort %s, tool choice %q, extra %s\n",
			i+1, *r.TopP, *r.Seed, r.Reasoning.Effort, r.ToolChoice.Mode, r.Extra["metadata"])
	}
	// Output:
	// request 1: top_p 0.9, seed 42, effort low, tool choice "tool", extra {"team":"docs"}
	// request 2: top_p 0.9, seed 42, effort low, tool choice "", extra {"team":"docs"}
}
