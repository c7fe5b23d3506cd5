package loop_test

import (
	"context"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

type benchArgs struct {
	Path  string `json:"path" jsonschema:"file to read"`
	Limit int    `json:"limit,omitempty" default:"100"`
}

func benchTool() *loop.ToolDef {
	return loop.NewTool("read", "Reads.", func(_ context.Context, a benchArgs) (string, error) {
		return "contents of " + a.Path, nil
	})
}

var benchText = "The file holds the configuration of the service: it listens on port 8080, " +
	"keeps its state in SQLite and logs to standard error in JSON."

// BenchmarkRunLoopback measures one whole run of two turns (a tool call,
// then a streamed answer) through the OpenAI provider over loopback HTTP.
func BenchmarkRunLoopback(b *testing.B) {
	srv := openaitest.NewServer()
	defer srv.Close()
	client := &openai.Client{BaseURL: srv.URL(), Model: "bench"}
	agent := loop.NewAgent(client, loop.MustToolset(benchTool()), nil)
	msgs := []llm.Message{llm.SystemMessage("You read files."), llm.UserMessage("What is in config.yaml?")}
	b.ReportAllocs()
	for b.Loop() {
		srv.Push(
			openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c1", "read", `{"path":"config.yaml"}`)}},
			openaitest.Reply{Text: benchText},
		)
		if _, err := agent.Run(context.Background(), msgs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunScripted measures the loop's own work for the same run, with
// a scripted in-process model and no HTTP.
func BenchmarkRunScripted(b *testing.B) {
	model := llmtest.NewModel()
	agent := loop.NewAgent(model, loop.MustToolset(benchTool()), nil)
	msgs := []llm.Message{llm.SystemMessage("You read files."), llm.UserMessage("What is in config.yaml?")}
	b.ReportAllocs()
	for b.Loop() {
		model.Push(llmtest.Call("c1", "read", `{"path":"config.yaml"}`), llmtest.Text(benchText))
		if _, err := agent.Run(context.Background(), msgs); err != nil {
			b.Fatal(err)
		}
	}
}
