package session

import (
	"fmt"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/store"
)

// The session state machine. A session's state is its phase, the pause
// flags and the final-answer request (see state); every change of them is
// one of the transitions below, each of which returns the events that
// report it, so that a phase change without its ActiveStateChangeEvent
// cannot be written. The callers' input (Manager.Pause, SendMessages...)
// and the worker (runSession, the segment's commits) only choose which
// transition applies. docs/architecture.md draws the same machine and
// tables its transitions; TestTransitions checks them.
//
//	phase    status                  leaves by
//	queued   queued                  promote (a slot frees): new
//	new      pending                 begin: run, or idle without a task
//	run      running                 a step ends: wait, idle or done; yield
//	wait     awaiting_tool_results   results, decisions, child ends: run
//	idle     idle                    a message: run; idle_timeout_s: done
//	done     completed, failed,      a message: run (restart)
//	         timed_out, interrupted
//
// Paused is orthogonal: a paused session shows paused and is not run; a
// pause asked for while the agent runs (PauseRequested) takes effect
// before its next step.

// A finalReason says why the next model request asks for the final
// answer without tools. It is stored in the state as its string.
type finalReason string

// The final-answer requests.
const (
	finalNone    finalReason = ""
	finalForced  finalReason = "force_answer" // the caller asked (ForceAnswer)
	finalTimeout finalReason = "timeout"      // max_time_s was reached
)

// An outcome is how a session ends: its status, the error and error code
// it shows, and the event that reports it.
type outcome struct {
	status Status
	// reason is the AgentCompletionEvent's reason; a failure reports an
	// AgentErrorEvent with err instead.
	reason    string
	err, code string
}

// The ways a session ends.
var (
	outcomeFinished    = outcome{status: StatusCompleted, reason: "finished"}
	outcomeTimedOut    = outcome{status: StatusTimedOut, reason: "timed_out", err: "max_time_s reached", code: CodeTimeout}
	outcomeInterrupted = outcome{status: StatusInterrupted, reason: "stopped"}
)

// outcomeFailed is the end of a failed session.
func outcomeFailed(code, err string) outcome {
	return outcome{status: StatusFailed, err: err, code: code}
}

// finish ends the session with o and returns the event that says so.
func finish(s *store.Session, st *state, o outcome) []store.Event {
	st.Phase = phaseDone
	st.Final = finalNone
	st.Run++ // the run is over: nothing it still tries to commit lands
	s.Status = string(o.status)
	s.Error, s.ErrorCode = o.err, o.code
	s.FinishedAt = time.Now().UTC()
	if s.StartedAt.IsZero() {
		s.StartedAt = s.FinishedAt
	}
	if o.status == StatusFailed {
		return []store.Event{event(EventAgentError, map[string]string{"error": o.err})}
	}
	return []store.Event{event(EventAgentCompletion, map[string]string{"reason": o.reason})}
}

// toQueued holds a session created above its owner's limit of active
// sessions. A queued or new session is not active: it has no
// ActiveStateChangeEvent (whose states are running, idle and
// awaiting_tool_results), and its start is reported by begin.
func (st *state) toQueued() []store.Event {
	st.Phase = phaseQueued
	return nil
}

// toNew lets a queued session start: a worker begins it.
func (st *state) toNew() []store.Event {
	st.Phase = phaseNew
	return nil
}

// toRun makes the session runnable. It says so unless it ran already, or
// is paused: then it says so when resumed (see unpause).
func (st *state) toRun() []store.Event {
	if st.Phase == phaseRun {
		return nil
	}
	st.Phase, st.IdleUntil = phaseRun, time.Time{}
	if st.Paused {
		st.RunningUnannounced = true
		return nil
	}
	return []store.Event{activeStateEvent(st, string(StatusRunning))}
}

// toIdle makes the session wait for a message, until the time given (zero:
// until one comes).
func (st *state) toIdle(until time.Time) []store.Event {
	st.Phase, st.IdleUntil = phaseIdle, until
	return []store.Event{activeStateEvent(st, string(StatusIdle))}
}

// toWait makes the session wait for the calls of its checkpoint; a
// session that waits already republishes what it still waits for.
func (st *state) toWait() []store.Event {
	st.Phase = phaseWait
	return []store.Event{activeStateEvent(st, string(StatusAwaitingToolResults))}
}

// toPaused applies a pause.
func (st *state) toPaused() []store.Event {
	st.PauseRequested, st.Paused = false, true
	return []store.Event{event(EventRunStatusChange, map[string]string{"status": "paused"})}
}

// begin starts a new session: it runs its task, or waits idle for its
// first message (for idle_timeout_s when set, else until one comes).
func begin(s *store.Session, st *state, now time.Time) []store.Event {
	s.StartedAt = now
	if st.Spec.MaxTime > 0 {
		st.Deadline = now.Add(st.Spec.MaxTime)
	}
	events := []store.Event{event(EventAgentStarted, struct{}{})}
	if len(st.Inbox) == 0 {
		return append(events, st.toIdle(idleUntil(st.Spec.spec, now))...)
	}
	return append(events, st.toRun()...)
}

