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

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
)

// recorder is an Observer that writes each hook as a line naming where it
// was called: the path of contexts the Start hooks returned, so that the
// lines show what nests in what.
type recorder struct {
	mu    sync.Mutex
	lines []string
	panic string // the hook that panics, if any
}

type pathKey struct{}

func pathOf(ctx context.Context) string {
	p, _ := ctx.Value(pathKey{}).(string)
	return p
}

func (r *recorder) add(hook, ctx string, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, hook+" "+ctx+" "+fmt.Sprintf(format, args...))
	if r.panic == hook {
		panic("observer bug in " + hook)
	}
}

func (r *recorder) Lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

func (r *recorder) RunStart(ctx context.Context, e loop.RunEvent) context.Context {
	name := "run"
	if e.Agent != "" {
		name = "run(" + e.Agent + ")"
	}
	r.add("RunStart", pathOf(ctx), "agent=%q depth=%d resumed=%v parent=%q", e.Agent, e.Depth, e.Resumed, e.TraceParent)
	return context.WithValue(ctx, pathKey{}, pathOf(ctx)+"/"+name)
}

func (r *recorder) RunEnd(ctx context.Context, e loop.RunEvent) {
	r.add("RunEnd", pathOf(ctx), "status=%s err=%v usage=%d/%d turns=%d", e.Status, e.Err != nil, e.Usage.InputTokens, e.Usage.OutputTokens, e.Turns)
}

func (r *recorder) TurnStart(ctx context.Context, e loop.TurnEvent) context.Context {
	r.add("TurnStart", pathOf(ctx), "turn=%d model=%s final=%v", e.Turn, e.Model, e.Final)
	return context.WithValue(ctx, pathKey{}, fmt.Sprintf("%s/turn%d", pathOf(ctx), e.Turn))
}

func (r *recorder) TurnEnd(ctx context.Context, e loop.TurnEvent) {
	r.add("TurnEnd", pathOf(ctx), "finish=%s usage=%d/%d cached=%d retries=%d err=%v", e.FinishReason, e.Usage.InputTokens, e.Usage.OutputTokens, e.Usage.CacheReadTokens, e.Retries, e.Err != nil)
}

func (r *recorder) ToolStart(ctx context.Context, e loop.ToolEvent) context.Context {
	r.add("ToolStart", pathOf(ctx), "%s id=%s", e.Name, e.CallID)
	return context.WithValue(ctx, pathKey{}, pathOf(ctx)+"/"+e.Name)
}

func (r *recorder) ToolEnd(ctx context.Context, e loop.ToolEvent) {
	kind := ""
	if te, ok := errors.AsType[*loop.ToolError](e.Err); ok {
		kind = string(te.Kind)
	}
	r.add("ToolEnd", pathOf(ctx), "%s err=%s pending=%s", e.Name, kind, e.Pending)
}

func (r *recorder) Retry(ctx context.Context, e loop.RetryEvent) {
	r.add("Retry", pathOf(ctx), "turn=%d attempt=%d", e.Turn, e.Attempt)
}

func (r *recorder) Compaction(ctx context.Context, info loop.CompactionInfo) {
	r.add("Compaction", pathOf(ctx), "%s %s", info.Reason, info.Strategy)
}

func (r *recorder) TraceParent(ctx context.Context) string {
	r.add("TraceParent", pathOf(ctx), "")
	return "tp:" + pathOf(ctx)
}

func TestObserverSeesRunTurnsToolsAndRetries(t *testing.T) {
	failing := loop.NewTool("fail", "Fails.", func(context.Context, struct{}) (string, error) {
		return "", errors.New("disk on fire")
	})
	model := llmtest.NewModel(
		llmtest.Fail(&llm.APIError{StatusCode: 503, Message: "busy"}),
		llmtest.Reply{ToolCalls: []llm.ToolCall{
			{ID: "c1", Name: "echo", Arguments: llm.Arguments(`{"text":"hi"}`)},
			{ID: "c2", Name: "fail", Arguments: llm.Arguments(`{}`)},
			{ID: "c3", Name: "nope", Arguments: llm.Arguments(`{}`)},
		}, Usage: llm.Usage{InputTokens: 100, OutputTokens: 10, CacheReadTokens: 60}},
		llmtest.Text("done"),
	)
	rec := &recorder{}
	agent := loop.NewAgent(model, loop.MustToolset(echoTool(), failing), &loop.Options{
		Model:    "m1",
		Observer: rec,
		Retry:    loop.RetryPolicy{BaseDelay: time.Millisecond},
	})
	_, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	if res.Status != loop.StatusCompleted {
		t.Fatalf("status %s: %v", res.Status, res.Err)
	}
	want := []string{
		`RunStart  agent="" depth=0 resumed=false parent=""`,
		`TurnStart /run turn=1 model=m1 final=false`,
		`Retry /run/turn1 turn=1 attempt=1`,
		`TurnEnd /run/turn1 finish=tool_calls usage=100/10 cached=60 retries=1 err=false`,
		`ToolStart /run echo id=c1`,
		`ToolEnd /run/echo echo err= pending=`,
		`ToolStart /run fail id=c2`,
		`ToolEnd /run/fail fail err=failed pending=`,
		`TurnStart /run turn=2 model=m1 final=false`,
		`TurnEnd /run/turn2 finish=stop usage=10/2 cached=0 retries=0 err=false`,
		`RunEnd /run status=completed err=false usage=110/12 turns=2`,
	}
	if diff := cmp.Diff(want, rec.Lines()); diff != "" {
		t.Errorf("observed (-want +got):\n%s", diff)
	}
}

