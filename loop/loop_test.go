package loop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
)

// collect runs seq to its end and returns its chunks and result.
func collect(t *testing.T, seq func(func(loop.Chunk) bool)) ([]loop.Chunk, *loop.Result) {
	t.Helper()
	var chunks []loop.Chunk
	var res *loop.Result
	ends := 0
	for c := range seq {
		chunks = append(chunks, c)
		if c.Type == loop.ChunkEnd {
			ends++
			res = c.Result
		}
	}
	if ends != 1 {
		t.Fatalf("run yielded %d end chunks, want exactly 1", ends)
	}
	if chunks[len(chunks)-1].Type != loop.ChunkEnd {
		t.Fatalf("last chunk is %q, want end", chunks[len(chunks)-1].Type)
	}
	return chunks, res
}

func types(chunks []loop.Chunk, keep ...loop.ChunkType) []string {
	var out []string
	for _, c := range chunks {
		for _, k := range keep {
			if c.Type == k {
				out = append(out, string(c.Type))
			}
		}
	}
	return out
}

func only(chunks []loop.Chunk, typ loop.ChunkType) []loop.Chunk {
	var out []loop.Chunk
	for _, c := range chunks {
		if c.Type == typ {
			out = append(out, c)
		}
	}
	return out
}

// toolResults returns the results of the tool messages sent in req.
func toolResults(req *llm.Request) []llm.ToolResult {
	var out []llm.ToolResult
	for _, m := range req.Messages {
		if m.Role != llm.RoleTool {
			continue
		}
		for _, p := range m.Parts {
			out = append(out, *p.ToolResult)
		}
	}
	return out
}

func lastResults(t *testing.T, model *llmtest.Model) []llm.ToolResult {
	t.Helper()
	reqs := model.Requests()
	if len(reqs) == 0 {
		t.Fatal("no model request")
	}
	return toolResults(reqs[len(reqs)-1])
}

func echoTool() *loop.ToolDef {
	type in struct {
		Text string `json:"text" jsonschema:"what to echo"`
	}
	return loop.NewTool("echo", "Echoes text.", func(_ context.Context, in in) (string, error) {
		return "echo: " + in.Text, nil
	})
}

