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
	"sync"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/store"
)

// Why a worker stops running a session before it waits or ends.
var (
	errShutdown     = errors.New("session manager stopped")
	errStopped      = errors.New("session ended")
	errLeaseLost    = errors.New("lease on the session lost")
	errHardDeadline = errors.New("max_time_s reached and the final answer took too long")
	// errYield is returned by the model wrapper to end a run between
	// steps, so that the worker applies the caller's input (messages,
	// pause, force_answer) and goes on from the last checkpoint.
	errYield = errors.New("yield to the caller's input")
)

// Start starts the workers: from now until [Manager.Stop], they claim the
// sessions that need running (those a stopped or crashed process left
// running included) and run them. Start returns an error if the manager
// was started before.
func (m *Manager) Start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done != nil {
		return errors.New("session: manager already started")
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	m.cancel = cancel
	m.done = make(chan struct{})
	go m.dispatch(ctx)
	return nil
}

// Stop stops the workers and waits for them until ctx is done. A running
// session stops where it is and stays runnable: its last checkpoint is in
// the store, and the next manager to start resumes it (a model request in
// flight is sent again). Stop is idempotent.
func (m *Manager) Stop(ctx context.Context) error {
	m.mu.Lock()
	cancel, done := m.cancel, m.done
	m.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel(errShutdown)
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// dispatch claims sessions and runs each in a worker goroutine. It sleeps
// until the store announces work, a wake-up time comes, or a worker frees
// up: no polling loop. Wake-up times include the expiry of leases other
// replicas hold on sessions that need a worker, so that a replica that
// dies has its sessions taken over once their leases expire. With a store
// that keeps replicas, it also records this replica's heartbeat.
func (m *Manager) dispatch(ctx context.Context) {
	var wg sync.WaitGroup
	defer close(m.done)
	defer wg.Wait()
	if rs, ok := m.st.(store.Replicas); ok {
		wg.Go(func() {
			for {
				p := protect(func() { m.heartbeat(ctx, rs) })
				if p == nil || ctx.Err() != nil {
					return
				}
				m.log.Error("replica heartbeat panicked; restarting it", "panic", fmt.Sprint(p.value), "stack", string(p.stack))
				sleep(ctx, m.opts.LeaseTTL/3)
			}
		})
	}
	work, unsubscribe := m.st.Subscribe(store.WorkTopic)
	defer unsubscribe()
	for ctx.Err() == nil {
		if p := protect(func() { m.dispatchOnce(ctx, &wg, work) }); p != nil {
			m.log.Error("session dispatcher panicked; going on", "panic", fmt.Sprint(p.value), "stack", string(p.stack))
			sleep(ctx, time.Second)
		}
	}
}

// dispatchOnce claims the sessions it can run and starts their workers in
// wg, then sleeps until there may be more.
func (m *Manager) dispatchOnce(ctx context.Context, wg *sync.WaitGroup, work <-chan struct{}) {
	m.mu.Lock()
	free := m.opts.Workers - len(m.running)
	m.mu.Unlock()
	var wake <-chan time.Time
	if free > 0 {
		claimed, err := m.claim(ctx, free)
		if err != nil {
			if ctx.Err() == nil {
				m.log.Error("claiming sessions", "err", err)
				sleep(ctx, time.Second)
			}
			return
		}
		for _, s := range claimed {
			wctx, cancel := context.WithCancelCause(ctx)
			m.mu.Lock()
			m.running[s.ID] = cancel
			if s.Attempts > suspectAfter {
				m.suspect = s.ID
			}
			m.mu.Unlock()
			wg.Go(func() { m.work(wctx, cancel, s) })
		}
		if len(claimed) == free {
			return // there may be more
		}
		next, err := m.st.NextWake(ctx, time.Now())
		if err != nil && ctx.Err() == nil {
			m.log.Error("reading wake-up times", "err", err)
			next = time.Now().Add(time.Second)
		}
		if !next.IsZero() {
			timer := time.NewTimer(max(time.Until(next), time.Millisecond))
			defer timer.Stop()
			wake = timer.C
		}
	}
	select {
	case <-ctx.Done():
	case <-work:
	case <-wake:
	case <-m.freed:
	}
}

// suspectAfter is the number of claims without progress after which a
// session is a suspect: it was running when its worker died or failed,
// twice in a row. A replica runs one suspect at a time, so that a session
// that takes the process down (each time, the attempts of the sessions
// running with it count too) brings down few others: they progress, run
// alone or with sessions that are not suspects, and are suspects no more.
const suspectAfter = 2

// claim claims up to free sessions: those claimed fewer than suspectAfter
// times without progress, and one more, the oldest, when no suspect runs
// here.
func (m *Manager) claim(ctx context.Context, free int) ([]*store.Session, error) {
	p := &store.ClaimParams{Owner: m.owner, Now: time.Now(), TTL: m.opts.LeaseTTL, Limit: free, BelowAttempts: suspectAfter}
	claimed, err := m.st.Claim(ctx, p)
	if err != nil || len(claimed) == free {
		return claimed, err
	}
	m.mu.Lock()
	busy := m.suspect != ""
	m.mu.Unlock()
	if busy {
		return claimed, nil
	}
	p.Now, p.Limit, p.BelowAttempts = time.Now(), 1, 0
	more, err := m.st.Claim(ctx, p)
	if err != nil {
		if len(claimed) == 0 {
			return nil, err
		}
		m.log.Error("claiming sessions", "err", err) // the others run
	}
	return append(claimed, more...), nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// work runs one claimed session until it waits or ends, renewing the lease
// meanwhile (see drive), then releases it.
func (m *Manager) work(ctx context.Context, cancel context.CancelCauseFunc, s *store.Session) {
	id := s.ID
	defer func() {
		m.mu.Lock()
		delete(m.running, id)
		if m.suspect == id {
			m.suspect = ""
		}
		m.mu.Unlock()
		select {
		case m.freed <- struct{}{}:
		default:
		}
	}()
	release := false
	if p := protect(func() { release = m.drive(ctx, cancel, s) }); p != nil {
		// drive recovers the run's panics; this one is its own. The
		// lease expires, and the attempts bound the retries.
		m.log.Error("session worker panicked", "session", id, "panic", fmt.Sprint(p.value), "stack", string(p.stack))
	}
	cancel(nil)
	if !release {
		return
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer rcancel()
	if err := m.st.Release(rctx, id, m.owner); err != nil && !errors.Is(err, store.ErrNotFound) {
		m.log.Warn("releasing session", "session", id, "err", err)
	}
}

// watch renews the lease of a running session and stops the run when the
// session ends (cancelled by its caller) or the lease is lost.
func (m *Manager) watch(ctx context.Context, cancel context.CancelCauseFunc, id string) {
	notify, unsubscribe := m.st.Subscribe(id)
	defer unsubscribe()
	tick := time.NewTicker(m.opts.LeaseTTL / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			err := m.st.Renew(ctx, id, m.owner, time.Now().Add(m.opts.LeaseTTL))
			if errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrNotFound) {
				cancel(errLeaseLost)
				return
			}
		case <-notify:
			s, err := m.st.GetSession(ctx, id)
			if err == nil && Status(s.Status).Terminal() {
				cancel(errStopped)
				return
			}
		}
	}
}

// leased is the update option of a worker's writes.
func (m *Manager) leased() *store.UpdateOptions { return &store.UpdateOptions{Lease: m.owner} }

// runSession does what the session needs until it waits or ends.
func (m *Manager) runSession(ctx context.Context, id string) error {
	for ctx.Err() == nil {
		s, st, err := m.read(ctx, id)
		if err != nil {
			return err
		}
		if st.Phase == phaseDone {
			return nil
		}
		now := time.Now()
		switch {
		case !st.Deadline.IsZero() && !now.Before(st.Deadline.Add(m.opts.TimeoutGrace)):
			// The final answer asked for at the deadline never came.
			_, _, err := m.update(ctx, id, m.leased(), func(s *store.Session, st *state) ([]store.Event, error) {
				if st.Phase == phaseDone {
					return nil, errNoChange
				}
				finish(s, st, StatusTimedOut, "max_time_s reached", CodeTimeout)
				return []store.Event{event(EventAgentCompletion, map[string]string{"reason": "timed_out"})}, nil
			})
			return err
		case !st.Deadline.IsZero() && !now.Before(st.Deadline) && st.Final != "timeout":
			if err := m.timeUp(ctx, id); err != nil {
				return err
			}
			continue
		}
		switch st.Phase {
		case phaseQueued:
			return nil // started by promote when a slot frees
		case phaseNew:
			err = m.start(ctx, id)
		case phaseIdle:
			if st.IdleUntil.IsZero() || now.Before(st.IdleUntil) {
				return nil
			}
			_, _, err = m.update(ctx, id, m.leased(), func(s *store.Session, st *state) ([]store.Event, error) {
				if st.Phase != phaseIdle || time.Now().Before(st.IdleUntil) {
					return nil, errNoChange
				}
				finish(s, st, StatusCompleted, "", "")
				return []store.Event{event(EventAgentCompletion, map[string]string{"reason": "finished"})}, nil
			})
			if err == nil {
				return nil
			}
		case phaseWait:
			if !st.waitsForChild() || now.Before(st.CheckChildrenAt) {
				return nil
			}
			err = m.checkChildren(ctx, id, st)
		case phaseRun:
			switch {
			case st.Paused:
				return nil
			case st.PauseRequested:
				_, _, err = m.update(ctx, id, m.leased(), func(s *store.Session, st *state) ([]store.Event, error) {
					if !st.PauseRequested {
						return nil, errNoChange
					}
					st.PauseRequested, st.Paused = false, true
					return []store.Event{event(EventRunStatusChange, map[string]string{"status": "paused"})}, nil
				})
				if err == nil {
					return nil
				}
			default:
				err = m.runSegment(ctx, s, st)
				if errors.Is(err, errYield) {
					err = nil
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// start moves a new session to running, or to idle when it has no task.
func (m *Manager) start(ctx context.Context, id string) error {
	_, _, err := m.update(ctx, id, m.leased(), func(s *store.Session, st *state) ([]store.Event, error) {
		if st.Phase != phaseNew {
			return nil, errNoChange
		}
		now := time.Now().UTC()
		s.StartedAt = now
		if st.Spec.MaxTime > 0 {
			st.Deadline = now.Add(st.Spec.MaxTime)
		}
		events := []store.Event{event(EventAgentStarted, struct{}{})}
		if len(st.Inbox) == 0 {
			// No task yet: it waits, idle, for its first message (for
			// idle_timeout_s when set, else until one comes).
			st.Phase, st.IdleUntil = phaseIdle, time.Time{}
			if st.Spec.IdleTimeout > 0 {
				st.IdleUntil = now.Add(st.Spec.IdleTimeout)
			}
			return append(events, activeStateEvent(st, "idle")), nil
		}
		st.Phase = phaseRun
		return append(events, activeStateEvent(st, "running")), nil
	})
	return err
}

// timeUp handles max_time_s: calls still waiting are answered with an
// error the model reads, and the model is asked for its final answer.
func (m *Manager) timeUp(ctx context.Context, id string) error {
	_, _, err := m.update(ctx, id, m.leased(), func(s *store.Session, st *state) ([]store.Event, error) {
		if st.Phase == phaseDone || st.Final == "timeout" {
			return nil, errNoChange
		}
		switch {
		case st.Phase == phaseIdle:
			finish(s, st, StatusCompleted, "", "")
			return []store.Event{event(EventAgentCompletion, map[string]string{"reason": "finished"})}, nil
		case st.Paused || st.Phase == phaseNew:
			finish(s, st, StatusTimedOut, "max_time_s reached", CodeTimeout)
			return []store.Event{event(EventAgentCompletion, map[string]string{"reason": "timed_out"})}, nil
		}
		st.Final = "timeout"
		st.PauseRequested = false
		events := abandonPending(st, "the session's time limit (max_time_s) was reached before this call got a result")
		if st.Phase == phaseWait {
			st.Phase = phaseRun
			events = append(events, activeStateEvent(st, "running"))
		}
		return events, nil
	})
	return err
}

// Final-answer prompts. They start alike so that a final request can be
// recognized when the agent has no tools (see segment.Stream).
const (
	finalPrefix       = "Stop here: "
	finalPromptBudget = finalPrefix + "this session's limit is reached ({budget}). Do not call any more tools; give your final answer now, based on what you have found so far."
	finalPromptForced = finalPrefix + "the user asks for your final answer now. Do not call any more tools; give your final answer based on what you have found so far."
	finalPromptTime   = finalPrefix + "this session's time limit is reached. Do not call any more tools; give your final answer now, based on what you have found so far."
)

// A segment is one run of the loop for a session, from its checkpoint to
// the next wait, end or yield. It is also the model of that run: it
// records each request and response, so that each step is committed with
// the exact transcript it continues from.
type segment struct {
	m     *Manager
	id    string
	owner string
	ctx   context.Context
	sp    *spec

	delivered []int64 // inbox messages given to this run
	noTools   bool
	calls     int // model requests made

	// the current step, set by Stream
	req   []llm.Message
	resp  *llm.Response
	final bool

	tools *loop.Toolset
	perms *loop.Permissions
	// answer holds the state change and events of a step that made no
	// call: they are committed with the end of the run.
	answer       func(s *store.Session, st *state)
	answerEvents []store.Event
}

// runSegment runs the loop from the session's checkpoint.
func (m *Manager) runSegment(ctx context.Context, s *store.Session, st *state) error {
	sp := st.Spec
	if !st.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadlineCause(ctx, st.Deadline.Add(m.opts.TimeoutGrace), errHardDeadline)
		defer cancel()
	}
	server, closeEnv, err := m.toolsets(sp, s.ID)
	if err != nil {
		return g0(m, ctx, s.ID).fail(fmt.Errorf("the session's agent cannot run here: %w", err))
	}
	// The session's own environments (a browser) live as long as this run.
	if closeEnv != nil {
		defer func() { closeEnv(m.ended(s.ID)) }()
	}
	client := &loop.Toolset{}
	for _, t := range sp.ClientTools {
		if err := client.Add(loop.NewClientTool(t.Name, t.Description, t.InputSchema)); err != nil {
			return g0(m, ctx, s.ID).fail(err)
		}
	}
	if len(sp.Subagents) > 0 {
		if err := client.Add(loop.NewClientTool(delegateTool, delegateDescription(sp.Subagents), delegateSchema(sp.Subagents))); err != nil {
			return g0(m, ctx, s.ID).fail(err)
		}
	}
	tools, err := loop.Join(server, client)
	if err != nil {
		return g0(m, ctx, s.ID).fail(err)
	}
	perms, hooks := m.policy(sp)
	ctx = context.WithValue(ctx, sessionIDKey{}, s.ID)
	g := &segment{m: m, id: s.ID, owner: s.Owner, ctx: ctx, sp: sp, tools: tools, noTools: tools.Len() == 0, perms: perms}
	var msgs []llm.Message
	for _, in := range st.Inbox {
		g.delivered = append(g.delivered, in.ID)
		msgs = append(msgs, in.Message)
	}
	cp := st.Checkpoint
	opts := loop.Options{
		Model:             sp.Model,
		FinalAnswerPrompt: finalPromptBudget,
		ToolTimeout:       m.opts.ToolTimeout,
		Retry:             m.opts.Retry,
		Logger:            m.log,
		Permissions:       perms,
		Hooks:             hooks,
		Approver: loop.ApproverFunc(func(context.Context, *loop.ApprovalRequest) (loop.Decision, error) {
			if m.opts.AutoApprove {
				return loop.Decision{Verdict: loop.Approve}, nil
			}
			return loop.Decision{Verdict: loop.Defer}, nil
		}),
	}
	if m.opts.Observer != nil {
		opts.Observer = yieldObserver{m.opts.Observer}
	}
	if sp.AnswerFormat != nil {
		opts.OutputSchema = &loop.OutputSchema{Schema: sp.AnswerFormat}
	}
	switch st.Final {
	case "force_answer":
		opts.FinalAnswerPrompt = finalPromptForced
	case "timeout":
		opts.FinalAnswerPrompt = finalPromptTime
	}
	if !st.Deadline.IsZero() && st.Final == "" {
		opts.MaxDuration = max(time.Until(st.Deadline), time.Nanosecond)
	}
	var run iter.Seq[loop.Chunk]
	if len(cp.Calls) == 0 {
		if len(msgs) == 0 && st.Final == "" {
			// Nothing new to say: the agent's last answer stands.
			msgs, err := cp.Messages.decode()
			if err != nil {
				return g.fail(err)
			}
			return g.answered(msgs, "", "")
		}
		opts.MaxTurns = max(sp.MaxSteps-st.Steps, 1)
		if st.Final != "" {
			opts.MaxTurns = 1
		}
		agent := loop.NewAgent(g, tools, &opts)
		history, err := cp.Messages.decode()
		if err != nil {
			return g.fail(err)
		}
		run = agent.RunLoop(ctx, append(history, msgs...))
	} else {
		susp, in, err := resumeInput(&cp, st.Steps)
		if err != nil {
			return g.fail(err)
		}
		in.Messages = msgs
		opts.MaxTurns = max(sp.MaxSteps, st.Steps+1)
		if st.Final != "" {
			opts.MaxTurns = st.Steps + 1
		}
		agent := loop.NewAgent(g, tools, &opts)
		run = agent.Resume(ctx, susp, in)
	}
	for c := range run {
		var err error
		switch c.Type {
		case loop.ChunkRetry:
			ev := agentEvent(AgentEventData{Kind: KindError, Origin: "model",
				Error: fmt.Sprintf("model request failed (attempt %d), retrying in %v: %v", c.Retry.Attempt, c.Retry.Delay.Round(time.Millisecond), c.Err)})
			// A retry is no step: the attempts stay counted.
			err = g.commitWith(g.m.leased(), func(*store.Session, *state) []store.Event { return []store.Event{ev} })
		case loop.ChunkTurnEnd:
			err = g.turnEnd(c)
		case loop.ChunkAnswerRejected:
			err = g.answerRejected(c)
		case loop.ChunkToolCallResult, loop.ChunkToolCallError:
			err = g.toolDone(c)
		case loop.ChunkEnd:
			return g.end(c.Result)
		}
		if err != nil {
			return err
		}
	}
	return context.Cause(ctx)
}

// resumeInput turns a checkpoint with calls into the loop's suspension
// and the input that continues it: posted results are in the suspension,
// decided approvals and server calls that had not finished (cut by a
// crash or a shutdown) are approved or rejected in the input.
func resumeInput(cp *checkpoint, steps int) (*loop.Suspension, *loop.ResumeInput, error) {
	msgs, err := cp.Messages.decode()
	if err != nil {
		return nil, nil, err
	}
	s := &loop.Suspension{Messages: msgs, Turn: steps, TraceParent: cp.TraceParent}
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
			case c.Waiting == waitRun:
				in.Approvals = append(in.Approvals, loop.ApprovalDecision{CallID: c.Call.ID, Approved: true})
			}
		}
		s.Calls = append(s.Calls, sc)
	}
	return s, in, nil
}

// Stream implements [llm.Model] for the run: between steps it yields to
// the caller's input; it gives every call of a response an id unique in
// the session; and it records the request and response of the step.
func (g *segment) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		if g.calls > 0 {
			if err := g.control(ctx); err != nil {
				yield(llm.Chunk{}, err)
				return
			}
		}
		if err := g.modelAllowed(ctx); err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		g.calls++
		g.req = slices.Clone(req.Messages)
		g.resp = nil
		g.final = req.ToolChoice.Mode == llm.ToolChoiceNone || g.noTools && endsWithFinalPrompt(req.Messages)
		for c, err := range g.m.model.Stream(ctx, req) {
			if err != nil {
				yield(c, err)
				return
			}
			if c.Kind == llm.ChunkDone && c.Response != nil {
				resp := *c.Response
				resp.Message = uniqueCallIDs(resp.Message, req.Messages)
				c.Response = &resp
				g.resp = &resp
			}
			if !yield(c, nil) {
				return
			}
		}
	}
}

