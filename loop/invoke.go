package loop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hrns-dev/hrns/llm"
)

// ErrPendingApproval is returned by [Toolset.Invoke] when the approver
// defers its decision. It wraps [ErrPending].
var ErrPendingApproval = fmt.Errorf("%w: waiting for approval", ErrPending)

// InvokeOptions configure [Toolset.Invoke]. The zero value of each field
// means the default of the [Options] field of the same role.
type InvokeOptions struct {
	// Timeout bounds the call unless the tool sets its own Timeout
	// (Options.ToolTimeout).
	Timeout time.Duration
	// Approver decides calls of tools that require approval; with none,
	// they are refused (Options.Approver).
	Approver Approver
	// ApprovalTimeout is the approval deadline (Options.ApprovalTimeout).
	ApprovalTimeout time.Duration
	// MaxOutput bounds the text of the result (Options.MaxToolOutput).
	MaxOutput int
	// Logger receives the stack of a panicking handler.
	Logger *slog.Logger
	// Permissions and Hooks are the policy the call is held to (see
	// [Permissions]). When both are nil, the call is held to the policy
	// of the run whose tool called Invoke, found in ctx (a program of
	// code mode calling its capabilities), if any.
	Permissions *Permissions
	Hooks       []Hook
}

// Invoke runs one call of a tool of ts exactly as a run executes a model's
// call: it finds the tool, decodes and validates the arguments against its
// schema (applying defaults), decides its permission as a run does (hooks,
// rules, mode, then the approver, with the deadline as a watchdog), runs the handler with its
// timeout, recovers a panic and bounds the output. Code that calls tools on
// a model's behalf without a model turn (a program in code mode, an MCP
// server, a sessions server) uses it to keep the same rules.
//
// A failure of the call (unknown tool, bad arguments, handler error, panic,
// timeout, refused or failed approval) is returned as a *[ToolError] whose
// message is what a model would read. An output the tool itself marked
// IsError is returned as an output, with a nil error. [ErrPending] is
// returned when the handler suspends the call, [ErrPendingApproval] when
// the approver defers it;
// [ErrCancelled] when the approver cancels; ctx's error when ctx is done.
func (ts *Toolset) Invoke(ctx context.Context, call llm.ToolCall, opts *InvokeOptions) (*Output, error) {
	o := &Options{MaxParallel: 1}
	if opts != nil {
		o.ToolTimeout, o.Approver, o.ApprovalTimeout = opts.Timeout, opts.Approver, opts.ApprovalTimeout
		o.MaxToolOutput, o.Logger = opts.MaxOutput, opts.Logger
	}
	o.setDefaults()
	if call.ID == "" {
		call.ID = "call"
	}
	x := &executor{tools: ts, opts: o, emit: func(Chunk) bool { return true }, consumerGone: func() bool { return false }}
	if opts != nil && (opts.Permissions != nil || len(opts.Hooks) > 0) {
		o.Permissions, x.hooks = opts.Permissions, newHookSet(opts.Hooks)
	} else if pol, _ := ctx.Value(runPolicyKey{}).(*runPolicy); pol != nil {
		o.Permissions, x.hooks, x.agentName, x.depth = pol.perms, pol.hooks, pol.agent, pol.depth
	}
	p := &execCall{call: call, state: SuspendedCall{Call: call}}
	x.resolveCall(p)
	if p.failure != nil {
		return nil, p.failure
	}
	if err := x.authorize(ctx, p); err != nil {
		return nil, err
	}
	if p.failure != nil {
		return nil, p.failure
	}
	if p.state.Waiting != "" {
		return nil, ErrPendingApproval
	}
	p.started = time.Now()
	out, err := x.runHandler(ctx, p)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if errors.Is(err, ErrPending) {
		return nil, err
	}
	x.recordResult(ctx, p, out, err)
	if p.failure != nil {
		return nil, p.failure
	}
	return &Output{Content: p.state.Result.Content, IsError: p.state.Result.IsError}, nil
}
