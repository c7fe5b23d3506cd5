package session

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/store"
)

// The prompts that ask for the final answer without tools, by why it is
// asked for.
const (
	finalPromptBudget = "Stop here: this session's limit is reached ({budget}). Do not call any more tools; give your final answer now, based on what you have found so far."
	finalPromptForced = "Stop here: the user asks for your final answer now. Do not call any more tools; give your final answer based on what you have found so far."
	finalPromptTime   = "Stop here: this session's time limit is reached. Do not call any more tools; give your final answer now, based on what you have found so far."
)

// A segment is one run of the loop for a session, from its checkpoint to
// the next wait, end or yield. It turns the run's chunks into commits:
// each step is committed with the exact transcript it continues from
// (the loop's turn_end carries it), and between steps the loop's
// BeforeTurn hook asks the session whether the caller's input (a
// message, a pause, a final-answer request) must come first; if so the
// run yields and the worker goes on from the last checkpoint.
type segment struct {
	// fixed at creation
	m     *Manager
	id    string
	owner string
	sp    *spec
	tools *loop.Toolset
	perms *loop.Permissions
	// run is the session's run generation this segment runs (see
	// state.Run): a commit finding another one lands nothing.
	run int64
	// delivered are the inbox messages given to this run.
	delivered []int64
	// persons says why a person must decide the calls the run sent to
	// the approver for one (loop.ApprovalRequest.Person): the pending
	// approvals show it (callState.Person).
	persons personReasons
	// stored is how many messages of the run's transcript the store's
	// transcript holds: a commit writes only those after them; size is
	// their encoded size, and tag the tag of the checkpoint being
	// committed.
	stored int
	size   int64
	tag    string
	// counted is the provider's count of the tokens of the first
	// countedLen messages of the run's transcript (0: none), which the
	// checkpoint keeps for the next run's compaction estimate.
	counted    int64
	countedLen int
	// model is the model name the run's last step was counted under.
	model string

	// turns counts the BeforeTurn calls; final says whether the last
	// turn started asked for the final answer (or, before the first,
	// whether the run was started for it). ranCalls says that a call
	// ended (ran, refused) before the first turn: a resumed run that ran
	// calls first reads the caller's input before its first request.
	turns    int
	final    bool
	ranCalls bool
	// yield is why BeforeTurn stopped the run: errYield to apply the
	// caller's input, errStopped when the session ended meanwhile, or
	// the store's error reading it.
	yield error

	// answer is the last step, when it made no call: it is committed
	// with what follows it (see stepCommits): the end of the run, or a
	// rejection of its answer. msgs is the run's transcript as of the
	// last step.
	answer *stepRecord
	msgs   []llm.Message
	// step holds the commit of a step whose calls all wait for the
	// caller (client-side tools): the run suspends next, and the step is
	// committed with the suspension, in one transaction instead of two.
	// Any other commit commits it first (flush).
	step *pendingStep
	// tokens are the tokens of the steps not committed yet: the next
	// commit counts them in its transaction (see chargeTokens).
	tokens *store.TokenCount
	// cur is the session as the segment last read or committed it, which
	// its next commit starts from instead of reading it again (nil: read
	// it); the store's version check tells when it is out of date.
	cur *store.Session
	// curState, when not nil, is the state of cur as decoded (or handed
	// over: see handOver) for the worker's pass that started the segment,
	// which the segment's first commit starts from instead of decoding
	// cur's again: nothing reads it after the segment's start (the run
	// took copies of what it needs), and the commit may change it.
	curState *state
	// lease is the worker's lease, which the segment's last commit may
	// give up (see lease).
	lease *leaseChange
}

type pendingStep struct {
	msgs []llm.Message
	fn   func(s *store.Session, st *state) []store.Event
}

// A stepRecord is what a step of the model adds to the session, however
// it ends: one step, its usage and the policy_event that reports it (see
// stepCommits).
type stepRecord struct {
	model  string
	usage  llm.Usage
	policy store.Event
}

// apply counts the step in st; it returns the events that report it.
func (r *stepRecord) apply(g *segment, st *state) []store.Event {
	st.Steps++
	if st.Usage == nil {
		st.Usage = map[string]llm.Usage{}
	}
	u := st.Usage[r.model]
	u.Add(r.usage)
	st.Usage[r.model] = u
	return []store.Event{r.policy, g.metricsEvent(st)}
}

