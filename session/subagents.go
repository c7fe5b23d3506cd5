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

// A subagent is one subagent of a spec: its name, and the agent of its
// child sessions (an inline definition or a name, as JSON).
type subagent struct {
	Name  string          `json:"name"`
	Agent json.RawMessage `json:"agent"`
}

// resolveSubagents checks the agent's subagents (each must be a valid
// agent for a child session) and returns them for the spec.
func (m *Manager) resolveSubagents(refs []AgentRef, depth int, v *validation) []subagent {
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
		name := ref.Name
		if ref.Inline != nil {
			name = ref.Inline.Name
		}
		if name == "" || seen[name] {
			v.add(fmt.Sprintf("subagent %q: a subagent needs a name of its own", name), "body", "agent", "subagents", i)
			continue
		}
		seen[name] = true
		child := m.normalize(&Request{Agent: ref, Messages: Messages{{Message: "check"}}})
		if _, _, err := m.resolveDepth(child, depth+1); err != nil {
			v.add(fmt.Sprintf("subagent %q: %v", name, err), "body", "agent", "subagents", i)
			continue
		}
		raw, _ := json.Marshal(child.Agent)
		out = append(out, subagent{Name: name, Agent: raw})
	}
	return out
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
		var a Agent
		desc := ""
		if json.Unmarshal(s.Agent, &a) == nil {
			desc = a.Description
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
	raw, _ := json.Marshal(req)
	v, _, err := g.m.create(ctx, &CreateParams{Owner: g.owner, Request: req, Raw: raw, IdempotencyKey: "subagent:" + parent + ":" + call.ID}, true)
	if err != nil {
		return "", fmt.Errorf("delegate: the subagent's session could not be created: %v", err)
	}
	return v.ID, nil
}

// childCheckEvery is how often a parent waiting for child sessions looks
// at them itself: the delivery of a child's end (deliver) happens when the
// child ends, and this catches one lost to a crash at that moment.
const childCheckEvery = time.Minute

// waitsForChild reports whether a call waits for a child session.
func (st *state) waitsForChild() bool {
	return slices.ContainsFunc(st.Checkpoint.Calls, func(c callState) bool { return c.Result == nil && c.Waiting == waitChild })
}

// checkChildren delivers the ends of the parent's children that ended,
// and otherwise commits nothing but the next check time.
func (m *Manager) checkChildren(ctx context.Context, id string, st *state) error {
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
			m.deliver(ctx, child)
			delivered = true
		}
	}
	if delivered {
		return nil
	}
	_, _, err := m.update(ctx, id, m.leased(), func(s *store.Session, st *state) ([]store.Event, error) {
		if st.Phase != phaseWait || !st.waitsForChild() {
			return nil, errNoChange
		}
		return nil, nil // derive sets the next check
	})
	return err
}

// deliver gives a child session's end to its parent: the answer (or how
// it failed) becomes the result of the delegate call that waits for it.
func (m *Manager) deliver(ctx context.Context, child *store.Session) {
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
	}
}
