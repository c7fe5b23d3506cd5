package loop

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hrns-dev/hrns/llm"
)

// An Observer watches runs: their start and end, each model request, each
// tool call, retries and compactions. Set it in [Options.Observer]; package
// github.com/hrns-dev/hrns/otel implements it with OpenTelemetry spans and
// metrics, so that the loop itself depends on no telemetry library.
//
// The Start methods return the context of what they open (a span, say):
// the loop passes it to the matching End method and to what runs inside,
// so a model request runs in the context TurnStart returned, a tool's
// handler in the one ToolStart returned (a sub-agent's run nests there),
// and turns and tools in the one RunStart returned. A Start method that has
// nothing to add returns ctx.
//
// The methods must be safe for concurrent use: a run calls them from its
// own goroutine, but concurrent tool calls end on theirs, and sub-agents
// run on their tool call's goroutine. They should return quickly: they run
// on the run's path. A panic in an Observer is recovered and logged to
// [Options.Logger]; it never stops a run.
//
// The events carry no message content, tool arguments or results: names,
// IDs, counts, durations and errors only.
type Observer interface {
	// RunStart is called when a run starts, or resumes.
	RunStart(ctx context.Context, e RunEvent) context.Context
	// RunEnd is called when the run ends: completed, suspended, failed,
	// or stopped by its consumer (Status is then empty and Err is the
	// context's error).
	RunEnd(ctx context.Context, e RunEvent)
	// TurnStart is called before a model request is sent, after any
	// compaction before it; its context is the one the request's
	// attempts are sent with.
	TurnStart(ctx context.Context, e TurnEvent) context.Context
	// TurnEnd is called when the request has its response, or has
	// failed for good.
	TurnEnd(ctx context.Context, e TurnEvent)
	// ToolStart is called when a call's handler is about to run (after
	// its validation and approval, with its tool_call_start chunk).
	// Calls that fail before they run (an unknown tool, invalid
	// arguments, a refusal) have no Start nor End.
	ToolStart(ctx context.Context, e ToolEvent) context.Context
	// ToolEnd is called when the handler returns, fails, times out or
	// is abandoned, or suspends the call (Pending is set).
	ToolEnd(ctx context.Context, e ToolEvent)
	// Retry is called, in the turn's context, when a model request
	// failed with a transient error and is about to be sent again.
	Retry(ctx context.Context, e RetryEvent)
	// Compaction is called, in the run's context, when the transcript
	// was compacted.
	Compaction(ctx context.Context, info CompactionInfo)
	// TraceParent returns the W3C traceparent of the run whose context
	// (as RunStart returned it) is ctx, or "". The loop stores it in
	// [Suspension.TraceParent] so that the run's [Agent.Resume], in
	// this process or another, continues its trace.
	TraceParent(ctx context.Context) string
}

// A RunEvent describes a run to an [Observer]: the first fields at its
// start, all of them at its end.
type RunEvent struct {
	// Agent is the name of the agent tool that runs it (see
	// [AgentTool]), and Depth its depth; empty and 0 for a top-level run.
	Agent string
	Depth int
	// Model is [Options.Model], the model requested.
	Model string
	// Resumed says the run continues a suspension ([Agent.Resume]);
	// TraceParent is then the suspension's [Suspension.TraceParent].
	Resumed     bool
	TraceParent string

	// Status is how the run ended; empty when its consumer stopped it.
	Status Status
	// Err is the error that ended a failed run, or the context's error
	// when the consumer stopped it.
	Err error
	// Usage and Turns count the tokens and model requests of the run,
	// across its resumptions.
	Usage llm.Usage
	Turns int
	// Duration is the time this segment of the run took (since
	// RunStart; a resumed run counts from its resumption).
	Duration time.Duration
}

// A TurnEvent describes a model request to an [Observer]: the first
// fields at TurnStart, all of them at TurnEnd.
type TurnEvent struct {
	// Turn numbers the request in the run, from 1.
	Turn int
	// Model is the model requested ([Options.Model]; empty lets the
	// provider choose).
	Model string
	// Final says a budget is spent and the request asks for a final
	// answer without tools.
	Final bool

	// ResponseModel and ResponseID are what the provider named the
	// model that answered and its response.
	ResponseModel string
	ResponseID    string
	Usage         llm.Usage
	FinishReason  llm.FinishReason
	// Retries counts the failed attempts of the request.
	Retries int
	// Err is why the request failed for good; nil when it answered.
	Err error
	// Duration is the time from TurnStart to TurnEnd, retries included.
	Duration time.Duration
}

