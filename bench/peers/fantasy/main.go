// Command fantasy runs the benchmarks' task with charm.land/fantasy: its
// OpenAI provider (Chat Completions) and an agent with one typed tool, run
// with Agent.Stream.
//
//	fantasy --base-url http://127.0.0.1:40123/v1 --runs 40
package main

import (
	"context"
	"os"
	"strings"

	"charm.land/fantasy"
	fopenai "charm.land/fantasy/providers/openai"

	"github.com/hrns-dev/hrns/bench/internal/task"
)

func main() {
	os.Exit(task.Main("fantasy", os.Args[1:], os.Stdout, os.Stderr, setup))
}

func setup(f *task.Flags) (task.RunFunc, error) {
	provider, err := fopenai.New(fopenai.WithBaseURL(f.BaseURL), fopenai.WithAPIKey("bench"))
	if err != nil {
		return nil, err
	}
	model, err := provider.LanguageModel(context.Background(), f.Model)
	if err != nil {
		return nil, err
	}
	read := fantasy.NewAgentTool(task.ToolName, task.Description,
		func(_ context.Context, in task.Args, _ fantasy.ToolCall) (fantasy.ToolResponse, error) {
			return fantasy.NewTextResponse(task.Read(in.Path)), nil
		})
	agent := fantasy.NewAgent(model, fantasy.WithSystemPrompt(task.System), fantasy.WithTools(read))
	return func(ctx context.Context) (string, error) {
		var answer strings.Builder
		_, err := agent.Stream(ctx, fantasy.AgentStreamCall{
			Prompt: task.Prompt,
			OnStepStart: func(int) error {
				answer.Reset() // the answer is the text of the last step
				return nil
			},
			OnTextDelta: func(_, text string) error {
				answer.WriteString(text)
				return nil
			},
		})
		return answer.String(), err
	}, nil
}