func TestObserverSeesFailedRequest(t *testing.T) {
	model := llmtest.NewModel(llmtest.Fail(&llm.APIError{StatusCode: 401, Message: "bad key"}))
	rec := &recorder{}
	agent := loop.NewAgent(model, nil, &loop.Options{Observer: rec})
	_, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	if res.Status != loop.StatusFailed {
		t.Fatalf("status %s", res.Status)
	}
	want := []string{
		`RunStart  agent="" depth=0 resumed=false parent=""`,
		`TurnStart /run turn=1 model= final=false`,
		`TurnEnd /run/turn1 finish= usage=0/0 cached=0 retries=0 err=true`,
		`RunEnd /run status=failed err=true usage=0/0 turns=0`,
	}
	if diff := cmp.Diff(want, rec.Lines()); diff != "" {
		t.Errorf("observed (-want +got):\n%s", diff)
	}
}

// A consumer that stops the run still gets the run's end observed, as
// stopped: no span is left open.
func TestObserverSeesStoppedRun(t *testing.T) {
	model := llmtest.NewModel(llmtest.Text("a long answer"))
	rec := &recorder{}
	agent := loop.NewAgent(model, nil, &loop.Options{Observer: rec})
	for c := range agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}) {
		if c.Type == loop.ChunkMessage {
			break
		}
	}
	lines := rec.Lines()
	if len(lines) != 4 || lines[2] != "TurnEnd /run/turn1 finish= usage=0/0 cached=0 retries=0 err=true" ||
		lines[3] != "RunEnd /run status= err=true usage=0/0 turns=0" {
		t.Errorf("observed:\n%s", strings.Join(lines, "\n"))
	}
}

