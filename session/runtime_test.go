package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// The tests of this file steer sessions while they run, cut their steps
// (a stop, a failed write, a crash, a cancel) and check what the caller
// and the model see afterwards (issue 31).

// within follows the session until cond holds, failing the test when it
// does not within d (a bound on a wait that should take milliseconds).
func within(t *testing.T, f *follower, d time.Duration, cond func(c *session.Changes) bool) *session.Changes {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("condition did not hold within %v; status %v; events:\n%s", d, lastStatus(f), f.dump())
		}
		c, _, err := f.m.Changes(f.t.Context(), owner, f.id, &session.ChangesParams{From: int64(len(f.events)), Wait: left})
		if err != nil {
			t.Fatal(err)
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
}

func lastStatus(f *follower) session.Status {
	if f.last == nil {
		return ""
	}
	return f.last.Status
}

// untilStatus is within for a status; it fails at once when the session
// ends otherwise.
func untilStatus(t *testing.T, f *follower, s session.Status) *session.Changes {
	t.Helper()
	return within(t, f, 20*time.Second, func(c *session.Changes) bool {
		if c.Status != s && c.Status.Terminal() {
			t.Fatalf("session ended %s (error %v), want %s; events:\n%s", c.Status, c.Error, s, f.dump())
		}
		return c.Status == s
	})
}

// received waits (bounded) for a value on ch.
func received[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not happen", what)
	}
	var zero T
	return zero
}

// receivedOr is received, with what diagnose says when nothing came.
func receivedOr[T any](t *testing.T, ch <-chan T, what string, diagnose func() string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not happen\n%s", what, diagnose())
	}
	var zero T
	return zero
}

// rerunDiagnosis describes, for a failure, the stored session id (its
// status, lease, attempts, state and events), the calls of the gated
// tools, the requests the model got, the managers' logs, and this
// process's goroutines that run a manager or a store.
func rerunDiagnosis(st store.Store, id string, model *llmtest.Model, tools []*gatedTool, logs ...*syncLog) string {
	var b strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now := time.Now()
	if s, err := st.GetSession(ctx, id); err != nil {
		fmt.Fprintf(&b, "reading the session: %v\n", err)
	} else {
		lease := "none"
		if s.LeaseOwner != "" {
			lease = fmt.Sprintf("%s until %s", s.LeaseOwner, s.LeaseUntil.Format("15:04:05.000"))
		}
		fmt.Fprintf(&b, "at %s the session is %s, runnable %v, wake_at %v, lease %s, attempts %d, version %d\nstate: %s\n",
			now.Format("15:04:05.000"), s.Status, s.Runnable, s.WakeAt, lease, s.Attempts, s.Version, s.State)
	}
	if evs, err := st.Events(ctx, id, 0, 1000); err != nil {
		fmt.Fprintf(&b, "reading the events: %v\n", err)
	} else {
		for _, e := range evs {
			fmt.Fprintf(&b, "event %d %s %s %s\n", e.Index, e.Time.Format("15:04:05.000"), e.Type, e.Data)
		}
	}
	for i, g := range tools {
		fmt.Fprintf(&b, "gated tool %d: %d starts unread, %d ran, %d cut\n", i+1, len(g.started), g.ran.Load(), g.cut.Load())
	}
	fmt.Fprintf(&b, "model requests after the restart: %d\n", len(model.Requests()))
	for i, l := range logs {
		fmt.Fprintf(&b, "manager %d's log:\n%s", i+1, l.String())
	}
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "hrns/session.(*Manager)") || strings.Contains(g, "hrns/store/sqlite.") || strings.Contains(g, "hrns/store/postgres.") {
			b.WriteString(g + "\n\n")
		}
	}
	return b.String()
}