func TestSimpleToolFlow(t *testing.T) {
	var got map[string]any
	tool := loop.NewSimpleTool("Looks up a project name",
		[]loop.ToolArgument{{Name: "id", Type: "string"}},
		func(args map[string]any) string {
			got = args
			id, _ := args["id"].(string)
			return "project-" + id
		})
	model := llmtest.NewModel(
		llmtest.Call("c1", "lookup_project", `{"id":"42"}`),
		llmtest.Text("It is project-42."),
	)
	agent := loop.New(model, map[string]loop.Tool{"lookup_project": tool})
	chunks, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{
		llm.SystemMessage("be brief"), llm.UserMessage("which project is 42?"),
	}))
	if res.Status != loop.StatusCompleted || res.Answer != "It is project-42." || res.Err != nil {
		t.Fatalf("result = %+v", res)
	}
	if diff := cmp.Diff(map[string]any{"id": "42"}, got); diff != "" {
		t.Errorf("tool args (-want +got):\n%s", diff)
	}
	want := []string{"turn_start", "tool_call_delta", "turn_end", "tool_call_start", "tool_call_result", "turn_start", "message", "turn_end", "end"}
	if diff := cmp.Diff(want, compact(chunks)); diff != "" {
		t.Errorf("chunk flow (-want +got):\n%s", diff)
	}
	start := only(chunks, loop.ChunkToolCallStart)[0]
	if start.ToolCall.ID != "c1" || start.ToolCall.Name != "lookup_project" || string(start.ToolCall.Arguments) != `{"id":"42"}` {
		t.Errorf("tool_call_start = %+v", start.ToolCall)
	}
	if r := only(chunks, loop.ChunkToolCallResult)[0]; r.Content != "project-42" {
		t.Errorf("tool_call_result content = %q", r.Content)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	wantSchema := `{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`
	if diff := cmp.Diff(wantSchema, string(reqs[0].Tools[0].InputSchema)); diff != "" {
		t.Errorf("schema (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]llm.ToolResult{{CallID: "c1", Name: "lookup_project", Content: []llm.Part{llm.TextPart("project-42")}}}, toolResults(reqs[1])); diff != "" {
		t.Errorf("tool message (-want +got):\n%s", diff)
	}
	// The transcript: input, assistant call, tool result, answer.
	roles := []llm.Role{}
	for _, m := range res.Messages {
		roles = append(roles, m.Role)
	}
	if diff := cmp.Diff([]llm.Role{"system", "user", "assistant", "tool", "assistant"}, roles); diff != "" {
		t.Errorf("transcript roles (-want +got):\n%s", diff)
	}
}

// compact lists chunk types, merging runs of the same delta type.
func compact(chunks []loop.Chunk) []string {
	var out []string
	for _, c := range chunks {
		s := string(c.Type)
		if len(out) > 0 && out[len(out)-1] == s && (c.Type == loop.ChunkMessage || c.Type == loop.ChunkReasoning || c.Type == loop.ChunkToolCallDelta) {
			continue
		}
		out = append(out, s)
	}
	return out
}

func TestToolFailuresReachTheModel(t *testing.T) {
	type args struct {
		N    int    `json:"n"`
		Mode string `json:"mode,omitempty" enum:"fast,slow"`
	}
	typed := loop.NewTool("typed", "Takes n.", func(_ context.Context, a args) (int, error) { return a.N * 2, nil })
	failing := loop.NewTool("failing", "Fails.", func(context.Context, struct{}) (string, error) {
		return "", errors.New("disk full")
	})
	panicking := loop.NewTool("panicking", "Panics.", func(context.Context, struct{}) (string, error) {
		panic("boom")
	})
	isErr := &loop.ToolDef{Name: "soft_error", Handler: func(context.Context, *loop.Call) (*loop.Output, error) {
		return loop.ErrorOutput("file not found"), nil
	}}
	tests := []struct {
		name, tool, args string
		kind             loop.ToolErrorKind
		want             string // substring of what the model reads
	}{
		{"unknown tool", "nope", `{}`, loop.ToolUnknown, `unknown tool "nope"; available tools: typed, failing, panicking, soft_error`},
		{"not JSON", "typed", `{"n": 1`, loop.ToolBadArgs, `invalid arguments for tool "typed": not valid JSON`},
		{"not an object", "typed", `[1,2]`, loop.ToolBadArgs, `arguments must be a JSON object, not an array`},
		{"missing field", "typed", `{}`, loop.ToolBadArgs, `"n"`},
		{"wrong type", "typed", `{"n":"three"}`, loop.ToolBadArgs, `n`},
		{"bad enum", "typed", `{"n":1,"mode":"medium"}`, loop.ToolBadArgs, `mode`},
		{"unexpected field", "typed", `{"n":1,"extra":true}`, loop.ToolBadArgs, `extra`},
		{"handler error", "failing", `{}`, loop.ToolFailed, `tool "failing" failed: disk full`},
		{"panic", "panicking", `{}`, loop.ToolPanicked, `tool "panicking" panicked: boom`},
		{"error output", "soft_error", `{}`, loop.ToolFailed, `file not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := llmtest.NewModel(llmtest.Call("c1", tt.tool, tt.args), llmtest.Text("ok"))
			agent := loop.NewAgent(model, loop.MustToolset(typed, failing, panicking, isErr), nil)
			chunks, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
			if res.Status != loop.StatusCompleted {
				t.Fatalf("status %s, err %v: a tool failure must not end the run", res.Status, res.Err)
			}
			errs := only(chunks, loop.ChunkToolCallError)
			if len(errs) != 1 {
				t.Fatalf("%d tool_call_error chunks, want 1", len(errs))
			}
			var te *loop.ToolError
			if !errors.As(errs[0].Err, &te) || te.Kind != tt.kind || te.CallID != "c1" {
				t.Errorf("error = %#v, want kind %s", errs[0].Err, tt.kind)
			}
			results := lastResults(t, model)
			if len(results) != 1 || !results[0].IsError || !strings.Contains(results[0].Text(), tt.want) {
				t.Errorf("model read %+v, want an error containing %q", results, tt.want)
			}
			if errs[0].Content != results[0].Text() {
				t.Errorf("chunk content %q differs from what the model read %q", errs[0].Content, results[0].Text())
			}
		})
	}
}

func TestTypedToolDefaultsAndResult(t *testing.T) {
	type in struct {
		City  string `json:"city"`
		Units string `json:"units,omitempty" enum:"metric,imperial" default:"metric"`
		Days  int    `json:"days,omitempty" default:"3"`
	}
	type out struct {
		Summary string `json:"summary"`
		Days    int    `json:"days"`
	}
	var got in
	tool := loop.NewTool("forecast", "Forecast.", func(_ context.Context, a in) (out, error) {
		got = a
		return out{Summary: a.City + " " + a.Units, Days: a.Days}, nil
	})
	model := llmtest.NewModel(llmtest.Call("c1", "forecast", `{"city":"Paris"}`), llmtest.Text("done"))
	agent := loop.NewAgent(model, loop.MustToolset(tool), nil)
	if _, err := agent.Run(t.Context(), []llm.Message{llm.UserMessage("weather?")}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in{City: "Paris", Units: "metric", Days: 3}, got); diff != "" {
		t.Errorf("defaults not applied (-want +got):\n%s", diff)
	}
	if txt := lastResults(t, model)[0].Text(); txt != `{"summary":"Paris metric","days":3}` {
		t.Errorf("result = %s", txt)
	}
}

func TestParallelCallsRunTogetherAndKeepCallOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Each concurrent call waits until both have started: run one
		// after the other, they would time out.
		var started sync2
		slow := &loop.ToolDef{Name: "fetch", Concurrent: true, Timeout: time.Minute,
			InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`),
			Handler: func(ctx context.Context, c *loop.Call) (*loop.Output, error) {
				if err := started.arrive(ctx, 2); err != nil {
					return nil, err
				}
				n := int(c.Args["n"].(float64))
				time.Sleep(time.Duration(3-n) * time.Second) // the first call finishes last
				return loop.TextOutput(fmt.Sprint("page ", n)), nil
			}}
		model := llmtest.NewModel(
			llmtest.Calls(
				llm.ToolCall{ID: "a", Name: "fetch", Arguments: llm.Arguments(`{"n":1}`)},
				llm.ToolCall{ID: "b", Name: "fetch", Arguments: llm.Arguments(`{"n":2}`)},
			),
			llmtest.Text("both fetched"),
		)
		agent := loop.NewAgent(model, loop.MustToolset(slow), nil)
		chunks, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
		if res.Err != nil || len(only(chunks, loop.ChunkToolCallError)) != 0 {
			t.Fatalf("err %v; errors %+v", res.Err, only(chunks, loop.ChunkToolCallError))
		}
		// Results are reported as they finish ...
		var order []string
		for _, c := range only(chunks, loop.ChunkToolCallResult) {
			order = append(order, c.ToolCall.ID)
		}
		if diff := cmp.Diff([]string{"b", "a"}, order); diff != "" {
			t.Errorf("result chunks (-want +got):\n%s", diff)
		}
		// ... and appended in call order.
		var ids []string
		for _, r := range lastResults(t, model) {
			ids = append(ids, r.CallID+"="+r.Text())
		}
		if diff := cmp.Diff([]string{"a=page 1", "b=page 2"}, ids); diff != "" {
			t.Errorf("tool message (-want +got):\n%s", diff)
		}
	})
}