// A ToolEvent describes a tool call to an [Observer]: the first fields at
// ToolStart, all of them at ToolEnd.
type ToolEvent struct {
	// CallID and Name identify the call; Description is the tool's.
	CallID      string
	Name        string
	Description string

	// Duration is how long the handler ran.
	Duration time.Duration
	// Err is why the call failed: a [*ToolError] (an error result, a
	// timeout, a panic...); nil when it succeeded or is pending.
	Err error
	// Pending says the call waits ([PendingResult], or [PendingAgent]
	// for a suspended sub-agent); the run will suspend.
	Pending PendingReason
}

// A RetryEvent describes a failed model request about to be sent again.
type RetryEvent struct {
	Turn int
	// Attempt is the number of the attempt that failed, from 1.
	Attempt int
	// Delay is the wait before the next attempt.
	Delay time.Duration
	// Err is the attempt's error.
	Err error
}

// runObserver is what a run keeps of its observer: the observer and the
// run's context as RunStart returned it. A run without an observer has
// none, which makes every hook a nil check.
type runObserver struct {
	o     Observer
	log   func(msg string, args ...any)
	ctx   context.Context
	start time.Time
}

// observeStart calls RunStart for r, if the agent has an observer, and
// returns the context the run goes on with. s is the suspension a resumed
// run continues, or nil.
func (r *run) observeStart(ctx context.Context, s *Suspension) context.Context {
	o := r.agent.opts.Observer
	if o == nil {
		return ctx
	}
	r.observer = &runObserver{o: o, log: r.agent.opts.Logger.Error, ctx: ctx, start: time.Now()}
	e := RunEvent{Model: r.agent.opts.Model}
	e.Depth, _ = ctx.Value(depthKey{}).(int)
	e.Agent, _ = ctx.Value(agentNameKey{}).(string)
	if s != nil {
		e.Resumed, e.TraceParent = true, s.TraceParent
	}
	r.observer.safely("RunStart", func() {
		if c := o.RunStart(ctx, e); c != nil {
			r.observer.ctx = c
		}
	})
	return r.observer.ctx
}

// observeEnd calls RunEnd for r; it runs when the run's iterator returns,
// however the run ended.
func (r *run) observeEnd() {
	if r.observer == nil {
		return
	}
	e := RunEvent{
		Status:   r.result.Status,
		Err:      r.result.Err,
		Usage:    r.result.Usage,
		Turns:    len(r.result.Turns),
		Duration: time.Since(r.observer.start),
	}
	e.Depth, _ = r.observer.ctx.Value(depthKey{}).(int)
	e.Agent, _ = r.observer.ctx.Value(agentNameKey{}).(string)
	e.Model = r.agent.opts.Model
	if e.Status == "" {
		e.Err = context.Canceled // the consumer stopped the run
	}
	r.observer.safely("RunEnd", func() { r.observer.o.RunEnd(r.observer.ctx, e) })
}

// traceParent returns what the observer wants kept with a suspension.
func (r *run) traceParent() string {
	if r.observer == nil {
		return ""
	}
	var tp string
	r.observer.safely("TraceParent", func() { tp = r.observer.o.TraceParent(r.observer.ctx) })
	return tp
}

// observedTurn is a model request being observed.
type observedTurn struct {
	e     TurnEvent
	ctx   context.Context
	start time.Time
}

// observeTurn calls TurnStart for the request req of the current turn and
// returns the context to send it with.
func (r *run) observeTurn(ctx context.Context, req *llm.Request) (context.Context, *observedTurn) {
	if r.observer == nil {
		return ctx, nil
	}
	t := &observedTurn{
		e:     TurnEvent{Turn: r.turn, Model: req.Model, Final: req.ToolChoice.Mode == llm.ToolChoiceNone && len(req.Tools) > 0},
		ctx:   ctx,
		start: time.Now(),
	}
	r.observer.safely("TurnStart", func() {
		if c := r.observer.o.TurnStart(ctx, t.e); c != nil {
			t.ctx = c
		}
	})
	return t.ctx, t
}

