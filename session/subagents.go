package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/store"
)

// Subagents. An agent with subagents gets one more tool, delegate(agent,
// task). A call of it does not run in the parent's worker: it creates a
// child session (the subagent as its agent, the task as its message,
// parent_session_id the parent's id, the parent's owner), and the parent
// waits for it as for a client-side tool, holding no goroutine. When the
// child ends, its answer (or how it failed) becomes the call's result and
// the parent runs on. The children are listed in the parent's
// status.subagent_session_ids and by GET /api/v2/sessions?parent_session_id=.
//
// This is the durable counterpart of loop.AgentTool, which runs a child
// agent inside the parent's tool call: a child session survives restarts,
// can be watched, steered and cancelled like any session, and its events
// are its own.

// delegateTool is the tool an agent with subagents delegates with.
const delegateTool = "delegate"

// waitChild: the call waits for its child session to end.
const waitChild = "child"

// maxSubagentDepth bounds the nesting of subagents in one request.
const maxSubagentDepth = 3

// maxSubagents bounds the subagents one request resolves, theirs
// included: each may be a registered agent with subagents of its own.
const maxSubagents = 64

// A subagent is one subagent of a spec: its name, and the agent of its
// child sessions (an inline definition or the name of an agent of the
// server, as JSON).
type subagent struct {
	Name  string          `json:"name"`
	Agent json.RawMessage `json:"agent"`
	// Description is what the delegate tool says of it.
	Description string `json:"description,omitempty"`
	// MaxSteps is a registered agent's step budget for its child
	// sessions; 0 when it has none.
	MaxSteps int `json:"max_steps,omitempty"`
}

// resolving is what the resolution of a request's agent carries down to
// its subagents: the context and owner the registry is read with, the
// names of the agents above (to refuse cycles), and how many subagents
// may still be resolved.
type resolving struct {
	ctx   context.Context
	owner string
	path  []string
	left  *int
}

// resolveSubagents resolves the agent's subagents as the agent of a
// session is: a configured agent's name, a catalog name, the name of an
// agent the owner registered, or an inline definition (whose names of
// environments and skills are the owner's too). Each must be a valid
// agent for a child session. A registered agent is stored as its
// definition now, its subagents too, so that the child sessions run what
// the parent was created with, and the nesting stays bounded.
func (m *Manager) resolveSubagents(rs *resolving, refs []AgentRef, depth int, v *validation) []subagent {
	if len(refs) == 0 {
		return nil
	}
	if depth >= maxSubagentDepth {
		v.add(fmt.Sprintf("subagents nest at most %d deep", maxSubagentDepth), "body", "agent", "subagents")
		return nil
	}
	var out []subagent
	seen := map[string]bool{}
	for i, ref := range refs {
		loc := []any{"body", "agent", "subagents", i}
		name := ref.Name
		if ref.Inline != nil {
			name = ref.Inline.Name
		}
		if name == "" || seen[name] {
			v.add(fmt.Sprintf("subagent %q: a subagent needs a name of its own", name), loc...)
			continue
		}
		seen[name] = true
		if slices.Contains(rs.path, name) {
			v.add(fmt.Sprintf("subagent %q: a cycle (%s → %s): an agent cannot be its own subagent, directly or not", name, strings.Join(rs.path, " → "), name), loc...)
			continue
		}
		if *rs.left <= 0 {
			v.add(fmt.Sprintf("an agent has at most %d subagents, theirs included", maxSubagents), loc...)
			return out
		}
		*rs.left--
		def, steps := ref, 0
		if ref.Inline == nil {
			got, n, err := m.lookupAgent(rs.ctx, rs.owner, ref.Name)
			if err != nil {
				nest(v, err, name, loc)
				continue
			}
			def, steps = got, n
		}
		child := m.normalize(&Request{Agent: def, Messages: Messages{{Message: "check"}}})
		creq, _, err := m.forSession(rs.ctx, rs.owner, child)
		if err != nil {
			nest(v, err, name, loc)
			continue
		}
		sub := &resolving{ctx: rs.ctx, owner: rs.owner, path: append(slices.Clip(rs.path), name), left: rs.left}
		csp, _, err := m.resolveDepth(sub, creq, depth+1)
		if err != nil {
			nest(v, err, name, loc)
			continue
		}
		stored := child.Agent
		if a := stored.Inline; a != nil {
			// Its subagents as resolved: registered ones by definition.
			a.Subagents = nil
			for _, s := range csp.Subagents {
				var r AgentRef
				if err := json.Unmarshal(s.Agent, &r); err != nil {
					v.add(fmt.Sprintf("subagent %q: %v", name, err), loc...)
					continue
				}
				a.Subagents = append(a.Subagents, r)
			}
		}
		raw, _ := json.Marshal(stored)
		desc := ""
		if stored.Inline != nil {
			desc = stored.Inline.Description
		} else if cfg := m.opts.Agents[stored.Name]; cfg != nil {
			desc = cfg.Description
		}
		out = append(out, subagent{Name: name, Agent: raw, Description: desc, MaxSteps: steps})
	}
	return out
}

