package session

import (
	"slices"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/store"
)

// What a step commits. A run's commits are made of the steps of its model
// and of what ends them; as machine.go makes the phases a table, this file
// makes the commits one: stepCommits says, for each way a step can end,
// what its commit holds, and segment.stepCommit is the one function that
// builds a step's commit from it. Every commit, a step's or not, is then
// written by Manager.updateFrom (see commit.go), the one path that
// applies a change, promotes queued sessions, delivers a child's end to
// its parent and wakes the waiters. docs/architecture.md draws the same
// table; TestStepCommits checks its rules, and each row has its test
// through the API (named in the table's doc).

// A stepEnd is how a step of the run, or the run itself, ends.
type stepEnd int

// The ways a step ends.
const (
	// endAnswer: the model answered, and the answer stands. The run
	// ends (answered): done completed, idle, or run again with the
	// messages that came meanwhile.
	endAnswer stepEnd = iota
	// endRejected: the answer did not match answer_format and is sent
	// back to the model, which is asked again in the same run.
	endRejected
	// endCalls: the model made calls. Server calls are committed
	// unfinished before they are evaluated and run; calls that all wait
	// for the caller are committed with the suspension that follows.
	endCalls
	// endNoAnswer: asked for its final answer, the model gave none: the
	// session fails (no_answer), or times out at max_time_s.
	endNoAnswer
	// endInvalid: the last answer the run allowed did not match
	// answer_format either: the session fails (answer_validation).
	endInvalid
	// endBlocked: a user_prompt hook blocked the new messages before
	// the model saw them. No step: they leave the inbox, refused, and
	// the session fails saying why.
	endBlocked
	// endYield: the run stopped between two steps for the caller's
	// input (a message, a pause, a final-answer request). No step.
	endYield
	// endCut: the run stopped (a shutdown, a crash, a lost lease, a
	// failed write, Cancel) with a call not finished. No step: the call
	// stays unfinished, and is evaluated again or failed (see
	// resumeInput, restart).
	endCut
	// endFailure: the runtime failed the session (a panic, poison, a
	// corrupt state, an internal error). No step: done failed
	// (internal), through the same commit path as any change.
	endFailure
)

// A stepRow is what the commit of a step that ends one way holds.
type stepRow struct {
	// step: the step is counted (steps, its usage, its policy_event and
	// a MetricsUpdateEvent).
	step bool
	// inbox: the inbox messages the run delivered leave the inbox.
	inbox bool
	// checkpoint: the run's transcript as of the step's end is the new
	// checkpoint (with the step's calls for endCalls). A commit that
	// takes messages out of the inbox must set a checkpoint that holds
	// them: a message leaves the inbox only in the commit of the
	// checkpoint that contains it (or, refused by a hook, in the commit
	// that fails the session saying so: endBlocked).
	checkpoint bool
}

// stepCommits is the table of what each step's commit holds.
var stepCommits = map[stepEnd]stepRow{
	endAnswer:   {step: true, inbox: true, checkpoint: true},
	endRejected: {step: true, inbox: true, checkpoint: true},
	endCalls:    {step: true, inbox: true, checkpoint: true},
	endNoAnswer: {step: true, inbox: true, checkpoint: true},
	endInvalid:  {step: true, inbox: true, checkpoint: true},
	endBlocked:  {inbox: true},
	endYield:    {},
	endCut:      {},
	endFailure:  {},
}

// stepCommit returns the change that commits a step ending with end: the
// step of rec (nil: none, as for a run that resumed with nothing new to
// say), the checkpoint of msgs with calls, as stepCommits says, then what
// then adds (nil: nothing). The change is committed with commitTranscript
// of msgs.
func (g *segment) stepCommit(end stepEnd, rec *stepRecord, msgs []llm.Message, calls []callState, then func(s *store.Session, st *state) []store.Event) func(s *store.Session, st *state) []store.Event {
	row := stepCommits[end]
	return func(s *store.Session, st *state) []store.Event {
		var events []store.Event
		if row.step && rec != nil {
			events = rec.apply(g, st)
		}
		if row.inbox {
			st.Inbox = slices.DeleteFunc(st.Inbox, func(in inboxMessage) bool { return slices.Contains(g.delivered, in.ID) })
		}
		if row.checkpoint {
			st.Checkpoint = g.checkpointOf(msgs, calls)
		}
		if then != nil {
			events = append(events, then(s, st)...)
		}
		return events
	}
}