func endsWithFinalPrompt(msgs []llm.Message) bool {
	if len(msgs) == 0 {
		return false
	}
	last := msgs[len(msgs)-1]
	return last.Role == llm.RoleUser && strings.HasPrefix(last.Text(), finalPrefix)
}

// control reports errYield when the caller's input should be applied
// before the next step: a message, a pause or a final-answer request.
func (g *segment) control(ctx context.Context) error {
	_, st, err := g.m.read(ctx, g.id)
	if err != nil {
		return err
	}
	if st.Phase == phaseDone {
		return errStopped
	}
	if st.PauseRequested || st.Paused || st.Final != "" && !g.final {
		return errYield
	}
	for _, in := range st.Inbox {
		if !slices.Contains(g.delivered, in.ID) {
			return errYield
		}
	}
	return nil
}

// uniqueCallIDs gives every call of msg an id that no earlier call of the
// transcript has, so that a late or repeated result can never answer the
// wrong call. Providers' own ids are kept when they are unique.
func uniqueCallIDs(msg llm.Message, transcript []llm.Message) llm.Message {
	used := map[string]bool{}
	for _, m := range transcript {
		for _, c := range m.ToolCalls() {
			used[c.ID] = true
		}
	}
	parts := msg.Parts
	cloned := false
	for i, p := range parts {
		if p.Kind != llm.PartToolCall || p.ToolCall == nil {
			continue
		}
		id := p.ToolCall.ID
		if id == "" || used[id] {
			if !cloned {
				parts, cloned = slices.Clone(parts), true
			}
			c := *p.ToolCall
			for id == "" || used[id] {
				id = "call_" + randomHex(8)
			}
			c.ID = id
			parts[i].ToolCall = &c
		}
		used[id] = true
	}
	msg.Parts = parts
	return msg
}