// sync2 is a barrier: arrive returns once n callers have arrived.
type sync2 struct {
	n  atomic.Int32
	ch chan struct{}
}

func (s *sync2) arrive(ctx context.Context, n int32) error {
	if s.n.Add(1) == n {
		close(s.barrier())
	}
	select {
	case <-s.barrier():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

var barrierMu = make(chan struct{}, 1)

func (s *sync2) barrier() chan struct{} {
	barrierMu <- struct{}{}
	defer func() { <-barrierMu }()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

func TestSequentialToolsNeverOverlap(t *testing.T) {
	var running, peak atomic.Int32
	seq := &loop.ToolDef{Name: "write", Handler: func(context.Context, *loop.Call) (*loop.Output, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(time.Millisecond)
		return loop.TextOutput("ok"), nil
	}}
	var calls []llm.ToolCall
	for i := range 4 {
		calls = append(calls, llm.ToolCall{ID: fmt.Sprint("c", i), Name: "write", Arguments: llm.Arguments(`{}`)})
	}
	model := llmtest.NewModel(llmtest.Calls(calls...), llmtest.Text("done"))
	agent := loop.NewAgent(model, loop.MustToolset(seq), nil)
	if _, err := agent.Run(t.Context(), []llm.Message{llm.UserMessage("go")}); err != nil {
		t.Fatal(err)
	}
	if peak.Load() != 1 {
		t.Errorf("%d sequential calls ran at once", peak.Load())
	}
	if n := len(lastResults(t, model)); n != 4 {
		t.Errorf("%d results, want 4", n)
	}
}

func TestToolTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A seed-style tool cannot see the context: it is abandoned, and
		// released only when the test ends.
		release := make(chan struct{})
		defer close(release)
		stuck := loop.NewSimpleTool("Hangs.", nil, func(map[string]any) string {
			<-release
			return "too late"
		})
		ts, _ := loop.ToolsetFromMap(map[string]loop.Tool{"stuck": stuck})
		model := llmtest.NewModel(llmtest.Call("c1", "stuck", `{}`), llmtest.Text("gave up"))
		agent := loop.NewAgent(model, ts, &loop.Options{ToolTimeout: 2 * time.Second})
		chunks, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		errs := only(chunks, loop.ChunkToolCallError)
		if len(errs) != 1 || errs[0].Content != `tool "stuck" timed out after 2s` {
			t.Fatalf("errors = %+v", errs)
		}
	})
}