// observeRetry reports a retry of the turn t.
func (r *run) observeRetry(t *observedTurn, attempt int, delay time.Duration, err error) {
	if t == nil {
		return
	}
	t.e.Retries = attempt
	e := RetryEvent{Turn: t.e.Turn, Attempt: attempt, Delay: delay, Err: err}
	r.observer.safely("Retry", func() { r.observer.o.Retry(t.ctx, e) })
}

// observeTurnEnd calls TurnEnd for t with the request's outcome.
func (r *run) observeTurnEnd(t *observedTurn, resp *llm.Response, err error) {
	if t == nil {
		return
	}
	e := t.e
	e.Duration = time.Since(t.start)
	if resp != nil && err == nil {
		e.ResponseModel, e.ResponseID = resp.Model, resp.ID
		e.Usage, e.FinishReason = resp.Usage, resp.FinishReason
	} else {
		e.Err = err
		if err == nil {
			e.Err = context.Canceled
		}
	}
	r.observer.safely("TurnEnd", func() { r.observer.o.TurnEnd(t.ctx, e) })
}

// observeCompaction reports a compaction.
func (r *run) observeCompaction(info *CompactionInfo) {
	if r.observer == nil {
		return
	}
	r.observer.safely("Compaction", func() { r.observer.o.Compaction(r.observer.ctx, *info) })
}

// toolStart calls ToolStart for p, if the agent has an observer, and
// returns the context its handler runs in.
func (x *executor) toolStart(ctx context.Context, p *execCall) context.Context {
	o := x.opts.Observer
	if o == nil {
		return ctx
	}
	e := ToolEvent{CallID: p.call.ID, Name: p.call.Name, Description: p.tool.def.Description}
	p.observerCtx = ctx
	observeSafely(x.opts.Logger.Error, "ToolStart", func() {
		if c := o.ToolStart(ctx, e); c != nil {
			p.observerCtx = c
		}
	})
	return p.observerCtx
}

// toolEnd calls ToolEnd for p, whose handler returned out and err after
// elapsed. It classifies the outcome as the executor's record does.
func (x *executor) toolEnd(p *execCall, out *Output, err error, elapsed time.Duration) {
	o := x.opts.Observer
	if o == nil || p.observerCtx == nil {
		return
	}
	e := ToolEvent{CallID: p.call.ID, Name: p.call.Name, Description: p.tool.def.Description, Duration: elapsed}
	switch {
	case errors.Is(err, ErrPending):
		e.Pending = PendingResult
		if _, ok := err.(*childSuspended); ok {
			e.Pending = PendingAgent
		}
	case err != nil:
		te, ok := err.(*ToolError)
		if !ok {
			te = &ToolError{Kind: ToolFailed, CallID: p.call.ID, Tool: p.call.Name, Msg: err.Error(), Err: err}
		}
		e.Err = te
	case out != nil && out.IsError:
		e.Err = &ToolError{Kind: ToolFailed, CallID: p.call.ID, Tool: p.call.Name, Msg: "the tool returned an error result"}
	}
	observeSafely(x.opts.Logger.Error, "ToolEnd", func() { o.ToolEnd(p.observerCtx, e) })
}

func (ob *runObserver) safely(hook string, f func()) { observeSafely(ob.log, hook, f) }

// observeSafely runs f, a call of an Observer's hook, recovering a panic:
// an observer never stops a run.
func observeSafely(log func(string, ...any), hook string, f func()) {
	defer func() {
		if v := recover(); v != nil {
			log("observer panicked", "hook", hook, "panic", fmt.Sprint(v))
		}
	}()
	f()
}

// agentNameKey carries the name of the agent tool a child run runs for.
type agentNameKey struct{}

// AgentName returns the name of the agent tool whose child run ctx belongs
// to ("" in a top-level run): an approver or a tool learns from it that
// the call is a sub-agent's (the chunks of such a call carry it as
// Chunk.Agent).
func AgentName(ctx context.Context) string {
	name, _ := ctx.Value(agentNameKey{}).(string)
	return name
}