// requestText renders what a model request holds, one message a line:
// role, text, tool calls and tool results (error or not).
func requestText(req *llm.Request) string {
	var b strings.Builder
	for _, m := range req.Messages {
		b.WriteString(string(m.Role) + ":")
		for _, p := range m.Parts {
			switch {
			case p.Kind == llm.PartText:
				b.WriteString(" " + p.Text)
			case p.Kind == llm.PartToolCall && p.ToolCall != nil:
				b.WriteString(" call(" + p.ToolCall.ID + ")")
			case p.Kind == llm.PartToolResult && p.ToolResult != nil:
				tag := "result"
				if p.ToolResult.IsError {
					tag = "error"
				}
				b.WriteString(" " + tag + "(" + p.ToolResult.CallID + ": " + p.ToolResult.Text() + ")")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// offersTools reports whether a request lets the model call tools (a
// request for the final answer declares them, with the tool choice none).
func offersTools(req *llm.Request) bool {
	return len(req.Tools) > 0 && req.ToolChoice.Mode != llm.ToolChoiceNone
}

// gatedTool is a server tool that reports each start of a call and then
// waits for its context to end or for release; ran counts the calls that
// returned a result, cut those whose context ended first.
type gatedTool struct {
	started chan string
	release chan struct{}
	ran     atomic.Int32
	cut     atomic.Int32
	once    sync.Once
}

func newGatedTool() *gatedTool {
	return &gatedTool{started: make(chan string, 16), release: make(chan struct{})}
}

func (g *gatedTool) open() { g.once.Do(func() { close(g.release) }) }

// waitCut waits (bounded) until a call was cut.
func (g *gatedTool) waitCut(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for g.cut.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the call was not stopped")
		}
		time.Sleep(time.Millisecond)
	}
}

func (g *gatedTool) tool(name string) *loop.ToolDef {
	return loop.NewTool(name, "Works for a while.", func(ctx context.Context, _ struct{}) (string, error) {
		g.started <- name
		select {
		case <-ctx.Done():
			g.cut.Add(1)
			return "", ctx.Err()
		case <-g.release:
			g.ran.Add(1)
			return "the tool's output", nil
		}
	})
}

func gatedOptions(g *gatedTool, o *session.Options) *session.Options {
	if o == nil {
		o = &session.Options{}
	}
	o.Agents = map[string]*session.AgentConfig{"w": {Toolsets: []string{"t"}}}
	o.Toolsets = map[string]*loop.Toolset{"t": loop.MustToolset(g.tool("slow"))}
	return o
}

// TestRejectedAnswerKeepsMessage (issue 31, item 1): a final answer
// rejected by answer_format leaves the user's message in the checkpoint
// it commits: a restart asks the model again with the question, the
// rejected answer and why it was rejected.
func TestRejectedAnswerKeepsMessage(t *testing.T) {
	st := openStore(t)
	blocked := llmtest.NewModel(llmtest.Text("Yes, it is."), llmtest.Reply{Block: true})
	m1 := session.New(st, blocked, nil)
	start(t, m1)
	v := create(t, m1, `{"agent":{"name":"judge","answer_format":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}},"messages":"Is the sky blue?"}`)
	f := &follower{t: t, m: m1, id: v.ID}
	within(t, f, 20*time.Second, func(*session.Changes) bool { return slices.Contains(kinds(f.events), "AgentEvent/error_event") })
	for len(blocked.Requests()) < 2 {
		time.Sleep(time.Millisecond)
	}
	if err := m1.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	model := llmtest.NewModel(llmtest.Text(`{"ok":true}`))
	m2 := startManager(t, st, model, nil)
	f.m = m2
	c := untilStatus(t, f, session.StatusCompleted)
	if string(c.Answer) != `{"ok":true}` {
		t.Errorf("answer = %s, want {\"ok\":true}; events:\n%s", c.Answer, f.dump())
	}
	reqs := model.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model requests after the restart, want 1", len(reqs))
	}
	got := requestText(reqs[0])
	for _, want := range []string{"user: Is the sky blue?", "assistant: Yes, it is.", "user: Your final answer was rejected"} {
		if !strings.Contains(got, want) {
			t.Errorf("the request after the restart lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "Is the sky blue?") != 1 {
		t.Errorf("the question is in the request %d times, want once:\n%s", strings.Count(got, "Is the sky blue?"), got)
	}
	if c.Metrics.Steps != 2 {
		t.Errorf("steps = %d, want 2", c.Metrics.Steps)
	}
}

// TestCutCallEvaluatedAgain (issue 31, item 2): a server call cut before
// its permission was decided and committed is run again only through the
// permission evaluation: a deny rule refuses it again after a failed
// write, and a pre_tool hook is asked again after a restart.
func TestCutCallEvaluatedAgain(t *testing.T) {
	t.Run("deny rule after a failed write", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var runs atomic.Int32
			danger := loop.NewTool("danger", "Does harm.", func(context.Context, struct{}) (string, error) {
				runs.Add(1)
				return "harm done", nil
			})
			var commits atomic.Int32
			// The second step commit of the run fails: the refusal.
			st := &flakyStore{Store: openStore(t), fail: func() bool { return commits.Add(1) == 2 }}
			model := llmtest.NewModel(llmtest.Call("c1", "danger", `{}`), llmtest.Text("refused, fine"), llmtest.Text("refused, fine"))
			m, log := newLogged(t, st, model, &session.Options{
				Agents:      map[string]*session.AgentConfig{"w": {Toolsets: []string{"t"}}},
				Toolsets:    map[string]*loop.Toolset{"t": loop.MustToolset(danger)},
				Permissions: &loop.Permissions{Deny: []loop.Rule{{Tool: "danger"}}},
			})
			start(t, m)
			v := create(t, m, `{"agent":"w","messages":"do harm"}`)
			f, c := ended(t, m, v.ID)
			if c.Status != session.StatusCompleted {
				t.Fatalf("ended %s (%v); events:\n%s", c.Status, c.Error, f.dump())
			}
			if !strings.Contains(log.String(), "disk I/O error") {
				t.Fatalf("no write failed:\n%s", log)
			}
			if n := runs.Load(); n != 0 {
				t.Errorf("the call a deny rule refuses ran %d times", n)
			}
			if !strings.Contains(f.dump(), "denied by the rule") {
				t.Errorf("the refusal is not in the events:\n%s", f.dump())
			}
		})
	})
	t.Run("pre_tool hook after a restart", func(t *testing.T) {
		st := openStore(t)
		g := newGatedTool()
		asked := make(chan struct{}, 1)
		slowHook := loop.Hook{Event: loop.HookPreTool, Func: func(ctx context.Context, _ *loop.HookInput) (*loop.HookOutput, error) {
			asked <- struct{}{}
			<-ctx.Done() // checking, slowly, until the stop cuts it
			return nil, ctx.Err()
		}}
		m1 := session.New(st, llmtest.NewModel(llmtest.Call("c1", "slow", `{}`)), gatedOptions(g, &session.Options{Hooks: []loop.Hook{slowHook}}))
		start(t, m1)
		v := create(t, m1, `{"agent":"w","messages":"go"}`)
		received(t, asked, "the first hook call")
		if err := m1.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		var calls atomic.Int32
		deny := loop.Hook{Event: loop.HookPreTool, Func: func(context.Context, *loop.HookInput) (*loop.HookOutput, error) {
			calls.Add(1)
			return &loop.HookOutput{Decision: loop.HookDeny, Reason: "not today"}, nil
		}}
		g.open()
		m2 := startManager(t, st, llmtest.NewModel(llmtest.Text("ok")), gatedOptions(g, &session.Options{Hooks: []loop.Hook{deny}}))
		f := &follower{t: t, m: m2, id: v.ID}
		untilStatus(t, f, session.StatusCompleted)
		if calls.Load() != 1 {
			t.Errorf("the hook was asked %d times after the restart, want 1", calls.Load())
		}
		if n := g.ran.Load(); n != 0 {
			t.Errorf("the call ran %d times without the hook's consent", n)
		}
	})
}

