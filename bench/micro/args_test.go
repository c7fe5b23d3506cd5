package micro

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/hrns-dev/hrns/bench/internal/task"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
)

const benchArgs = `{"path":"notes/turn-1.txt"}`

func readTool() *loop.ToolDef {
	return loop.NewTool(task.ToolName, task.Description, func(_ context.Context, in task.Args) (string, error) {
		return task.Read(in.Path), nil
	})
}

// BenchmarkToolArgs checks one call's arguments per op. "raw-unmarshal" is
// what the baseline does: decode them into the argument struct.
// "jsonschema-go" does what hrns's loop does for a typed tool: decode them
// into a map, validate the map against the tool's schema (resolved once),
// then decode them into the struct.
func BenchmarkToolArgs(b *testing.B) {
	raw := []byte(benchArgs)
	b.Run("raw-unmarshal", func(b *testing.B) {
		m := startMeter(b)
		for b.Loop() {
			var a task.Args
			if err := json.Unmarshal(raw, &a); err != nil {
				b.Fatal(err)
			}
		}
		m.report(1, "call")
	})
	b.Run("jsonschema-go", func(b *testing.B) {
		var s jsonschema.Schema
		if err := json.Unmarshal(readTool().InputSchema, &s); err != nil {
			b.Fatal(err)
		}
		resolved, err := s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
		if err != nil {
			b.Fatal(err)
		}
		m := startMeter(b)
		for b.Loop() {
			var v map[string]any
			if err := json.Unmarshal(raw, &v); err != nil {
				b.Fatal(err)
			}
			if err := resolved.Validate(v); err != nil {
				b.Fatal(err)
			}
			var a task.Args
			if err := json.Unmarshal(raw, &a); err != nil {
				b.Fatal(err)
			}
		}
		m.report(1, "call")
	})
}

// BenchmarkLoopRun runs the loop for one run of two turns (a call, then a
// three-chunk answer) with a scripted in-process model: the loop's own
// cost, without a provider. "typed" uses the task's tool made by
// loop.NewTool, whose arguments are validated against its schema;
// "untyped" a ToolDef without a schema, whose handler decodes the same
// arguments itself. Their difference is the cost of validation in a run.
func BenchmarkLoopRun(b *testing.B) {
	untyped := &loop.ToolDef{
		Name:        task.ToolName,
		Description: task.Description,
		Handler: func(_ context.Context, call *loop.Call) (*loop.Output, error) {
			out, err := task.ReadArgs(call.Arguments)
			if err != nil {
				return nil, err
			}
			return loop.TextOutput(out), nil
		},
	}
	msgs := []llm.Message{llm.SystemMessage(task.System), llm.UserMessage(task.Prompt)}
	for _, tc := range []struct {
		name string
		tool *loop.ToolDef
	}{{"typed", readTool()}, {"untyped", untyped}} {
		b.Run(tc.name, func(b *testing.B) {
			model := llmtest.NewModel()
			agent := loop.NewAgent(model, loop.MustToolset(tc.tool), nil)
			ctx := context.Background()
			m := startMeter(b)
			for b.Loop() {
				model.Push(llmtest.Call("call_1", task.ToolName, benchArgs), llmtest.Text("The notes say the service listens on 8080."))
				if _, err := agent.Run(ctx, msgs); err != nil {
					b.Fatal(err)
				}
			}
			m.report(1, "run")
		})
	}
}
