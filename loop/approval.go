package loop

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hrns-dev/hrns/llm"
)

// The approver, the last step of a call's permission (authorize.go): the
// Approver interface, and approve, which asks it with the deadline as a
// watchdog.

// An Approver decides whether calls of tools that require approval may run.
//
// Approve is called from the run's goroutine, one call at a time, before the
// tool runs; ctx expires at the agent's approval deadline. An Approver that
// does not answer by then is treated as a refusal: the deadline is a
// watchdog, so a broken approver never leaves a run waiting forever. An
// error is a refusal too. Approvals never enter the transcript sent to the
// model; a refusal reaches it as a tool error.
type Approver interface {
	Approve(ctx context.Context, req *ApprovalRequest) (Decision, error)
}

// ApproverFunc adapts a function to [Approver].
type ApproverFunc func(ctx context.Context, req *ApprovalRequest) (Decision, error)

// Approve calls f.
func (f ApproverFunc) Approve(ctx context.Context, req *ApprovalRequest) (Decision, error) {
	return f(ctx, req)
}

// An ApprovalRequest describes a call waiting for approval.
type ApprovalRequest struct {
	Call llm.ToolCall
	// Description is the tool's description.
	Description string
	// Deadline is when the request is refused if undecided.
	Deadline time.Time
	// Permission, when the agent has a permission policy or hooks, is
	// the decision that sent the call to the approver: Step is
	// StepHook when a hook asked (Rule names it, Reason is its reason),
	// StepApprover when no earlier step decided.
	Permission *PermissionDecision
	// Person, when set, is why only a person may approve the call (the
	// tool's [ToolDef.AskPerson]: a provider's safety check, typing into
	// a password field); it is also Permission's Reason. An approver that
	// approves without asking a person (an auto-approval, an "always"
	// answer) must not approve such a call.
	Person string
}

// Verdict is an approver's answer.
type Verdict int

// Verdicts.
const (
	// Approve lets the call run.
	Approve Verdict = iota + 1
	// Reject refuses the call; the model is told, with the reason.
	Reject
	// Defer suspends the call until a decision is given to
	// [Agent.Resume], for approvals made by a person later.
	Defer
	// Cancel refuses the call and ends the run with [ErrCancelled].
	Cancel
)

// A Decision is an approver's answer to one request.
type Decision struct {
	Verdict Verdict
	// Reason is shown to the model when the call is rejected.
	Reason string
}

// approve asks the approver about p, which perm sent to it. A refusal
// becomes p's result; Defer makes p wait; Cancel ends the run.
func (x *executor) approve(ctx context.Context, p *execCall, perm *PermissionDecision) error {
	o := x.opts
	name := p.call.Name
	if o.Approver == nil {
		te := &ToolError{Kind: ToolRefused, Msg: fmt.Sprintf("tool %q requires approval and no approver is configured; the call was not run", name)}
		if perm != nil {
			te.Permission = &PermissionDecision{Behavior: Deny, Step: StepApprover, Reason: te.Msg}
		}
		x.failCall(p, te)
		return nil
	}
	if !x.emit(Chunk{Type: ChunkApprovalRequest, ToolCall: p.chunkInfo(), Permission: perm}) {
		return context.Canceled
	}
	actx, cancel := context.WithTimeout(ctx, o.ApprovalTimeout)
	defer cancel()
	deadline, _ := actx.Deadline()
	// The approver sees the arguments the tool will get: validated, with
	// defaults applied.
	call := p.call
	call.Arguments = llm.Arguments(p.parsed.Arguments)
	req := &ApprovalRequest{Call: call, Description: p.tool.def.Description, Deadline: deadline, Permission: perm, Person: p.person}
	type answer struct {
		d   Decision
		err error
	}
	done := make(chan answer, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- answer{err: fmt.Errorf("approver panicked: %v", v)}
			}
		}()
		d, err := o.Approver.Approve(actx, req)
		done <- answer{d, err}
	}()
	var a answer
	select {
	case a = <-done:
	case <-actx.Done():
		// The watchdog: an approver that ignores its context does not
		// hold the run.
		a = answer{err: actx.Err()}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	refused := func(te *ToolError) {
		if perm != nil {
			te.Permission = &PermissionDecision{Behavior: Deny, Step: StepApprover, Reason: te.Msg}
		}
		x.failCall(p, te)
	}
	switch {
	case errors.Is(a.err, context.DeadlineExceeded):
		refused(&ToolError{Kind: ToolRefused, Err: a.err, Msg: fmt.Sprintf("approval for tool %q timed out after %v; the call was not run", name, o.ApprovalTimeout)})
	case a.err != nil:
		refused(&ToolError{Kind: ToolRefused, Err: a.err, Msg: fmt.Sprintf("approval for tool %q failed (%v); the call was not run", name, a.err)})
	case a.d.Verdict == Approve:
		p.approved = true
	case a.d.Verdict == Defer:
		p.state.Waiting = PendingApproval
		x.emit(Chunk{Type: ChunkToolCallPending, ToolCall: p.chunkInfo()})
	case a.d.Verdict == Cancel:
		return ErrCancelled
	default:
		refused(&ToolError{Kind: ToolRefused, Msg: rejection(name, a.d.Reason)})
	}
	return nil
}

func rejection(name, reason string) string {
	msg := fmt.Sprintf("the call to tool %q was rejected", name)
	if reason != "" {
		msg += ": " + reason
	}
	return msg
}