// TestCutCallFailedAfterCancelOrPoison (issue 31, item 3): a call cut by
// Cancel, or by the failure of a session that took its process down
// (poison), is not run again when a message restarts the session: the
// model reads an error result for it.
func TestCutCallFailedAfterCancelOrPoison(t *testing.T) {
	t.Run("cancel", func(t *testing.T) {
		g := newGatedTool()
		model := llmtest.NewModel(llmtest.Call("c1", "slow", `{}`), llmtest.Text("sorry"))
		m := startManager(t, openStore(t), model, gatedOptions(g, nil))
		v := create(t, m, `{"agent":"w","messages":"go"}`)
		received(t, g.started, "the call")
		if err := m.Cancel(t.Context(), owner, v.ID); err != nil {
			t.Fatal(err)
		}
		f := &follower{t: t, m: m, id: v.ID}
		untilStatus(t, f, session.StatusInterrupted)
		g.waitCut(t)
		if err := m.SendMessages(t.Context(), owner, v.ID, []session.UserMessage{{Message: "what happened?"}}); err != nil {
			t.Fatal(err)
		}
		g.open()
		untilStatus(t, f, session.StatusCompleted)
		if n := len(g.started); n != 0 {
			t.Errorf("the cancelled call ran again %d times; events:\n%s", n, f.dump())
		}
		checkCutError(t, model, "c1")
	})
	t.Run("poison", func(t *testing.T) {
		st := openStore(t)
		g := newGatedTool()
		m1 := session.New(st, llmtest.NewModel(llmtest.Call("c1", "slow", `{}`)), gatedOptions(g, nil))
		start(t, m1)
		v := create(t, m1, `{"agent":"w","messages":"go"}`)
		received(t, g.started, "the call")
		if err := m1.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		claimAndDie(t, st, 3, 1) // the call took the process down three times
		g.open()
		model := llmtest.NewModel(llmtest.Text("sorry"))
		m2, _ := newLogged(t, st, model, gatedOptions(g, nil))
		start(t, m2)
		f, c := ended(t, m2, v.ID)
		checkInternal(t, f, c, "failed 3 times in a row")
		if err := m2.SendMessages(t.Context(), owner, v.ID, []session.UserMessage{{Message: "what happened?"}}); err != nil {
			t.Fatal(err)
		}
		untilStatus(t, f, session.StatusCompleted)
		if n := len(g.started); n != 0 {
			t.Errorf("the poison call ran again %d times", n)
		}
		checkCutError(t, model, "c1")
	})
}

