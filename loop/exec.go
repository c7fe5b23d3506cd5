package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hrns-dev/hrns/llm"
)

// Step 7 of a turn (see run.runTurns): the calls of an assistant message.
// runTools is the run's entry point; the executor below runs the calls of
// one message for it, for a resumption (suspend.go) and for
// [Toolset.Invoke] (invoke.go): each call's tool is found and its
// arguments validated (resolveCall), its permission decided (authorize.go,
// approval.go), its handler run with its timeout (runBatch, runHandler), and
// its result recorded after the post_tool hooks (recordResult).

// ToolErrorKind classifies a failed tool call.
type ToolErrorKind string

// Tool error kinds.
const (
	ToolUnknown     ToolErrorKind = "unknown_tool"
	ToolBadArgs     ToolErrorKind = "invalid_arguments"
	ToolFailed      ToolErrorKind = "failed"
	ToolPanicked    ToolErrorKind = "panic"
	ToolTimedOut    ToolErrorKind = "timeout"
	ToolRefused     ToolErrorKind = "refused" // rejected, or approval timed out or failed
	ToolInterrupted ToolErrorKind = "interrupted"
)

// A ToolError is the error of a tool_call_error chunk. Its message is what
// the model reads as the call's result.
type ToolError struct {
	Kind   ToolErrorKind
	CallID string
	Tool   string
	// Msg is the model-visible explanation.
	Msg string
	// Err is the underlying error, if any. It wraps [ErrPermission]
	// when the permission policy refused the call.
	Err error
	// Permission is the decision that refused the call, when the
	// permission policy did.
	Permission *PermissionDecision
}

func (e *ToolError) Error() string { return e.Msg }
func (e *ToolError) Unwrap() error { return e.Err }

// An executor runs the tool calls of one assistant message: it validates
// arguments, asks for approvals, runs handlers with timeouts and recovers
// their panics, and reports each step through emit.
type executor struct {
	tools *Toolset
	opts  *Options
	// emit reports a chunk; it returns false once nobody listens.
	emit func(Chunk) bool
	// consumerGone reports whether the consumer has gone.
	consumerGone func() bool
	// onRunGoroutine, if set, carries functions that running calls
	// (agent tools) need run on the run's goroutine while they run.
	onRunGoroutine chan func()
	// hooks are the agent's hooks (nil without any); agentName and
	// depth name the sub-agent whose calls these are, for them.
	hooks     *hookSet
	agentName string
	depth     int
}

// runTools runs the calls of the assistant message just taken (the
// executor decides each one's permission and runs it) and appends their
// results; it reports whether the loop goes on: false when the run ended,
// suspended or failed.
func (r *run) runTools(ctx context.Context, calls []llm.ToolCall) bool {
	states, err := r.exec.execute(ctx, calls, nil)
	if err != nil {
		r.fail(err)
		return false
	}
	return r.appendResults(states)
}

// appendResults appends the tool message of a finished set of calls, or
// suspends the run if some still wait; it reports whether the loop goes on.
func (r *run) appendResults(states []SuspendedCall) bool {
	for _, s := range states {
		if s.Result == nil {
			r.suspend(states)
			return false
		}
	}
	if len(states) == 0 {
		return !r.consumerGone // a yielded run resumed: no calls to answer
	}
	tm := llm.Message{Role: llm.RoleTool, Parts: make([]llm.Part, len(states))}
	for i, s := range states {
		tm.Parts[i] = llm.Part{Kind: llm.PartToolResult, ToolResult: s.Result}
	}
	r.transcript = append(r.transcript, tm)
	return !r.consumerGone
}

// execCall is one call on its way through the executor.
type execCall struct {
	call        llm.ToolCall
	tool        *wiredTool
	parsed      *Call
	approved    bool   // approval already given (on resume)
	person      string // why only a person may approve it (ToolDef.AskPerson)
	state       SuspendedCall
	failure     *ToolError // why the call failed, when the executor failed it (not its handler)
	started     time.Time
	observerCtx context.Context // the observer's context for the call, if it has one
}

