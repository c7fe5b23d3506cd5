// Command eino runs the benchmarks' task with CloudWeGo Eino: the react
// agent of github.com/cloudwego/eino/flow/agent/react over the OpenAI chat
// model of eino-ext, with one tool made by utils.InferTool, run with
// Agent.Stream.
//
//	eino --base-url http://127.0.0.1:40123/v1 --runs 40
package main

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"

	einoopenai "github.com/cloudwego/eino-ext/components/model/openai"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/components/tool/utils"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"

	"github.com/hrns-dev/hrns/bench/internal/task"
)

func main() {
	os.Exit(task.Main("eino", os.Args[1:], os.Stdout, os.Stderr, setup))
}

// args are the tool's arguments, tagged as Eino's schema inference reads
// them.
type args struct {
	Path string `json:"path" jsonschema:"description=the file to read\\, relative to the notes folder"`
}

func setup(f *task.Flags) (task.RunFunc, error) {
	ctx := context.Background()
	model, err := einoopenai.NewChatModel(ctx, &einoopenai.ChatModelConfig{BaseURL: f.BaseURL, APIKey: "bench", Model: f.Model})
	if err != nil {
		return nil, err
	}
	read, err := utils.InferTool(task.ToolName, task.Description, func(_ context.Context, in args) (string, error) {
		return task.Read(in.Path), nil
	})
	if err != nil {
		return nil, err
	}
	agent, err := react.NewAgent(ctx, &react.AgentConfig{
		ToolCallingModel: model,
		ToolsConfig:      compose.ToolsNodeConfig{Tools: []tool.BaseTool{read}},
		MaxStep:          100,
	})
	if err != nil {
		return nil, err
	}
	msgs := []*schema.Message{schema.SystemMessage(task.System), schema.UserMessage(task.Prompt)}
	return func(ctx context.Context) (string, error) {
		sr, err := agent.Stream(ctx, msgs)
		if err != nil {
			return "", err
		}
		defer sr.Close()
		var answer strings.Builder
		for {
			m, err := sr.Recv()
			if errors.Is(err, io.EOF) {
				return answer.String(), nil
			}
			if err != nil {
				return "", err
			}
			answer.WriteString(m.Content)
		}
	}, nil
}