// checkCutError checks that the model's last request holds an error
// result for the call, and the user's follow-up after it.
func checkCutError(t *testing.T, model *llmtest.Model, id string) {
	t.Helper()
	reqs := model.Requests()
	got := requestText(reqs[len(reqs)-1])
	if !strings.Contains(got, "error("+id+": ") || !strings.Contains(got, "what happened?") {
		t.Errorf("the request after the restart lacks the call's error result or the message:\n%s", got)
	}
	if strings.Contains(got, "the tool's output") {
		t.Errorf("the request holds the cut call's output:\n%s", got)
	}
}

// TestCancelThenMessageStopsTheStep (issue 31, item 4): Cancel followed at
// once by a message stops the running call, and nothing of the cancelled
// run lands in the restarted session.
func TestCancelThenMessageStopsTheStep(t *testing.T) {
	eachStore(t, func(t *testing.T, st store.Store) {
		g := newGatedTool()
		model := llmtest.NewModel(llmtest.Call("c1", "slow", `{}`), llmtest.Text("ok, stopped"))
		m := startManager(t, st, model, gatedOptions(g, nil))
		v := create(t, m, `{"agent":"w","messages":"go"}`)
		received(t, g.started, "the call")
		if err := m.Cancel(t.Context(), owner, v.ID); err != nil {
			t.Fatal(err)
		}
		if err := m.SendMessages(t.Context(), owner, v.ID, []session.UserMessage{{Message: "what happened?"}}); err != nil {
			t.Fatal(err)
		}
		deadline := time.After(10 * time.Second)
		for g.cut.Load() == 0 {
			select {
			case <-deadline:
				t.Error("the cancelled call was not stopped")
				g.open() // let it end, to see where its result lands
				g.cut.Store(-1)
			case <-time.After(time.Millisecond):
			}
		}
		f := &follower{t: t, m: m, id: v.ID}
		untilStatus(t, f, session.StatusCompleted)
		checkCutError(t, model, "c1")
		if strings.Contains(f.dump(), "the tool's output") {
			t.Errorf("the cancelled call's result was logged:\n%s", f.dump())
		}
	})
}

// TestForceAnswerDuringClientStep (issue 31, item 5): a force answer sent
// while the model makes a step that ends in client-side calls is
// honoured: the calls are answered with an error, and the next request
// offers no tools.
func TestForceAnswerDuringClientStep(t *testing.T) {
	gate := make(chan struct{})
	asked := make(chan struct{}, 1)
	model := llmtest.NewModel(llmtest.Reply{Func: func(*llm.Request) llmtest.Reply {
		asked <- struct{}{}
		<-gate
		return llmtest.Call("c1", "lookup", `{}`)
	}}, llmtest.Text("my final answer"))
	m := startManager(t, openStore(t), model, nil)
	v := create(t, m, transcriptAgent)
	received(t, asked, "the first model request")
	if err := m.ForceAnswer(t.Context(), owner, v.ID); err != nil {
		t.Fatal(err)
	}
	close(gate)
	f := &follower{t: t, m: m, id: v.ID}
	c := untilStatus(t, f, session.StatusCompleted)
	if string(c.Answer) != `"my final answer"` {
		t.Errorf("answer = %s", c.Answer)
	}
	reqs := model.Requests()
	if len(reqs) != 2 || offersTools(reqs[1]) {
		t.Fatalf("%d requests, the last offering tools %v; want 2, the last offering none", len(reqs), offersTools(reqs[len(reqs)-1]))
	}
	if got := requestText(reqs[1]); !strings.Contains(got, "error(c1: ") {
		t.Errorf("the final request lacks the abandoned call's error:\n%s", got)
	}
}

