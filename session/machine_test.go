package session

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/store"
)

// machineState is what the table compares of a session: its phase, the
// flags, the status and error code it shows.
type machineState struct {
	Phase              phase
	Paused             bool
	PauseRequested     bool
	RunningUnannounced bool
	Final              finalReason
	Status             Status
	Code               string
}

func (ms machineState) build() (*store.Session, *state) {
	st := &state{Spec: agentSpec{spec: &spec{}}, Phase: ms.Phase, Paused: ms.Paused, PauseRequested: ms.PauseRequested,
		RunningUnannounced: ms.RunningUnannounced, Final: ms.Final}
	s := &store.Session{ID: "s1", Status: string(ms.Status), ErrorCode: ms.Code}
	if ms.Phase != phaseDone {
		derive(s, st)
	}
	return s, st
}

func observe(s *store.Session, st *state) machineState {
	derive(s, st)
	return machineState{Phase: st.Phase, Paused: st.Paused, PauseRequested: st.PauseRequested,
		RunningUnannounced: st.RunningUnannounced, Final: st.Final, Status: Status(s.Status), Code: s.ErrorCode}
}

// describe names an event by its type and what distinguishes it:
// ActiveStateChangeEvent:running, AgentEvent/flow_event:pause...
func describe(e store.Event) string {
	var d map[string]any
	_ = json.Unmarshal(e.Data, &d)
	out := e.Type
	if k, ok := d["kind"].(string); ok {
		out += "/" + k
	}
	for _, key := range []string{"state", "reason", "status", "flow"} {
		if v, ok := d[key].(string); ok {
			out += ":" + v
		}
	}
	if d["error"] != nil && e.Type == EventAgentError {
		out += ":error"
	}
	return out
}

// clientCall puts a call of a client-side tool waiting for its result in
// the checkpoint.
func clientCall(st *state, answered bool) {
	c := callState{Call: llm.ToolCall{ID: "c1", Name: "lookup", Arguments: llm.Arguments(`{}`)}, Client: true, Waiting: waitResult}
	if answered {
		c.Result, c.Waiting = &llm.ToolResult{CallID: "c1", Name: "lookup"}, ""
	}
	st.Checkpoint.Calls = []callState{c}
}

// cutCall puts a server call its run did not finish in the checkpoint.
func cutCall(st *state) {
	st.Checkpoint.Calls = []callState{{Call: llm.ToolCall{ID: "c1", Name: "slow", Arguments: llm.Arguments(`{}`)}, Waiting: waitUnfinished}}
}