// g0 is a segment for reporting a failure before the run starts.
func g0(m *Manager, ctx context.Context, id string) *segment {
	return &segment{m: m, id: id, ctx: ctx}
}

// commit applies fn under the lease and commits the events it returns.
// Each is a step of the run (or its end), which resets the count of
// attempts to run the session.
func (g *segment) commit(fn func(s *store.Session, st *state) []store.Event) error {
	return g.commitWith(&store.UpdateOptions{Lease: g.m.owner, ResetAttempts: true}, fn)
}

func (g *segment) commitWith(opts *store.UpdateOptions, fn func(s *store.Session, st *state) []store.Event) error {
	_, _, err := g.m.update(g.ctx, g.id, opts, func(s *store.Session, st *state) ([]store.Event, error) {
		if st.Phase == phaseDone {
			return nil, errStopped
		}
		return fn(s, st), nil
	})
	if errors.Is(err, store.ErrLeaseLost) {
		return errLeaseLost
	}
	return err
}

// requiresApproval reports whether a call will wait for a decision, as
// far as the permission policy tells before the run decides it (hooks,
// which run then, may still decide otherwise: the run's suspension is
// what counts).
func (g *segment) requiresApproval(call llm.ToolCall) bool {
	def, ok := g.tools.Lookup(call.Name)
	if !ok || g.m.opts.AutoApprove {
		return false
	}
	if g.perms == nil {
		return def.RequiresApproval
	}
	return g.perms.Check(&def, call.Arguments.JSON()).Behavior == loop.Ask
}