// runSegment runs the loop from the session's checkpoint.
func (m *Manager) runSegment(ctx context.Context, s *store.Session, st *state, h *leaseChange) (retErr error) {
	sp := st.Spec.spec
	if !st.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, st.Deadline.Add(m.opts.TimeoutGrace), errHardDeadline)
		defer cancel()
	}
	g := &segment{m: m, id: s.ID, owner: s.Owner, sp: sp, lease: h, run: st.Run, final: st.Final != finalNone,
		counted: st.Checkpoint.Counted, countedLen: int(st.Checkpoint.CountedLength)}
	g.keep(s)
	g.curState = st
	defer func() {
		if g.tokens != nil && !stepRunsAgain(ctx, retErr) {
			m.addTokens(g.owner, g.tokens) // the step no commit carried is spent
		}
	}()
	server, closeEnv, err := m.toolsets(sp, s.ID)
	mcpFailed := m.takeMCPFailures(s.ID)
	if err != nil {
		return g.fail(ctx, fmt.Errorf("the session's agent cannot run here: %w", err))
	}
	if len(mcpFailed) > 0 {
		// The caller reads which MCP servers this run goes without, and
		// why; the model reads it with the run's input (mcpservers.go).
		if err := g.commitWith(ctx, m.leased(), func(*store.Session, *state) []store.Event { return mcpFailureEvents(mcpFailed) }); err != nil {
			if closeEnv != nil {
				closeEnv(false)
			}
			return err
		}
	}
	// The session's own environments (a browser) live as long as this run.
	if closeEnv != nil {
		defer func() { closeEnv(m.ended(s.ID)) }()
	}
	client := &loop.Toolset{}
	for _, t := range sp.ClientTools {
		if err := client.Add(loop.NewClientTool(t.Name, t.Description, t.InputSchema)); err != nil {
			return g.fail(ctx, err)
		}
	}
	if sp.Computer != nil {
		if err := client.Add(userComputerTool(sp.Computer)); err != nil {
			return g.fail(ctx, err)
		}
	}
	if len(sp.Subagents) > 0 {
		if err := client.Add(loop.NewClientTool(delegateTool, delegateDescription(sp.Subagents), delegateSchema(sp.Subagents))); err != nil {
			return g.fail(ctx, err)
		}
	}
	if g.tools, err = loop.Join(server, client); err != nil {
		return g.fail(ctx, err)
	}
	perms, hooks := m.policy(sp)
	g.perms = perms
	ctx = context.WithValue(ctx, sessionIDKey{}, s.ID)
	var msgs []llm.Message
	for _, in := range st.Inbox {
		g.delivered = append(g.delivered, in.ID)
		msgs = append(msgs, in.Message)
	}
	cp := st.Checkpoint
	history, err := m.loadTranscript(ctx, s.ID, &cp)
	if _, ok := errors.AsType[*storeError](err); ok {
		return err // the worker tries again
	}
	if err != nil {
		return g.fail(ctx, err)
	}
	if len(cp.Messages) == 0 {
		g.stored = len(history)
		g.size = m.transcripts.sizeOf(s.ID)
	}
	opts := loop.Options{
		Model:             sp.Model,
		Reasoning:         sp.Reasoning,
		FinalAnswerPrompt: finalPromptBudget,
		ToolTimeout:       m.opts.ToolTimeout,
		Retry:             m.opts.Retry,
		Logger:            m.log,
		Permissions:       perms,
		Hooks:             hooks,
		Observer:          m.opts.Observer,
		BeforeTurn:        g.beforeTurn,
		Compaction:        m.compaction(sp.Model),
		Approver: loop.ApproverFunc(func(_ context.Context, req *loop.ApprovalRequest) (loop.Decision, error) {
			if req.Person != "" {
				// Only a person decides it, through the API, even
				// with AutoApprove.
				g.persons.set(req.Call.ID, req.Person)
				return loop.Decision{Verdict: loop.Defer}, nil
			}
			if m.opts.AutoApprove {
				return loop.Decision{Verdict: loop.Approve}, nil
			}
			return loop.Decision{Verdict: loop.Defer}, nil
		}),
	}
	if sp.AnswerFormat != nil {
		opts.OutputSchema = &loop.OutputSchema{Schema: sp.AnswerFormat}
	}
	switch st.Final {
	case finalForced:
		opts.FinalAnswerPrompt = finalPromptForced
	case finalTimeout:
		opts.FinalAnswerPrompt = finalPromptTime
	}
	if !st.Deadline.IsZero() && st.Final == finalNone {
		opts.MaxDuration = max(time.Until(st.Deadline), time.Nanosecond)
	}
	var run iter.Seq[loop.Chunk]
	resume := len(cp.Calls) > 0 || endsOnUser(history)
	switch {
	case !resume && len(msgs) == 0 && st.Final == finalNone:
		// Nothing new to say: the agent's last answer stands.
		return g.answered(ctx, history, "", "")
	case !resume:
		opts.MaxTurns = max(sp.MaxSteps-st.Steps, 1)
		if st.Final != finalNone {
			opts.MaxTurns = 1
		}
		run = loop.NewAgent(m.model, g.tools, &opts).RunLoop(ctx, append(append(history, msgs...), mcpFailureNote(mcpFailed)...))
	default:
		// The checkpoint ends mid-turn: on calls, or on what the model
		// must answer (a rejected answer sent back). The run goes on
		// from there; new messages come after, each seen by the hooks.
		susp, in := resumeInput(&cp, history, st.Steps)
		in.Messages = append(msgs, mcpFailureNote(mcpFailed)...)
		opts.MaxTurns = max(sp.MaxSteps, st.Steps+1)
		if st.Final != finalNone {
			opts.MaxTurns = st.Steps + 1
		}
		run = loop.NewAgent(m.model, g.tools, &opts).Resume(ctx, susp, in)
	}
	for c := range run {
		if c.Depth > 0 {
			continue // a sub-agent's chunks: its parent's call reports it
		}
		var err error
		switch c.Type {
		case loop.ChunkRetry:
			// The caller reads what happened; the log keeps the full
			// error, with the model server's URL (tenanterror.go).
			g.m.log.Warn("model request failed, retrying", "session", g.id, "attempt", c.Retry.Attempt, "err", c.Err)
			ev := agentEvent(AgentEventData{Kind: KindError, Origin: "model",
				Error: fmt.Sprintf("model request failed (attempt %d), retrying in %v: %s", c.Retry.Attempt, c.Retry.Delay.Round(time.Millisecond), tenantError(c.Err))})
			// A retry is no step: the attempts stay counted.
			err = g.commitWith(ctx, g.m.leased(), func(*store.Session, *state) []store.Event { return []store.Event{ev} })
		case loop.ChunkCompaction:
			err = g.compacted(ctx, c.Compaction)
		case loop.ChunkTurnEnd:
			err = g.turnEnd(ctx, c)
		case loop.ChunkAnswerRejected:
			err = g.answerRejected(ctx, c)
		case loop.ChunkToolCallResult, loop.ChunkToolCallError:
			err = g.toolDone(ctx, c)
		case loop.ChunkEnd:
			return g.end(ctx, c.Result)
		}
		if err != nil {
			return err
		}
	}
	return context.Cause(ctx)
}

