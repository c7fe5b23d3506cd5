package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
)

// A message with one call runs it without a goroutine to wait for it
// (executor.runOne); a message with several concurrent calls runs them
// as a batch (executor.runBatch). TestOneCallRunsAsABatch runs each case's
// call alone and beside a second concurrent call, and requires the same of
// the first call either way: its chunks, the result the model reads, its
// observed end, the post_tool hooks' view, and how the run ends.
func TestOneCallRunsAsABatch(t *testing.T) {
	type setup struct {
		handler loop.Handler
		opts    func(*loop.Options)
		// stop cancels the run's context from within the handler.
		stopRun bool
		// approval: the tool requires it, and the approver answers.
		approval *loop.Verdict
	}
	approve, reject := loop.Approve, loop.Reject
	slow := func(ctx context.Context, _ *loop.Call) (*loop.Output, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	cases := map[string]setup{
		"ok": {handler: func(_ context.Context, c *loop.Call) (*loop.Output, error) {
			return loop.TextOutput("got " + string(c.Arguments)), nil
		}},
		"error": {handler: func(context.Context, *loop.Call) (*loop.Output, error) {
			return nil, errors.New("disk full")
		}},
		"error output": {handler: func(context.Context, *loop.Call) (*loop.Output, error) {
			return loop.ErrorOutput("no such file"), nil
		}},
		"nil output": {handler: func(context.Context, *loop.Call) (*loop.Output, error) {
			return nil, nil
		}},
		"panic": {handler: func(context.Context, *loop.Call) (*loop.Output, error) {
			panic("boom")
		}},
		"timeout, context kept": {handler: slow, opts: func(o *loop.Options) { o.ToolTimeout = 3 * time.Second }},
		"timeout, context ignored": {handler: func(context.Context, *loop.Call) (*loop.Output, error) {
			time.Sleep(time.Hour) // abandoned after the timeout
			return loop.TextOutput("too late"), nil
		}, opts: func(o *loop.Options) { o.ToolTimeout = 3 * time.Second }},
		"deadline error before the timeout": {handler: func(context.Context, *loop.Call) (*loop.Output, error) {
			return nil, fmt.Errorf("upstream: %w", context.DeadlineExceeded)
		}},
		"run stopped mid-call": {handler: slow, stopRun: true},
		"pending":              {handler: func(context.Context, *loop.Call) (*loop.Output, error) { return nil, loop.ErrPending }},
		"approved": {handler: func(context.Context, *loop.Call) (*loop.Output, error) {
			return loop.TextOutput("ran"), nil
		}, approval: &approve},
		"rejected": {handler: func(context.Context, *loop.Call) (*loop.Output, error) {
			return loop.TextOutput("ran"), nil
		}, approval: &reject},
		"hooks": {handler: func(_ context.Context, c *loop.Call) (*loop.Output, error) {
			return loop.TextOutput("ran with " + string(c.Arguments)), nil
		}, opts: func(o *loop.Options) {
			o.Hooks = []loop.Hook{
				{Event: loop.HookPreTool, Func: func(context.Context, *loop.HookInput) (*loop.HookOutput, error) {
					return &loop.HookOutput{Arguments: json.RawMessage(`{"n":2}`)}, nil
				}},
				{Event: loop.HookPostTool, Func: func(_ context.Context, in *loop.HookInput) (*loop.HookOutput, error) {
					return &loop.HookOutput{Output: loop.TextOutput("hooked: " + *in.Result)}, nil
				}},
			}
		}},
		"post_tool hook replaces a failure": {handler: func(context.Context, *loop.Call) (*loop.Output, error) {
			return nil, errors.New("disk full")
		}, opts: func(o *loop.Options) {
			o.Hooks = []loop.Hook{{Event: loop.HookPostTool, Func: func(_ context.Context, in *loop.HookInput) (*loop.HookOutput, error) {
				return &loop.HookOutput{Output: loop.TextOutput("recovered from " + *in.Result)}, nil
			}}}
		}},
		"permission denied": {handler: func(context.Context, *loop.Call) (*loop.Output, error) {
			return loop.TextOutput("ran"), nil
		}, opts: func(o *loop.Options) {
			o.Permissions = &loop.Permissions{Deny: []loop.Rule{{Tool: "t"}}}
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				run := func(withSibling bool) oneCallOutcome {
					ctx, cancel := context.WithCancel(t.Context())
					defer cancel()
					handler := c.handler
					if c.stopRun {
						inner := handler
						handler = func(hctx context.Context, call *loop.Call) (*loop.Output, error) {
							cancel()
							return inner(hctx, call)
						}
					}
					tool := &loop.ToolDef{Name: "t", Description: "The tool.", Concurrent: true, Handler: handler,
						InputSchema:      json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`),
						RequiresApproval: c.approval != nil}
					sibling := &loop.ToolDef{Name: "sibling", Concurrent: true, Handler: func(context.Context, *loop.Call) (*loop.Output, error) {
						return loop.TextOutput("sibling"), nil
					}}
					calls := []llm.ToolCall{{ID: "c1", Name: "t", Arguments: llm.Arguments(`{"n":1}`)}}
					if withSibling {
						calls = append(calls, llm.ToolCall{ID: "c2", Name: "sibling", Arguments: llm.Arguments(`{}`)})
					}
					model := llmtest.NewModel(llmtest.Calls(calls...), llmtest.Text("done"))
					obs := &toolEndRecorder{}
					opts := &loop.Options{Observer: obs}
					if c.approval != nil {
						v := *c.approval
						opts.Approver = loop.ApproverFunc(func(context.Context, *loop.ApprovalRequest) (loop.Decision, error) {
							return loop.Decision{Verdict: v}, nil
						})
					}
					if c.opts != nil {
						c.opts(opts)
					}
					agent := loop.NewAgent(model, loop.MustToolset(tool, sibling), opts)
					var out oneCallOutcome
					for ch := range agent.RunLoop(ctx, []llm.Message{llm.UserMessage("go")}) {
						if ch.ToolCall != nil && ch.ToolCall.ID == "c1" {
							kind := loop.ToolErrorKind("")
							var te *loop.ToolError
							if errors.As(ch.Err, &te) {
								kind = te.Kind
							}
							out.Chunks = append(out.Chunks, fmt.Sprintf("%s %s %q %s", ch.Type, ch.ToolCall.Arguments, ch.Content, kind))
						}
						if ch.Type == loop.ChunkEnd {
							out.Status = string(ch.Result.Status)
							if ch.Result.Err != nil {
								out.Err = ch.Result.Err.Error()
							}
							if s := ch.Result.Suspension; s != nil {
								for _, sc := range s.Calls {
									if sc.Call.ID == "c1" {
										out.Waiting = append(out.Waiting, sc.Call.ID+" "+string(sc.Waiting))
									}
								}
							}
						}
					}
					if reqs := model.Requests(); len(reqs) > 1 {
						for _, r := range toolResults(reqs[len(reqs)-1]) {
							if r.CallID == "c1" {
								out.ModelRead = fmt.Sprintf("%q error=%v", r.Text(), r.IsError)
							}
						}
					}
					synctest.Wait() // an abandoned call's end is observed when it returns
					out.Ends = obs.ends("c1")
					return out
				}
				alone, batched := run(false), run(true)
				time.Sleep(2 * time.Hour) // abandoned handlers return (the time is the bubble's)
				if diff := cmp.Diff(batched, alone); diff != "" {
					t.Errorf("one call alone differs from the same call in a batch (-batch +alone):\n%s", diff)
				}
				if len(alone.Chunks) == 0 {
					t.Error("no chunk of the call")
				}
			})
		})
	}
}

// oneCallOutcome is what TestOneCallRunsAsABatch compares.
type oneCallOutcome struct {
	Chunks    []string
	ModelRead string
	Ends      []string
	Status    string
	Err       string
	Waiting   []string
}

// toolEndRecorder records the tool ends it is told of.
type toolEndRecorder struct {
	mu   sync.Mutex
	seen []loop.ToolEvent
}

func (o *toolEndRecorder) ends(id string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, e := range o.seen {
		if e.CallID != id {
			continue
		}
		s := fmt.Sprintf("%s %s pending=%q", e.Name, e.Description, e.Pending)
		if e.Err != nil {
			s += " err=" + e.Err.Error()
		}
		out = append(out, s)
	}
	return out
}

func (o *toolEndRecorder) RunStart(ctx context.Context, _ loop.RunEvent) context.Context { return ctx }
func (o *toolEndRecorder) RunEnd(context.Context, loop.RunEvent)                         {}
func (o *toolEndRecorder) TurnStart(ctx context.Context, _ loop.TurnEvent) context.Context {
	return ctx
}
func (o *toolEndRecorder) TurnEnd(context.Context, loop.TurnEvent) {}
func (o *toolEndRecorder) ToolStart(ctx context.Context, _ loop.ToolEvent) context.Context {
	return ctx
}
func (o *toolEndRecorder) ToolEnd(_ context.Context, e loop.ToolEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, e)
}
func (o *toolEndRecorder) Retry(context.Context, loop.RetryEvent)          {}
func (o *toolEndRecorder) Compaction(context.Context, loop.CompactionInfo) {}
func (o *toolEndRecorder) TraceParent(context.Context) string              { return "" }

// A consumer that leaves while the only call runs (at a chunk its agent
// tool relays) stops the run at once: the call's context is cancelled, and
// its end is still observed, as when the call runs in a batch.
func TestOneCallConsumerLeaves(t *testing.T) {
	for _, withSibling := range []bool{false, true} {
		t.Run(fmt.Sprint("sibling=", withSibling), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				child := loop.NewAgent(llmtest.NewModel(llmtest.Reply{Block: true}), nil, nil)
				tool := loop.AgentTool("helper", "Helps.", child, nil)
				tool.Concurrent = true
				sibling := &loop.ToolDef{Name: "sibling", Concurrent: true, Handler: func(ctx context.Context, _ *loop.Call) (*loop.Output, error) {
					<-ctx.Done()
					return nil, ctx.Err()
				}}
				calls := []llm.ToolCall{{ID: "c1", Name: "helper", Arguments: llm.Arguments(`{"task":"help"}`)}}
				if withSibling {
					calls = append(calls, llm.ToolCall{ID: "c2", Name: "sibling", Arguments: llm.Arguments(`{}`)})
				}
				obs := &toolEndRecorder{}
				agent := loop.NewAgent(llmtest.NewModel(llmtest.Calls(calls...)), loop.MustToolset(tool, sibling), &loop.Options{Observer: obs})
				left := false
				for ch := range agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}) {
					if ch.Agent != "" {
						left = true
						break
					}
				}
				if !left {
					t.Fatal("no chunk of the child was relayed")
				}
				synctest.Wait()
				ends := obs.ends("c1")
				if len(ends) != 1 || !strings.Contains(ends[0], "err=") {
					t.Errorf("ends of c1 = %q, want one, with an error", ends)
				}
			})
		})
	}
}

// An agent tool alone in its message relays its child's chunks and usage
// through the run's goroutine while the run waits for it, as in a batch.
func TestOneAgentToolRelaysItsChild(t *testing.T) {
	for _, withSibling := range []bool{false, true} {
		t.Run(fmt.Sprint("sibling=", withSibling), func(t *testing.T) {
			childModel := llmtest.NewModel(llmtest.Text("child answer"))
			child := loop.NewAgent(childModel, nil, nil)
			tool := loop.AgentTool("helper", "Helps.", child, nil)
			tool.Concurrent = true
			sibling := &loop.ToolDef{Name: "sibling", Concurrent: true, Handler: func(context.Context, *loop.Call) (*loop.Output, error) {
				return loop.TextOutput("sibling"), nil
			}}
			calls := []llm.ToolCall{{ID: "c1", Name: "helper", Arguments: llm.Arguments(`{"task":"help"}`)}}
			if withSibling {
				calls = append(calls, llm.ToolCall{ID: "c2", Name: "sibling", Arguments: llm.Arguments(`{}`)})
			}
			model := llmtest.NewModel(llmtest.Calls(calls...), llmtest.Text("done"))
			agent := loop.NewAgent(model, loop.MustToolset(tool, sibling), nil)
			chunks, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			relayed := 0
			for _, c := range chunks {
				if c.Agent != "" {
					relayed++
				}
			}
			if relayed == 0 {
				t.Error("no chunk of the child was relayed")
			}
			var got string
			for _, r := range lastResults(t, model) {
				if r.CallID == "c1" {
					got = r.Text()
				}
			}
			if !strings.Contains(got, "child answer") {
				t.Errorf("the model read %q, want the child's answer", got)
			}
		})
	}
}