// turnEnd reports the model's step. A step that made calls is committed
// at once, with the checkpoint that holds them, before any call runs; a
// step that answered is committed with the end of the run, so that no
// checkpoint ends on an answer the session has not reported.
func (g *segment) turnEnd(c loop.Chunk) error {
	if g.resp == nil {
		return errors.New("session: step ended without a response")
	}
	msg := g.resp.Message
	msg.Role = llm.RoleAssistant
	if g.final {
		msg.Parts = slices.DeleteFunc(slices.Clone(msg.Parts), func(p llm.Part) bool { return p.Kind == llm.PartToolCall })
	}
	var usage llm.Usage
	if c.Usage != nil {
		usage = *c.Usage
	}
	g.m.chargeTokens(g.ctx, g.owner, c.Usage)
	model := firstNonEmpty(g.sp.Model, g.resp.Model, "default")
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
	client := map[string]bool{}
	for _, t := range g.sp.ClientTools {
		client[t.Name] = true
	}
	var cs []callState
	for _, call := range calls {
		policy.ToolReqs = append(policy.ToolReqs, toolRequest(call))
		w := waitRun
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
	encoded := encodeTranscript(append(slices.Clone(g.req), msg))
	delivered := g.delivered
	apply := func(s *store.Session, st *state) {
		st.Steps++
		if st.Usage == nil {
			st.Usage = map[string]llm.Usage{}
		}
		u := st.Usage[model]
		u.Add(usage)
		st.Usage[model] = u
		st.Inbox = slices.DeleteFunc(st.Inbox, func(in inboxMessage) bool { return slices.Contains(delivered, in.ID) })
		if len(cs) > 0 {
			st.Checkpoint = checkpoint{Messages: encoded, Calls: cs}
		}
	}
	if len(calls) == 0 {
		g.answer = apply
		g.answerEvents = []store.Event{agentEvent(policy)}
		return nil
	}
	return g.commit(func(s *store.Session, st *state) []store.Event {
		apply(s, st)
		return []store.Event{agentEvent(policy), g.metricsEvent(st)}
	})
}

// toolDone commits the result of a server-side call (or a call refused
// before it ran) with the checkpoint that records it: after a crash, only
// the calls without a result run again.
func (g *segment) toolDone(c loop.Chunk) error {
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
	return g.commit(func(s *store.Session, st *state) []store.Event {
		for i := range st.Checkpoint.Calls {
			if cs := &st.Checkpoint.Calls[i]; cs.Call.ID == info.ID && cs.Result == nil {
				cs.Result, cs.Waiting = res, ""
			}
		}
		return append([]store.Event{ev}, observations...)
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
		if strings.HasPrefix(req.ToolName, "browser_") {
			env = "web"
		}
		out = append(out, agentEvent(AgentEventData{Kind: KindObservation, ObservationType: env, ToolReq: req,
			Image: &ImageContent{Type: "base64", MediaType: p.Media.MIMEType, Source: base64.StdEncoding.EncodeToString(p.Media.Data)}}))
	}
	return out
}

// end commits how the run ended.
func (g *segment) end(res *loop.Result) error {
	switch res.Status {
	case loop.StatusCompleted:
		return g.answered(res.Messages, res.Answer, res.Budget)
	case loop.StatusSuspended:
		return g.suspended(res.Suspension)
	}
	cause := context.Cause(g.ctx)
	switch {
	case errors.Is(res.Err, errYield):
		return errYield
	case errors.Is(res.Err, errStopped):
		return errStopped
	case errors.Is(cause, errHardDeadline):
		// The run's context is done; reporting why is not.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(g.ctx), 10*time.Second)
		defer cancel()
		g.ctx = ctx
		return g.commit(func(s *store.Session, st *state) []store.Event {
			finish(s, st, StatusTimedOut, "max_time_s reached", CodeTimeout)
			return []store.Event{event(EventAgentCompletion, map[string]string{"reason": "timed_out"})}
		})
	case g.ctx.Err() != nil:
		return cause // shutdown, cancelled, lease lost: nothing to report
	case errors.As(res.Err, new(*storeError)):
		return res.Err // reading the caller's input failed: retried (see drive)
	case errors.Is(res.Err, ErrTokenQuotaExceeded):
		return g.quotaStopped(res.Err)
	case errors.Is(res.Err, loop.ErrNoAnswer):
		return g.noAnswer(res)
	case errors.Is(res.Err, loop.ErrInvalidOutput):
		return g.invalidAnswer(res)
	}
	return g.fail(res.Err)
}

// answerRejected commits a final answer that did not match the answer
// format: its step, and an error_event saying why; the loop asks the model
// again.
func (g *segment) answerRejected(c loop.Chunk) error {
	apply, events := g.answer, g.answerEvents
	g.answer, g.answerEvents = nil, nil
	ev := agentEvent(AgentEventData{Kind: KindError, Origin: "answer_validation", Error: fmt.Sprint(c.Err)})
	return g.commit(func(s *store.Session, st *state) []store.Event {
		if apply != nil {
			apply(s, st)
			events = append(events, g.metricsEvent(st))
		}
		return append(events, ev)
	})
}

// invalidAnswer ends a session whose final answer never matched its
// answer format (error_code answer_validation).
func (g *segment) invalidAnswer(res *loop.Result) error {
	encoded := encodeTranscript(res.Messages)
	apply, events := g.answer, g.answerEvents
	return g.commit(func(s *store.Session, st *state) []store.Event {
		if apply != nil {
			apply(s, st)
			events = append(events, g.metricsEvent(st))
		}
		st.Checkpoint = checkpoint{Messages: encoded}
		st.Final = ""
		finish(s, st, StatusFailed, res.Err.Error(), CodeAnswerValidation)
		return append(events, event(EventAgentError, map[string]string{"error": res.Err.Error()}))
	})
}

// noAnswer ends a session whose model gave no answer when asked for its
// final one: timed out when time was the limit, else failed (no_answer).
func (g *segment) noAnswer(res *loop.Result) error {
	encoded := encodeTranscript(res.Messages)
	return g.commit(func(s *store.Session, st *state) []store.Event {
		st.Checkpoint = checkpoint{Messages: encoded}
		if st.Final == "timeout" || res.Budget == "max_duration" {
			st.Final = ""
			finish(s, st, StatusTimedOut, "max_time_s reached", CodeTimeout)
			return []store.Event{event(EventAgentCompletion, map[string]string{"reason": "timed_out"})}
		}
		st.Final = ""
		finish(s, st, StatusFailed, res.Err.Error(), CodeNoAnswer)
		return []store.Event{event(EventAgentError, map[string]string{"error": res.Err.Error()})}
	})
}

// answered commits the agent's answer (if the run gave one) and what
// follows: the end of the session, a wait for the next message, or a run
// with messages that came meanwhile.
func (g *segment) answered(msgs []llm.Message, answer, budget string) error {
	encoded := encodeTranscript(msgs)
	return g.commit(func(s *store.Session, st *state) []store.Event {
		var events []store.Event
		if g.answer != nil {
			g.answer(s, st)
			events = append(events, g.answerEvents...)
			events = append(events, g.metricsEvent(st))
			b, _ := json.Marshal(answer)
			if st.Spec.AnswerFormat != nil && json.Valid([]byte(answer)) {
				b = json.RawMessage(answer) // the structured answer, validated by the loop
			}
			s.Answer = b
			events = append(events, agentEvent(AgentEventData{Kind: KindAnswer, Answer: b}))
		}
		st.Checkpoint = checkpoint{Messages: encoded}
		final := st.Final
		st.Final = ""
		switch {
		case final == "timeout" || budget == "max_duration":
			finish(s, st, StatusTimedOut, "max_time_s reached", CodeTimeout)
			events = append(events, event(EventAgentCompletion, map[string]string{"reason": "timed_out"}))
		case len(st.Inbox) > 0:
			st.Phase = phaseRun // messages came while the agent answered
		case st.Spec.IdleTimeout > 0:
			st.Phase, st.IdleUntil = phaseIdle, time.Now().Add(st.Spec.IdleTimeout)
			events = append(events, activeStateEvent(st, "idle"))
		default:
			finish(s, st, StatusCompleted, "", "")
			events = append(events, event(EventAgentCompletion, map[string]string{"reason": "finished"}))
		}
		return events
	})
}

// suspended commits the calls the run waits for, keeping results the
// caller posted while it ran.
func (g *segment) suspended(susp *loop.Suspension) error {
	client := map[string]bool{}
	for _, t := range g.sp.ClientTools {
		client[t.Name] = true
	}
	encoded := encodeTranscript(susp.Messages)
	// The delegate calls' child sessions, created before the wait is
	// committed (idempotently: a repeated run finds the same ones).
	var pre []callState
	for _, sc := range susp.Calls {
		if sc.Result == nil && sc.Call.Name == delegateTool {
			pre = append(pre, callState{Call: sc.Call})
		}
	}
	children := map[string]callState{}
	for _, c := range g.startChildren(pre) {
		children[c.Call.ID] = c
	}
	return g.commit(func(s *store.Session, st *state) []store.Event {
		old := st.Checkpoint.Calls
		var cs []callState
		for _, sc := range susp.Calls {
			c := callState{Call: sc.Call, Client: client[sc.Call.Name], Result: sc.Result}
			if sc.Result == nil {
				c.Waiting = waitApproval
				if sc.Waiting == loop.PendingResult {
					c.Waiting = waitResult
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
		st.Checkpoint = checkpoint{Messages: encoded, Calls: cs, TraceParent: susp.TraceParent}
		if st.settled() {
			st.Phase = phaseRun // everything was answered while the run went on
			return nil
		}
		st.Phase = phaseWait
		events := []store.Event{activeStateEvent(st, string(StatusAwaitingToolResults))}
		if st.PauseRequested {
			// A pause asked for during the step that made the calls
			// takes effect now, not once their results are posted.
			st.PauseRequested, st.Paused = false, true
			events = append(events, event(EventRunStatusChange, map[string]string{"status": "paused"}))
		}
		return events
	})
}

// fail ends the session as failed.
func (g *segment) fail(err error) error {
	return g.commit(func(s *store.Session, st *state) []store.Event {
		finish(s, st, StatusFailed, err.Error(), CodeInternal)
		return []store.Event{event(EventAgentError, map[string]string{"error": err.Error()})}
	})
}