// beforeTurn is the run's [loop.Options.BeforeTurn]: before each step but
// the first, it reads the session and yields to the caller's input.
func (g *segment) beforeTurn(ctx context.Context, next loop.NextTurn) bool {
	if g.turns > 0 || g.ranCalls {
		if g.yield = g.control(ctx); g.yield != nil {
			return false
		}
	}
	if g.yield = g.modelAllowed(ctx); g.yield != nil {
		return false // the owner's token quota is spent (see quota.go)
	}
	g.turns++
	g.final = next.Final()
	return true
}

// control reports errYield when the caller's input should be applied
// before the next step: a message, a pause or a final-answer request
// (unless the last step already asked for the final answer).
func (g *segment) control(ctx context.Context) error {
	s, st, err := g.m.read(ctx, g.id)
	g.keep(s)
	if err != nil {
		return err
	}
	if st.Phase == phaseDone || st.Run != g.run {
		return errStopped
	}
	if st.PauseRequested || st.Paused || st.Final != finalNone && !g.final {
		return errYield
	}
	for _, in := range st.Inbox {
		if !slices.Contains(g.delivered, in.ID) {
			return errYield
		}
	}
	return nil
}

// endsOnUser reports whether a transcript ends on a message the model has
// not answered yet (a rejected answer's correction).
func endsOnUser(msgs []llm.Message) bool {
	return len(msgs) > 0 && msgs[len(msgs)-1].Role == llm.RoleUser
}

