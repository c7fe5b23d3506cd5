package loop

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hrns-dev/hrns/llm"
)

// Suspension and resumption: a run stops with calls that wait (suspend:
// a client-side tool, a deferred approval, a suspended sub-agent) or
// between two turns (yieldBetweenTurns: Options.BeforeTurn), as a [Suspension];
// [Agent.Resume] continues it (resume), before the turns of run.runTurns.

// suspend ends the run with the calls of the last assistant message, some
// of which still wait for their results.
func (r *run) suspend(states []SuspendedCall) {
	r.result.Suspension = r.suspension(states)
	r.end(StatusSuspended)
}

// yieldBetweenTurns ends the run between two turns, as BeforeTurn asked.
func (r *run) yieldBetweenTurns() {
	r.result.Suspension = r.suspension(nil)
	r.end(StatusYielded)
}

// suspension is the run as it stands, waiting for calls.
func (r *run) suspension(calls []SuspendedCall) *Suspension {
	counted := r.countedTokens
	if r.countedMessages == 0 {
		counted = 0
	}
	return &Suspension{
		Messages: slices.Clone(r.transcript),
		Calls:    calls,
		Turn:     r.turn,
		Usage:    r.result.Usage,
		Turns:    slices.Clone(r.result.Turns),
		Elapsed:  time.Since(r.start),

		Counted:         counted,
		CountedMessages: r.countedMessages,

		TraceParent: r.traceParent(),
	}
}

// resume applies in to the suspended calls of s; it reports whether the
// loop goes on (false when the run ended: suspended again, or failed).
func (r *run) resume(ctx context.Context, s *Suspension, in *ResumeInput) bool {
	states := slices.Clone(s.Calls)
	in, nested, err := routeResume(states, in)
	if err != nil {
		r.refuseResume(s, err)
		return false
	}
	index := make(map[string]int, len(states))
	for i, c := range states {
		index[c.Call.ID] = i
	}
	// Check every ID before applying anything, so that bad input leaves
	// the suspension as it was.
	for _, res := range in.Results {
		if _, ok := index[res.CallID]; !ok {
			r.refuseResume(s, fmt.Errorf("%w: %q", ErrUnknownCall, res.CallID))
			return false
		}
	}
	for _, d := range in.Approvals {
		if _, ok := index[d.CallID]; !ok {
			r.refuseResume(s, fmt.Errorf("%w: %q", ErrUnknownCall, d.CallID))
			return false
		}
	}
	for _, id := range in.Reevaluate {
		if _, ok := index[id]; !ok {
			r.refuseResume(s, fmt.Errorf("%w: %q", ErrUnknownCall, id))
			return false
		}
	}
	find := func(id string) (int, bool) {
		i, ok := index[id]
		return i, ok
	}
	for _, res := range in.Results {
		i, ok := find(res.CallID)
		if !ok {
			return false
		}
		if states[i].Result != nil {
			continue // delivered before: harmless
		}
		res.Name = states[i].Call.Name
		res.Content = r.exec.elideOutput(res.Content)
		states[i].Result, states[i].Waiting = &res, ""
		c := Chunk{Type: ChunkToolCallResult, Content: res.Text(), Media: mediaParts(res.Content), ToolCall: callInfo(states[i].Call)}
		if res.IsError {
			c.Type = ChunkToolCallError
			c.Err = &ToolError{Kind: ToolFailed, CallID: res.CallID, Tool: res.Name, Msg: c.Content}
		}
		if !r.emit(c) {
			return false
		}
	}
	var approved []llm.ToolCall
	pre := make(map[string]bool)
	for _, d := range in.Approvals {
		i, ok := find(d.CallID)
		if !ok {
			return false
		}
		st := &states[i]
		if st.Result != nil || st.Waiting != PendingApproval || pre[d.CallID] {
			continue
		}
		if d.Approved {
			pre[d.CallID] = true
			approved = append(approved, st.Call)
			continue
		}
		te := &ToolError{Kind: ToolRefused, CallID: st.Call.ID, Tool: st.Call.Name, Msg: rejection(st.Call.Name, d.Reason)}
		st.Result = &llm.ToolResult{CallID: st.Call.ID, Name: st.Call.Name, Content: []llm.Part{llm.TextPart(te.Msg)}, IsError: true}
		st.Waiting = ""
		if !r.emit(Chunk{Type: ChunkToolCallError, Content: te.Msg, Err: te, ToolCall: callInfo(st.Call)}) {
			return false
		}
	}
	for _, id := range in.Reevaluate {
		st := &states[index[id]]
		if st.Result != nil || st.Waiting != PendingApproval || slices.ContainsFunc(approved, func(c llm.ToolCall) bool { return c.ID == id }) {
			continue
		}
		approved = append(approved, st.Call) // not in pre: evaluated
	}
	for _, st := range states {
		// Suspended sub-agents given input resume: their calls run
		// again (already approved, if they needed it).
		if nested[st.Call.ID] != nil && st.Result == nil && !pre[st.Call.ID] {
			pre[st.Call.ID] = true
			approved = append(approved, st.Call)
		}
	}
	if len(approved) > 0 {
		slices.SortFunc(approved, func(a, b llm.ToolCall) int { return index[a.ID] - index[b.ID] })
		ran, err := r.exec.execute(r.asParent.withResumes(ctx, nested), approved, pre)
		if err != nil {
			r.fail(err)
			return false
		}
		for _, st := range ran {
			states[index[st.Call.ID]] = st
		}
	}
	if !r.appendResults(states) {
		return false
	}
	for _, m := range in.Messages {
		if !r.promptHooks(ctx, &m) {
			return false
		}
		r.transcript = append(r.transcript, m)
	}
	return true
}