// nest adds the errors of a subagent's resolution at its place in the
// request, saying which subagent they are about.
func nest(v *validation, err error, name string, loc []any) {
	ve, ok := errors.AsType[*ValidationError](err)
	if !ok {
		v.add(fmt.Sprintf("subagent %q: %v", name, err), loc...)
		return
	}
	for _, f := range ve.Fields {
		rest := f.Loc
		if len(rest) >= 2 && rest[0] == "body" && rest[1] == "agent" {
			rest = rest[2:]
		} else if len(rest) >= 1 && rest[0] == "body" {
			rest = rest[1:]
		}
		msg := f.Msg
		if !strings.HasPrefix(msg, "subagent ") {
			msg = fmt.Sprintf("subagent %q: %s", name, msg)
		}
		v.fields = append(v.fields, FieldError{Loc: at(loc, rest...), Msg: msg, Type: f.Type})
	}
}

// delegateSchema is the input schema of the delegate tool.
func delegateSchema(subs []subagent) json.RawMessage {
	var names []string
	for _, s := range subs {
		names = append(names, s.Name)
	}
	b, _ := json.Marshal(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"agent": map[string]any{"type": "string", "enum": names, "description": "the subagent to delegate to"},
			"task":  map[string]any{"type": "string", "description": "what the subagent should do, with everything it needs to know"},
		},
		"required":             []string{"agent", "task"},
		"additionalProperties": false,
	})
	return b
}

func delegateDescription(subs []subagent) string {
	var b strings.Builder
	b.WriteString("Delegate a task to a subagent, which works on it alone and returns its answer. Subagents:")
	for _, s := range subs {
		desc := s.Description
		var a Agent
		if desc == "" && json.Unmarshal(s.Agent, &a) == nil {
			desc = a.Description // a spec stored before Description was
		}
		fmt.Fprintf(&b, "\n- %s: %s", s.Name, desc)
	}
	return b.String()
}

// startChildren creates the child sessions of the delegate calls that
// wait and have none yet, before the parent's wait is committed. Creation
// is idempotent per parent and call, so a run repeated after a crash
// finds the same children. A call the child cannot be created for gets
// an error result at once.
func (g *segment) startChildren(ctx context.Context, calls []callState) []callState {
	for i := range calls {
		c := &calls[i]
		if c.Call.Name != delegateTool || len(g.sp.Subagents) == 0 || c.Result != nil || c.Child != "" {
			continue
		}
		id, err := g.startChild(ctx, c.Call)
		if err != nil {
			c.Result = &llm.ToolResult{CallID: c.Call.ID, Name: c.Call.Name, IsError: true, Content: []llm.Part{llm.TextPart(err.Error())}}
			c.Waiting = ""
			continue
		}
		c.Child, c.Waiting = id, waitChild
	}
	return calls
}

// childError is what the model (and so the session's owner) reads of
// why a child session could not be created: a refusal of the request
// (its validation, a quota) as it is; anything else, a store's error
// most often, which may name the operator's database, as an internal
// error, the full error logged.
func (g *segment) childError(err error) string {
	if _, ok := errors.AsType[*ValidationError](err); ok || errors.Is(err, ErrQuotaExceeded) || errors.Is(err, ErrTokenQuotaExceeded) {
		return err.Error()
	}
	g.m.log.Error("a subagent's session could not be created", "session", g.id, "err", err)
	return "an internal error of the server"
}