// resumeInput turns a checkpoint into the loop's suspension and the input
// that continues it: posted results are in the suspension, recorded
// decisions in the input's approvals, and the server calls that had not
// finished (cut by a stop, a crash or a failed write) in its calls to
// evaluate again: they are never approved by being cut. A cut call of a
// session that was cancelled or failed got an error result before (see
// restart), and one of a session whose time was up too (see timeUp).
func resumeInput(cp *checkpoint, msgs []llm.Message, steps int) (*loop.Suspension, *loop.ResumeInput) {
	s := &loop.Suspension{Messages: msgs, Turn: steps, TraceParent: cp.TraceParent}
	if cp.CountedLength > 0 && cp.CountedLength <= int64(len(msgs)) {
		s.Counted, s.CountedMessages = cp.Counted, int(cp.CountedLength)
	}
	in := &loop.ResumeInput{}
	for _, c := range cp.Calls {
		sc := loop.SuspendedCall{Call: c.Call, Result: c.Result}
		if c.Result == nil {
			sc.Waiting = loop.PendingApproval
			if c.Waiting == waitResult || c.Waiting == waitChild {
				sc.Waiting = loop.PendingResult
			}
			switch {
			case c.Decision != nil:
				in.Approvals = append(in.Approvals, *c.Decision)
			case c.Waiting == waitUnfinished:
				in.Reevaluate = append(in.Reevaluate, c.Call.ID)
			}
		}
		s.Calls = append(s.Calls, sc)
	}
	return s, in
}

// keep makes s, as read or committed (nil: unknown), the session the
// segment's next commit starts from. It keeps a copy: s is the caller's.
func (g *segment) keep(s *store.Session) {
	g.curState = nil
	if s == nil {
		g.cur = nil
		return
	}
	c := *s
	g.cur = &c
}

// stepRunsAgain reports whether a segment that ended with err (its
// context ctx) leaves its last step to be run again, by this worker or
// another: the lease was lost, the worker shuts down, or the store failed
// (the session is retried). The tokens of that step are counted when it
// is committed then. A session that ended meanwhile, or failed, does not
// run it again.
func stepRunsAgain(ctx context.Context, err error) bool {
	for _, e := range []error{err, context.Cause(ctx)} {
		if errors.Is(e, errLeaseLost) || errors.Is(e, store.ErrLeaseLost) || errors.Is(e, errShutdown) || errors.As(e, new(*storeError)) {
			return true
		}
	}
	return false
}

// commit applies fn under the lease and commits the events it returns.
// Each is a step of the run (or its end), which resets the count of
// attempts to run the session.
func (g *segment) commit(ctx context.Context, fn func(s *store.Session, st *state) []store.Event) error {
	return g.commitWith(ctx, &store.UpdateOptions{Lease: g.m.owner, ResetAttempts: true}, fn)
}

// commitTranscript is commit for a step whose checkpoint continues from
// msgs, the run's transcript: it appends to the store's transcript the
// messages the store does not hold yet, in the same transaction. fn sets
// the checkpoint (see checkpointOf).
func (g *segment) commitTranscript(ctx context.Context, msgs []llm.Message, fn func(s *store.Session, st *state) []store.Event) error {
	from := g.stored
	if from > len(msgs) {
		from = 0 // not a continuation of what is stored: write it all
	}
	size := g.size
	if from == 0 {
		size = 0
	}
	t := &store.Transcript{From: int64(from), Messages: make([]json.RawMessage, 0, len(msgs)-from)}
	for _, msg := range msgs[from:] {
		b, err := json.Marshal(msg)
		if err != nil {
			panic(fmt.Sprintf("session: encoding a message: %v", err))
		}
		t.Messages = append(t.Messages, b)
		size += int64(len(b))
	}
	g.tag = newID()
	if err := g.flush(ctx); err != nil {
		return err
	}
	err := g.commitWith(ctx, &store.UpdateOptions{Lease: g.m.owner, ResetAttempts: true, Transcript: t}, fn)
	if err != nil {
		g.m.transcripts.drop(g.id)
		return err
	}
	g.stored, g.size = len(msgs), size
	g.m.transcripts.put(g.id, g.tag, msgs, size)
	return nil
}

