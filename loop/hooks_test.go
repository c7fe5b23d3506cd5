package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
)

func echoTools(t *testing.T) *loop.Toolset {
	t.Helper()
	cmd := commandTool()
	cmd.Handler = func(_ context.Context, c *loop.Call) (*loop.Output, error) {
		return loop.TextOutput("output of " + c.Args["command"].(string) + " secret=hunter2"), nil
	}
	return loop.MustToolset(&cmd)
}

// hookLog records the events hooks were called for.
type hookLog struct {
	mu     sync.Mutex
	events []string
}

func (l *hookLog) hook(ev loop.HookEvent, f func(*loop.HookInput) *loop.HookOutput) loop.Hook {
	return loop.Hook{Event: ev, Func: func(_ context.Context, in *loop.HookInput) (*loop.HookOutput, error) {
		l.mu.Lock()
		l.events = append(l.events, string(in.Event))
		l.mu.Unlock()
		if f == nil {
			return nil, nil
		}
		return f(in), nil
	}}
}

func TestHooksInARun(t *testing.T) {
	var log hookLog
	model := llmtest.NewModel(
		llmtest.Call("c1", "run_command", `{"command":"rm -rf x"}`),
		llmtest.Call("c2", "run_command", `{"command":"ls"}`),
		llmtest.Text("done?"),
		llmtest.Text("done."),
	)
	stops := 0
	agent := loop.NewAgent(model, echoTools(t), &loop.Options{
		Permissions: &loop.Permissions{Mode: loop.ModeBypass},
		Hooks: []loop.Hook{
			log.hook(loop.HookRunStart, func(*loop.HookInput) *loop.HookOutput { return &loop.HookOutput{Context: "The repo is hrns."} }),
			log.hook(loop.HookUserPrompt, func(in *loop.HookInput) *loop.HookOutput {
				return &loop.HookOutput{Context: "(prompt was " + in.Prompt + ")"}
			}),
			log.hook(loop.HookPreTool, func(in *loop.HookInput) *loop.HookOutput {
				if strings.Contains(string(in.Arguments), "rm") {
					return &loop.HookOutput{Decision: loop.HookDeny, Reason: "no deleting here"}
				}
				return nil
			}),
			log.hook(loop.HookPostTool, func(in *loop.HookInput) *loop.HookOutput {
				return &loop.HookOutput{Output: loop.TextOutput(strings.ReplaceAll(*in.Result, "hunter2", "[redacted]"))}
			}),
			log.hook(loop.HookStop, func(in *loop.HookInput) *loop.HookOutput {
				stops++
				if !in.StopHookActive {
					return &loop.HookOutput{Decision: loop.HookBlock, Reason: "Run the tests first."}
				}
				return nil
			}),
			log.hook(loop.HookRunEnd, nil),
		},
	})
	chunks, res := collect(t, agent.RunLoop(context.Background(), []llm.Message{llm.UserMessage("clean up")}))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if res.Answer != "done." {
		t.Errorf("answer %q, want the one given after the stop hook", res.Answer)
	}
	want := "run_start user_prompt pre_tool pre_tool post_tool stop stop run_end"
	if got := strings.Join(log.events, " "); got != want {
		t.Errorf("hooks called: %s\nwant %s", got, want)
	}
	reqs := model.Requests()
	first := reqs[0].Messages[0]
	if got := first.Text(); !strings.Contains(got, "(prompt was clean up)") || !strings.Contains(got, "The repo is hrns.") {
		t.Errorf("first user message %q lacks the hooks' context", got)
	}
	r1 := toolResults(reqs[1])
	if len(r1) != 1 || !r1[0].IsError || !strings.Contains(r1[0].Text(), "no deleting here") {
		t.Errorf("denied call's result = %+v", r1)
	}
	r2 := toolResults(reqs[2])
	if got := r2[len(r2)-1].Text(); got != "output of ls secret=[redacted]" {
		t.Errorf("result the model read = %q", got)
	}
	last := reqs[3].Messages[len(reqs[3].Messages)-1]
	if last.Role != llm.RoleUser || last.Text() != "Run the tests first." {
		t.Errorf("after the stop hook the model read %+v", last)
	}
	// The denial is a tool_call_error carrying the decision, and hook
	// chunks report the interventions.
	var denied *loop.PermissionDecision
	for _, c := range only(chunks, loop.ChunkToolCallError) {
		denied = c.Permission
	}
	if denied == nil || denied.Step != loop.StepHook || denied.Behavior != loop.Deny {
		t.Errorf("tool_call_error permission = %+v", denied)
	}
	var decisions []string
	for _, c := range only(chunks, loop.ChunkHook) {
		decisions = append(decisions, string(c.Hook.Event)+":"+c.Hook.Decision)
	}
	wantDecisions := "run_start:context user_prompt:context pre_tool:deny post_tool:replace stop:block"
	if got := strings.Join(decisions, " "); got != wantDecisions {
		t.Errorf("hook chunks: %s\nwant %s", got, wantDecisions)
	}
}