func TestCancellationStopsModelAndTools(t *testing.T) {
	t.Run("during the model stream", func(t *testing.T) {
		model := llmtest.NewModel(llmtest.Reply{Block: true})
		agent := loop.NewAgent(model, nil, nil)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var res *loop.Result
		for c := range agent.RunLoop(ctx, []llm.Message{llm.UserMessage("go")}) {
			if c.Type == loop.ChunkTurnStart {
				cancel()
			}
			if c.Type == loop.ChunkEnd {
				res = c.Result
			}
		}
		if !errors.Is(res.Err, context.Canceled) || res.Status != loop.StatusFailed {
			t.Fatalf("result %+v, want failed with context.Canceled", res)
		}
	})
	t.Run("during a tool", func(t *testing.T) {
		toolCtxDone := make(chan struct{})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		tool := &loop.ToolDef{Name: "wait", Handler: func(tctx context.Context, _ *loop.Call) (*loop.Output, error) {
			cancel()
			<-tctx.Done()
			close(toolCtxDone)
			return nil, tctx.Err()
		}}
		model := llmtest.NewModel(llmtest.Call("c1", "wait", `{}`))
		agent := loop.NewAgent(model, loop.MustToolset(tool), nil)
		_, res := collect(t, agent.RunLoop(ctx, []llm.Message{llm.UserMessage("go")}))
		<-toolCtxDone
		if !errors.Is(res.Err, context.Canceled) {
			t.Fatalf("err = %v", res.Err)
		}
	})
	t.Run("breaking out of the range", func(t *testing.T) {
		toolCtxDone := make(chan struct{})
		slow := &loop.ToolDef{Name: "wait", Concurrent: true, Handler: func(tctx context.Context, _ *loop.Call) (*loop.Output, error) {
			<-tctx.Done()
			close(toolCtxDone)
			return nil, tctx.Err()
		}}
		quick := &loop.ToolDef{Name: "quick", Concurrent: true, Handler: func(context.Context, *loop.Call) (*loop.Output, error) {
			return loop.TextOutput("done"), nil
		}}
		model := llmtest.NewModel(llmtest.Calls(
			llm.ToolCall{ID: "s", Name: "wait", Arguments: llm.Arguments(`{}`)},
			llm.ToolCall{ID: "q", Name: "quick", Arguments: llm.Arguments(`{}`)},
		))
		agent := loop.NewAgent(model, loop.MustToolset(slow, quick), nil)
		for c := range agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}) {
			if c.Type == loop.ChunkToolCallResult {
				break
			}
		}
		<-toolCtxDone // the running tool's context is cancelled once the consumer leaves
	})
}

