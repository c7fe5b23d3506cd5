package loop

import (
	"time"

	"github.com/hrns-dev/hrns/llm"
)

// Status is how a run ended.
type Status string

// Run statuses.
const (
	// StatusCompleted: the model gave its final answer.
	StatusCompleted Status = "completed"
	// StatusSuspended: calls wait for results from outside; resume with
	// [Agent.Resume].
	StatusSuspended Status = "suspended"
	// StatusFailed: a fatal error ended the run; Result.Err says which.
	StatusFailed Status = "failed"
	// StatusYielded: [Options.BeforeTurn] stopped the run between two
	// turns. Result.Suspension holds the transcript as it stood (no
	// calls wait) and the accounting so far; [Agent.Resume] continues
	// it, with ResumeInput.Messages appended before the next turn.
	StatusYielded Status = "yielded"
)

// A Result is the outcome of a run.
type Result struct {
	Status Status `json:"status"`
	// Answer is the text of the model's last message.
	Answer string `json:"answer"`
	// Messages is the whole transcript: the input messages, then every
	// message of the run, as sent to the model. It can be stored and
	// given to a later run to continue the conversation.
	Messages []llm.Message `json:"messages"`
	// Usage sums the token usage of every turn.
	Usage llm.Usage `json:"usage"`
	// Turns has one entry per model request.
	Turns []TurnInfo `json:"turns"`
	// Budget names the budget that was spent ("max_turns", "max_duration"
	// or "max_output_tokens"), if one was; the last turn then asked the
	// model for a final answer without tools.
	Budget string `json:"budget,omitempty"`
	// Suspension is set when Status is StatusSuspended or
	// StatusYielded.
	Suspension *Suspension `json:"suspension,omitempty"`
	// Err is the error that ended a failed run.
	Err error `json:"-"`
}

// MarshalJSON writes the result with its error as a string field "error".
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	var errText string
	if r.Err != nil {
		errText = r.Err.Error()
	}
	return marshalNoEscape(struct {
		plain
		Error string `json:"error,omitempty"`
	}{plain(r), errText})
}

// TurnInfo describes one model request.
type TurnInfo struct {
	Usage        llm.Usage        `json:"usage"`
	FinishReason llm.FinishReason `json:"finish_reason"`
	// Retries counts the failed attempts before the one that answered.
	Retries int `json:"retries,omitempty"`
}

// A Suspension is a run stopped while calls wait for results from outside.
// It is plain data: store it as JSON and give it to [Agent.Resume], in this
// process or another, to continue exactly where the run stopped.
type Suspension struct {
	// Messages is the transcript up to and including the assistant
	// message that made the calls; for a yielded run (no Calls), the
	// transcript between the two turns.
	Messages []llm.Message `json:"messages"`
	// Calls holds every call of that message, in order, with the result
	// of those that finished; empty for a yielded run.
	Calls []SuspendedCall `json:"calls"`
	// Turn is the number of the turn that made the calls.
	Turn int `json:"turn"`
	// Usage and Turns carry the accounting of the run so far.
	Usage llm.Usage  `json:"usage"`
	Turns []TurnInfo `json:"turns"`
	// Elapsed is the time the run has been running, summed over its
	// segments (the time spent suspended does not count), so that
	// MaxDuration bounds the whole run across resumptions.
	Elapsed time.Duration `json:"elapsed_ns,omitempty"`
	// Counted is the provider's count of the tokens of the first
	// CountedMessages messages of Messages (the input of the last
	// request and its answer, from its usage report), 0 when unknown:
	// the run resumed starts its estimate of the next request from it
	// (see [Compaction]) instead of estimating the whole transcript.
	Counted         int64 `json:"counted,omitempty"`
	CountedMessages int   `json:"counted_messages,omitempty"`
	// TraceParent is the W3C traceparent of the run that suspended, as
	// its [Options.Observer] gave it, so that [Agent.Resume] continues
	// the run's trace wherever it runs; empty without an observer.
	TraceParent string `json:"trace_parent,omitempty"`
}

// PendingReason says what a suspended call waits for.
type PendingReason string

// Pending reasons.
const (
	// PendingResult: the tool's result will be supplied by the caller.
	PendingResult PendingReason = "result"
	// PendingApproval: a person must approve the call before it runs.
	PendingApproval PendingReason = "approval"
	// PendingAgent: the call's sub-agent is suspended (see [AgentTool]);
	// SuspendedCall.Agent holds its suspension.
	PendingAgent PendingReason = "agent"
)

// A SuspendedCall is one call of a suspended turn.
type SuspendedCall struct {
	Call llm.ToolCall `json:"call"`
	// Result is set once the call has finished.
	Result *llm.ToolResult `json:"result,omitempty"`
	// Waiting says what the call waits for while Result is nil.
	Waiting PendingReason `json:"waiting,omitempty"`
	// Agent is the suspension of the call's sub-agent, when Waiting is
	// PendingAgent: the calls it waits for are answered through the
	// parent's Resume.
	Agent *Suspension `json:"agent,omitempty"`
}

// Pending returns the calls that still wait, in call order. A call whose
// sub-agent is suspended is replaced by the calls the sub-agent waits for,
// so that Pending lists what the whole tree of agents waits for: give
// their results and decisions to [Agent.Resume] of the top-level agent.
func (s *Suspension) Pending() []SuspendedCall {
	var out []SuspendedCall
	for _, c := range s.Calls {
		switch {
		case c.Result != nil:
		case c.Agent != nil:
			out = append(out, c.Agent.Pending()...)
		default:
			out = append(out, c)
		}
	}
	return out
}

// ResumeInput is what [Agent.Resume] is given to continue a suspended run.
type ResumeInput struct {
	// Results answer calls that wait for a result, by CallID. A result
	// for a call that waits for approval replaces the call.
	Results []llm.ToolResult
	// Approvals decide calls that wait for approval: a decision made
	// (by a person, or recorded earlier) that the call runs or not. An
	// approved call runs without being evaluated again.
	Approvals []ApprovalDecision
	// Reevaluate names calls that wait for approval with no decision
	// made, to be decided again as calls the model just made: each goes
	// through the whole permission evaluation (pre_tool hooks, deny and
	// ask rules, the mode, allow rules, the approver), and runs, is
	// refused, or waits for approval again as it says. A runtime that
	// resumes a call cut before it finished (its process stopped or
	// died) gives it here, never in Approvals: only a decision skips
	// the evaluation.
	Reevaluate []string
	// Messages are appended after the tool results, before the next
	// model request: for example a user message that steers the run.
	Messages []llm.Message
}

// ApprovalDecision decides a call that waits for approval.
type ApprovalDecision struct {
	CallID   string `json:"call_id"`
	Approved bool   `json:"approved"`
	// Reason is shown to the model when the call is rejected.
	Reason string `json:"reason,omitempty"`
}