// A stop hook that always blocks cannot keep a run going past MaxTurns.
func TestStopHookBoundedByTurns(t *testing.T) {
	model := llmtest.NewModel()
	for range 10 {
		model.Push(llmtest.Text("done"))
	}
	calls := 0
	agent := loop.NewAgent(model, nil, &loop.Options{MaxTurns: 4, Hooks: []loop.Hook{{Event: loop.HookStop,
		Func: func(context.Context, *loop.HookInput) (*loop.HookOutput, error) {
			calls++
			return &loop.HookOutput{Decision: loop.HookBlock, Reason: "again"}, nil
		}}}})
	_, res := collect(t, agent.RunLoop(context.Background(), []llm.Message{llm.UserMessage("go")}))
	if res.Err != nil || res.Status != loop.StatusCompleted {
		t.Fatalf("status %s, err %v", res.Status, res.Err)
	}
	if n := len(model.Requests()); n != 4 {
		t.Errorf("%d requests, want MaxTurns (4)", n)
	}
}

func TestUserPromptHookBlocks(t *testing.T) {
	model := llmtest.NewModel(llmtest.Text("never"))
	agent := loop.NewAgent(model, nil, &loop.Options{Hooks: []loop.Hook{{Event: loop.HookUserPrompt,
		Func: func(_ context.Context, in *loop.HookInput) (*loop.HookOutput, error) {
			if strings.Contains(in.Prompt, "password") {
				return &loop.HookOutput{Decision: loop.HookBlock, Reason: "prompts must not hold passwords"}, nil
			}
			return nil, nil
		}}}})
	_, res := collect(t, agent.RunLoop(context.Background(), []llm.Message{llm.UserMessage("my password is x")}))
	if !errors.Is(res.Err, loop.ErrPromptBlocked) || !strings.Contains(res.Err.Error(), "passwords") {
		t.Fatalf("err = %v", res.Err)
	}
	if len(model.Requests()) != 0 {
		t.Error("the model saw the blocked prompt")
	}
}

// A hook that fails is reported; for events other than the tool ones it
// changes nothing, and a post_tool failure withholds the result.
func TestHookFailuresReported(t *testing.T) {
	fail := func(context.Context, *loop.HookInput) (*loop.HookOutput, error) { return nil, errors.New("boom") }
	model := llmtest.NewModel(llmtest.Call("c1", "run_command", `{"command":"ls"}`), llmtest.Text("ok"))
	agent := loop.NewAgent(model, echoTools(t), &loop.Options{
		Permissions: &loop.Permissions{Mode: loop.ModeBypass},
		Hooks: []loop.Hook{
			{Name: "start", Event: loop.HookRunStart, Func: fail},
			{Name: "redactor", Event: loop.HookPostTool, Func: fail},
			{Name: "end", Event: loop.HookRunEnd, Func: fail},
		}})
	chunks, res := collect(t, agent.RunLoop(context.Background(), []llm.Message{llm.UserMessage("go")}))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	var failed []string
	for _, c := range only(chunks, loop.ChunkHook) {
		if c.Err != nil && c.Hook.Decision == "error" {
			failed = append(failed, c.Hook.Name)
		}
	}
	if got := strings.Join(failed, " "); got != "start redactor end" {
		t.Errorf("failures reported: %q", got)
	}
	r := toolResults(model.Requests()[1])
	if len(r) != 1 || !r[0].IsError || strings.Contains(r[0].Text(), "hunter2") || !strings.Contains(r[0].Text(), "withheld") {
		t.Errorf("the model read %+v", r)
	}
}

