// Command openaigo runs the benchmarks' task with the official OpenAI Go SDK
// (github.com/openai/openai-go/v3) and a hand-written loop: stream a
// completion into a ChatCompletionAccumulator, run the calls, append the
// assistant message and the results, repeat.
//
//	openaigo --base-url http://127.0.0.1:40123/v1 --runs 40
package main

import (
	"context"
	"errors"
	"os"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/hrns-dev/hrns/bench/internal/task"
)

func main() {
	os.Exit(task.Main("openaigo", os.Args[1:], os.Stdout, os.Stderr, setup))
}

func setup(f *task.Flags) (task.RunFunc, error) {
	client := openai.NewClient(option.WithBaseURL(f.BaseURL+"/"), option.WithAPIKey("bench"), option.WithMaxRetries(0))
	tools := []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:        task.ToolName,
		Description: openai.String(task.Description),
		Parameters: shared.FunctionParameters{
			"type": "object",
			"properties": map[string]any{
				"path": map[string]any{"type": "string", "description": "the file to read"},
			},
			"required":             []string{"path"},
			"additionalProperties": false,
		},
	})}
	return func(ctx context.Context) (string, error) {
		params := openai.ChatCompletionNewParams{
			Model: f.Model,
			Messages: []openai.ChatCompletionMessageParamUnion{
				openai.SystemMessage(task.System),
				openai.UserMessage(task.Prompt),
			},
			Tools:         tools,
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		}
		for {
			stream := client.Chat.Completions.NewStreaming(ctx, params)
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				return "", err
			}
			stream.Close()
			if len(acc.Choices) == 0 {
				return "", errors.New("no choices")
			}
			msg := acc.Choices[0].Message
			if len(msg.ToolCalls) == 0 {
				return msg.Content, nil
			}
			params.Messages = append(params.Messages, msg.ToParam())
			for _, call := range msg.ToolCalls {
				out, err := task.ReadArgs([]byte(call.Function.Arguments))
				if err != nil {
					out = err.Error()
				}
				params.Messages = append(params.Messages, openai.ToolMessage(out, call.ID))
			}
		}
	}, nil
}
