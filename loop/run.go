package loop

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/hrns-dev/hrns/llm"
)

// RunLoop runs the agent on messages until the model gives its final answer,
// a call suspends the run, or a fatal error stops it.
//
// Put the system prompt first in messages, as llm.SystemMessage or
// openai.SystemMessage. Each turn streams a model response; each tool call
// it makes is parsed and validated, announced with a tool_call_start chunk,
// run, and its result appended to the conversation as a tool message; then
// the next turn starts. See [ChunkType] for every chunk.
//
// The returned iterator runs the loop as it is ranged over. Every run ends
// with exactly one [ChunkEnd] chunk whose Result says how it ended; a fatal
// error is reported by a [ChunkError] chunk just before it. Breaking out of
// the range stops the run: the model stream is closed and running tools'
// contexts are cancelled. Cancelling ctx does the same, and the run ends
// with ctx's error.
func (a *Agent) RunLoop(ctx context.Context, messages []llm.Message) iter.Seq[Chunk] {
	return func(yield func(Chunk) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		r := a.newRun(yield, slices.Clone(messages), 0, nil)
		ctx = r.becomeParent(ctx)
		ctx = r.observeStart(ctx, nil)
		defer r.observeEnd()
		if r.startHooks(ctx, true) {
			r.runTurns(ctx)
		}
	}
}

// Run runs the agent like [Agent.RunLoop] and returns its result, whose Err
// is also returned.
func (a *Agent) Run(ctx context.Context, messages []llm.Message) (*Result, error) {
	return Drain(a.RunLoop(ctx, messages))
}

// Resume continues a suspended run with the results and decisions in in.
// Calls approved in in run first; if calls still wait afterwards, the run
// suspends again at once. Otherwise the tool results are appended in call
// order, then in.Messages, and the loop goes on as [Agent.RunLoop] does.
// Input that names a call the suspension does not hold is refused whole
// before anything is applied: the run ends at once, still suspended
// (Result.Status is [StatusSuspended] and Result.Suspension is s), with
// Result.Err wrapping [ErrUnknownCall], so s can be resumed again with
// corrected input. A result for a call that already has one is ignored,
// so delivering a result twice is harmless. Budgets carry over from s:
// turns, tokens and the run's elapsed time ([Suspension.Elapsed]).
func (a *Agent) Resume(ctx context.Context, s *Suspension, in *ResumeInput) iter.Seq[Chunk] {
	return func(yield func(Chunk) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		r := a.newRun(yield, slices.Clone(s.Messages), s.Turn, s)
		ctx = r.becomeParent(ctx)
		ctx = r.observeStart(ctx, s)
		defer r.observeEnd()
		if in == nil {
			in = &ResumeInput{}
		}
		if r.startHooks(ctx, false) && r.resume(ctx, s, in) {
			r.runTurns(ctx)
		}
	}
}

// Drain consumes a run and returns its result, and its error if it failed.
func Drain(run iter.Seq[Chunk]) (*Result, error) {
	var res *Result
	for c := range run {
		if c.Type == ChunkEnd {
			res = c.Result
		}
	}
	if res == nil {
		return nil, fmt.Errorf("loop: run ended without a result")
	}
	return res, res.Err
}

// run is the state of one run.
type run struct {
	agent *Agent
	exec  executor
	yield func(Chunk) bool
	// consumerGone says the consumer broke out of the range: nothing is
	// emitted any more, and the run stops at its next step.
	consumerGone bool
	start        time.Time
	// transcript is only appended to; any other change (compaction)
	// calls conversation.Rewrote, since the run owns its conversation.
	transcript []llm.Message
	turn       int
	result     Result
	// conversation is what the provider keeps between the run's turns
	// (see llm.Conversation), in each of its model requests; dropped with
	// the run.
	conversation llm.Conversation

	answersChecked int // final answers checked against the output schema
	// transcriptCallIDs are the IDs of the transcript's calls (see
	// usedCallIDs).
	transcriptCallIDs map[string]bool

	// countedTokens is the provider's count of the last request and its
	// answer, which ends at transcript[countedMessages-1];
	// countedMessages is 0 when no count describes the transcript (see
	// contextEstimate).
	countedTokens   int64
	countedMessages int
	// asParent is what the agent tools of the run see of it (subagent.go).
	asParent *parentRun
	// observer is the run's observer, if it has one (observe.go).
	observer *runObserver

	// hooks are the agent's (nil without any); runEndCtx is the run's
	// context, for the run_end hooks; stopHookActive says a stop hook
	// made the run go on.
	hooks          *hookSet
	runEndCtx      context.Context
	stopHookActive bool
}