// flush commits the step held back for the suspension, if any.
func (g *segment) flush(ctx context.Context) error {
	p := g.step
	if p == nil {
		return nil
	}
	g.step = nil
	return g.commitTranscript(ctx, p.msgs, p.fn)
}

// checkpointOf is the checkpoint of a transcript committed with
// commitTranscript (called within its fn).
func (g *segment) checkpointOf(msgs []llm.Message, calls []callState) checkpoint {
	cp := checkpoint{Length: int64(len(msgs)), Tag: g.tag, Calls: calls}
	if g.countedLen > 0 && g.countedLen <= len(msgs) {
		cp.Counted, cp.CountedLength = g.counted, int64(g.countedLen)
	}
	return cp
}

func (g *segment) commitWith(ctx context.Context, opts *store.UpdateOptions, fn func(s *store.Session, st *state) []store.Event) error {
	if err := g.flush(ctx); err != nil {
		return err
	}
	if g.tokens != nil {
		o := *opts
		o.Tokens = g.tokens
		opts = &o
	}
	c := &change{cur: g.cur, curState: g.curState, opts: opts, lease: g.lease, keepState: true}
	g.curState = nil
	cur, _, err := g.m.commit(ctx, g.id, c, func(s *store.Session, st *state) ([]store.Event, error) {
		if st.Phase == phaseDone || st.Run != g.run {
			return nil, errStopped // the run was ended: fenced off
		}
		return fn(s, st), nil
	})
	g.keep(cur)
	if err == nil {
		g.tokens = nil
	}
	if errors.Is(err, store.ErrLeaseLost) {
		return errLeaseLost
	}
	return err
}

// requiresApproval reports whether a call is committed with its step as
// waiting for a decision (which Decide takes before the run suspends,
// and a run cut before it decided keeps waiting for), as far as the
// permission policy tells before the run decides it (hooks, which run
// then, may still decide otherwise: the run's suspension is what
// counts). A call of a tool that may send it to a person
// (loop.ToolDef.AskPerson: a provider's safety check, typing into a
// password field) is not: only the tool, asked when the call is about to
// run, tells whether it goes to a person and why, and the person must be
// shown why before deciding. It waits for the run to ask (a run cut
// before that asks again) and is taken as waiting for a decision when
// the run suspends with it, its reason recorded (callState.Person),
// whatever AutoApprove and the rules say.
func (g *segment) requiresApproval(call llm.ToolCall) bool {
	def, ok := g.tools.Lookup(call.Name)
	if !ok || g.m.opts.AutoApprove || def.AskPerson != nil {
		return false
	}
	if g.perms == nil {
		return def.RequiresApproval
	}
	return g.perms.Check(&def, call.Arguments.JSON()).Behavior == loop.Ask
}

