// Command hrnsloop runs the benchmarks' task with hrns's loop library: an
// [openai.Client] and one typed tool made by [loop.NewTool].
//
//	hrnsloop --base-url http://127.0.0.1:40123/v1 --runs 40
//
// --variant turns on one feature of the loop that the plain client leaves
// off, in a way that changes nothing of the task, so that the driver can
// show what each costs beside the plain client (and so that features not
// in use cost nothing):
//
//   - hooks: a hook of every event of a run (pre_tool, post_tool,
//     user_prompt, stop, run_start, run_end), each with no opinion;
//   - permissions: a permission policy with a deny and an allow rule;
//   - observer: an [loop.Observer] that counts what it is told;
//   - compaction: [loop.Compaction] with a context window the run never
//     nears (the estimate of every turn, no compaction);
//   - beforeturn: an Options.BeforeTurn that lets every turn go on;
//   - structured: an output schema (a JSON string), the answer checked
//     against it and decoded (the mock then answers the same text as a
//     JSON string);
//   - all: every one of the above at once.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"github.com/hrns-dev/hrns/bench/internal/task"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
)

func main() {
	os.Exit(task.Main("hrnsloop", os.Args[1:], os.Stdout, os.Stderr, setup))
}

// Variants are the features --variant turns on, with all.
var Variants = []string{"hooks", "permissions", "observer", "compaction", "beforeturn", "structured", "all"}

func setup(f *task.Flags) (task.RunFunc, error) {
	client := &openai.Client{BaseURL: f.BaseURL, APIKey: "bench", Model: f.Model}
	size := f.ResultBytes
	read := loop.NewTool(task.ToolName, task.Description, func(_ context.Context, in task.Args) (string, error) {
		return task.Result(in.Path, size), nil
	})
	// As many turns as the longest task takes (the baseline has no bound).
	opts := loop.Options{MaxTurns: 1000}
	on := map[string]bool{}
	switch f.Variant {
	case "":
	case "all":
		for _, v := range Variants {
			on[v] = true
		}
	default:
		known := false
		for _, v := range Variants {
			known = known || v == f.Variant
		}
		if !known {
			return nil, fmt.Errorf("unknown variant %q; there are %s", f.Variant, strings.Join(Variants, ", "))
		}
		on[f.Variant] = true
	}
	if on["hooks"] {
		noOpinion := func(context.Context, *loop.HookInput) (*loop.HookOutput, error) { return nil, nil }
		for _, ev := range []loop.HookEvent{loop.HookPreTool, loop.HookPostTool, loop.HookUserPrompt, loop.HookStop, loop.HookRunStart, loop.HookRunEnd} {
			opts.Hooks = append(opts.Hooks, loop.Hook{Event: ev, Func: noOpinion})
		}
	}
	if on["permissions"] {
		opts.Permissions = &loop.Permissions{
			Deny:  []loop.Rule{{Tool: "run_command"}},
			Allow: []loop.Rule{{Tool: task.ToolName}},
		}
	}
	if on["observer"] {
		opts.Observer = &countingObserver{}
	}
	if on["compaction"] {
		opts.Compaction = &loop.Compaction{ContextWindow: 1 << 30}
	}
	if on["beforeturn"] {
		opts.BeforeTurn = func(context.Context, loop.NextTurn) bool { return true }
	}
	structured := on["structured"]
	if structured {
		opts.OutputSchema = &loop.OutputSchema{Schema: json.RawMessage(`{"type":"string"}`)}
	}
	agent := loop.NewAgent(client, loop.MustToolset(read), &opts)
	msgs := []llm.Message{llm.SystemMessage(task.System), llm.UserMessage(task.Prompt)}
	return func(ctx context.Context) (string, error) {
		res, err := agent.Run(ctx, msgs)
		if err != nil {
			return "", err
		}
		if structured {
			var s string
			if err := json.Unmarshal([]byte(res.Answer), &s); err != nil {
				return "", fmt.Errorf("structured answer: %w", err)
			}
			return s, nil
		}
		return res.Answer, nil
	}, nil
}

// countingObserver counts the events it is told of, as the least an
// observer does.
type countingObserver struct{ n atomic.Int64 }

func (o *countingObserver) RunStart(ctx context.Context, _ loop.RunEvent) context.Context {
	o.n.Add(1)
	return ctx
}
func (o *countingObserver) RunEnd(context.Context, loop.RunEvent) { o.n.Add(1) }
func (o *countingObserver) TurnStart(ctx context.Context, _ loop.TurnEvent) context.Context {
	o.n.Add(1)
	return ctx
}
func (o *countingObserver) TurnEnd(context.Context, loop.TurnEvent) { o.n.Add(1) }
func (o *countingObserver) ToolStart(ctx context.Context, _ loop.ToolEvent) context.Context {
	o.n.Add(1)
	return ctx
}
func (o *countingObserver) ToolEnd(context.Context, loop.ToolEvent)         { o.n.Add(1) }
func (o *countingObserver) Retry(context.Context, loop.RetryEvent)          { o.n.Add(1) }
func (o *countingObserver) Compaction(context.Context, loop.CompactionInfo) { o.n.Add(1) }
func (o *countingObserver) TraceParent(context.Context) string              { return "" }
