package session_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/sqlite"
)

const owner = "alice"

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func startManager(t *testing.T, st store.Store, model llm.Model, opts *session.Options) *session.Manager {
	t.Helper()
	if opts == nil {
		opts = &session.Options{}
	}
	opts.Logger = slog.New(slog.NewTextHandler(tWriter{t}, nil))
	m := session.New(st, model, opts)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(context.Background()) })
	return m
}

func create(t *testing.T, m *session.Manager, body string) *session.View {
	t.Helper()
	var req session.Request
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	v, created, err := m.Create(t.Context(), &session.CreateParams{Owner: owner, Request: &req, Raw: json.RawMessage(body)})
	if err != nil || !created {
		t.Fatalf("Create = %v, %v", created, err)
	}
	return v
}

// follower reads a session's events as they come.
type follower struct {
	t      *testing.T
	m      *session.Manager
	id     string
	events []session.Event
	last   *session.Changes
}

// until reads events until cond holds for the latest changes.
func (f *follower) until(cond func(c *session.Changes) bool) *session.Changes {
	f.t.Helper()
	for range 1000 {
		c, _, err := f.m.Changes(f.t.Context(), owner, f.id, &session.ChangesParams{From: int64(len(f.events)), Wait: 10 * time.Second})
		if err != nil {
			f.t.Fatal(err)
		}
		if c == nil {
			continue
		}
		f.events = append(f.events, c.NewEvents...)
		f.last = c
		if cond(c) {
			return c
		}
	}
	f.t.Fatalf("condition never held; events:\n%s", f.dump())
	return nil
}

func (f *follower) status(s session.Status) *session.Changes {
	f.t.Helper()
	return f.until(func(c *session.Changes) bool {
		if c.Status != s && c.Status.Terminal() {
			f.t.Fatalf("session ended %s (error %v), want %s; events:\n%s", c.Status, c.Error, s, f.dump())
		}
		return c.Status == s
	})
}

func (f *follower) dump() string {
	var b strings.Builder
	for _, e := range f.events {
		b.WriteString(e.Type + " " + string(e.Data) + "\n")
	}
	return b.String()
}

// kinds lists the events as "Type" or "AgentEvent/kind".
func kinds(events []session.Event) []string {
	var out []string
	for _, e := range events {
		k := e.Type
		if e.Type == session.EventAgent {
			var d session.AgentEventData
			json.Unmarshal(e.Data, &d)
			k += "/" + d.Kind
		}
		if e.Type == session.EventActiveState {
			var d session.ActiveState
			json.Unmarshal(e.Data, &d)
			k += "/" + d.State
		}
		out = append(out, k)
	}
	return out
}

func checkIndexes(t *testing.T, events []session.Event) {
	t.Helper()
	for i, e := range events {
		if e.Index != int64(i) {
			t.Fatalf("event %d has index %d", i, e.Index)
		}
	}
}

