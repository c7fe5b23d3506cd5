package loop

import (
	"context"
	"time"

	"github.com/hrns-dev/hrns/llm"
)

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
