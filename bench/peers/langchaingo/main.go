// Command langchaingo runs the benchmarks' task with
// github.com/tmc/langchaingo: the OpenAI functions agent over its OpenAI LLM,
// run by an agents.Executor, streaming, with one tool.
//
// The agent streams only if the chain call passes a streaming function: in
// v0.1.14 chains.GetLLMCallOptions overrides the agent's own one (set by a
// callbacks handler) with nil, so a handler alone leaves streaming off.
//
//	langchaingo --base-url http://127.0.0.1:40123/v1 --runs 40
package main

import (
	"context"
	"os"

	"github.com/tmc/langchaingo/agents"
	"github.com/tmc/langchaingo/chains"
	lcopenai "github.com/tmc/langchaingo/llms/openai"
	"github.com/tmc/langchaingo/tools"

	"github.com/hrns-dev/hrns/bench/internal/task"
)

func main() {
	os.Exit(task.Main("langchaingo", os.Args[1:], os.Stdout, os.Stderr, setup))
}

// readTool is the task's tool. The functions agent gives a tool the call's
// arguments as a JSON string.
type readTool struct{}

var _ tools.Tool = readTool{}

func (readTool) Name() string        { return task.ToolName }
func (readTool) Description() string { return task.Description }
func (readTool) Call(_ context.Context, input string) (string, error) {
	out, err := task.ReadArgs([]byte(input))
	if err != nil {
		return err.Error(), nil
	}
	return out, nil
}

func setup(f *task.Flags) (task.RunFunc, error) {
	llm, err := lcopenai.New(lcopenai.WithBaseURL(f.BaseURL), lcopenai.WithToken("bench"), lcopenai.WithModel(f.Model))
	if err != nil {
		return nil, err
	}
	agent := agents.NewOpenAIFunctionsAgent(llm, []tools.Tool{readTool{}},
		agents.NewOpenAIOption().WithSystemMessage(task.System))
	exec := agents.NewExecutor(agent, agents.WithMaxIterations(100))
	stream := chains.WithStreamingFunc(func(context.Context, []byte) error { return nil })
	return func(ctx context.Context) (string, error) {
		return chains.Run(ctx, exec, task.Prompt, stream)
	}, nil
}