// TestNoAnswerCountsItsStep (issue 31, item 6): a run that ends without
// the final answer it was asked for commits its step: steps and usage
// count it, and a restart does not give the model the first message
// twice.
func TestNoAnswerCountsItsStep(t *testing.T) {
	g := newGatedTool()
	g.open()
	model := llmtest.NewModel(llmtest.Call("c1", "slow", `{}`), llmtest.Text("here is my answer"))
	m := startManager(t, openStore(t), model, gatedOptions(g, nil))
	v := create(t, m, `{"agent":"w","messages":"first message","max_steps":1}`)
	f := &follower{t: t, m: m, id: v.ID}
	c := untilStatus(t, f, session.StatusFailed)
	if c.ErrorCode == nil || *c.ErrorCode != session.CodeNoAnswer {
		t.Fatalf("error code %v, want no_answer", c.ErrorCode)
	}
	if c.Metrics.Steps != 1 || len(c.Metrics.CostPerModel) != 1 || c.Metrics.CostPerModel[0].InputTokens == 0 {
		t.Errorf("metrics %+v, want the step with its usage", c.Metrics)
	}
	if err := m.SendMessages(t.Context(), owner, v.ID, []session.UserMessage{{Message: "try again"}}); err != nil {
		t.Fatal(err)
	}
	untilStatus(t, f, session.StatusCompleted)
	reqs := model.Requests()
	got := requestText(reqs[len(reqs)-1])
	if n := strings.Count(got, "first message"); n != 1 {
		t.Errorf("the first message is in the request %d times, want once:\n%s", n, got)
	}
}

// TestFailureFreesQueueAndTellsParent (issue 31, item 7): a session that
// fails inside the runtime (a panic) frees its owner's slot, so a queued
// session starts, and its parent learns that it ended.
func TestFailureFreesQueueAndTellsParent(t *testing.T) {
	t.Run("queue", func(t *testing.T) {
		st := openStore(t)
		m, _ := newLogged(t, st, llmtest.NewModel(llmtest.Text("fine")), &session.Options{MaxActiveSessions: 1})
		a := create(t, m, `{"agent":{"name":"a"},"messages":"explode"}`)
		b := create(t, m, `{"agent":{"name":"a"},"messages":"hi"}`)
		if b.Status.Status != session.StatusQueued {
			t.Fatalf("second session %s, want queued", b.Status.Status)
		}
		session.SetBeforeRun(m, func(id string) {
			if id == a.ID {
				panic("runtime exploded")
			}
		})
		start(t, m)
		fa := &follower{t: t, m: m, id: a.ID}
		untilStatus(t, fa, session.StatusFailed)
		fb := &follower{t: t, m: m, id: b.ID}
		untilStatus(t, fb, session.StatusCompleted)
	})
	t.Run("parent", func(t *testing.T) {
		model := llmtest.NewModel(llmtest.Call("c1", "delegate", `{"agent":"helper","task":"say yes"}`), llmtest.Text("the helper failed"))
		m, _ := newLogged(t, openStore(t), model, nil)
		parent := create(t, m, `{"agent":{"name":"boss","subagents":[{"name":"helper","description":"Helps."}]},"messages":"ask the helper"}`)
		session.SetBeforeRun(m, func(id string) {
			if id != parent.ID {
				panic("runtime exploded")
			}
		})
		start(t, m)
		f := &follower{t: t, m: m, id: parent.ID}
		c := untilStatus(t, f, session.StatusCompleted)
		if string(c.Answer) != `"the helper failed"` {
			t.Errorf("answer = %s", c.Answer)
		}
		reqs := model.Requests()
		if got := requestText(reqs[len(reqs)-1]); !strings.Contains(got, "error(c1: ") || !strings.Contains(got, "runtime exploded") {
			t.Errorf("the parent's request lacks the child's failure:\n%s", got)
		}
	})
}