// execute runs the calls of one assistant message and returns their states
// in call order. Calls run sequentially, except that consecutive calls of
// tools marked Concurrent run together. preapproved names calls whose
// approval was given on resume. Only an approver's Cancel or the end of the
// run returns an error: every tool failure becomes a result.
func (x *executor) execute(ctx context.Context, calls []llm.ToolCall, preapproved map[string]bool) ([]SuspendedCall, error) {
	ps := make([]*execCall, len(calls))
	for i, c := range calls {
		p := &execCall{call: c, approved: preapproved[c.ID], state: SuspendedCall{Call: c}}
		ps[i] = p
		x.resolveCall(p)
	}
	// Permissions come first, one call at a time, in call order.
	for _, p := range ps {
		if p.state.Result != nil || p.parsed == nil || p.approved {
			continue
		}
		if err := x.authorize(ctx, p); err != nil {
			return nil, err
		}
	}
	var batch []*execCall
	flush := func() error {
		err := x.runBatch(ctx, batch)
		batch = batch[:0]
		return err
	}
	for _, p := range ps {
		if p.parsed == nil || p.state.Result != nil || p.state.Waiting != "" {
			continue
		}
		batch = append(batch, p)
		if !p.tool.def.Concurrent {
			if len(batch) > 1 {
				last := batch[len(batch)-1]
				batch = batch[:len(batch)-1]
				if err := flush(); err != nil {
					return nil, err
				}
				batch = append(batch, last)
			}
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	states := make([]SuspendedCall, len(ps))
	for i, p := range ps {
		states[i] = p.state
	}
	return states, nil
}

// resolveCall finds the call's tool and validates its arguments; a failure
// becomes the call's result.
func (x *executor) resolveCall(p *execCall) {
	name := p.call.Name
	p.tool = x.tools.lookup(name)
	if p.tool == nil {
		avail := strings.Join(x.tools.Names(), ", ")
		if avail == "" {
			avail = "none"
		}
		x.failCall(p, &ToolError{Kind: ToolUnknown, Msg: fmt.Sprintf("unknown tool %q; available tools: %s", name, avail)})
		return
	}
	args, m, err := p.tool.parseArgs(p.call.Arguments)
	if err != nil {
		msg := fmt.Sprintf("invalid arguments for tool %q: %v", name, err)
		if errors.Is(err, errNotJSON) {
			// The model may not see its own words again (providers
			// that need an object are sent {}), so quote them.
			msg += "; the arguments were: " + Elide(string(p.call.Arguments), 300) + "; call the tool again with a JSON object"
		}
		x.failCall(p, &ToolError{Kind: ToolBadArgs, Msg: msg, Err: err})
		return
	}
	p.parsed = &Call{ID: p.call.ID, Name: name, Arguments: args, Args: m}
	if d := p.tool.def.decode; d != nil && len(args) > 0 {
		if v, ok := d(args); ok {
			p.parsed.decoded, p.parsed.decodedFrom = v, args
		}
	}
}

// parseArgs decodes, fills in defaults and validates raw arguments.
func (w *wiredTool) parseArgs(args llm.Arguments) (json.RawMessage, map[string]any, error) {
	raw := json.RawMessage(bytes.TrimSpace(args))
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, nil, fmt.Errorf("%w (%v)", errNotJSON, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, nil, fmt.Errorf("arguments must be a JSON object, not %s", jsonKind(v))
	}
	if bytes.Contains(w.def.InputSchema, []byte(`"default"`)) {
		if err := w.schema.ApplyDefaults(&m); err != nil {
			return nil, nil, err
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, nil, err
		}
		raw = b
	}
	if w.flat != nil && w.flat.accepts(m) {
		return raw, m, nil
	}
	if err := w.schema.Validate(m); err != nil {
		return nil, nil, errors.New(cleanValidationError(err.Error()))
	}
	return raw, m, nil
}

// cleanValidationError drops jsonschema-go's prefix that names the schema's
// internal path, keeping what tells the model which field is wrong.
func cleanValidationError(s string) string {
	s = strings.TrimPrefix(s, "validating root: ")
	return strings.TrimPrefix(s, "validating /: ")
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

// runBatch runs calls at once (a batch of one runs alone) and records their
// results, reporting each as it finishes.
func (x *executor) runBatch(ctx context.Context, batch []*execCall) error {
	switch len(batch) {
	case 0:
		return nil
	case 1:
		return x.runOne(ctx, batch[0])
	}
	type done struct {
		p   *execCall
		out *Output
		err error
	}
	results := make(chan done, len(batch))
	next, running := 0, 0
	for next < len(batch) || running > 0 {
		for running < x.opts.MaxParallel && next < len(batch) {
			p := batch[next]
			next++
			if !x.emit(Chunk{Type: ChunkToolCallStart, ToolCall: p.chunkInfo()}) {
				return context.Canceled
			}
			p.started = time.Now()
			running++
			cctx := x.toolStart(ctx, p)
			go func() {
				out, err := x.runHandler(cctx, p)
				x.toolEnd(p, out, err, time.Since(p.started))
				results <- done{p, out, err}
			}()
		}
		var d done
	wait:
		for {
			select {
			case d = <-results:
				break wait
			case f := <-x.onRunGoroutine:
				f()
				if x.consumerGone() {
					return context.Canceled
				}
			}
		}
		running--
		x.recordResult(ctx, d.p, d.out, d.err)
		if x.consumerGone() {
			// The consumer left: return now, so that the run's context
			// is cancelled and the calls still running are told to stop.
			return context.Canceled
		}
	}
	if x.consumerGone() {
		return context.Canceled
	}
	return ctx.Err()
}

// runOne runs one call as runBatch runs a batch, without a goroutine of its
// own to wait for the handler: the run's goroutine waits, taking the
// functions that agent tools send it meanwhile.
func (x *executor) runOne(ctx context.Context, p *execCall) error {
	if !x.emit(Chunk{Type: ChunkToolCallStart, ToolCall: p.chunkInfo()}) {
		return context.Canceled
	}
	p.started = time.Now()
	h := x.startHandler(x.toolStart(ctx, p), p)
	var out *Output
	var err error
wait:
	for {
		select {
		case a := <-h.done:
			out, err = h.answered(a)
			break wait
		case <-h.ctx.Done():
			out, err = h.ended()
			break wait
		case f := <-x.onRunGoroutine:
			f()
			if x.consumerGone() {
				// The consumer left: return now, so that the run's
				// context is cancelled and the call is told to stop;
				// its end is still observed, as runBatch's is.
				go func() {
					out, err := h.wait()
					x.toolEnd(p, out, err, time.Since(p.started))
				}()
				return context.Canceled
			}
		}
	}
	h.cancel()
	x.toolEnd(p, out, err, time.Since(p.started))
	x.recordResult(ctx, p, out, err)
	if x.consumerGone() {
		return context.Canceled
	}
	return ctx.Err()
}

// runHandler runs one handler with the call's timeout, turning panics into
// errors. It returns when the handler does or when its context is done,
// whichever is first: a handler that ignores its context is abandoned.
func (x *executor) runHandler(ctx context.Context, p *execCall) (*Output, error) {
	return x.startHandler(ctx, p).wait()
}

// A handlerRun is one call's handler running on a goroutine of its own, with
// the call's timeout.
type handlerRun struct {
	p *execCall
	// parent is the context the call was run in; ctx is the call's,
	// ended by the timeout.
	parent, ctx context.Context
	cancel      context.CancelFunc
	timeout     time.Duration
	done        chan handlerAnswer
	// state decides, once, whether the handler answered in time: the
	// handler's goroutine sets handlerAnswered when it returned before
	// ctx ended, the waiter handlerAbandoned when it saw ctx end first.
	state atomic.Int32
}

// The states of a handlerRun.
const (
	handlerRunning int32 = iota
	handlerAnswered
	handlerAbandoned
)

// A handlerAnswer is what a handler returned, or its panic as an error.
type handlerAnswer struct {
	out *Output
	err error
	// inTime: the handler returned before its context ended, and before
	// the call was given up.
	inTime bool
}

// startHandler starts p's handler on a goroutine of its own, under the
// call's timeout.
func (x *executor) startHandler(ctx context.Context, p *execCall) *handlerRun {
	timeout := p.tool.def.Timeout
	if timeout <= 0 {
		timeout = x.opts.ToolTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	h := &handlerRun{p: p, parent: ctx, ctx: cctx, cancel: cancel, timeout: timeout, done: make(chan handlerAnswer, 1)}
	go func() {
		a := x.callHandler(h)
		a.inTime = h.ctx.Err() == nil && h.state.CompareAndSwap(handlerRunning, handlerAnswered)
		h.done <- a
	}()
	return h
}

// callHandler calls h's handler and returns its answer, a panic recovered
// into a [ToolPanicked] error.
func (x *executor) callHandler(h *handlerRun) (a handlerAnswer) {
	defer func() {
		if v := recover(); v != nil {
			x.opts.Logger.Error("tool panicked", "tool", h.p.call.Name, "panic", v, "stack", string(debug.Stack()))
			a = handlerAnswer{err: &ToolError{Kind: ToolPanicked, Msg: fmt.Sprintf("tool %q panicked: %v", h.p.call.Name, v)}}
		}
	}()
	out, err := h.p.tool.def.Handler(x.withPolicy(h.ctx), h.p.parsed)
	return handlerAnswer{out: out, err: err}
}

// wait waits for the handler's answer or the end of the call's context,
// whichever is first, and returns the call's outcome.
func (h *handlerRun) wait() (*Output, error) {
	defer h.cancel()
	select {
	case a := <-h.done:
		return h.answered(a)
	case <-h.ctx.Done():
		return h.ended()
	}
}

// The outcome of a call does not depend on which of a select's ready cases
// it picks (at random) when the handler's answer and its context's end are
// both there by the time the call is waited for: the run's goroutine was
// busy, or the machine loaded. An answer the handler gave before its
// context ended is the call's, whatever it is; one it gave after, a
// handler that stops when told to and says so (its context's error, a
// killed command's output), is the call interrupted or timed out, as if it
// had not answered.

// answered is the call's outcome when the handler answered a.
func (h *handlerRun) answered(a handlerAnswer) (*Output, error) {
	if !a.inTime {
		return h.expired()
	}
	return a.out, a.err
}

// ended is the call's outcome when its context ended: the handler's answer
// if it gave it before, or the call interrupted or timed out.
func (h *handlerRun) ended() (*Output, error) {
	if h.state.CompareAndSwap(handlerRunning, handlerAbandoned) {
		return h.expired()
	}
	// The handler answered in time; its answer is on its way.
	return h.answered(<-h.done)
}

// expired is the call's outcome when its context ended before the handler
// answered: the run stopped, or the call timed out.
func (h *handlerRun) expired() (*Output, error) {
	if h.parent.Err() != nil {
		return nil, &ToolError{Kind: ToolInterrupted, Msg: fmt.Sprintf("tool %q was interrupted: the run stopped", h.p.call.Name), Err: h.parent.Err()}
	}
	return nil, timeoutError(h.p, h.timeout)
}

func timeoutError(p *execCall, d time.Duration) error {
	return &ToolError{Kind: ToolTimedOut, Msg: fmt.Sprintf("tool %q timed out after %v", p.call.Name, d), Err: context.DeadlineExceeded}
}

// recordResult turns a handler's answer into the call's result and reports
// it, after the post_tool hooks have seen it.
func (x *executor) recordResult(ctx context.Context, p *execCall, out *Output, err error) {
	elapsed := time.Since(p.started)
	if errors.Is(err, ErrPending) {
		p.state.Waiting = PendingResult
		if ap, ok := err.(*childSuspended); ok {
			p.state.Waiting, p.state.Agent = PendingAgent, ap.s
		}
		x.emit(Chunk{Type: ChunkToolCallPending, ToolCall: p.chunkInfo()})
		return
	}
	if hs := x.hooks.matching(HookPostTool, p.call.Name); len(hs) > 0 && ctx.Err() == nil {
		if err != nil {
			// The hooks see the failure as the model would; it stays
			// the failure it was unless they replace it.
			te, ok := err.(*ToolError)
			if !ok {
				te = &ToolError{Kind: ToolFailed, Msg: fmt.Sprintf("tool %q failed: %v", p.call.Name, err), Err: err}
			}
			seen := ErrorOutput(te.Msg)
			if got := x.postToolHooks(ctx, p, hs, seen); got != seen {
				out, err = got, nil
			}
		} else {
			if out == nil {
				out = TextOutput("")
			}
			out = x.postToolHooks(ctx, p, hs, out)
		}
	}
	switch {
	case err != nil:
		// Only a ToolError returned as such is taken as the call's
		// failure: one wrapped deeper belongs to another call (a handler
		// that invokes tools itself) and must not replace this one.
		te, ok := err.(*ToolError)
		if !ok {
			te = &ToolError{Kind: ToolFailed, Msg: fmt.Sprintf("tool %q failed: %v", p.call.Name, err), Err: err}
		}
		x.failCallAfter(p, te, elapsed)
		return
	case out == nil:
		out = TextOutput("")
	}
	res := &llm.ToolResult{CallID: p.call.ID, Name: p.call.Name, Content: x.elideOutput(out.Content), IsError: out.IsError}
	p.state.Result = res
	info := p.chunkInfo()
	info.Duration = elapsed
	c := Chunk{Type: ChunkToolCallResult, ToolCall: info, Content: res.Text(), Media: mediaParts(res.Content)}
	if out.IsError {
		c.Type = ChunkToolCallError
		c.Err = &ToolError{Kind: ToolFailed, CallID: p.call.ID, Tool: p.call.Name, Msg: c.Content}
	}
	x.emit(c)
}

// mediaParts returns the image and document parts of content.
func mediaParts(content []llm.Part) []llm.Part {
	var media []llm.Part
	for _, p := range content {
		if p.Kind == llm.PartImage || p.Kind == llm.PartDocument {
			media = append(media, p)
		}
	}
	return media
}

// elideOutput elides the text of content to the agent's MaxToolOutput.
func (x *executor) elideOutput(content []llm.Part) []llm.Part {
	max := x.opts.MaxToolOutput
	if max < 0 {
		return content
	}
	total := 0
	for _, p := range content {
		total += len(p.Text)
	}
	if total <= max {
		return content
	}
	out := make([]llm.Part, 0, len(content))
	var text strings.Builder
	for _, p := range content {
		if p.Kind == llm.PartText {
			text.WriteString(p.Text)
			continue
		}
		out = append(out, p)
	}
	return append([]llm.Part{llm.TextPart(Elide(text.String(), max))}, out...)
}

func (x *executor) failCall(p *execCall, te *ToolError) { x.failCallAfter(p, te, 0) }

func (x *executor) failCallAfter(p *execCall, te *ToolError, elapsed time.Duration) {
	te.CallID, te.Tool = p.call.ID, p.call.Name
	p.failure = te
	p.state.Result = &llm.ToolResult{CallID: p.call.ID, Name: p.call.Name, Content: []llm.Part{llm.TextPart(te.Msg)}, IsError: true}
	info := p.chunkInfo()
	info.Duration = elapsed
	x.emit(Chunk{Type: ChunkToolCallError, ToolCall: info, Content: te.Msg, Err: te, Permission: te.Permission})
}

func (p *execCall) chunkInfo() *ToolCallInfo {
	if p.parsed != nil {
		return &ToolCallInfo{ID: p.call.ID, Name: p.call.Name, Arguments: p.parsed.Arguments}
	}
	return callInfo(p.call)
}

// callInfo describes a call for chunks, its arguments as valid JSON.
func callInfo(c llm.ToolCall) *ToolCallInfo {
	return &ToolCallInfo{ID: c.ID, Name: c.Name, Arguments: c.Arguments.JSON()}
}

// errNotJSON marks arguments that are not JSON at all.
var errNotJSON = errors.New("not valid JSON")