// refuseResume ends a resumption whose input names a call the suspension
// does not hold: nothing was applied, the run is still suspended at s, and
// the result carries the error.
func (r *run) refuseResume(s *Suspension, err error) {
	r.result.Err = err
	r.result.Suspension = s
	r.emit(Chunk{Type: ChunkError, Err: err})
	r.end(StatusSuspended)
}

// routeResume splits the input of a resumption between the calls of the
// suspended message (returned as top) and the suspended children of its
// agent calls (returned by call ID). It returns an error wrapping
// ErrUnknownCall for an ID found nowhere in the tree.
func routeResume(states []SuspendedCall, in *ResumeInput) (*ResumeInput, map[string]*childResume, error) {
	top := &ResumeInput{Messages: in.Messages}
	var nested map[string]*childResume
	index := make(map[string]int, len(states))
	for i, c := range states {
		index[c.Call.ID] = i
	}
	find := func(id string) (*childResume, error) {
		if _, ok := index[id]; ok {
			return nil, nil
		}
		for _, st := range states {
			if st.Agent == nil || st.Result != nil || !st.Agent.holdsCall(id) {
				continue
			}
			if nested == nil {
				nested = make(map[string]*childResume)
			}
			cr := nested[st.Call.ID]
			if cr == nil {
				cr = &childResume{s: st.Agent, in: &ResumeInput{}}
				nested[st.Call.ID] = cr
			}
			return cr, nil
		}
		return nil, fmt.Errorf("%w: %q", ErrUnknownCall, id)
	}
	for _, res := range in.Results {
		cr, err := find(res.CallID)
		switch {
		case err != nil:
			return nil, nil, err
		case cr != nil:
			cr.in.Results = append(cr.in.Results, res)
		default:
			top.Results = append(top.Results, res)
		}
	}
	for _, d := range in.Approvals {
		cr, err := find(d.CallID)
		switch {
		case err != nil:
			return nil, nil, err
		case cr != nil:
			cr.in.Approvals = append(cr.in.Approvals, d)
		default:
			top.Approvals = append(top.Approvals, d)
		}
	}
	for _, id := range in.Reevaluate {
		cr, err := find(id)
		switch {
		case err != nil:
			return nil, nil, err
		case cr != nil:
			cr.in.Reevaluate = append(cr.in.Reevaluate, id)
		default:
			top.Reevaluate = append(top.Reevaluate, id)
		}
	}
	return top, nested, nil
}

// holdsCall reports whether id names a call of s or of a suspended child in it.
func (s *Suspension) holdsCall(id string) bool {
	for _, c := range s.Calls {
		if c.Call.ID == id || c.Result == nil && c.Agent != nil && c.Agent.holdsCall(id) {
			return true
		}
	}
	return false
}