// Plan mode through a run: the model reads why its edit was refused.
func TestPlanModeInARun(t *testing.T) {
	model := llmtest.NewModel(llmtest.Call("c1", "run_command", `{"command":"make"}`), llmtest.Text("Here is my plan."))
	agent := loop.NewAgent(model, echoTools(t), &loop.Options{Permissions: &loop.Permissions{Mode: loop.ModePlan}})
	_, res := collect(t, agent.RunLoop(context.Background(), []llm.Message{llm.UserMessage("build")}))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	r := toolResults(model.Requests()[1])
	if len(r) != 1 || !strings.Contains(r[0].Text(), "plan mode") {
		t.Errorf("the model read %+v", r)
	}
}

// A sub-agent's calls are held to the parent's policy and hooks, and the
// parent's subagent_stop hooks run when it would stop.
func TestSubagentInheritsPolicy(t *testing.T) {
	childModel := llmtest.NewModel(
		llmtest.Call("k1", "run_command", `{"command":"rm -rf /"}`),
		llmtest.Text("child done"),
		llmtest.Text("child really done"),
	)
	child := loop.NewAgent(childModel, echoTools(t), nil)
	parentModel := llmtest.NewModel(llmtest.Call("p1", "helper", `{"task":"clean"}`), llmtest.Text("parent done"))
	var mu sync.Mutex
	var seen []string
	parent := loop.NewAgent(parentModel, loop.MustToolset(loop.AgentTool("helper", "helps", child, nil)), &loop.Options{
		Permissions: &loop.Permissions{Mode: loop.ModeBypass, Deny: mustRules(t, "run_command(rm:*)")},
		Hooks: []loop.Hook{
			{Event: loop.HookPreTool, Func: func(_ context.Context, in *loop.HookInput) (*loop.HookOutput, error) {
				mu.Lock()
				seen = append(seen, in.Tool+"@"+in.Agent)
				mu.Unlock()
				return nil, nil
			}},
			{Event: loop.HookSubagentStop, Func: func(_ context.Context, in *loop.HookInput) (*loop.HookOutput, error) {
				mu.Lock()
				seen = append(seen, string(in.Event)+"@"+in.Agent)
				mu.Unlock()
				if !in.StopHookActive {
					return &loop.HookOutput{Decision: loop.HookBlock, Reason: "check again"}, nil
				}
				return nil, nil
			}},
			{Event: loop.HookStop, Func: func(_ context.Context, in *loop.HookInput) (*loop.HookOutput, error) {
				mu.Lock()
				seen = append(seen, "stop@"+in.Agent)
				mu.Unlock()
				return nil, nil
			}},
		}})
	_, res := collect(t, parent.RunLoop(context.Background(), []llm.Message{llm.UserMessage("go")}))
	if res.Err != nil || res.Answer != "parent done" {
		t.Fatalf("answer %q, err %v", res.Answer, res.Err)
	}
	want := "helper@ run_command@helper subagent_stop@helper subagent_stop@helper stop@"
	if got := strings.Join(seen, " "); got != want {
		t.Errorf("hooks saw %s\nwant %s", got, want)
	}
	r := toolResults(childModel.Requests()[1])
	if len(r) != 1 || !strings.Contains(r[0].Text(), "denied by the rule run_command(rm:*)") {
		t.Errorf("the child read %+v", r)
	}
}

