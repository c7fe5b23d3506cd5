package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hrns-dev/hrns/llm"
)

// AgentToolOptions configure a tool made by [AgentTool]. The zero value of
// each field picks the documented default.
type AgentToolOptions struct {
	// SystemPrompt is the child's system prompt, the first message of
	// each of its runs; empty means none.
	SystemPrompt string
	// MaxDepth bounds nesting: the top-level run is at depth 0, the
	// agents it runs through agent tools at depth 1, and so on. A call
	// that would run the child deeper than MaxDepth is not run and fails
	// with a tool error the model reads; this holds for cycles too (an
	// agent that is, directly or not, a tool of itself). 0 means 3.
	MaxDepth int
	// Timeout bounds one call, that is the child's whole run; 0 means
	// the parent's ToolTimeout.
	Timeout time.Duration
	// Concurrent lets the parent run calls of this tool at the same time
	// as other concurrent calls of the same message.
	Concurrent bool
	// RequiresApproval makes each call wait for the parent's approver.
	RequiresApproval bool
}

// agentToolSchema is the input of an agent tool.
var agentToolSchema = json.RawMessage(`{"type":"object","properties":{"task":{"type":"string","description":"The task for the agent, with everything it needs to know: it sees nothing else of this conversation."}},"required":["task"],"additionalProperties":false}`)

// AgentTool returns a tool that runs child, a whole agent with its own
// model, tools, options and budgets, on a task: the model calls it with
// {"task": "..."}, the child runs on its system prompt and the task as the
// user message, and its final answer is the call's result. A child that
// fails gives an error result the model reads.
//
// The child's chunks go to the parent's consumer, tagged with Agent (name)
// and Depth (1 for a child of the top-level run), except its end chunk (its
// answer is the call's result); they never enter the parent's transcript.
// The child's token usage is added to the parent's Result.Usage, so that
// the parent's MaxOutputTokens counts it. Cancelling the parent cancels the
// child. The child's budgets are its own Options, bounded by what the
// parent has left of MaxDuration and MaxOutputTokens when the call starts.
// A child without an Approver uses the parent's (one approval at a time
// across the tree). Depth is bounded by opts.MaxDepth.
//
// A child that suspends (a client-side tool, a deferred approval) suspends
// the parent: the agent call waits with Waiting [PendingAgent] and the
// child's [Suspension] in [SuspendedCall.Agent], and [Suspension.Pending]
// lists the calls the whole tree waits for. Give their results and
// decisions to the parent's [Agent.Resume]: it routes them to the child,
// which resumes, and its answer becomes the agent call's result.
//
// child's runs are independent of each other: the tool may be called
// concurrently, by several parents.
func AgentTool(name, description string, child *Agent, opts *AgentToolOptions) *ToolDef {
	if child == nil {
		panic("loop.AgentTool: nil child")
	}
	var o AgentToolOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = 3
	}
	at := &agentTool{name: name, child: child, opts: o}
	return &ToolDef{
		Name:             name,
		Description:      description,
		InputSchema:      agentToolSchema,
		Handler:          at.call,
		Concurrent:       o.Concurrent,
		Timeout:          o.Timeout,
		RequiresApproval: o.RequiresApproval,
		// The child's calls are held to the policy themselves.
		Access: AccessRead,
	}
}

type agentTool struct {
	name  string
	child *Agent
	opts  AgentToolOptions
}

// childSuspended is the error of an agent call whose child suspended: it
// wraps ErrPending and carries the child's suspension.
type childSuspended struct{ s *Suspension }

func (e *childSuspended) Error() string { return "sub-agent suspended: " + ErrPending.Error() }
func (e *childSuspended) Unwrap() error { return ErrPending }