// TestPromptHooksSeeEveryMessage (issue 31, item 8): user_prompt hooks see
// each message of a batch, not only the last.
func TestPromptHooksSeeEveryMessage(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	hook := loop.Hook{Event: loop.HookUserPrompt, Func: func(_ context.Context, in *loop.HookInput) (*loop.HookOutput, error) {
		mu.Lock()
		seen = append(seen, in.Prompt)
		mu.Unlock()
		if strings.Contains(in.Prompt, "forbidden") {
			return &loop.HookOutput{Decision: loop.HookBlock, Reason: "not allowed"}, nil
		}
		return nil, nil
	}}
	model := llmtest.NewModel(llmtest.Text("hello"), llmtest.Text("done"))
	m := startManager(t, openStore(t), model, &session.Options{Hooks: []loop.Hook{hook}})
	v := create(t, m, `{"agent":{"name":"a"},"messages":[{"type":"user_message","message":"do the forbidden thing"},{"type":"user_message","message":"thanks"}]}`)
	f := &follower{t: t, m: m, id: v.ID}
	untilStatus(t, f, session.StatusFailed)
	if n := len(model.Requests()); n != 0 {
		t.Errorf("the model got %d requests; the blocked message reached it", n)
	}
	// A batch sent to a finished session: each message is seen.
	if err := m.SendMessages(t.Context(), owner, v.ID, []session.UserMessage{{Message: "hello"}, {Message: "and more"}}); err != nil {
		t.Fatal(err)
	}
	untilStatus(t, f, session.StatusCompleted)
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"do the forbidden thing", "hello"} {
		if !slices.Contains(seen, want) {
			t.Errorf("the hooks saw %q, not %q", seen, want)
		}
	}
}

// TestSteeringDuringRerun (issue 31, item 11): a message and a force answer
// accepted while a restarted run re-runs a cut call are in the very next
// model request, which offers no tools; the run was cut by a stop (as on
// SIGTERM) or by the death of its replica (as on kill -9: its store
// freezes, and another manager takes the session over once the lease
// expires).
func TestSteeringDuringRerun(t *testing.T) {
	for _, cause := range []string{"stop", "crash"} {
		t.Run(cause, func(t *testing.T) {
			base := openStore(t)
			dying := &frozenStore{Store: base, thaw: make(chan struct{})}
			defer close(dying.thaw)
			g1 := newGatedTool()
			m1, log1 := newLogged(t, dying, llmtest.NewModel(llmtest.Call("c1", "slow", `{}`)), gatedOptions(g1, &session.Options{LeaseTTL: 300 * time.Millisecond}))
			start(t, m1)
			v := create(t, m1, `{"agent":"w","messages":"go"}`)
			received(t, g1.started, "the call")
			if cause == "stop" {
				if err := m1.Stop(t.Context()); err != nil {
					t.Fatal(err)
				}
			} else {
				dying.frozen.Store(true)
			}
			g2 := newGatedTool()
			model := llmtest.NewModel(llmtest.Text("stopped as asked"))
			m2, log2 := newLogged(t, base, model, gatedOptions(g2, &session.Options{LeaseTTL: 300 * time.Millisecond}))
			start(t, m2)
			started := time.Now()
			receivedOr(t, g2.started, "the call run again", func() string {
				// It failed once in 40 runs under load, silently: say
				// where the session stands and what both managers did.
				return fmt.Sprintf("manager 1 is %s, manager 2 %s, started at %s\n", m1.ReplicaID(), m2.ReplicaID(), started.Format("15:04:05.000")) +
					rerunDiagnosis(base, v.ID, model, []*gatedTool{g1, g2}, log1, log2)
			})
			if err := m2.SendMessages(t.Context(), owner, v.ID, []session.UserMessage{{Message: "stop, do not do that"}}); err != nil {
				t.Fatal(err)
			}
			if err := m2.ForceAnswer(t.Context(), owner, v.ID); err != nil {
				t.Fatal(err)
			}
			g2.open()
			f := &follower{t: t, m: m2, id: v.ID}
			untilStatus(t, f, session.StatusCompleted)
			reqs := model.Requests()
			if len(reqs) == 0 {
				t.Fatal("no model request")
			}
			if got := requestText(reqs[0]); !strings.Contains(got, "stop, do not do that") {
				t.Errorf("the first request after the re-run lacks the message:\n%s", got)
			}
			if offersTools(reqs[0]) {
				t.Errorf("the first request after the force answer offers tools:\n%s", requestText(reqs[0]))
			}
		})
	}
}