func (a *Agent) newRun(yield func(Chunk) bool, msgs []llm.Message, turn int, s *Suspension) *run {
	r := &run{agent: a, yield: yield, start: time.Now(), transcript: msgs, turn: turn}
	r.conversation.Own()
	r.exec = executor{tools: a.tools, opts: &a.opts, emit: r.emit, consumerGone: func() bool { return r.consumerGone }, hooks: a.hooks}
	r.hooks = a.hooks
	if s != nil {
		r.start = r.start.Add(-s.Elapsed)
		r.result.Usage = s.Usage
		r.result.Turns = slices.Clone(s.Turns)
		if s.CountedMessages > 0 && s.CountedMessages <= len(msgs) && s.Counted > 0 {
			r.countedTokens, r.countedMessages = s.Counted, s.CountedMessages
		}
	}
	return r
}

// emit yields c unless the consumer has stopped; it reports whether the
// run should go on.
func (r *run) emit(c Chunk) bool {
	if r.consumerGone {
		return false
	}
	if c.Turn == 0 {
		c.Turn = r.turn
	}
	if !r.yield(c) {
		r.consumerGone = true
	}
	return !r.consumerGone
}

// runTurns runs turns until the run ends. Before it, RunLoop and Resume
// (above) made the run the parent of its agent tools (becomeParent,
// subagent.go), started its observation (observeStart, observe.go), ran
// the run_start and user_prompt hooks (startHooks, hooks.go) and, for
// Resume, applied the input to the suspended calls (resume, suspend.go).
//
// This is the whole of a turn, each step in a file of its own with one
// entry point, in the order they run:
//
//  1. beginTurn (instructions.go): the budgets, Options.BeforeTurn, and the
//     final-answer prompt when a budget is spent.
//  2. compactBeforeRequest (compact.go): the transcript compacted when the
//     request would come near the context window.
//  3. buildRequest (request.go): the model request, from Options.
//  4. sendRequest (send.go): the attempts of the request, with retries and
//     one compaction after a context length refusal; each attempt's stream
//     is read by readStream (stream.go), which relays its deltas.
//  5. takeMessage (answer.go): the assistant message, its calls made safe
//     to keep, appended to the transcript.
//  6. a message without calls is the answer: judgeAnswer (answer.go)
//     checks it (a final answer was asked for, the output schema, the stop
//     hooks) and the run completes, or goes on for another turn.
//  7. a message with calls: runTools (exec.go) decides each call's
//     permission (authorize.go, approval.go, with the pre_tool hooks of
//     hooks.go), runs the handlers and appends their results, or suspends
//     the run while some wait (suspend.go).
//
// Hooks (hooks.go) and the observer (observe.go) are called from within
// these steps; a run that ends calls fail or end, below.
func (r *run) runTurns(ctx context.Context) {
	if r.agent.output != nil && r.agent.output.err != nil {
		r.fail(r.agent.output.err)
		return
	}
	for {
		budget, ok := r.beginTurn(ctx)
		if !ok {
			return
		}
		final := budget != ""
		if !r.emit(Chunk{Type: ChunkTurnStart}) {
			return
		}
		if err := r.compactBeforeRequest(ctx); err != nil {
			r.fail(err)
			return
		}
		req := r.buildRequest(final)
		resp, err := r.sendRequest(ctx, req)
		if err != nil {
			r.fail(err)
			return
		}
		msg, ok := r.takeMessage(resp, final)
		if !ok {
			return
		}
		calls := msg.ToolCalls()
		if len(calls) == 0 {
			switch r.judgeAnswer(ctx, msg, budget) {
			case answerAccepted:
				r.end(StatusCompleted)
				return
			case answerFailed:
				return
			}
			continue // answerAgain
		}
		if !r.runTools(ctx, calls) {
			return
		}
	}
}

// fail ends the run with err, reported by an error chunk before the end.
func (r *run) fail(err error) {
	if r.consumerGone {
		// The consumer is gone; nobody will read the chunks.
		return
	}
	r.result.Err = err
	r.emit(Chunk{Type: ChunkError, Err: err})
	r.end(StatusFailed)
}

// end ends the run with status: the run_end hooks, then the end chunk
// with the result.
func (r *run) end(status Status) {
	r.result.Status = status
	r.endHooks()
	r.result.Messages = r.transcript
	res := r.result
	r.emit(Chunk{Type: ChunkEnd, Result: &res})
}