// TestTransitions is the state machine of machine.go as a table: a state,
// an input, and the state and events that follow. No store is involved.
func TestTransitions(t *testing.T) {
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	inbox := func(st *state) { st.Inbox = []inboxMessage{{ID: 1, Message: llm.UserMessage("task")}} }
	idle := func(st *state) { st.Spec.IdleTimeout = time.Minute }
	tests := []struct {
		name  string
		from  machineState
		setup func(st *state)
		input func(s *store.Session, st *state) []store.Event
		to    machineState
		want  []string
	}{{
		name:  "a session above its owner's limit is queued, unannounced",
		from:  machineState{Phase: phaseNew},
		input: func(s *store.Session, st *state) []store.Event { return st.toQueued() },
		to:    machineState{Phase: phaseQueued, Status: StatusQueued},
	}, {
		name:  "a freed slot lets it start",
		from:  machineState{Phase: phaseQueued},
		input: func(s *store.Session, st *state) []store.Event { return st.toNew() },
		to:    machineState{Phase: phaseNew, Status: StatusPending},
	}, {
		name:  "a new session with a task runs",
		from:  machineState{Phase: phaseNew},
		setup: inbox,
		input: func(s *store.Session, st *state) []store.Event { return begin(s, st, now) },
		to:    machineState{Phase: phaseRun, Status: StatusRunning},
		want:  []string{"AgentStartedEvent", "ActiveStateChangeEvent:running"},
	}, {
		name:  "a new session without a task waits idle",
		from:  machineState{Phase: phaseNew},
		setup: idle,
		input: func(s *store.Session, st *state) []store.Event { return begin(s, st, now) },
		to:    machineState{Phase: phaseIdle, Status: StatusIdle},
		want:  []string{"AgentStartedEvent", "ActiveStateChangeEvent:idle"},
	}, {
		name:  "an answer ends the session",
		from:  machineState{Phase: phaseRun},
		input: func(s *store.Session, st *state) []store.Event { return st.afterAnswer(s, false, now) },
		to:    machineState{Phase: phaseDone, Status: StatusCompleted},
		want:  []string{"AgentCompletionEvent:finished"},
	}, {
		name:  "an answer with idle_timeout_s waits for a message",
		from:  machineState{Phase: phaseRun},
		setup: idle,
		input: func(s *store.Session, st *state) []store.Event { return st.afterAnswer(s, false, now) },
		to:    machineState{Phase: phaseIdle, Status: StatusIdle},
		want:  []string{"ActiveStateChangeEvent:idle"},
	}, {
		name:  "an answer with messages that came meanwhile runs on, unannounced",
		from:  machineState{Phase: phaseRun},
		setup: inbox,
		input: func(s *store.Session, st *state) []store.Event { return st.afterAnswer(s, false, now) },
		to:    machineState{Phase: phaseRun, Status: StatusRunning},
	}, {
		name:  "the answer asked for at max_time_s ends it timed out",
		from:  machineState{Phase: phaseRun, Final: finalTimeout},
		setup: idle,
		input: func(s *store.Session, st *state) []store.Event { return st.afterAnswer(s, false, now) },
		to:    machineState{Phase: phaseDone, Status: StatusTimedOut, Code: CodeTimeout},
		want:  []string{"AgentCompletionEvent:timed_out"},
	}, {
		name:  "a forced answer clears the request and ends the session",
		from:  machineState{Phase: phaseRun, Final: finalForced},
		input: func(s *store.Session, st *state) []store.Event { return st.afterAnswer(s, false, now) },
		to:    machineState{Phase: phaseDone, Status: StatusCompleted},
		want:  []string{"AgentCompletionEvent:finished"},
	}, {
		name:  "a run that suspends on a client call waits",
		from:  machineState{Phase: phaseRun},
		setup: func(st *state) { clientCall(st, false) },
		input: func(s *store.Session, st *state) []store.Event { return st.afterSuspend() },
		to:    machineState{Phase: phaseWait, Status: StatusAwaitingToolResults},
		want:  []string{"ActiveStateChangeEvent:awaiting_tool_results"},
	}, {
		name:  "a pause asked for during the step takes effect with the wait",
		from:  machineState{Phase: phaseRun, PauseRequested: true},
		setup: func(st *state) { clientCall(st, false) },
		input: func(s *store.Session, st *state) []store.Event { return st.afterSuspend() },
		to:    machineState{Phase: phaseWait, Paused: true, Status: StatusPaused},
		want:  []string{"ActiveStateChangeEvent:awaiting_tool_results", "AgentRunStatusChangeEvent:paused"},
	}, {
		name:  "a run whose calls were all answered meanwhile runs on",
		from:  machineState{Phase: phaseRun},
		setup: func(st *state) { clientCall(st, true) },
		input: func(s *store.Session, st *state) []store.Event { return st.afterSuspend() },
		to:    machineState{Phase: phaseRun, Status: StatusRunning},
	}, {
		name:  "a force answer that came during a step ending in client calls abandons them and runs on",
		from:  machineState{Phase: phaseRun, Final: finalForced},
		setup: func(st *state) { clientCall(st, false) },
		input: func(s *store.Session, st *state) []store.Event { return st.afterSuspend() },
		to:    machineState{Phase: phaseRun, Final: finalForced, Status: StatusRunning},
		want:  []string{"AgentEvent/error_event"},
	}, {
		name:  "a message restarts a cancelled session whose call was cut: the call fails",
		from:  machineState{Phase: phaseDone, Status: StatusInterrupted},
		setup: cutCall,
		input: func(s *store.Session, st *state) []store.Event {
			return receive(s, st, []llm.Message{llm.UserMessage("again")}, []string{"user"}, now)
		},
		to:   machineState{Phase: phaseRun, Status: StatusRunning},
		want: []string{"AgentEvent/error_event", "AgentStartedEvent", "AgentEvent/message_event", "ActiveStateChangeEvent:running"},
	}, {
		name:  "max_time_s fails a cut call instead of running it",
		from:  machineState{Phase: phaseRun},
		setup: cutCall,
		input: func(s *store.Session, st *state) []store.Event { return timeUp(s, st) },
		to:    machineState{Phase: phaseRun, Final: finalTimeout, Status: StatusRunning},
		want:  []string{"AgentEvent/error_event"},
	}, {
		name:  "the last result runs a waiting session",
		from:  machineState{Phase: phaseWait},
		setup: func(st *state) { clientCall(st, true) },
		input: func(s *store.Session, st *state) []store.Event { return st.settle() },
		to:    machineState{Phase: phaseRun, Status: StatusRunning},
		want:  []string{"ActiveStateChangeEvent:running"},
	}, {
		name:  "a result while calls still wait republishes them",
		from:  machineState{Phase: phaseWait},
		setup: func(st *state) { clientCall(st, false) },
		input: func(s *store.Session, st *state) []store.Event { return st.settle() },
		to:    machineState{Phase: phaseWait, Status: StatusAwaitingToolResults},
		want:  []string{"ActiveStateChangeEvent:awaiting_tool_results"},
	}, {
		name:  "the last result of a paused session: running is said on resume",
		from:  machineState{Phase: phaseWait, Paused: true},
		setup: func(st *state) { clientCall(st, true) },
		input: func(s *store.Session, st *state) []store.Event { return st.settle() },
		to:    machineState{Phase: phaseRun, Paused: true, RunningUnannounced: true, Status: StatusPaused},
	}, {
		name:  "resuming says it runs",
		from:  machineState{Phase: phaseRun, Paused: true, RunningUnannounced: true},
		input: func(s *store.Session, st *state) []store.Event { return unpause(st) },
		to:    machineState{Phase: phaseRun, Status: StatusRunning},
		want:  []string{"AgentEvent/flow_event:resume", "AgentRunStatusChangeEvent:running", "ActiveStateChangeEvent:running"},
	}, {
		name:  "a pause while running is requested",
		from:  machineState{Phase: phaseRun},
		input: func(s *store.Session, st *state) []store.Event { return pause(st) },
		to:    machineState{Phase: phaseRun, PauseRequested: true, Status: StatusRunning},
		want:  []string{"AgentEvent/flow_event:pause"},
	}, {
		name:  "a pause while waiting is at once",
		from:  machineState{Phase: phaseWait},
		input: func(s *store.Session, st *state) []store.Event { return pause(st) },
		to:    machineState{Phase: phaseWait, Paused: true, Status: StatusPaused},
		want:  []string{"AgentEvent/flow_event:pause", "AgentRunStatusChangeEvent:paused"},
	}, {
		name:  "the worker applies a requested pause",
		from:  machineState{Phase: phaseRun, PauseRequested: true},
		input: func(s *store.Session, st *state) []store.Event { return st.toPaused() },
		to:    machineState{Phase: phaseRun, Paused: true, Status: StatusPaused},
		want:  []string{"AgentRunStatusChangeEvent:paused"},
	}, {
		name:  "force_answer while running asks at the next step",
		from:  machineState{Phase: phaseRun},
		input: func(s *store.Session, st *state) []store.Event { return forceAnswer(st) },
		to:    machineState{Phase: phaseRun, Final: finalForced, Status: StatusRunning},
		want:  []string{"AgentEvent/flow_event:force_answer"},
	}, {
		name:  "force_answer while waiting answers the calls and runs",
		from:  machineState{Phase: phaseWait},
		setup: func(st *state) { clientCall(st, false) },
		input: func(s *store.Session, st *state) []store.Event { return forceAnswer(st) },
		to:    machineState{Phase: phaseRun, Final: finalForced, Status: StatusRunning},
		want:  []string{"AgentEvent/flow_event:force_answer", "AgentEvent/error_event", "ActiveStateChangeEvent:running"},
	}, {
		name:  "max_time_s while waiting answers the calls and asks for the answer",
		from:  machineState{Phase: phaseWait},
		setup: func(st *state) { clientCall(st, false) },
		input: timeUp,
		to:    machineState{Phase: phaseRun, Final: finalTimeout, Status: StatusRunning},
		want:  []string{"AgentEvent/error_event", "ActiveStateChangeEvent:running"},
	}, {
		name:  "max_time_s while running asks for the answer, no event",
		from:  machineState{Phase: phaseRun, PauseRequested: true},
		input: timeUp,
		to:    machineState{Phase: phaseRun, Final: finalTimeout, Status: StatusRunning},
	}, {
		name:  "max_time_s while idle completes",
		from:  machineState{Phase: phaseIdle},
		input: timeUp,
		to:    machineState{Phase: phaseDone, Status: StatusCompleted},
		want:  []string{"AgentCompletionEvent:finished"},
	}, {
		name:  "max_time_s while paused times out",
		from:  machineState{Phase: phaseWait, Paused: true},
		input: timeUp,
		to:    machineState{Phase: phaseDone, Paused: true, Status: StatusTimedOut, Code: CodeTimeout},
		want:  []string{"AgentCompletionEvent:timed_out"},
	}, {
		name: "a message to a paused idle session resumes and runs it",
		from: machineState{Phase: phaseIdle, Paused: true},
		input: func(s *store.Session, st *state) []store.Event {
			return receive(s, st, []llm.Message{llm.UserMessage("more")}, []string{"user"}, now)
		},
		to: machineState{Phase: phaseRun, Status: StatusRunning},
		want: []string{"AgentEvent/message_event", "AgentEvent/flow_event:resume", "AgentRunStatusChangeEvent:running",
			"ActiveStateChangeEvent:running"},
	}, {
		name: "a message restarts a finished session",
		from: machineState{Phase: phaseDone, Status: StatusFailed, Code: CodeInternal},
		input: func(s *store.Session, st *state) []store.Event {
			return receive(s, st, []llm.Message{llm.UserMessage("again")}, []string{"user"}, now)
		},
		to:   machineState{Phase: phaseRun, Status: StatusRunning},
		want: []string{"AgentStartedEvent", "AgentEvent/message_event", "ActiveStateChangeEvent:running"},
	}, {
		name:  "cancel interrupts",
		from:  machineState{Phase: phaseWait},
		input: func(s *store.Session, st *state) []store.Event { return finish(s, st, outcomeInterrupted) },
		to:    machineState{Phase: phaseDone, Status: StatusInterrupted},
		want:  []string{"AgentCompletionEvent:stopped"},
	}, {
		name: "a failure reports its error",
		from: machineState{Phase: phaseRun, Final: finalForced},
		input: func(s *store.Session, st *state) []store.Event {
			return finish(s, st, outcomeFailed(CodeNoAnswer, "no answer"))
		},
		to:   machineState{Phase: phaseDone, Status: StatusFailed, Code: CodeNoAnswer},
		want: []string{"AgentErrorEvent:error"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, st := tc.from.build()
			if tc.setup != nil {
				tc.setup(st)
			}
			var got []string
			for _, e := range tc.input(s, st) {
				got = append(got, describe(e))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.to, observe(s, st)); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEveryPhaseChangeIsReported runs each transition from each phase and
// checks the rule the transitions exist for: when the phase the caller
// sees changes, an event says so (an ActiveStateChangeEvent, or the
// event that ends or starts the session).
func TestEveryPhaseChangeIsReported(t *testing.T) {
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	inputs := map[string]func(s *store.Session, st *state) []store.Event{
		"toRun":        func(s *store.Session, st *state) []store.Event { return st.toRun() },
		"toIdle":       func(s *store.Session, st *state) []store.Event { return st.toIdle(now) },
		"toWait":       func(s *store.Session, st *state) []store.Event { return st.toWait() },
		"settle":       func(s *store.Session, st *state) []store.Event { return st.settle() },
		"afterSuspend": func(s *store.Session, st *state) []store.Event { return st.afterSuspend() },
		"afterAnswer":  func(s *store.Session, st *state) []store.Event { return st.afterAnswer(s, false, now) },
		"timeUp":       timeUp,
		"forceAnswer":  func(s *store.Session, st *state) []store.Event { return forceAnswer(st) },
		"pause":        func(s *store.Session, st *state) []store.Event { return pause(st) },
		"unpause":      func(s *store.Session, st *state) []store.Event { return unpause(st) },
		"receive": func(s *store.Session, st *state) []store.Event {
			return receive(s, st, []llm.Message{llm.UserMessage("hi")}, []string{"user"}, now)
		},
	}
	for _, from := range []phase{phaseNew, phaseRun, phaseWait, phaseIdle} {
		for _, answered := range []bool{false, true} {
			for name, input := range inputs {
				s, st := machineState{Phase: from}.build()
				clientCall(st, answered)
				events := input(s, st)
				if st.Phase == from {
					continue
				}
				var said []string
				for _, e := range events {
					said = append(said, describe(e))
				}
				joined := strings.Join(said, " ")
				if !strings.Contains(joined, "ActiveStateChangeEvent") && !strings.Contains(joined, "AgentCompletionEvent") &&
					!strings.Contains(joined, "AgentErrorEvent") {
					t.Errorf("%s from %s (answered %v): phase %s with events %q", name, from, answered, st.Phase, said)
				}
			}
		}
	}
}

// TestEveryEndingFencesTheRun: every ending moves the run generation on,
// so that no commit of the run it ended lands (see segment.commitWith),
// and a restart does not move it back.
func TestEveryEndingFencesTheRun(t *testing.T) {
	for _, o := range []outcome{outcomeFinished, outcomeTimedOut, outcomeInterrupted, outcomeFailed(CodeInternal, "x")} {
		s, st := machineState{Phase: phaseRun}.build()
		st.Run = 7
		finish(s, st, o)
		if st.Run != 8 {
			t.Errorf("%s: run generation %d after the ending, want 8", o.status, st.Run)
		}
		receive(s, st, []llm.Message{llm.UserMessage("again")}, []string{"user"}, time.Now())
		if st.Run != 8 {
			t.Errorf("%s: run generation %d after the restart, want 8", o.status, st.Run)
		}
	}
}