func (g *segment) startChild(ctx context.Context, call llm.ToolCall) (string, error) {
	var in struct {
		Agent string `json:"agent"`
		Task  string `json:"task"`
	}
	if err := json.Unmarshal(call.Arguments, &in); err != nil {
		return "", fmt.Errorf("delegate: arguments must be {\"agent\", \"task\"}: %v", err)
	}
	i := slices.IndexFunc(g.sp.Subagents, func(s subagent) bool { return s.Name == in.Agent })
	if i < 0 {
		return "", fmt.Errorf("delegate: no subagent %q", in.Agent)
	}
	var ref AgentRef
	if err := json.Unmarshal(g.sp.Subagents[i].Agent, &ref); err != nil {
		return "", err
	}
	parent := g.id
	req := &Request{Agent: ref, Messages: Messages{{Type: "user_message", Message: in.Task, CallerID: "agent:" + g.sp.Agent}}, ParentSessionID: &parent}
	if n := g.sp.Subagents[i].MaxSteps; n > 0 {
		req.MaxSteps = &n
	}
	raw, _ := json.Marshal(req)
	// Idempotent per run generation: a run repeated after a crash (the
	// same generation) finds its children; a later run, whose model may
	// give a call the same ID, gets children of its own.
	key := "subagent:" + parent + ":" + call.ID
	if g.run != 0 {
		key = fmt.Sprintf("subagent:%s:r%d:%s", parent, g.run, call.ID)
	}
	v, _, err := g.m.create(ctx, &CreateParams{Owner: g.owner, Request: req, Raw: raw, IdempotencyKey: key}, true)
	if err != nil {
		return "", fmt.Errorf("delegate: the subagent's session could not be created: %s", g.childError(err))
	}
	if g.m.afterChild != nil {
		g.m.afterChild(parent)
	}
	// The parent's run may have been ended (cancelled, failed, timed
	// out) while the child was being made: then nothing will wait for
	// it. The ending cancels the children it finds (cancelChildren); one
	// made after it is found here, since the ending was committed before
	// this read or the child was there for its listing.
	if _, st, err := g.m.read(ctx, parent); err == nil && (st.Phase == phaseDone || st.Run != g.run) {
		if err := g.m.Cancel(context.WithoutCancel(ctx), g.owner, v.ID); err != nil {
			g.m.log.Error("cancelling the child session of an ended run", "session", v.ID, "parent", parent, "err", err)
		}
		return "", errStopped
	}
	return v.ID, nil
}

// maxChildrenCancelled bounds the children an ending cancels.
const maxChildrenCancelled = 10_000

// cancelChildren cancels the child sessions of parent that have not ended:
// the parent ended, so nothing will read their answers. Each child's own
// ending cancels its children in turn.
func (m *Manager) cancelChildren(ctx context.Context, parent *store.Session) {
	running := append([]string{string(StatusQueued)}, activeStatuses...) // not ended
	for done := 0; done < maxChildrenCancelled; {
		page, _, err := m.st.ListSessions(ctx, &store.ListParams{Owner: parent.Owner, ParentID: parent.ID, Statuses: running, Limit: 100, Ascending: true})
		if err != nil {
			m.log.Error("listing the children of an ended session", "session", parent.ID, "err", err)
			return
		}
		if len(page) == 0 {
			return
		}
		progress := false
		for _, c := range page {
			if err := m.Cancel(ctx, parent.Owner, c.ID); err != nil {
				m.log.Error("cancelling a child of an ended session", "session", c.ID, "parent", parent.ID, "err", err)
				continue
			}
			progress = true
			done++
		}
		if !progress {
			return
		}
	}
}

// childCheckEvery is how often a parent waiting for child sessions looks
// at them itself: the delivery of a child's end (deliver) happens when the
// child ends, and this catches one lost to a crash at that moment. A
// waiting child looks at its parent as often: the cancel of the children
// (cancelChildren) follows the parent's end, and this catches one lost so.
const childCheckEvery = time.Minute