// A sub-agent's run nests in its tool call; its suspension keeps its own
// trace parent, and Resume passes each run the trace parent it suspended
// with.
func TestObserverNestsSubAgentsAndCarriesTraceParent(t *testing.T) {
	model := llmtest.NewModel(
		llmtest.Call("p1", "helper", `{"task":"ask the user"}`),
		llmtest.Call("k1", "ask", `{}`),
		llmtest.Text("the user said yes"),
		llmtest.Text("they agree"),
	)
	child := loop.NewAgent(model, loop.MustToolset(loop.NewClientTool("ask", "Asks the user.", json.RawMessage(`{"type":"object"}`))), nil)
	rec := &recorder{}
	parent := loop.NewAgent(model, loop.MustToolset(loop.AgentTool("helper", "Helps.", child, nil)), &loop.Options{Observer: rec})
	_, res := collect(t, parent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	if res.Status != loop.StatusSuspended {
		t.Fatalf("status %s: %v", res.Status, res.Err)
	}
	s := roundTrip(t, res.Suspension)
	if s.TraceParent != "tp:/run" || s.Calls[0].Agent == nil || s.Calls[0].Agent.TraceParent != "tp:/run/helper/run(helper)" {
		t.Fatalf("trace parents: %q, child %+v", s.TraceParent, s.Calls[0].Agent)
	}
	want := []string{
		`RunStart  agent="" depth=0 resumed=false parent=""`,
		`TurnStart /run turn=1 model= final=false`,
		`TurnEnd /run/turn1 finish=tool_calls usage=10/11 cached=0 retries=0 err=false`,
		`ToolStart /run helper id=p1`,
		`RunStart /run/helper agent="helper" depth=1 resumed=false parent=""`,
		`TurnStart /run/helper/run(helper) turn=1 model= final=false`,
		`TurnEnd /run/helper/run(helper)/turn1 finish=tool_calls usage=13/11 cached=0 retries=0 err=false`,
		`ToolStart /run/helper/run(helper) ask id=k1`,
		`ToolEnd /run/helper/run(helper)/ask ask err= pending=result`,
		`TraceParent /run/helper/run(helper) `,
		`RunEnd /run/helper/run(helper) status=suspended err=false usage=13/11 turns=1`,
		`ToolEnd /run/helper helper err= pending=agent`,
		`TraceParent /run `,
		`RunEnd /run status=suspended err=false usage=23/22 turns=1`,
	}
	if diff := cmp.Diff(want, rec.Lines()); diff != "" {
		t.Errorf("observed (-want +got):\n%s", diff)
	}

	rec.lines = nil
	_, res = collect(t, parent.Resume(t.Context(), s, &loop.ResumeInput{Results: []llm.ToolResult{
		{CallID: "k1", Content: []llm.Part{llm.TextPart("yes")}},
	}}))
	if res.Status != loop.StatusCompleted {
		t.Fatalf("status %s: %v", res.Status, res.Err)
	}
	want = []string{
		`RunStart  agent="" depth=0 resumed=true parent="tp:/run"`,
		`ToolStart /run helper id=p1`,
		`RunStart /run/helper agent="helper" depth=1 resumed=true parent="tp:/run/helper/run(helper)"`,
		`TurnStart /run/helper/run(helper) turn=2 model= final=false`,
		`TurnEnd /run/helper/run(helper)/turn2 finish=stop usage=13/5 cached=0 retries=0 err=false`,
		`RunEnd /run/helper/run(helper) status=completed err=false usage=26/16 turns=2`,
		`ToolEnd /run/helper helper err= pending=`,
		`TurnStart /run turn=2 model= final=false`,
		`TurnEnd /run/turn2 finish=stop usage=10/3 cached=0 retries=0 err=false`,
		`RunEnd /run status=completed err=false usage=46/30 turns=2`,
	}
	if diff := cmp.Diff(want, rec.Lines()); diff != "" {
		t.Errorf("observed on resume (-want +got):\n%s", diff)
	}
}

// An observer that panics in any hook does not change the run.
func TestObserverPanicsDoNotStopRuns(t *testing.T) {
	for _, hook := range []string{"RunStart", "TurnStart", "TurnEnd", "ToolStart", "ToolEnd", "RunEnd"} {
		t.Run(hook, func(t *testing.T) {
			model := llmtest.NewModel(llmtest.Call("c1", "echo", `{"text":"hi"}`), llmtest.Text("done"))
			agent := loop.NewAgent(model, loop.MustToolset(echoTool()), &loop.Options{Observer: &recorder{panic: hook}})
			_, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
			if res.Status != loop.StatusCompleted || res.Answer != "done" {
				t.Fatalf("status %s, answer %q: %v", res.Status, res.Answer, res.Err)
			}
		})
	}
}

// nopObserver observes nothing: what a run pays for calling the hooks.
type nopObserver struct{}

func (nopObserver) RunStart(ctx context.Context, _ loop.RunEvent) context.Context   { return ctx }
func (nopObserver) RunEnd(context.Context, loop.RunEvent)                           {}
func (nopObserver) TurnStart(ctx context.Context, _ loop.TurnEvent) context.Context { return ctx }
func (nopObserver) TurnEnd(context.Context, loop.TurnEvent)                         {}
func (nopObserver) ToolStart(ctx context.Context, _ loop.ToolEvent) context.Context { return ctx }
func (nopObserver) ToolEnd(context.Context, loop.ToolEvent)                         {}
func (nopObserver) Retry(context.Context, loop.RetryEvent)                          {}
func (nopObserver) Compaction(context.Context, loop.CompactionInfo)                 {}
func (nopObserver) TraceParent(context.Context) string                              { return "" }

// BenchmarkRunScriptedObserved is BenchmarkRunScripted with an observer
// that does nothing: the cost of the hooks themselves.
func BenchmarkRunScriptedObserved(b *testing.B) {
	model := llmtest.NewModel()
	agent := loop.NewAgent(model, loop.MustToolset(benchTool()), &loop.Options{Observer: nopObserver{}})
	msgs := []llm.Message{llm.SystemMessage("You read files."), llm.UserMessage("What is in config.yaml?")}
	b.ReportAllocs()
	for b.Loop() {
		model.Push(llmtest.Call("c1", "read", `{"path":"config.yaml"}`), llmtest.Text(benchText))
		if _, err := agent.Run(context.Background(), msgs); err != nil {
			b.Fatal(err)
		}
	}
}