func TestClientToolRoundTrip(t *testing.T) {
	model := llmtest.NewModel(
		llmtest.Calls(
			llm.ToolCall{ID: "call_1", Name: "get_order_status", Arguments: llm.Arguments(`{"order_id":"4242"}`)},
			llm.ToolCall{ID: "call_2", Name: "get_order_status", Arguments: llm.Arguments(`{"order_id":"4243"}`)},
		),
		llmtest.Text("Order 4242 shipped; 4243 was not found."),
	)
	m := startManager(t, openStore(t), model, nil)
	v := create(t, m, `{"agent":{"name":"support-agent","tools":[{"name":"get_order_status","description":"Look up the status of an order in our system.","input_schema":{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}}]},"messages":"Check orders 4242 and 4243."}`)
	f := &follower{t: t, m: m, id: v.ID}
	f.status(session.StatusAwaitingToolResults)
	last := f.events[len(f.events)-1]
	var as session.ActiveState
	json.Unmarshal(last.Data, &as)
	want := []session.ToolRequest{
		{ToolName: "get_order_status", Args: json.RawMessage(`{"order_id":"4242"}`), ID: "call_1"},
		{ToolName: "get_order_status", Args: json.RawMessage(`{"order_id":"4243"}`), ID: "call_2"},
	}
	if diff := cmp.Diff(want, as.PendingToolCalls); diff != "" {
		t.Fatalf("pending calls (-want +got):\n%s", diff)
	}
	ctx := t.Context()
	if err := m.PostToolResults(ctx, owner, v.ID, []session.ToolResult{{Kind: "tool_result", ToolReq: want[0], Result: json.RawMessage(`"shipped"`)}}); err != nil {
		t.Fatal(err)
	}
	// Twice is harmless.
	if err := m.PostToolResults(ctx, owner, v.ID, []session.ToolResult{{Kind: "tool_result", ToolReq: want[0], Result: json.RawMessage(`"shipped"`)}}); err != nil {
		t.Fatal(err)
	}
	f.until(func(*session.Changes) bool { return true })
	if err := m.PostToolResults(ctx, owner, v.ID, []session.ToolResult{{Kind: "error_event", ToolReq: want[1], Error: "Order not found", Origin: "custom_tools"}}); err != nil {
		t.Fatal(err)
	}
	c := f.status(session.StatusCompleted)
	if string(c.Answer) != `"Order 4242 shipped; 4243 was not found."` {
		t.Errorf("answer = %s", c.Answer)
	}
	checkIndexes(t, f.events)
	wantKinds := []string{
		"AgentEvent/message_event",
		"AgentStartedEvent",
		"ActiveStateChangeEvent/running",
		"AgentEvent/policy_event",
		"MetricsUpdateEvent",
		"ActiveStateChangeEvent/awaiting_tool_results",
		"AgentEvent/tool_result",
		"ActiveStateChangeEvent/awaiting_tool_results",
		"AgentEvent/error_event",
		"ActiveStateChangeEvent/running",
		"AgentEvent/policy_event",
		"MetricsUpdateEvent",
		"AgentEvent/answer_event",
		"AgentCompletionEvent",
	}
	if diff := cmp.Diff(wantKinds, kinds(f.events)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// The republished list holds the surviving call.
	json.Unmarshal(f.events[7].Data, &as)
	if len(as.PendingToolCalls) != 1 || as.PendingToolCalls[0].ID != "call_2" {
		t.Errorf("republished pending calls = %+v, want call_2 only", as.PendingToolCalls)
	}
	// The model read both results, the error marked as one.
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	tm := reqs[1].Messages[len(reqs[1].Messages)-1]
	if tm.Role != llm.RoleTool || len(tm.Parts) != 2 || tm.Parts[0].ToolResult.Text() != "shipped" ||
		!tm.Parts[1].ToolResult.IsError || tm.Parts[1].ToolResult.Text() != "Order not found" {
		t.Errorf("tool message = %+v", tm)
	}
	// After the end, results are refused.
	err := m.PostToolResults(ctx, owner, v.ID, []session.ToolResult{{Kind: "tool_result", ToolReq: want[0], Result: json.RawMessage(`"x"`)}})
	if err == nil || !strings.Contains(err.Error(), "finished") {
		t.Errorf("post after the end = %v, want ErrFinished", err)
	}
}

func TestUnknownCallRefused(t *testing.T) {
	model := llmtest.NewModel(llmtest.Call("call_1", "get_order_status", `{"order_id":"1"}`), llmtest.Text("done"))
	m := startManager(t, openStore(t), model, nil)
	v := create(t, m, `{"agent":{"name":"a","tools":[{"name":"get_order_status","description":"d"}]},"messages":"go"}`)
	f := &follower{t: t, m: m, id: v.ID}
	f.status(session.StatusAwaitingToolResults)
	err := m.PostToolResults(t.Context(), owner, v.ID, []session.ToolResult{
		{Kind: "tool_result", ToolReq: session.ToolRequest{ID: "call_1"}, Result: json.RawMessage(`"ok"`)},
		{Kind: "tool_result", ToolReq: session.ToolRequest{ID: "nope"}, Result: json.RawMessage(`"ok"`)},
	})
	var ve *session.ValidationError
	if !errorsAs(err, &ve) || !strings.Contains(ve.Error(), `"nope"`) {
		t.Fatalf("post with an unknown id = %v, want a validation error naming it", err)
	}
	// Nothing of the batch was recorded.
	if c, _, _ := m.Changes(t.Context(), owner, v.ID, &session.ChangesParams{From: int64(len(f.events))}); c != nil {
		t.Errorf("events after a refused batch: %v", kinds(c.NewEvents))
	}
	if _, err := m.Get(t.Context(), "bob", v.ID); err != session.ErrNotFound {
		t.Errorf("Get by another owner = %v, want ErrNotFound", err)
	}
}

func errorsAs[T error](err error, target *T) bool {
	t, ok := err.(T)
	if ok {
		*target = t
	}
	return ok
}

func TestValidation(t *testing.T) {
	m := session.New(openStore(t), llmtest.NewModel(), &session.Options{
		Environments: map[string]*loop.Toolset{"web": loop.MustToolset(loop.NewTool("web_fetch", "fetch", func(context.Context, struct{}) (string, error) { return "", nil }))},
	})
	tests := []struct {
		name, body string
		want       []string // substrings of the field errors, in order
	}{
		{"no agent", `{"messages":"hi"}`, []string{"body.agent: Field required"}},
		{"unknown agent", `{"agent":"nobody","messages":"hi"}`, []string{`unknown agent "nobody"`}},
		{"unknown environment", `{"agent":{"name":"a","environments":[{"kind":"moon"}]},"messages":"hi"}`, []string{`body.agent.environments.0: environment kind "moon" is not provided`}},
		{"desktop on the server", `{"agent":{"name":"a","environments":[{"kind":"desktop","host":"cloud"}]},"messages":"hi"}`, []string{`body.agent.environments.0.host: a desktop environment runs on the caller's device here (host "user_device"), not "cloud"`}},
		{"two computer tools", `{"agent":{"name":"a","environments":["desktop"],"tools":[{"name":"computer","description":"d"}]},"messages":"hi"}`, []string{`body.agent.tools: tool "computer" is the tool of the agent's desktop environment`}},
		{"bad tool", `{"agent":{"name":"a","tools":[{"name":"9bad","description":"d"},{"name":"ok","description":"d","input_schema":{"type":"string"}}]},"messages":"hi"}`,
			[]string{"body.agent.tools.0.name", "body.agent.tools.1.input_schema"}},
		{"shadowing", `{"agent":{"name":"a","environments":["web"],"tools":[{"name":"web_fetch","description":"d"}]},"messages":"hi"}`, []string{"environment"}},
		{"budgets", `{"agent":{"name":"a"},"messages":"hi","max_steps":0,"max_time_s":-1,"idle_timeout_s":0}`, []string{"max_steps", "max_time_s", "idle_timeout_s"}},
		{"bad image", `{"agent":{"name":"a"},"messages":{"message":"look","images":["file:///etc/passwd"]}}`, []string{"body.messages.0.images.0"}},
		{"unknown subagent", `{"agent":{"name":"a","subagents":["b"]},"messages":"hi"}`, []string{`body.agent.subagents.0: subagent "b": unknown agent "b"`}},
		{"subagents too deep", `{"agent":{"name":"a","subagents":[{"name":"b","subagents":[{"name":"c","subagents":[{"name":"d","subagents":[{"name":"e"}]}]}]}]},"messages":"hi"}`, []string{"nest at most 3 deep"}},
		{"override", `{"agent":{"name":"a"},"messages":"hi","overrides":{"agent.name":"x"}}`, []string{"not supported"}},
		{"override of a missing environment", `{"agent":{"name":"a"},"messages":"hi","overrides":{"agent.environments[kind=web].start_url":"x"}}`, []string{"the agent has no web environment"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req session.Request
			if err := json.Unmarshal([]byte(tt.body), &req); err != nil {
				t.Fatal(err)
			}
			_, _, err := m.Create(t.Context(), &session.CreateParams{Owner: owner, Request: &req, Raw: json.RawMessage(tt.body)})
			var ve *session.ValidationError
			if !errorsAs(err, &ve) {
				t.Fatalf("Create = %v, want a validation error", err)
			}
			if len(ve.Fields) != len(tt.want) {
				t.Errorf("%d field errors, want %d: %v", len(ve.Fields), len(tt.want), ve)
			}
			msg := ve.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
}

func TestIdempotency(t *testing.T) {
	m := session.New(openStore(t), llmtest.NewModel(), nil)
	mk := func(body, key string) (*session.View, bool, error) {
		var req session.Request
		json.Unmarshal([]byte(body), &req)
		return m.Create(t.Context(), &session.CreateParams{Owner: owner, Request: &req, Raw: json.RawMessage(body), IdempotencyKey: key})
	}
	a, created, err := mk(`{"agent":{"name":"a"},"messages":"hi"}`, "k")
	if err != nil || !created {
		t.Fatal(created, err)
	}
	b, created, err := mk(`{ "messages": "hi", "agent": {"name": "a"} }`, "k")
	if err != nil || created || b.ID != a.ID {
		t.Errorf("replay = %v, created %v, %v; want session %s", b, created, err, a.ID)
	}
	if _, _, err := mk(`{"agent":{"name":"a"},"messages":"bye"}`, "k"); err != session.ErrIdempotencyMismatch {
		t.Errorf("same key, other body = %v, want ErrIdempotencyMismatch", err)
	}
}

func TestSteering(t *testing.T) {
	// The model calls a server tool that waits until released, so the
	// session is surely running when the caller's input comes.
	release := make(chan struct{})
	slow := loop.NewTool("slow", "waits", func(ctx context.Context, _ struct{}) (string, error) {
		select {
		case <-release:
			return "done", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	model := llmtest.NewModel(
		llmtest.Call("c1", "slow", `{}`),
		llmtest.Text("first answer"),
		llmtest.Text("second answer"),
	)
	m := startManager(t, openStore(t), model, &session.Options{
		Agents:   map[string]*session.AgentConfig{"worker": {Description: "works", Toolsets: []string{"slow"}}},
		Toolsets: map[string]*loop.Toolset{"slow": loop.MustToolset(slow)},
	})
	v := create(t, m, `{"agent":"worker","messages":"start","idle_timeout_s":60}`)
	f := &follower{t: t, m: m, id: v.ID}
	f.until(func(c *session.Changes) bool { return slices.Contains(kinds(c.NewEvents), "AgentEvent/policy_event") })
	ctx := t.Context()
	// (A message sent after the pause would resume the session, as in
	// the reference: TestMessageResumesPaused of package server.)
	if err := m.SendMessages(ctx, owner, v.ID, []session.UserMessage{{Message: "also this"}}); err != nil {
		t.Fatal(err)
	}
	if err := m.Pause(ctx, owner, v.ID); err != nil {
		t.Fatal(err)
	}
	close(release)
	f.status(session.StatusPaused)
	if n := len(model.Requests()); n != 1 {
		t.Errorf("%d model requests while paused, want 1", n)
	}
	if err := m.Resume(ctx, owner, v.ID); err != nil {
		t.Fatal(err)
	}
	f.status(session.StatusIdle)
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	if last.Role != llm.RoleUser || last.Text() != "also this" {
		t.Errorf("the message sent while running reached the model as %+v", last)
	}
	// An idle session wakes on a message.
	if err := m.SendMessages(ctx, owner, v.ID, []session.UserMessage{{Message: "more"}}); err != nil {
		t.Fatal(err)
	}
	c := f.until(func(c *session.Changes) bool {
		return string(c.Answer) == `"second answer"` && c.Status == session.StatusIdle
	})
	if c.Metrics.Steps != 3 {
		t.Errorf("steps = %d, want 3", c.Metrics.Steps)
	}
	if err := m.Cancel(ctx, owner, v.ID); err != nil {
		t.Fatal(err)
	}
	f.status(session.StatusInterrupted)
	if err := m.Cancel(ctx, owner, v.ID); err != nil {
		t.Errorf("second cancel = %v", err)
	}
	if err := m.Pause(ctx, owner, v.ID); err == nil {
		t.Error("pause after the end succeeded")
	}
	checkIndexes(t, f.events)
}

func TestForceAnswer(t *testing.T) {
	model := llmtest.NewModel(llmtest.Call("c1", "ask", `{}`), llmtest.Text("best effort"))
	m := startManager(t, openStore(t), model, nil)
	v := create(t, m, `{"agent":{"name":"a","tools":[{"name":"ask","description":"asks"}]},"messages":"go"}`)
	f := &follower{t: t, m: m, id: v.ID}
	f.status(session.StatusAwaitingToolResults)
	if err := m.ForceAnswer(t.Context(), owner, v.ID); err != nil {
		t.Fatal(err)
	}
	f.status(session.StatusCompleted)
	reqs := model.Requests()
	final := reqs[1]
	if final.ToolChoice.Mode != llm.ToolChoiceNone {
		t.Errorf("final request tool choice = %q, want none", final.ToolChoice.Mode)
	}
	msgs := final.Messages
	tm, prompt := msgs[len(msgs)-2], msgs[len(msgs)-1]
	if !tm.Parts[0].ToolResult.IsError || !strings.Contains(tm.Parts[0].ToolResult.Text(), "final answer") {
		t.Errorf("abandoned call's result = %+v", tm.Parts[0].ToolResult)
	}
	if !strings.Contains(prompt.Text(), "the user asks for your final answer") || strings.Contains(prompt.Text(), "%!") {
		t.Errorf("final prompt = %q", prompt.Text())
	}
}

func TestMaxTimeWithUnresolvedCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		model := llmtest.NewModel(llmtest.Call("c1", "ask", `{}`), llmtest.Text("out of time"))
		m := startManager(t, openStore(t), model, nil)
		v := create(t, m, `{"agent":{"name":"a","tools":[{"name":"ask","description":"asks"}]},"messages":"go","max_time_s":30}`)
		f := &follower{t: t, m: m, id: v.ID}
		f.status(session.StatusAwaitingToolResults)
		start := time.Now()
		c := f.status(session.StatusTimedOut)
		if waited := time.Since(start); waited < 29*time.Second || waited > 31*time.Second {
			t.Errorf("timed out after %v of fake time, want 30s", waited)
		}
		if string(c.Answer) != `"out of time"` || c.ErrorCode == nil || *c.ErrorCode != "timeout" {
			t.Errorf("answer %s, error code %v", c.Answer, c.ErrorCode)
		}
		reqs := model.Requests()
		if len(reqs) != 2 {
			t.Fatalf("%d model requests, want 2", len(reqs))
		}
		msgs := reqs[1].Messages
		res := msgs[len(msgs)-2].Parts[0].ToolResult
		if !res.IsError || !strings.Contains(res.Text(), "max_time_s") {
			t.Errorf("the unresolved call's result = %+v, want a model-visible error", res)
		}
		if got := kinds(f.events); !slices.Contains(got, "AgentEvent/error_event") || got[len(got)-1] != "AgentCompletionEvent" {
			t.Errorf("events = %v", got)
		}
	})
}

func TestIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		model := llmtest.NewModel(llmtest.Text("hello"))
		m := startManager(t, openStore(t), model, nil)
		v := create(t, m, `{"agent":{"name":"a"},"messages":"hi","idle_timeout_s":5}`)
		f := &follower{t: t, m: m, id: v.ID}
		f.status(session.StatusIdle)
		start := time.Now()
		f.status(session.StatusCompleted)
		if waited := time.Since(start); waited != 5*time.Second {
			t.Errorf("completed %v after going idle, want 5s", waited)
		}
	})
}

func TestRestartResumes(t *testing.T) {
	st := openStore(t)
	// The first manager's model never answers; it is stopped mid-request.
	blocked := llmtest.NewModel(llmtest.Reply{Block: true})
	m1 := session.New(st, blocked, nil)
	m1.Start(context.Background())
	v := create(t, m1, `{"agent":{"name":"a"},"messages":"hi"}`)
	f := &follower{t: t, m: m1, id: v.ID}
	f.status(session.StatusRunning)
	for len(blocked.Requests()) == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := m1.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	model := llmtest.NewModel(llmtest.Text("answered after restart"))
	m2 := startManager(t, st, model, nil)
	f.m = m2
	c := f.status(session.StatusCompleted)
	if string(c.Answer) != `"answered after restart"` {
		t.Errorf("answer = %s", c.Answer)
	}
	checkIndexes(t, f.events)
	want := []string{"AgentEvent/message_event", "AgentStartedEvent", "ActiveStateChangeEvent/running", "AgentEvent/policy_event", "MetricsUpdateEvent", "AgentEvent/answer_event", "AgentCompletionEvent"}
	if diff := cmp.Diff(want, kinds(f.events)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestRestartMidTool stops the manager while a server tool runs: the next
// manager runs the call again (at least once) and the log holds its
// result once.
func TestRestartMidTool(t *testing.T) {
	st := openStore(t)
	var runs atomic.Int32
	started := make(chan struct{}, 4)
	slow := loop.NewTool("slow", "Works.", func(ctx context.Context, _ struct{}) (string, error) {
		if runs.Add(1) == 1 {
			started <- struct{}{}
			<-ctx.Done() // the first run is cut by the stop
			return "", ctx.Err()
		}
		return "worked", nil
	})
	opts := func() *session.Options {
		return &session.Options{
			Agents:   map[string]*session.AgentConfig{"w": {Toolsets: []string{"slow"}}},
			Toolsets: map[string]*loop.Toolset{"slow": loop.MustToolset(slow)},
		}
	}
	m1 := session.New(st, llmtest.NewModel(llmtest.Call("c1", "slow", `{}`)), opts())
	m1.Start(context.Background())
	v := create(t, m1, `{"agent":"w","messages":"go"}`)
	<-started
	if err := m1.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	m2 := startManager(t, st, llmtest.NewModel(llmtest.Text("all done")), opts())
	f := &follower{t: t, m: m2, id: v.ID}
	f.status(session.StatusCompleted)
	if runs.Load() != 2 {
		t.Errorf("the tool ran %d times, want 2 (cut once, then again)", runs.Load())
	}
	want := []string{"AgentEvent/message_event", "AgentStartedEvent", "ActiveStateChangeEvent/running",
		"AgentEvent/policy_event", "MetricsUpdateEvent", "AgentEvent/tool_result",
		"AgentEvent/policy_event", "MetricsUpdateEvent", "AgentEvent/answer_event", "AgentCompletionEvent"}
	if diff := cmp.Diff(want, kinds(f.events)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	checkIndexes(t, f.events)
}

// TestHardDeadline: a model that never answers is cut at max_time_s plus
// the grace period, and the session ends timed_out.
func TestHardDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := startManager(t, openStore(t), llmtest.NewModel(llmtest.Reply{Block: true}), &session.Options{TimeoutGrace: 5 * time.Second})
		v := create(t, m, `{"agent":{"name":"a"},"messages":"go","max_time_s":10}`)
		f := &follower{t: t, m: m, id: v.ID}
		f.status(session.StatusRunning)
		start := time.Now()
		c := f.status(session.StatusTimedOut)
		if waited := time.Since(start); waited != 15*time.Second {
			t.Errorf("cut after %v of fake time, want 15s", waited)
		}
		if c.ErrorCode == nil || *c.ErrorCode != session.CodeTimeout {
			t.Errorf("error code = %v", c.ErrorCode)
		}
	})
}

// TestLongIdleTimeout: an idle_timeout_s whose nanoseconds do not fit in an
// int64 keeps the session idle, as a long one does: it neither completes
// at its first answer (a timeout that wrapped below zero) nor a moment
// later (one that wrapped to a fraction of a second).
func TestLongIdleTimeout(t *testing.T) {
	for _, idle := range []string{"9000000000", "9223372036854775807", "18446744074"} {
		t.Run(idle, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				model := llmtest.NewModel(llmtest.Text("hello"))
				m := startManager(t, openStore(t), model, nil)
				v := create(t, m, `{"agent":{"name":"a"},"messages":"hi","idle_timeout_s":`+idle+`}`)
				f := &follower{t: t, m: m, id: v.ID}
				f.status(session.StatusIdle)
				c, _, err := m.Changes(t.Context(), owner, v.ID, &session.ChangesParams{From: int64(len(f.events)), Wait: 24 * time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				if c != nil {
					f.events = append(f.events, c.NewEvents...)
					t.Errorf("the session went on from idle within a day (%s); events:\n%s", c.Status, f.dump())
				}
			})
		})
	}
}