// turnEnd reports the model's step. A step that made calls is committed
// at once, with the checkpoint that holds them, before any call runs
// (when all of them wait for the caller, nothing runs: it is committed
// with the suspension that follows); a step that answered is committed
// with the end of the run, so that no checkpoint ends on an answer the
// session has not reported.
func (g *segment) turnEnd(ctx context.Context, c loop.Chunk) error {
	if len(c.Messages) == 0 {
		return errors.New("session: a step ended without its transcript")
	}
	msg := c.Messages[len(c.Messages)-1]
	var usage llm.Usage
	if c.Usage != nil {
		usage = *c.Usage
	}
	g.chargeTokens(c.Usage)
	if c.Usage != nil && c.Usage.InputTokens > 0 {
		g.counted, g.countedLen = c.Usage.InputTokens+c.Usage.OutputTokens, len(c.Messages)
	} else {
		g.countedLen = 0
	}
	model := firstNonEmpty(g.sp.Model, c.Model, "default")
	g.model = model
	policy := AgentEventData{Kind: KindPolicy, ToolReqs: []ToolRequest{}}
	if t := msg.Text(); t != "" {
		policy.Content = &t
	}
	var reasoning strings.Builder
	for _, p := range msg.Parts {
		if p.Kind == llm.PartReasoning && p.Reasoning != nil {
			reasoning.WriteString(p.Reasoning.Text)
		}
	}
	if r := reasoning.String(); r != "" {
		policy.ReasoningContent = &r
	}
	calls := msg.ToolCalls()
	client := g.sp.clientNames()
	var cs []callState
	for _, call := range calls {
		policy.ToolReqs = append(policy.ToolReqs, toolRequest(call))
		w := waitUnfinished
		switch {
		case call.Name == delegateTool && len(g.sp.Subagents) > 0:
			w = waitChild
		case client[call.Name]:
			w = waitResult
		case g.requiresApproval(call):
			w = waitApproval
		}
		cs = append(cs, callState{Call: call, Client: client[call.Name], Waiting: w})
	}
	rec := &stepRecord{model: model, usage: usage, policy: agentEvent(policy)}
	g.msgs = c.Messages
	if len(calls) == 0 {
		g.answer = rec // committed with what follows (see end)
		return nil
	}
	g.answer = nil
	fn := g.stepCommit(endCalls, rec, c.Messages, cs, nil)
	if !slices.ContainsFunc(cs, func(c callState) bool { return c.Waiting != waitResult }) {
		// Nothing runs before the run suspends: commit with it.
		g.step = &pendingStep{msgs: c.Messages, fn: fn}
		return nil
	}
	return g.commitTranscript(ctx, c.Messages, fn)
}

// toolDone commits the result of a server-side call (or a call refused
// before it ran) with the checkpoint that records it: after a crash, only
// the calls without a result run again.
func (g *segment) toolDone(ctx context.Context, c loop.Chunk) error {
	info := c.ToolCall
	if info == nil {
		return nil
	}
	req := toolRequest(llm.ToolCall{ID: info.ID, Name: info.Name, Arguments: llm.Arguments(info.Arguments)})
	res := &llm.ToolResult{CallID: info.ID, Name: info.Name, Content: append([]llm.Part{llm.TextPart(c.Content)}, c.Media...)}
	var ev store.Event
	var observations []store.Event
	if c.Type == loop.ChunkToolCallResult {
		ev = agentEvent(AgentEventData{Kind: KindToolResult, ToolReq: &req, Result: resultJSON(c.Content)})
		observations = observationEvents(&req, c.Media)
	} else {
		res.IsError = true
		origin := "tool"
		if te, ok := errors.AsType[*loop.ToolError](c.Err); ok && te.Kind == loop.ToolRefused {
			origin = "approval"
		}
		ev = agentEvent(AgentEventData{Kind: KindError, Error: c.Content, Origin: origin, ToolReq: &req})
	}
	if g.turns == 0 {
		g.ranCalls = true
	}
	// The files the call left in the files folder for the user.
	marks, complete := g.m.scanFiles(g.m.filesFolder(g.sp, g.id))
	return g.commit(ctx, func(s *store.Session, st *state) []store.Event {
		for i := range st.Checkpoint.Calls {
			if cs := &st.Checkpoint.Calls[i]; cs.Call.ID == info.ID && cs.Result == nil {
				cs.Result, cs.Waiting = res, ""
			}
		}
		return append(append([]store.Event{ev}, observations...), g.m.agentFiles(g.id, st, marks, complete)...)
	})
}

// observationEvents carries the images a tool returned, as the reference's
// observation events carry screenshots.
func observationEvents(req *ToolRequest, media []llm.Part) []store.Event {
	var out []store.Event
	for _, p := range media {
		if p.Kind != llm.PartImage || p.Media == nil || len(p.Media.Data) == 0 {
			continue
		}
		env := ""
		switch {
		case strings.HasPrefix(req.ToolName, "browser_"):
			env = "web"
		case req.ToolName == "computer":
			env = "desktop" // the desktop package's computer tool
		}
		out = append(out, agentEvent(AgentEventData{Kind: KindObservation, ObservationType: env, ToolReq: req,
			Image: &ImageContent{Type: "base64", MediaType: p.Media.MIMEType, Source: base64.StdEncoding.EncodeToString(p.Media.Data)}}))
	}
	return out
}