// waitsForChild reports whether a call waits for a child session.
func (st *state) waitsForChild() bool {
	return slices.ContainsFunc(st.Checkpoint.Calls, func(c callState) bool { return c.Result == nil && c.Waiting == waitChild })
}

// checkChildren delivers the ends of the parent's children that ended,
// and otherwise commits nothing but the next check time. A child session
// that waits looks at its parent first: one that ended (or is gone)
// cancels it, as its end would have (cancelChildren) had it not been
// lost: the end committed, its answer lost to a broken connection or the
// process gone before its follow-up ran, and a Cancel tried again found
// the parent ended and did nothing more.
func (m *Manager) checkChildren(ctx context.Context, s *store.Session, st *state) error {
	id := s.ID
	if s.ParentID != "" {
		parent, err := m.st.GetSession(ctx, s.ParentID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return &storeError{err}
		}
		if err != nil || Status(parent.Status).Terminal() {
			if err := m.Cancel(ctx, s.Owner, id); err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
			return nil
		}
	}
	delivered := false
	for _, c := range st.Checkpoint.Calls {
		if c.Result != nil || c.Waiting != waitChild {
			continue
		}
		child, err := m.st.GetSession(ctx, c.Child)
		switch {
		case errors.Is(err, store.ErrNotFound):
			child = &store.Session{ID: c.Child, ParentID: id, Status: string(StatusFailed), Error: "the subagent's session no longer exists"}
		case err != nil:
			return &storeError{err}
		}
		if Status(child.Status).Terminal() {
			if err := m.deliver(ctx, child); err != nil {
				// As any commit's store error: the lease is left to
				// expire and the attempts bound the retries. Going
				// round at once tried the delivery again as fast as
				// the store refused it (TestChildEndUndeliverableDoesNotSpin).
				return &storeError{err}
			}
			delivered = true
		}
	}
	if delivered {
		return nil
	}
	_, _, err := m.update(ctx, id, m.leased(), func(s *store.Session, st *state) ([]store.Event, error) {
		if st.Phase != phaseWait || !st.waitsForChild() && s.ParentID == "" {
			return nil, errNoChange
		}
		return nil, nil // derive sets the next check
	})
	return err
}

// deliver gives a child session's end to its parent: the answer (or how
// it failed) becomes the result of the delegate call that waits for it.
// It logs and returns the commit's error, nil when the parent or its call
// is gone (nothing to deliver to).
func (m *Manager) deliver(ctx context.Context, child *store.Session) error {
	text := ""
	isErr := child.Status != string(StatusCompleted)
	switch {
	case isErr:
		text = fmt.Sprintf("the subagent's session %s ended %s", child.ID, child.Status)
		if child.Error != "" {
			text += ": " + child.Error
		}
	default:
		text = resultText(child.Answer)
	}
	_, _, err := m.update(ctx, child.ParentID, nil, func(s *store.Session, st *state) ([]store.Event, error) {
		i := slices.IndexFunc(st.Checkpoint.Calls, func(c callState) bool { return c.Child == child.ID && c.Result == nil })
		if i < 0 || st.Phase == phaseDone {
			return nil, errNoChange
		}
		c := &st.Checkpoint.Calls[i]
		c.Result = &llm.ToolResult{CallID: c.Call.ID, Name: c.Call.Name, IsError: isErr, Content: []llm.Part{llm.TextPart(text)}}
		c.Waiting = ""
		req := toolRequest(c.Call)
		ev := agentEvent(AgentEventData{Kind: KindToolResult, ToolReq: &req, Result: resultJSON(text)})
		if isErr {
			ev = agentEvent(AgentEventData{Kind: KindError, ToolReq: &req, Error: text, Origin: "subagent"})
		}
		return append([]store.Event{ev}, st.settle()...), nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, ErrNotFound) {
		m.log.Error("giving a subagent's answer to its parent", "session", child.ID, "parent", child.ParentID, "err", err)
		return err
	}
	return nil
}