// idleUntil is when a session idle from now completes; zero without
// idle_timeout_s.
func idleUntil(sp *spec, now time.Time) time.Time {
	if sp.IdleTimeout <= 0 {
		return time.Time{}
	}
	return now.Add(sp.IdleTimeout)
}

// afterAnswer is what follows the agent's answer: the end of the session
// (timed out when time was the limit), a run with the messages that came
// meanwhile, or a wait for the next message (idle_timeout_s).
func (st *state) afterAnswer(s *store.Session, outOfTime bool, now time.Time) []store.Event {
	final := st.Final
	st.Final = finalNone
	switch {
	case final == finalTimeout || outOfTime:
		return finish(s, st, outcomeTimedOut)
	case len(st.Inbox) > 0:
		return st.toRun()
	case st.Spec.IdleTimeout > 0:
		return st.toIdle(now.Add(st.Spec.IdleTimeout))
	}
	return finish(s, st, outcomeFinished)
}

// afterSuspend is what follows a run that stopped with calls waiting: a
// wait, taking a pause asked for during the step now rather than once
// the results are in; or the run again, when every call was answered
// while it ran, or when the final answer was asked for meanwhile (a
// force answer, max_time_s): then the calls are answered with an error
// the model reads, as forceAnswer does for a waiting session.
func (st *state) afterSuspend() []store.Event {
	if st.Final != finalNone {
		return abandonPending(st, finalWhy(st.Final))
	}
	if st.settled() {
		return st.toRun() // it runs on
	}
	events := st.toWait()
	if st.PauseRequested {
		events = append(events, st.toPaused()...)
	}
	return events
}

// settle follows answers to a waiting session's calls: it runs when no
// call waits any more, and else republishes what it still waits for.
func (st *state) settle() []store.Event {
	if st.Phase != phaseWait {
		return nil
	}
	if st.settled() {
		return st.toRun()
	}
	return st.toWait()
}

// timeUp applies max_time_s: a session that cannot answer any more ends
// (idle: it answered, completed; paused or not started: timed out);
// otherwise the calls still waiting are answered with an error the model
// reads, and the model is asked for its final answer.
func timeUp(s *store.Session, st *state) []store.Event {
	switch {
	case st.Phase == phaseIdle:
		return finish(s, st, outcomeFinished)
	case st.Paused || st.Phase == phaseNew:
		return finish(s, st, outcomeTimedOut)
	}
	st.Final = finalTimeout
	st.PauseRequested = false
	events := abandonPending(st, finalWhy(finalTimeout))
	events = append(events, failCut(st, "the session's time limit (max_time_s) was reached before this call finished")...)
	if st.Phase == phaseWait {
		events = append(events, st.toRun()...)
	}
	return events
}

// forceAnswer asks for the final answer at the next step; calls that wait
// are answered with an error saying so.
func forceAnswer(st *state) []store.Event {
	st.Final = finalForced
	events := []store.Event{flowEvent("force_answer")}
	if st.Phase == phaseWait {
		events = append(events, abandonPending(st, finalWhy(finalForced))...)
		events = append(events, st.toRun()...)
	}
	return events
}

// pause pauses the session: at once unless the agent is running, else
// before its next step.
func pause(st *state) []store.Event {
	events := []store.Event{flowEvent("pause")}
	if st.Phase == phaseRun {
		st.PauseRequested = true
		return events
	}
	return append(events, st.toPaused()...)
}

// unpause undoes a pause. A session whose calls were answered while it
// was paused announces now that it runs (toRun does not while paused).
func unpause(st *state) []store.Event {
	events := []store.Event{flowEvent("resume")}
	if st.Paused {
		events = append(events, event(EventRunStatusChange, map[string]string{"status": "running"}))
		if st.Phase == phaseRun && st.RunningUnannounced {
			events = append(events, activeStateEvent(st, string(StatusRunning)))
		}
	}
	st.Paused, st.PauseRequested, st.RunningUnannounced = false, false, false
	return events
}

// receive gives the agent user messages (with the caller_id of each): a
// finished session starts again (see restart), a paused one resumes, an
// idle one runs.
func receive(s *store.Session, st *state, msgs []llm.Message, callers []string, now time.Time) []store.Event {
	var events []store.Event
	if st.Phase == phaseDone {
		events = restart(s, st, now)
	}
	for i, msg := range msgs {
		st.NextInID++
		st.Inbox = append(st.Inbox, inboxMessage{ID: st.NextInID, Message: msg})
		events = append(events, messageEvent(msg, callers[i]))
	}
	if st.Paused || st.PauseRequested {
		events = append(events, unpause(st)...)
	}
	if st.Phase == phaseIdle || st.Phase == phaseDone {
		events = append(events, st.toRun()...)
	}
	return events
}