// Toolset.Invoke called from inside a run's tool (code mode) is held to
// the run's policy.
func TestInvokeInheritsRunPolicy(t *testing.T) {
	inner := echoTools(t)
	var innerErr error
	outer := &loop.ToolDef{Name: "program", Access: loop.AccessRead, Handler: func(ctx context.Context, _ *loop.Call) (*loop.Output, error) {
		_, innerErr = inner.Invoke(ctx, llm.ToolCall{Name: "run_command", Arguments: llm.Arguments(`{"command":"make"}`)}, nil)
		return loop.TextOutput("ok"), nil
	}}
	model := llmtest.NewModel(llmtest.Call("c1", "program", `{}`), llmtest.Text("ok"))
	agent := loop.NewAgent(model, loop.MustToolset(outer), &loop.Options{Permissions: &loop.Permissions{Mode: loop.ModePlan}})
	if _, res := collect(t, agent.RunLoop(context.Background(), []llm.Message{llm.UserMessage("go")})); res.Err != nil {
		t.Fatal(res.Err)
	}
	var te *loop.ToolError
	if !errors.As(innerErr, &te) || te.Permission == nil || te.Permission.Step != loop.StepMode {
		t.Errorf("inner call: %v, want refused by plan mode", innerErr)
	}
}

// A call deferred by the approver after a hook rewrote it resumes with the
// rewritten arguments.
func TestRewriteSurvivesSuspension(t *testing.T) {
	var got string
	cmd := commandTool()
	cmd.Handler = func(_ context.Context, c *loop.Call) (*loop.Output, error) {
		got = c.Args["command"].(string)
		return loop.TextOutput("ok"), nil
	}
	model := llmtest.NewModel(llmtest.Call("c1", "run_command", `{"command":"make"}`), llmtest.Text("ok"))
	agent := loop.NewAgent(model, loop.MustToolset(&cmd), &loop.Options{
		Approver: loop.ApproverFunc(func(context.Context, *loop.ApprovalRequest) (loop.Decision, error) {
			return loop.Decision{Verdict: loop.Defer}, nil
		}),
		Hooks: []loop.Hook{{Event: loop.HookPreTool, Func: func(context.Context, *loop.HookInput) (*loop.HookOutput, error) {
			return &loop.HookOutput{Arguments: json.RawMessage(`{"command":"make -n"}`)}, nil
		}}},
	})
	_, res := collect(t, agent.RunLoop(context.Background(), []llm.Message{llm.UserMessage("go")}))
	if res.Status != loop.StatusSuspended {
		t.Fatalf("status %s", res.Status)
	}
	b, _ := json.Marshal(res.Suspension)
	var s loop.Suspension
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	_, res = collect(t, agent.Resume(context.Background(), &s, &loop.ResumeInput{Approvals: []loop.ApprovalDecision{{CallID: "c1", Approved: true}}}))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if got != "make -n" {
		t.Errorf("resumed call ran %q, want the rewritten command", got)
	}
}

// pre_compact hooks are told before the transcript is compacted.
func TestPreCompactHook(t *testing.T) {
	model := llmtest.NewModel()
	for i := range 6 {
		model.Push(llmtest.Call(fmt.Sprintf("c%d", i), "read", fmt.Sprintf(`{"n":%d}`, i)))
	}
	model.Push(llmtest.Fail(fmt.Errorf("too long: %w", llm.ErrContextLength)), llmtest.Text("Done."))
	var triggers []string
	agent := loop.NewAgent(model, loop.MustToolset(readTool(3000)), &loop.Options{
		Compaction: &loop.Compaction{},
		Hooks: []loop.Hook{{Event: loop.HookPreCompact, Func: func(_ context.Context, in *loop.HookInput) (*loop.HookOutput, error) {
			triggers = append(triggers, in.Trigger)
			return nil, nil
		}}},
	})
	chunks, res := collect(t, agent.RunLoop(context.Background(), []llm.Message{llm.UserMessage("go")}))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if len(only(chunks, loop.ChunkCompaction)) != 1 || strings.Join(triggers, ",") != "context_length" {
		t.Errorf("pre_compact hooks were told %q", triggers)
	}
}