func TestBudgetsAskForAFinalAnswer(t *testing.T) {
	loopForever := func(req *llm.Request) llmtest.Reply {
		if req.ToolChoice.Mode == llm.ToolChoiceNone {
			// A model that ignores tool_choice: its calls are dropped.
			return llmtest.Reply{Text: "final answer", ToolCalls: []llm.ToolCall{{ID: "x", Name: "echo", Arguments: llm.Arguments(`{"text":"again"}`)}}}
		}
		return llmtest.Call("", "echo", `{"text":"again"}`)
	}
	script := func(n int) []llmtest.Reply {
		var r []llmtest.Reply
		for range n {
			r = append(r, llmtest.Reply{Func: loopForever})
		}
		return r
	}
	tests := []struct {
		name   string
		opts   loop.Options
		budget string
		turns  int
	}{
		{"turns", loop.Options{MaxTurns: 3}, "max_turns", 3},
		{"output tokens", loop.Options{MaxOutputTokens: 25}, "max_output_tokens", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := llmtest.NewModel(script(10)...)
			agent := loop.NewAgent(model, loop.MustToolset(echoTool()), &tt.opts)
			_, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
			if res.Status != loop.StatusCompleted || res.Budget != tt.budget || res.Answer != "final answer" {
				t.Fatalf("result: status %s budget %q answer %q err %v", res.Status, res.Budget, res.Answer, res.Err)
			}
			reqs := model.Requests()
			if len(reqs) != tt.turns {
				t.Fatalf("%d requests, want %d", len(reqs), tt.turns)
			}
			last := reqs[len(reqs)-1]
			if last.ToolChoice.Mode != llm.ToolChoiceNone || len(last.Tools) == 0 {
				t.Errorf("final request: tool choice %q with %d tools; want none, tools still declared", last.ToolChoice.Mode, len(last.Tools))
			}
			if m := last.Messages[len(last.Messages)-1]; m.Role != llm.RoleUser || !strings.Contains(m.Text(), tt.budget) {
				t.Errorf("final request does not ask for an answer: %+v", m)
			}
			final := res.Messages[len(res.Messages)-1]
			if len(final.ToolCalls()) != 0 {
				t.Errorf("calls of the final turn were kept: %+v", final.ToolCalls())
			}
		})
	}
	t.Run("duration", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			slow := &loop.ToolDef{Name: "echo", Handler: func(context.Context, *loop.Call) (*loop.Output, error) {
				time.Sleep(40 * time.Second)
				return loop.TextOutput("ok"), nil
			}}
			model := llmtest.NewModel(script(10)...)
			agent := loop.NewAgent(model, loop.MustToolset(slow), &loop.Options{MaxDuration: time.Minute})
			_, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
			if res.Budget != "max_duration" || len(model.Requests()) != 3 {
				t.Fatalf("budget %q after %d requests", res.Budget, len(model.Requests()))
			}
		})
	})
}

func TestUsageAndFinishReasonPerTurn(t *testing.T) {
	model := llmtest.NewModel(
		llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: "c", Name: "echo", Arguments: llm.Arguments(`{"text":"x"}`)}},
			Usage: llm.Usage{InputTokens: 100, OutputTokens: 10, CacheReadTokens: 80}},
		llmtest.Reply{Text: "cut", Finish: llm.FinishLength, Usage: llm.Usage{InputTokens: 130, OutputTokens: 20}},
	)
	agent := loop.NewAgent(model, loop.MustToolset(echoTool()), nil)
	chunks, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
	want := llm.Usage{InputTokens: 230, OutputTokens: 30, CacheReadTokens: 80}
	if diff := cmp.Diff(want, res.Usage); diff != "" {
		t.Errorf("run usage (-want +got):\n%s", diff)
	}
	ends := only(chunks, loop.ChunkTurnEnd)
	if len(ends) != 2 || ends[0].Usage.OutputTokens != 10 || ends[1].FinishReason != llm.FinishLength || ends[0].FinishReason != llm.FinishToolCalls {
		t.Errorf("turn_end chunks = %+v", ends)
	}
	if len(res.Turns) != 2 || res.Turns[1].FinishReason != llm.FinishLength {
		t.Errorf("turns = %+v", res.Turns)
	}
}