// restart reopens a finished session for a new message: it runs again
// from its transcript, with its error cleared, its time budget
// (max_time_s) counted anew from now, and any call left without a result
// answered with an error the model reads. Its steps go on counting
// towards max_steps. Its phase stays done until the message makes it run.
func restart(s *store.Session, st *state, now time.Time) []store.Event {
	events := abandonPending(st, "the session ended before this call got a result")
	// A call cut when the session ended is not run again: it was
	// cancelled, or the session failed (possibly because of it).
	why := "the session ended before this call finished"
	switch Status(s.Status) {
	case StatusInterrupted:
		why = "the session was cancelled while this call ran"
	case StatusFailed:
		why = "the session failed while this call ran"
	}
	events = append(events, failCut(st, why+"; it was not run again")...)
	events = append(events, failApproved(st, s.Status)...)
	st.Final, st.Paused, st.PauseRequested = finalNone, false, false
	st.Deadline = time.Time{}
	if st.Spec.MaxTime > 0 {
		st.Deadline = now.Add(st.Spec.MaxTime)
	}
	s.Error, s.ErrorCode = "", ""
	s.FinishedAt = time.Time{}
	return append(events, event(EventAgentStarted, struct{}{}))
}

// finalWhy is what the model reads of a call abandoned because the final
// answer was asked for.
func finalWhy(f finalReason) string {
	if f == finalTimeout {
		return "the session's time limit (max_time_s) was reached before this call got a result"
	}
	return "the user asked for a final answer before this call got a result"
}

// abandonPending answers every call that still waits for the caller (a
// result, a decision, a child session) with an error the model reads.
func abandonPending(st *state, why string) []store.Event {
	var events []store.Event
	for i := range st.Checkpoint.Calls {
		c := &st.Checkpoint.Calls[i]
		if c.Result != nil || c.Waiting == waitUnfinished || c.Decision != nil {
			continue
		}
		msg := fmt.Sprintf("tool %q was not run: %s", c.Call.Name, why)
		if c.Waiting == waitApproval {
			c.Decision = &loop.ApprovalDecision{CallID: c.Call.ID, Reason: why}
			continue // the run reports the rejection
		}
		c.Result = &llm.ToolResult{CallID: c.Call.ID, Name: c.Call.Name, Content: []llm.Part{llm.TextPart(msg)}, IsError: true}
		c.Waiting = ""
		req := toolRequest(c.Call)
		events = append(events, agentEvent(AgentEventData{Kind: KindError, Error: msg, Origin: "hrns", ToolReq: &req}))
	}
	return events
}

// failCut answers the calls cut before they finished (see cutCalls) with
// an error the model reads, instead of running them again. It is for the
// causes that must not run them again: the session was cancelled or
// failed, or its time is up. A call cut by a stop or a crash of its
// worker is decided again instead (see resumeInput).
func failCut(st *state, why string) []store.Event {
	var events []store.Event
	for _, i := range cutCalls(st) {
		c := &st.Checkpoint.Calls[i]
		msg := fmt.Sprintf("tool %q was cut before it finished: %s", c.Call.Name, why)
		c.Result = &llm.ToolResult{CallID: c.Call.ID, Name: c.Call.Name, Content: []llm.Part{llm.TextPart(msg)}, IsError: true}
		c.Waiting = ""
		req := toolRequest(c.Call)
		events = append(events, agentEvent(AgentEventData{Kind: KindError, Error: msg, Origin: "hrns", ToolReq: &req}))
	}
	return events
}

// failApproved answers the calls approved before the session ended that
// its run had not run yet (approved while the session was paused, or as
// it ended) with an error the model reads: no call of a run that ended
// runs after its end (a new run, started by a message, would run them).
// A rejected call is not run either: the run reports the rejection.
func failApproved(st *state, status string) []store.Event {
	why := "the session ended before this approved call ran"
	switch Status(status) {
	case StatusInterrupted:
		why = "the session was cancelled before this approved call ran"
	case StatusFailed:
		why = "the session failed before this approved call ran"
	}
	var events []store.Event
	for i := range st.Checkpoint.Calls {
		c := &st.Checkpoint.Calls[i]
		if c.Result != nil || c.Decision == nil || !c.Decision.Approved {
			continue
		}
		msg := fmt.Sprintf("tool %q was not run: %s", c.Call.Name, why)
		c.Result = &llm.ToolResult{CallID: c.Call.ID, Name: c.Call.Name, Content: []llm.Part{llm.TextPart(msg)}, IsError: true}
		c.Waiting = ""
		req := toolRequest(c.Call)
		events = append(events, agentEvent(AgentEventData{Kind: KindError, Error: msg, Origin: "hrns", ToolReq: &req}))
	}
	return events
}

// cutCalls returns the indexes of the checkpoint's calls that are cut:
// server-side calls committed before their run evaluated and ran them,
// still without a result or a decision. Read while no run is in flight
// (a new run's start, a restart), these are the calls a stopped, failed
// or cancelled run left.
func cutCalls(st *state) []int {
	var out []int
	for i, c := range st.Checkpoint.Calls {
		if c.Result == nil && c.Decision == nil && c.Waiting == waitUnfinished {
			out = append(out, i)
		}
	}
	return out
}