func (t *agentTool) call(ctx context.Context, call *Call) (*Output, error) {
	parent := parentRunFrom(ctx)
	depth := 1
	if parent != nil {
		depth = parent.depth + 1
	}
	if depth > t.opts.MaxDepth {
		return ErrorOutput(fmt.Sprintf("agent %q was not run: it would run at depth %d, deeper than the limit of %d; do the task yourself or with other tools",
			t.name, depth, t.opts.MaxDepth)), nil
	}
	child := t.child.forChild(ctx, parent)
	cctx := context.WithValue(context.WithValue(ctx, depthKey{}, depth), agentNameKey{}, t.name)
	var (
		run   func(func(Chunk) bool)
		prior llm.Usage
	)
	if cr := childResumeOf(ctx, parent, call.ID); cr != nil {
		run = child.Resume(cctx, cr.s, cr.in)
		prior = cr.s.Usage
	} else {
		var in struct {
			Task string `json:"task"`
		}
		if err := json.Unmarshal(call.Arguments, &in); err != nil {
			return nil, err
		}
		var msgs []llm.Message
		if t.opts.SystemPrompt != "" {
			msgs = append(msgs, llm.SystemMessage(t.opts.SystemPrompt))
		}
		run = child.RunLoop(cctx, append(msgs, llm.UserMessage(in.Task)))
	}
	var res *Result
	for c := range run {
		if c.Type == ChunkEnd {
			res = c.Result
			continue
		}
		if c.Depth == 0 {
			c.Agent, c.Depth = t.name, depth
		}
		if !parent.relay(ctx, c) {
			break // the parent's consumer is gone: stop the child
		}
	}
	if res == nil {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, context.Canceled
	}
	used := res.Usage
	used.Add(llm.Usage{
		InputTokens: -prior.InputTokens, OutputTokens: -prior.OutputTokens, CacheReadTokens: -prior.CacheReadTokens,
		CacheWriteTokens: -prior.CacheWriteTokens, ReasoningTokens: -prior.ReasoningTokens,
	})
	parent.addUsage(ctx, used)
	switch res.Status {
	case StatusCompleted:
		return TextOutput(res.Answer), nil
	case StatusSuspended:
		if res.Err != nil {
			// The routed input was refused (it cannot be, as the
			// parent checked it): the child is still suspended.
			t.child.opts.Logger.WarnContext(ctx, "sub-agent refused its resume input", "agent", t.name, "err", res.Err)
		}
		return nil, &childSuspended{s: res.Suspension}
	case StatusYielded:
		return ErrorOutput(fmt.Sprintf("agent %q stopped before its answer: its BeforeTurn hook ended the run", t.name)), nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return ErrorOutput(fmt.Sprintf("agent %q failed: %v", t.name, res.Err)), nil
}

// forChild returns the agent a call of an agent tool runs: a with the
// parent's approver and permissions if it has none, the parent's hooks
// (see inheritHooks), and its budgets bounded by what the parent has left.
func (a *Agent) forChild(ctx context.Context, parent *parentRun) *Agent {
	if parent == nil {
		return a
	}
	var left budgetLeft
	if !parent.doOnRunGoroutine(ctx, func() { left = parent.run.budgetLeft() }) {
		return a
	}
	c := *a
	if c.opts.Observer == nil {
		c.opts.Observer = parent.run.agent.opts.Observer
	}
	if c.opts.Approver == nil && left.approver != nil {
		c.opts.Approver = left.approver
	}
	if c.opts.Permissions == nil {
		c.opts.Permissions = left.perms
	}
	if left.hooks != nil {
		c.hooks = newHookSet(inheritHooks(c.opts.Hooks, left.hooks))
	}
	if left.duration > 0 && (c.opts.MaxDuration == 0 || left.duration < c.opts.MaxDuration) {
		c.opts.MaxDuration = left.duration
	}
	if left.output > 0 && (c.opts.MaxOutputTokens == 0 || left.output < c.opts.MaxOutputTokens) {
		c.opts.MaxOutputTokens = left.output
	}
	return &c
}

// budgetLeft is what a run has left, for a child it starts.
type budgetLeft struct {
	duration time.Duration // 0: no bound
	output   int64         // 0: no bound
	approver Approver
	perms    *Permissions
	hooks    *hookSet
}

func (r *run) budgetLeft() budgetLeft {
	o := &r.agent.opts
	var b budgetLeft
	if o.MaxDuration > 0 {
		b.duration = max(o.MaxDuration-time.Since(r.start), time.Nanosecond)
	}
	if o.MaxOutputTokens > 0 {
		b.output = max(o.MaxOutputTokens-r.result.Usage.OutputTokens, 1)
	}
	b.approver = r.asParent.approver
	b.perms, b.hooks = r.agent.opts.Permissions, r.hooks
	return b
}

// A parentRun is what a run tells the agent tools it runs, through their
// context: its depth, and a way to act on the run from their goroutines.
type parentRun struct {
	run   *run
	depth int
	// onRunGoroutine carries functions to run on the run's goroutine,
	// which takes them while it waits for tool calls (see
	// executor.runBatch).
	onRunGoroutine chan func()
	// approver is the run's approver, serialised, for children without
	// their own: siblings share it, and pass it on.
	approver Approver
}

// childResumes holds, by call ID, the suspended children that the calls
// run by one resumption of owner resume. It travels in the context of those calls
// only, so that a later call reusing an ID starts afresh.
type childResumes struct {
	owner *parentRun
	calls map[string]*childResume
}

type childResume struct {
	s  *Suspension
	in *ResumeInput
}

type parentRunKey struct{}
type depthKey struct{}
type childResumesKey struct{}

// parentRunFrom returns the run whose agent tool ctx is a call of, or nil.
func parentRunFrom(ctx context.Context) *parentRun {
	n, _ := ctx.Value(parentRunKey{}).(*parentRun)
	return n
}

// becomeParent makes r the parent of the agent tools it runs: it returns
// ctx carrying r's parentRun. Its depth is the one an agent tool gave it,
// or 0.
func (r *run) becomeParent(ctx context.Context) context.Context {
	depth, _ := ctx.Value(depthKey{}).(int)
	r.asParent = &parentRun{run: r, depth: depth, onRunGoroutine: make(chan func())}
	if depth > 0 {
		r.exec.agentName, _ = ctx.Value(agentNameKey{}).(string)
		r.exec.depth = depth
	}
	if a := r.agent.opts.Approver; a != nil {
		r.asParent.approver = serialize(a)
	}
	r.exec.onRunGoroutine = r.asParent.onRunGoroutine
	return context.WithValue(ctx, parentRunKey{}, r.asParent)
}

// doOnRunGoroutine runs f on the run's goroutine; it reports false,
// without running f, if ctx ends first.
func (n *parentRun) doOnRunGoroutine(ctx context.Context, f func()) bool {
	done := make(chan struct{})
	select {
	case n.onRunGoroutine <- func() { f(); close(done) }:
	case <-ctx.Done():
		return false
	}
	<-done
	return true
}

// relay relays a child's chunk to the run's consumer; it reports whether
// the consumer still listens. With no parent the chunk is dropped.
func (n *parentRun) relay(ctx context.Context, c Chunk) bool {
	if n == nil {
		return ctx.Err() == nil
	}
	ok := false
	n.doOnRunGoroutine(ctx, func() { ok = n.run.emit(c) })
	return ok
}

// addUsage adds a child's usage to the run's.
func (n *parentRun) addUsage(ctx context.Context, u llm.Usage) {
	if n == nil || u == (llm.Usage{}) {
		return
	}
	n.doOnRunGoroutine(ctx, func() { n.run.result.Usage.Add(u) })
}

// withResumes returns ctx carrying the children that the calls run in it
// resume.
func (n *parentRun) withResumes(ctx context.Context, calls map[string]*childResume) context.Context {
	return context.WithValue(ctx, childResumesKey{}, &childResumes{owner: n, calls: calls})
}

// childResumeOf returns what the call id of parent resumes, or nil when it
// is a fresh call.
func childResumeOf(ctx context.Context, parent *parentRun, id string) *childResume {
	rs, _ := ctx.Value(childResumesKey{}).(*childResumes)
	if rs == nil || parent == nil || rs.owner != parent {
		return nil
	}
	return rs.calls[id]
}

// serialize returns an approver that lets one call of a through at a time,
// for a tree of agents that share it. An approver already serialised is
// returned as it is, so the whole tree shares one turn.
func serialize(a Approver) Approver {
	if s, ok := a.(*serialApprover); ok {
		return s
	}
	s := &serialApprover{a: a, slot: make(chan struct{}, 1)}
	return s
}

type serialApprover struct {
	a    Approver
	slot chan struct{}
}

func (s *serialApprover) Approve(ctx context.Context, req *ApprovalRequest) (Decision, error) {
	select {
	case s.slot <- struct{}{}:
	case <-ctx.Done():
		return Decision{}, ctx.Err()
	}
	defer func() { <-s.slot }()
	return s.a.Approve(ctx, req)
}