// A post_tool hook that replaces nothing leaves a failure as it was.
func TestPostToolHookKeepsFailures(t *testing.T) {
	slow := &loop.ToolDef{Name: "slow", Timeout: time.Millisecond, Handler: func(ctx context.Context, _ *loop.Call) (*loop.Output, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	var seen string
	hooks := []loop.Hook{{Event: loop.HookPostTool, Func: func(_ context.Context, in *loop.HookInput) (*loop.HookOutput, error) {
		seen = *in.Result
		return nil, nil
	}}}
	_, err := loop.MustToolset(slow).Invoke(context.Background(), llm.ToolCall{Name: "slow"}, &loop.InvokeOptions{Hooks: hooks})
	var te *loop.ToolError
	if !errors.As(err, &te) || te.Kind != loop.ToolTimedOut {
		t.Fatalf("err = %v, want the timeout", err)
	}
	if !strings.Contains(seen, "timed out") {
		t.Errorf("the hook saw %q", seen)
	}
}

// A hook that asks sends the call to the approver with its reason.
func TestPreToolHookAsks(t *testing.T) {
	cmd := commandTool()
	cmd.Handler = func(context.Context, *loop.Call) (*loop.Output, error) { return loop.TextOutput("ran"), nil }
	var got *loop.PermissionDecision
	approver := loop.ApproverFunc(func(_ context.Context, req *loop.ApprovalRequest) (loop.Decision, error) {
		got = req.Permission
		return loop.Decision{Verdict: loop.Approve}, nil
	})
	hooks := []loop.Hook{{Name: "guard", Event: loop.HookPreTool, Func: func(context.Context, *loop.HookInput) (*loop.HookOutput, error) {
		return &loop.HookOutput{Decision: loop.HookAsk, Reason: "it touches production"}, nil
	}}}
	if _, err := loop.MustToolset(&cmd).Invoke(context.Background(), llm.ToolCall{Name: "run_command", Arguments: llm.Arguments(`{"command":"deploy"}`)},
		&loop.InvokeOptions{Approver: approver, Hooks: hooks, Permissions: &loop.Permissions{Mode: loop.ModeBypass}}); err != nil {
		t.Fatal(err)
	}
	if got == nil || got.Step != loop.StepHook || got.Rule != "guard" || got.Reason != "it touches production" || got.Behavior != loop.Ask {
		t.Errorf("the approver was told %+v", got)
	}
}

// TestUserPromptHookSeesEveryNewMessage: each of the user messages that
// end a run's input is judged, not only the last.
func TestUserPromptHookSeesEveryNewMessage(t *testing.T) {
	var seen []string
	model := llmtest.NewModel(llmtest.Text("never"))
	agent := loop.NewAgent(model, nil, &loop.Options{Hooks: []loop.Hook{{Event: loop.HookUserPrompt,
		Func: func(_ context.Context, in *loop.HookInput) (*loop.HookOutput, error) {
			seen = append(seen, in.Prompt)
			if strings.Contains(in.Prompt, "forbidden") {
				return &loop.HookOutput{Decision: loop.HookBlock, Reason: "no"}, nil
			}
			return nil, nil
		}}}})
	history := []llm.Message{llm.UserMessage("earlier"), {Role: llm.RoleAssistant, Parts: []llm.Part{llm.TextPart("ok")}}}
	_, res := collect(t, agent.RunLoop(t.Context(), append(history, llm.UserMessage("do the forbidden thing"), llm.UserMessage("thanks"))))
	if !errors.Is(res.Err, loop.ErrPromptBlocked) {
		t.Fatalf("err = %v, want the batch blocked", res.Err)
	}
	if len(model.Requests()) != 0 {
		t.Error("the model saw the blocked message")
	}
	if strings.Join(seen, "|") != "do the forbidden thing" {
		t.Errorf("the hook saw %q, want the new messages only, up to the block", seen)
	}
}