func TestRetries(t *testing.T) {
	rateLimited := &llm.APIError{Provider: "test", StatusCode: 429, Message: "slow down", RetryAfter: 7 * time.Second}
	overloaded := &llm.APIError{Provider: "test", StatusCode: 503, Message: "overloaded"}
	auth := &llm.APIError{Provider: "test", StatusCode: 401, Message: "bad key"}
	t.Run("retry-after is honoured", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			model := llmtest.NewModel(llmtest.Fail(rateLimited), llmtest.Text("hi"))
			agent := loop.NewAgent(model, nil, nil)
			start := time.Now()
			chunks, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
			if res.Err != nil || res.Answer != "hi" {
				t.Fatalf("result %+v", res)
			}
			retries := only(chunks, loop.ChunkRetry)
			if len(retries) != 1 || retries[0].Retry.Delay != 7*time.Second || !errors.Is(retries[0].Err, llm.ErrRateLimited) {
				t.Fatalf("retries = %+v", retries)
			}
			if waited := time.Since(start); waited != 7*time.Second {
				t.Errorf("waited %v, want the 7s the provider asked for", waited)
			}
			if res.Turns[0].Retries != 1 {
				t.Errorf("turn retries = %d", res.Turns[0].Retries)
			}
		})
	})
	t.Run("backoff grows with jitter and gives up", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			model := llmtest.NewModel(llmtest.Fail(overloaded), llmtest.Fail(overloaded), llmtest.Fail(overloaded), llmtest.Fail(overloaded))
			agent := loop.NewAgent(model, nil, &loop.Options{Retry: loop.RetryPolicy{MaxAttempts: 4, BaseDelay: time.Second, MaxDelay: 3 * time.Second}})
			chunks, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
			if !errors.Is(res.Err, loop.ErrRetriesExhausted) || !errors.Is(res.Err, llm.ErrOverloaded) {
				t.Fatalf("err = %v", res.Err)
			}
			if _, ok := errors.AsType[*llm.APIError](res.Err); !ok {
				t.Errorf("the provider's error is not reachable with errors.As: %v", res.Err)
			}
			retries := only(chunks, loop.ChunkRetry)
			if len(retries) != 3 {
				t.Fatalf("%d retries, want 3", len(retries))
			}
			for i, lo := range []time.Duration{500 * time.Millisecond, time.Second, 1500 * time.Millisecond} {
				if d := retries[i].Retry.Delay; d < lo || d > 2*lo {
					t.Errorf("retry %d delay %v, want in [%v, %v]", i+1, d, lo, 2*lo)
				}
			}
			if e := only(chunks, loop.ChunkError); len(e) != 1 {
				t.Errorf("%d error chunks, want 1", len(e))
			}
		})
	})
	t.Run("a dropped stream is retried", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			model := llmtest.NewModel(llmtest.Reply{Text: "partial answer that", Err: fmt.Errorf("read: %w", errUnexpectedEOF), FailAfter: 2}, llmtest.Text("whole answer"))
			agent := loop.NewAgent(model, nil, nil)
			chunks, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
			if res.Err != nil || res.Answer != "whole answer" {
				t.Fatalf("result %+v", res)
			}
			if diff := cmp.Diff([]string{"turn_start", "message", "retry", "message", "turn_end", "end"}, compact(chunks)); diff != "" {
				t.Errorf("flow (-want +got):\n%s", diff)
			}
		})
	})
	t.Run("auth errors are fatal at once", func(t *testing.T) {
		model := llmtest.NewModel(llmtest.Fail(auth), llmtest.Text("never"))
		agent := loop.NewAgent(model, nil, nil)
		chunks, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
		if !errors.Is(res.Err, llm.ErrAuth) || len(only(chunks, loop.ChunkRetry)) != 0 || model.Remaining() != 1 {
			t.Fatalf("err %v, %d retries", res.Err, len(only(chunks, loop.ChunkRetry)))
		}
	})
	t.Run("a retry-after beyond the limit fails at once", func(t *testing.T) {
		long := &llm.APIError{Provider: "test", StatusCode: 429, RetryAfter: time.Hour}
		model := llmtest.NewModel(llmtest.Fail(long))
		agent := loop.NewAgent(model, nil, nil)
		_, res := collect(t, agent.RunLoop(t.Context(), []llm.Message{llm.UserMessage("go")}))
		if !errors.Is(res.Err, llm.ErrRateLimited) {
			t.Fatalf("err = %v", res.Err)
		}
	})
}

