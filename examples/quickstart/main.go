// Command quickstart runs an agent with two tools, end to end, without a key
// or a network: its model is a scripted OpenAI-compatible server on
// loopback, so the run goes through the real provider and the real loop.
// Set OPENAI_API_KEY (and OPENAI_BASE_URL, OPENAI_MODEL for other servers)
// to run the same agent against a real model instead.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

type wordCountArgs struct {
	Text string `json:"text" jsonschema:"the text to count words in"`
}

type wordCount struct {
	Words int `json:"words"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	client := openai.NewFromEnv()
	if os.Getenv("OPENAI_API_KEY") == "" {
		srv := openaitest.NewServer(
			openaitest.Reply{Reasoning: "I should look the project up, then count the words of its motto.", ToolCalls: []llm.ToolCall{
				openaitest.ToolCall("call_1", "lookup_project", `{"id":"42"}`),
			}},
			openaitest.Reply{ToolCalls: []llm.ToolCall{
				openaitest.ToolCall("call_2", "count_words", `{"text":"give an LLM tools and run it until the job is done"}`),
			}},
			openaitest.Reply{Text: "Project 42 is hrns; its motto, \"give an LLM tools and run it until the job is done\", has 12 words."},
		)
		defer srv.Close()
		client = &openai.Client{BaseURL: srv.URL(), Model: "scripted"}
		fmt.Println("(no OPENAI_API_KEY: replaying a scripted model over loopback HTTP)")
	}

	lookup := loop.NewSimpleTool(
		"Looks up a project by id and returns its name and motto",
		[]loop.ToolArgument{{Name: "id", Type: "string"}},
		func(args map[string]any) string {
			if args["id"] == "42" {
				return "hrns: give an LLM tools and run it until the job is done"
			}
			return "not found"
		},
	)
	count := loop.NewTool("count_words", "Counts the words of a text.",
		func(_ context.Context, in wordCountArgs) (wordCount, error) {
			return wordCount{Words: len(strings.Fields(in.Text))}, nil
		})
	tools := loop.MustToolset(count)
	if err := tools.AddTool("lookup_project", lookup); err != nil {
		return err
	}
	agent := loop.NewAgent(client, tools, &loop.Options{MaxTurns: 10})

	thinking := false
	for chunk := range agent.RunLoop(ctx, []llm.Message{
		openai.SystemMessage("You answer questions about projects. Use the tools."),
		openai.UserMessage("What is project 42, and how many words are in its motto?"),
	}) {
		switch chunk.Type {
		case loop.ChunkTurnStart:
			thinking = false
		case loop.ChunkReasoning:
			if !thinking {
				fmt.Print("thinking: ")
				thinking = true
			}
			fmt.Print(chunk.Content)
		case loop.ChunkMessage:
			fmt.Print(chunk.Content)
		case loop.ChunkRetry:
			// The failed attempt's deltas are void; the next one starts over.
			fmt.Printf("\n[retrying after: %v; the answer starts again]\n", chunk.Err)
		case loop.ChunkToolCallStart:
			fmt.Printf("\n→ %s %s\n", chunk.ToolCall.Name, chunk.ToolCall.Arguments)
		case loop.ChunkToolCallResult, loop.ChunkToolCallError:
			fmt.Printf("← %s\n", chunk.Content)
		case loop.ChunkEnd:
			r := chunk.Result
			fmt.Printf("\n\n%s after %d turns, %d input + %d output tokens\n", r.Status, len(r.Turns), r.Usage.InputTokens, r.Usage.OutputTokens)
			return r.Err
		}
	}
	return nil
}