// end commits how the run ended.
func (g *segment) end(ctx context.Context, res *loop.Result) error {
	switch res.Status {
	case loop.StatusCompleted:
		return g.answered(ctx, res.Messages, res.Answer, res.Budget)
	case loop.StatusSuspended:
		return g.suspended(ctx, res.Suspension)
	}
	if err := g.flush(ctx); err != nil {
		return err
	}
	switch res.Status {
	case loop.StatusYielded:
		if errors.Is(g.yield, ErrTokenQuotaExceeded) {
			return g.quotaStopped(ctx, g.yield)
		}
		return g.yield // the session goes on from its checkpoint
	}
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errHardDeadline):
		// The run's context is done; reporting why is not.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return g.commit(ctx, func(s *store.Session, st *state) []store.Event {
			return finish(s, st, outcomeTimedOut)
		})
	case ctx.Err() != nil:
		return cause // shutdown, cancelled, lease lost: nothing to report
	case errors.Is(res.Err, loop.ErrNoAnswer):
		return g.noAnswer(ctx, res)
	case errors.Is(res.Err, loop.ErrInvalidOutput):
		return g.invalidAnswer(ctx, res)
	case errors.Is(res.Err, loop.ErrPromptBlocked):
		return g.blocked(ctx, res.Err)
	}
	return g.fail(ctx, res.Err)
}

// blocked ends a session whose new messages a user_prompt hook blocked
// (see stepCommits, endBlocked): they leave the inbox, refused, in the
// commit that says so; the model never saw them, so no checkpoint holds
// them, and a message sent later does not bring them back.
func (g *segment) blocked(ctx context.Context, err error) error {
	return g.commit(ctx, g.stepCommit(endBlocked, nil, nil, nil, func(s *store.Session, st *state) []store.Event {
		return finish(s, st, outcomeFailed(CodeInternal, err.Error()))
	}))
}

// answerRejected commits a final answer that did not match the answer
// format (see stepCommits, endRejected): its step, with the transcript
// that holds it and the message that sends it back as the checkpoint, and
// an error_event saying why; the loop asks the model again.
func (g *segment) answerRejected(ctx context.Context, c loop.Chunk) error {
	rec := g.answer
	g.answer = nil
	// The loop appended the message the model reads (c.Content) to the
	// transcript of the step's end.
	msgs := append(slices.Clip(g.msgs), llm.UserMessage(c.Content))
	g.msgs = msgs
	ev := agentEvent(AgentEventData{Kind: KindError, Origin: "answer_validation", Error: fmt.Sprint(c.Err)})
	return g.commitTranscript(ctx, msgs, g.stepCommit(endRejected, rec, msgs, nil, func(*store.Session, *state) []store.Event {
		return []store.Event{ev}
	}))
}

// invalidAnswer ends a session whose final answer never matched its
// answer format (error_code answer_validation).
func (g *segment) invalidAnswer(ctx context.Context, res *loop.Result) error {
	return g.commitTranscript(ctx, res.Messages, g.stepCommit(endInvalid, g.answer, res.Messages, nil, func(s *store.Session, st *state) []store.Event {
		return finish(s, st, outcomeFailed(CodeAnswerValidation, res.Err.Error()))
	}))
}

// noAnswer ends a session whose model gave no answer when asked for its
// final one: timed out when time was the limit, else failed (no_answer).
func (g *segment) noAnswer(ctx context.Context, res *loop.Result) error {
	return g.commitTranscript(ctx, res.Messages, g.stepCommit(endNoAnswer, g.answer, res.Messages, nil, func(s *store.Session, st *state) []store.Event {
		if st.Final == finalTimeout || res.Budget == "max_duration" {
			return finish(s, st, outcomeTimedOut)
		}
		return finish(s, st, outcomeFailed(CodeNoAnswer, tenantError(res.Err)))
	}))
}