func TestOutputIsElided(t *testing.T) {
	big := strings.Repeat("a", 5000) + "MIDDLE" + strings.Repeat("z", 5000)
	tool := &loop.ToolDef{Name: "dump", Handler: func(context.Context, *loop.Call) (*loop.Output, error) {
		return loop.TextOutput(big), nil
	}}
	model := llmtest.NewModel(llmtest.Call("c", "dump", `{}`), llmtest.Text("ok"))
	agent := loop.NewAgent(model, loop.MustToolset(tool), &loop.Options{MaxToolOutput: 1000})
	if _, err := agent.Run(t.Context(), []llm.Message{llm.UserMessage("go")}); err != nil {
		t.Fatal(err)
	}
	got := lastResults(t, model)[0].Text()
	if len(got) > 1000 || !strings.HasPrefix(got, "aaaa") || !strings.HasSuffix(got, "zzzz") || strings.Contains(got, "MIDDLE") {
		t.Fatalf("elided output (%d bytes) = %.80q...", len(got), got)
	}
	if !strings.Contains(got, "bytes elided") {
		t.Errorf("no elision marker in %q", got)
	}
}

func TestCallIDsAreMadeUnique(t *testing.T) {
	model := llmtest.NewModel(
		llmtest.Calls(
			llm.ToolCall{ID: "", Name: "echo", Arguments: llm.Arguments(`{"text":"1"}`)},
			llm.ToolCall{ID: "dup", Name: "echo", Arguments: llm.Arguments(`{"text":"2"}`)},
			llm.ToolCall{ID: "dup", Name: "echo", Arguments: llm.Arguments(`{"text":"3"}`)},
		),
		llmtest.Text("ok"),
	)
	agent := loop.NewAgent(model, loop.MustToolset(echoTool()), nil)
	res, err := agent.Run(t.Context(), []llm.Message{llm.UserMessage("go")})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, c := range res.Messages[1].ToolCalls() {
		r := res.Messages[2].Parts[i].ToolResult
		if c.ID == "" || seen[c.ID] || r.CallID != c.ID {
			t.Errorf("call %d id %q, result id %q", i, c.ID, r.CallID)
		}
		seen[c.ID] = true
	}
}

func TestChunkJSON(t *testing.T) {
	c := loop.Chunk{Type: loop.ChunkToolCallError, Turn: 2, Content: "bad <&>", Err: errors.New("bad"),
		ToolCall: &loop.ToolCallInfo{ID: "c1", Name: "x", Arguments: json.RawMessage(`{"a":1}`)}}
	// As the CLI writes --json lines: code and commands stay readable.
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		t.Fatal(err)
	}
	b := strings.TrimSuffix(buf.String(), "\n")
	want := `{"type":"tool_call_error","turn":2,"content":"bad <&>","tool_call":{"id":"c1","name":"x","arguments":{"a":1}},"error":"bad"}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}

func TestElide(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"unbounded text", -1, "unbounded text"},
		{strings.Repeat("a", 50) + strings.Repeat("z", 50), 40, "aaaaa\n\n[... 90 bytes elided ...]\n\nzzzzz"},
		{strings.Repeat("é", 40), 36, "é\n\n[... 74 bytes elided ...]\n\néé"}, // cut on rune boundaries
		{"0123456789abcdefghij", 10, "0123456789"},                            // no room for the marker
		{strings.Repeat("é", 10), 5, "éé"},
		{"abc", 0, ""},
	}
	for _, tt := range tests {
		got := loop.Elide(tt.in, tt.max)
		if tt.max >= 0 && len(got) > tt.max {
			t.Errorf("Elide(…, %d) is %d bytes long", tt.max, len(got))
		}
		if got != tt.want {
			t.Errorf("Elide(%.10q…, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}

// TestRunConversation checks that every model request of a run carries the
// run's own llm.Conversation (what providers keep between turns) and that
// another run has another.
func TestRunConversation(t *testing.T) {
	model := llmtest.NewModel(
		llmtest.Call("c1", "echo", `{"text":"a"}`), llmtest.Text("one"),
		llmtest.Call("c2", "echo", `{"text":"b"}`), llmtest.Text("two"))
	agent := loop.NewAgent(model, loop.MustToolset(echoTool()), nil)
	for range 2 {
		if _, err := agent.Run(t.Context(), []llm.Message{llm.UserMessage("go")}); err != nil {
			t.Fatal(err)
		}
	}
	reqs := model.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4", len(reqs))
	}
	for i, r := range reqs {
		if r.Conversation == nil {
			t.Fatalf("request %d has no conversation", i)
		}
	}
	if reqs[0].Conversation != reqs[1].Conversation || reqs[2].Conversation != reqs[3].Conversation {
		t.Error("the turns of a run have different conversations")
	}
	if reqs[0].Conversation == reqs[2].Conversation {
		t.Error("two runs share a conversation")
	}
}
