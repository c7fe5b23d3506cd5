// Command hrnsloop runs the benchmarks' task with hrns's loop library: an
// [openai.Client] and one typed tool made by [loop.NewTool].
//
//	hrnsloop --base-url http://127.0.0.1:40123/v1 --runs 40
package main

import (
	"context"
	"os"

	"github.com/hrns-dev/hrns/bench/internal/task"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
)

func main() {
	os.Exit(task.Main("hrnsloop", os.Args[1:], os.Stdout, os.Stderr, setup))
}

func setup(f *task.Flags) (task.RunFunc, error) {
	client := &openai.Client{BaseURL: f.BaseURL, APIKey: "bench", Model: f.Model}
	read := loop.NewTool(task.ToolName, task.Description, func(_ context.Context, in task.Args) (string, error) {
		return task.Read(in.Path), nil
	})
	agent := loop.NewAgent(client, loop.MustToolset(read), nil)
	msgs := []llm.Message{llm.SystemMessage(task.System), llm.UserMessage(task.Prompt)}
	return func(ctx context.Context) (string, error) {
		res, err := agent.Run(ctx, msgs)
		if err != nil {
			return "", err
		}
		return res.Answer, nil
	}, nil
}