// answered commits the agent's answer (if the run gave one) and what
// follows: the end of the session, a wait for the next message, or a run
// with messages that came meanwhile.
func (g *segment) answered(ctx context.Context, msgs []llm.Message, answer, budget string) error {
	rec := g.answer
	left := g.leftFiles()
	return g.commitTranscript(ctx, msgs, g.stepCommit(endAnswer, rec, msgs, nil, func(s *store.Session, st *state) []store.Event {
		events := left(st) // the files the agent leaves, before its answer
		if rec != nil {
			b, _ := json.Marshal(answer)
			if st.Spec.AnswerFormat != nil && json.Valid([]byte(answer)) {
				b = json.RawMessage(answer) // the structured answer, validated by the loop
			}
			s.Answer = b
			events = append(events, agentEvent(AgentEventData{Kind: KindAnswer, Answer: b}))
		}
		return append(events, st.afterAnswer(s, budget == "max_duration", time.Now())...)
	}))
}

// suspended commits the calls the run waits for, keeping results the
// caller posted while it ran.
func (g *segment) suspended(ctx context.Context, susp *loop.Suspension) error {
	client := g.sp.clientNames()
	// The delegate calls' child sessions, created before the wait is
	// committed (idempotently: a repeated run finds the same ones).
	var pre []callState
	for _, sc := range susp.Calls {
		if sc.Result == nil && sc.Call.Name == delegateTool {
			pre = append(pre, callState{Call: sc.Call})
		}
	}
	children := map[string]callState{}
	for _, c := range g.startChildren(ctx, pre) {
		children[c.Call.ID] = c
	}
	step := g.step
	g.step = nil
	left := g.leftFiles()
	err := g.commitTranscript(ctx, susp.Messages, func(s *store.Session, st *state) []store.Event {
		var events []store.Event
		if step != nil {
			events = step.fn(s, st)
		}
		events = append(events, left(st)...) // the files the agent leaves
		old := st.Checkpoint.Calls
		var cs []callState
		for _, sc := range susp.Calls {
			c := callState{Call: sc.Call, Client: client[sc.Call.Name], Result: sc.Result}
			if sc.Result == nil {
				c.Waiting = waitApproval
				if sc.Waiting == loop.PendingResult {
					c.Waiting = waitResult
				} else {
					c.Person = g.persons.get(sc.Call.ID)
				}
				if ch, ok := children[sc.Call.ID]; ok {
					c.Result, c.Waiting, c.Child = ch.Result, ch.Waiting, ch.Child
					if ch.Child != "" && !slices.Contains(st.Children, ch.Child) {
						st.Children = append(st.Children, ch.Child)
					}
				}
				if i := slices.IndexFunc(old, func(o callState) bool { return o.Call.ID == sc.Call.ID }); i >= 0 {
					if old[i].Result != nil {
						c.Result, c.Waiting = old[i].Result, ""
					} else if c.Waiting == waitApproval {
						c.Decision = old[i].Decision
					}
				}
			}
			cs = append(cs, c)
		}
		st.Checkpoint = g.checkpointOf(susp.Messages, cs)
		st.Checkpoint.TraceParent = susp.TraceParent
		return append(events, st.afterSuspend()...)
	})
	if err != nil {
		return err
	}
	// A child that ended before this commit (at once: it failed to
	// start) found no call waiting for it: deliver its end now. Not on
	// the worker's context: this commit gave the lease up when it left
	// the session waiting, and the watcher, renewing it, finds it lost
	// and cancels that context (a delivery lost so waited for the
	// parent's periodic check, a minute later).
	dctx := context.WithoutCancel(ctx)
	for _, c := range children {
		if c.Child == "" || g.m.dropDelivery {
			continue
		}
		if child, err := g.m.st.GetSession(dctx, c.Child); err == nil && Status(child.Status).Terminal() {
			g.m.deliver(dctx, child)
		}
	}
	return nil
}

// fail ends the session as failed: the caller reads the error as
// tenantError words it, the log keeps it whole.
func (g *segment) fail(ctx context.Context, err error) error {
	g.m.log.Error("session failed", "session", g.id, "err", err)
	msg := tenantError(err)
	return g.commit(ctx, func(s *store.Session, st *state) []store.Event {
		return finish(s, st, outcomeFailed(CodeInternal, msg))
	})
}
