package loop

import (
	"context"
	"fmt"
	"io"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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
		ctx = r.attach(ctx)
		ctx = r.observeStart(ctx, nil)
		defer r.observeEnd()
		if r.startHooks(ctx, true) {
			r.loop(ctx)
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
		ctx = r.attach(ctx)
		ctx = r.observeStart(ctx, s)
		defer r.observeEnd()
		if in == nil {
			in = &ResumeInput{}
		}
		if r.startHooks(ctx, false) && r.resume(ctx, s, in) {
			r.loop(ctx)
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
	a       *Agent
	exec    executor
	yield   func(Chunk) bool
	stopped bool // the consumer broke out of the range
	start   time.Time
	msgs    []llm.Message // appended to only; any other change calls conv.Rewrote (the run owns conv)
	turn    int
	res     Result
	// conv is the run's conversation, in each of its model requests: what
	// the provider keeps between the run's turns (see llm.Conversation),
	// dropped with the run.
	conv llm.Conversation

	outAttempts int // final answers checked against the output schema
	// callIDs are the IDs of the transcript's calls (see usedCallIDs).
	callIDs map[string]bool

	// ctxTokens is the provider's count of the last request and its
	// answer, which ends at msgs[ctxLen-1]; ctxLen is 0 when no count
	// describes the transcript (see contextEstimate).
	ctxTokens int64
	ctxLen    int
	// nest is what the agent tools of the run see of it (subagent.go).
	nest *nest
	// obs is the run's observer, if it has one (observe.go).
	obs *observed

	// hooks are the agent's (nil without any); hookCtx is the run's
	// context, for the run_end hooks; stopContinued says a stop hook
	// made the run go on.
	hooks         *hookSet
	hookCtx       context.Context
	stopContinued bool
}

func (a *Agent) newRun(yield func(Chunk) bool, msgs []llm.Message, turn int, s *Suspension) *run {
	r := &run{a: a, yield: yield, start: time.Now(), msgs: msgs, turn: turn}
	r.conv.Own()
	r.exec = executor{tools: a.tools, opts: &a.opts, emit: r.emit, stopped: func() bool { return r.stopped }, hooks: a.hooks}
	r.hooks = a.hooks
	if s != nil {
		r.start = r.start.Add(-s.Elapsed)
		r.res.Usage = s.Usage
		r.res.Turns = slices.Clone(s.Turns)
		if s.CountedMessages > 0 && s.CountedMessages <= len(msgs) && s.Counted > 0 {
			r.ctxTokens, r.ctxLen = s.Counted, s.CountedMessages
		}
	}
	return r
}

// emit yields c unless the consumer has stopped; it reports whether the
// run should go on.
func (r *run) emit(c Chunk) bool {
	if r.stopped {
		return false
	}
	if c.Turn == 0 {
		c.Turn = r.turn
	}
	if !r.yield(c) {
		r.stopped = true
	}
	return !r.stopped
}

// loop runs turns until the run ends.
func (r *run) loop(ctx context.Context) {
	if r.a.out != nil && r.a.out.err != nil {
		r.fail(r.a.out.err)
		return
	}
	for {
		budget := r.budgetSpent()
		if r.a.opts.BeforeTurn != nil && !r.a.opts.BeforeTurn(ctx, NextTurn{Turn: r.turn + 1, Budget: budget}) {
			r.yieldRun()
			return
		}
		final := budget != ""
		if final {
			r.res.Budget = budget
			r.msgs = append(r.msgs, llm.UserMessage(strings.ReplaceAll(r.a.opts.FinalAnswerPrompt, "{budget}", budget)))
		}
		r.turn++
		resp, err := r.callModel(ctx, final)
		if err != nil {
			r.fail(err)
			return
		}
		msg := resp.Message
		msg.Role = llm.RoleAssistant
		if final {
			msg.Parts = slices.DeleteFunc(slices.Clone(msg.Parts), func(p llm.Part) bool { return p.Kind == llm.PartToolCall })
		}
		r.normalizeCalls(&msg)
		r.msgs = append(r.msgs, msg)
		usage := resp.Usage
		if !r.emit(Chunk{Type: ChunkTurnEnd, Usage: &usage, FinishReason: resp.FinishReason, Model: resp.Model, Messages: r.msgs}) {
			return
		}
		calls := msg.ToolCalls()
		if len(calls) == 0 {
			r.res.Answer = msg.Text()
			if final && strings.TrimSpace(r.res.Answer) == "" {
				// The model ignored the request for an answer (it
				// called tools anyway, or said nothing): no success.
				r.fail(fmt.Errorf("%w: %s was reached and the model gave no final answer", ErrNoAnswer, budget))
				return
			}
			switch r.checkAnswer(final) {
			case answerRetry:
				continue
			case answerFailed:
				return
			}
			if r.stopHooks(ctx, final) {
				continue
			}
			r.end(StatusCompleted)
			return
		}
		states, err := r.exec.execute(ctx, calls, nil)
		if err != nil {
			r.fail(err)
			return
		}
		if !r.appendResults(states) {
			return
		}
	}
}

// NextTurn describes the model request a run is about to make, for
// [Options.BeforeTurn].
type NextTurn struct {
	// Turn is the number the request will have (see Chunk.Turn).
	Turn int
	// Budget names the budget that makes it the run's last turn, one
	// that asks for a final answer without tools ("max_turns",
	// "max_duration" or "max_output_tokens"; see [Result.Budget]);
	// empty for an ordinary turn.
	Budget string
}

// Final reports whether the turn asks for a final answer without tools.
func (t NextTurn) Final() bool { return t.Budget != "" }

// yieldRun ends the run between two turns, as BeforeTurn asked.
func (r *run) yieldRun() {
	r.res.Suspension = r.suspension(nil)
	r.end(StatusYielded)
}

// suspension is the run as it stands, waiting for calls.
func (r *run) suspension(calls []SuspendedCall) *Suspension {
	counted := r.ctxTokens
	if r.ctxLen == 0 {
		counted = 0
	}
	return &Suspension{
		Messages: slices.Clone(r.msgs),
		Calls:    calls,
		Turn:     r.turn,
		Usage:    r.res.Usage,
		Turns:    slices.Clone(r.res.Turns),
		Elapsed:  time.Since(r.start),

		Counted:         counted,
		CountedMessages: r.ctxLen,

		TraceParent: r.traceParent(),
	}
}

// appendResults appends the tool message of a finished set of calls, or
// suspends the run if some still wait; it reports whether the loop goes on.
func (r *run) appendResults(states []SuspendedCall) bool {
	for _, s := range states {
		if s.Result == nil {
			r.res.Suspension = r.suspension(states)
			r.end(StatusSuspended)
			return false
		}
	}
	if len(states) == 0 {
		return !r.stopped // a yielded run resumed: no calls to answer
	}
	tm := llm.Message{Role: llm.RoleTool, Parts: make([]llm.Part, len(states))}
	for i, s := range states {
		tm.Parts[i] = llm.Part{Kind: llm.PartToolResult, ToolResult: s.Result}
	}
	r.msgs = append(r.msgs, tm)
	return !r.stopped
}

// budgetSpent names the budget that makes the next turn the last, or "".
func (r *run) budgetSpent() string {
	o := &r.a.opts
	switch {
	case r.turn+1 >= o.MaxTurns:
		return "max_turns"
	case o.MaxDuration > 0 && time.Since(r.start) >= o.MaxDuration:
		return "max_duration"
	case o.MaxOutputTokens > 0 && r.res.Usage.OutputTokens >= o.MaxOutputTokens:
		return "max_output_tokens"
	}
	return ""
}

// callModel sends the turn's request, retrying transient failures.
func (r *run) callModel(ctx context.Context, final bool) (resp *llm.Response, err error) {
	o := &r.a.opts
	req := r.request(final)
	if !r.emit(Chunk{Type: ChunkTurnStart}) {
		return nil, context.Canceled
	}
	if err := r.compactBeforeTurn(ctx); err != nil {
		return nil, err
	}
	req.Messages = r.msgs
	ctx, ot := r.observeTurn(ctx, req)
	defer func() { r.observeTurnEnd(ot, resp, err) }()
	compacted := false
	for attempt := 1; ; attempt++ {
		resp, err := r.stream(ctx, req)
		if err == nil {
			r.noteUsage(resp.Usage)
			info := TurnInfo{Usage: resp.Usage, FinishReason: resp.FinishReason, Retries: attempt - 1}
			r.res.Turns = append(r.res.Turns, info)
			r.res.Usage.Add(resp.Usage)
			return resp, nil
		}
		if r.stopped {
			return nil, context.Canceled
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if retry, err := r.compactForRetry(ctx, err, &compacted); err != nil {
			return nil, err
		} else if retry {
			req.Messages = r.msgs
			continue
		}
		if !llm.IsRetryable(err) {
			return nil, err
		}
		if attempt >= o.Retry.MaxAttempts {
			return nil, fmt.Errorf("%w after %d attempts: %w", ErrRetriesExhausted, attempt, err)
		}
		after := llm.RetryAfter(err)
		if after > o.Retry.MaxRetryAfter {
			return nil, fmt.Errorf("provider asked to retry after %v, more than the %v allowed: %w", after, o.Retry.MaxRetryAfter, err)
		}
		delay := o.Retry.backoff(attempt, after)
		o.Logger.DebugContext(ctx, "retrying model request", "attempt", attempt, "delay", delay, "err", err)
		r.observeRetry(ot, attempt, delay, err)
		if !r.emit(Chunk{Type: ChunkRetry, Retry: &RetryInfo{Attempt: attempt, Delay: delay}, Err: err}) {
			return nil, context.Canceled
		}
		if err := sleep(ctx, delay); err != nil {
			return nil, err
		}
	}
}

// stream runs one attempt of a model request, relaying its deltas.
func (r *run) stream(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	var calls streamCalls // by stream index, for delta chunks
	for c, err := range r.a.model.Stream(ctx, req) {
		if err != nil {
			return nil, err
		}
		var out Chunk
		switch c.Kind {
		case llm.ChunkText:
			out = Chunk{Type: ChunkMessage, Content: c.Text}
		case llm.ChunkReasoning:
			out = Chunk{Type: ChunkReasoning, Content: c.Text}
		case llm.ChunkToolCallStart:
			calls.set(c.Index, ToolCallInfo{ID: c.ID, Name: c.Name})
			out = Chunk{Type: ChunkToolCallDelta, ToolCall: &ToolCallInfo{ID: c.ID, Name: c.Name}}
		case llm.ChunkToolCallDelta:
			info := calls.get(c.Index)
			out = Chunk{Type: ChunkToolCallDelta, Content: c.Text, ToolCall: &info}
		case llm.ChunkDone:
			if c.Response == nil {
				return nil, fmt.Errorf("model stream: done without a response: %w", io.ErrUnexpectedEOF)
			}
			return c.Response, nil
		default:
			continue
		}
		if !r.emit(out) {
			return nil, context.Canceled
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("model stream ended without a response: %w", io.ErrUnexpectedEOF)
}

// streamCalls names the calls of a stream by the index the model stream
// gave them. Indices come from the model: a negative or huge one must not
// panic or allocate, so those live in a map.
type streamCalls struct {
	low  []ToolCallInfo
	high map[int]ToolCallInfo
}

// maxDenseIndex bounds the indices kept in a slice; models number their
// calls from 0, so real indices stay far below it.
const maxDenseIndex = 256

func (s *streamCalls) set(i int, c ToolCallInfo) {
	if i < 0 || i >= maxDenseIndex {
		if s.high == nil {
			s.high = make(map[int]ToolCallInfo)
		}
		if len(s.high) < maxDenseIndex {
			s.high[i] = c
		}
		return
	}
	for len(s.low) <= i {
		s.low = append(s.low, ToolCallInfo{})
	}
	s.low[i] = c
}

func (s *streamCalls) get(i int) ToolCallInfo {
	if i >= 0 && i < len(s.low) {
		return s.low[i]
	}
	return s.high[i]
}

// normalizeCalls makes the calls of msg safe to keep: every call gets a
// non-empty ID that no other call of the run's transcript has, so results
// and resumptions can be matched by ID and a late or repeated result can
// never answer the wrong call (some models number their calls from 0 each
// turn); invalid UTF-8 in IDs, names and arguments is replaced, so what
// the run holds is what every JSON encoding of it carries (a stored call
// then matches its result after a round trip). IDs that are already
// unique are kept.
func (r *run) normalizeCalls(msg *llm.Message) {
	cloned := false
	for i, p := range msg.Parts {
		if p.Kind != llm.PartToolCall || p.ToolCall == nil {
			continue
		}
		seen := r.usedCallIDs()
		tc := p.ToolCall
		valid := utf8.ValidString(tc.ID) && utf8.ValidString(tc.Name) && utf8.Valid(tc.Arguments)
		if valid && tc.ID != "" && !seen[tc.ID] {
			seen[tc.ID] = true
			continue
		}
		c := *tc
		c.ID, c.Name = strings.ToValidUTF8(c.ID, "\uFFFD"), strings.ToValidUTF8(c.Name, "\uFFFD")
		c.Arguments = c.Arguments.Sanitize()
		if c.ID == "" || seen[c.ID] {
			c.ID = "call_" + strconv.Itoa(r.turn) + "_" + strconv.Itoa(i)
			for seen[c.ID] {
				c.ID += "_"
			}
		}
		seen[c.ID] = true
		if !cloned {
			msg.Parts, cloned = slices.Clone(msg.Parts), true
		}
		msg.Parts[i].ToolCall = &c
	}
}

// usedCallIDs returns the IDs of the calls in the run's transcript,
// collected at the first call the run makes and kept up to date by
// normalizeCalls: a run without calls never pays for it.
func (r *run) usedCallIDs() map[string]bool {
	if r.callIDs == nil {
		r.callIDs = make(map[string]bool)
		for _, m := range r.msgs {
			for _, p := range m.Parts {
				if p.Kind == llm.PartToolCall && p.ToolCall != nil {
					r.callIDs[p.ToolCall.ID] = true
				}
			}
		}
	}
	return r.callIDs
}

func (r *run) fail(err error) {
	if r.stopped {
		// The consumer is gone; nobody will read the chunks.
		return
	}
	r.res.Err = err
	r.emit(Chunk{Type: ChunkError, Err: err})
	r.end(StatusFailed)
}

func (r *run) end(status Status) {
	r.res.Status = status
	r.endHooks()
	r.res.Messages = r.msgs
	res := r.res
	r.emit(Chunk{Type: ChunkEnd, Result: &res})
}