// TestCancelReachesAStepWhoseWatchStartsLate: a worker's watch of its
// session subscribes before the run starts, so that a cancel and a
// message committed while the first step's call works stop the call even
// when the watch's goroutine runs late (here: after both commits). The
// watch subscribed in its own goroutine: under load the call went on
// until its end (TestCancelThenMessageStopsTheStep failed 1 in 60).
func TestCancelReachesAStepWhoseWatchStartsLate(t *testing.T) {
	g := newGatedTool()
	model := llmtest.NewModel(llmtest.Call("c1", "slow", `{}`), llmtest.Text("ok, stopped"))
	m := startManager(t, openStore(t), model, gatedOptions(g, nil))
	late := make(chan struct{})
	closeLate := sync.OnceFunc(func() { close(late) })
	t.Cleanup(closeLate) // before the manager stops
	var once sync.Once
	session.SetBeforeWatch(m, func(string) {
		once.Do(func() { <-late }) // the first worker's watch only
	})
	v := create(t, m, `{"agent":"w","messages":"go"}`)
	received(t, g.started, "the call")
	if err := m.Cancel(t.Context(), owner, v.ID); err != nil {
		t.Fatal(err)
	}
	if err := m.SendMessages(t.Context(), owner, v.ID, []session.UserMessage{{Message: "what happened?"}}); err != nil {
		t.Fatal(err)
	}
	closeLate()
	deadline := time.After(10 * time.Second)
	for g.cut.Load() == 0 {
		select {
		case <-deadline:
			g.open()
			t.Fatal("the cancelled call was not stopped")
		case <-time.After(time.Millisecond):
		}
	}
	f := &follower{t: t, m: m, id: v.ID}
	untilStatus(t, f, session.StatusCompleted)
}

// TestApprovedWhilePausedNotRunAfterCancel: a call approved while its
// session was paused waits for the resume to run; a cancel then ends the
// run, and a message that starts the session again must not run it: no
// call made before a cancel runs after it. Before the fix the new run ran
// it (the restart answered only the calls without a decision), as
// TestModelBased found on SQLite (seed 1050569200773: 'cancelled-result
// broken: ... tool_result of call q40s0.m0.r2.0 made before the cancel
// ... was committed after it').
func TestApprovedWhilePausedNotRunAfterCancel(t *testing.T) {
	var ran atomic.Int32
	guarded := &loop.ToolDef{Name: "guarded", RequiresApproval: true, InputSchema: json.RawMessage(`{"type":"object"}`),
		Handler: func(context.Context, *loop.Call) (*loop.Output, error) {
			ran.Add(1)
			return loop.TextOutput("the tool's output"), nil
		}}
	model := llmtest.NewModel(llmtest.Call("c1", "guarded", `{}`), llmtest.Text("sorry"))
	m := startManager(t, openStore(t), model, &session.Options{
		Toolsets: map[string]*loop.Toolset{"t": loop.MustToolset(guarded)},
		Agents:   map[string]*session.AgentConfig{"w": {Toolsets: []string{"t"}}},
	})
	v := create(t, m, `{"agent":"w","messages":"go"}`)
	f := &follower{t: t, m: m, id: v.ID}
	untilStatus(t, f, session.StatusAwaitingToolResults)
	if err := m.Pause(t.Context(), owner, v.ID); err != nil {
		t.Fatal(err)
	}
	if err := m.Decide(t.Context(), owner, v.ID, []session.Decision{{ID: "c1", Approved: true}}); err != nil {
		t.Fatal(err)
	}
	if err := m.Cancel(t.Context(), owner, v.ID); err != nil {
		t.Fatal(err)
	}
	untilStatus(t, f, session.StatusInterrupted)
	if err := m.SendMessages(t.Context(), owner, v.ID, []session.UserMessage{{Message: "what happened?"}}); err != nil {
		t.Fatal(err)
	}
	untilStatus(t, f, session.StatusCompleted)
	if n := ran.Load(); n != 0 {
		t.Errorf("the call approved before the cancel ran %d times after it; events:\n%s", n, f.dump())
	}
	reqs := model.Requests()
	if got := requestText(reqs[len(reqs)-1]); !strings.Contains(got, "error(c1: ") || strings.Contains(got, "the tool's output") {
		t.Errorf("the request after the restart does not read the call as not run:\n%s", got)
	}
}
