package session

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/store"
)

// phase is where a session is in its life; with the pause flags it
// determines the status (see derive).
type phase string

const (
	phaseQueued phase = "queued" // created above the owner's quota; waits for a slot
	phaseNew    phase = "new"    // created, not started
	phaseRun    phase = "run"    // needs or has a worker running the loop
	phaseWait   phase = "wait"   // calls wait for results or approvals
	phaseIdle   phase = "idle"   // answered; waits for a message
	phaseDone   phase = "done"   // ended; the status says how
)

// state is the runtime state of a session, stored as JSON in
// store.Session.State. Every change to it is committed together with the
// events that report it.
type state struct {
	Spec  agentSpec `json:"spec"`
	Phase phase     `json:"phase"`
	// Checkpoint is where a run continues from.
	Checkpoint checkpoint `json:"checkpoint"`
	// Inbox holds user messages not yet delivered to the model.
	Inbox    []inboxMessage `json:"inbox,omitempty"`
	NextInID int64          `json:"next_inbox_id,omitempty"`

	// PauseRequested asks a running session to pause at the next step;
	// Paused is set once it has.
	PauseRequested bool `json:"pause_requested,omitempty"`
	Paused         bool `json:"paused,omitempty"`
	// RunningUnannounced: the session's calls were all answered while it
	// was paused; the ActiveStateChangeEvent "running" comes when it is
	// resumed.
	RunningUnannounced bool `json:"running_unannounced,omitempty"`
	// Final makes the next model request ask for a final answer without
	// tools, and says why.
	Final finalReason `json:"final,omitempty"`

	// Run is the session's run generation: it changes with every
	// transition that ends a run (finish: an answer that completes it,
	// Cancel, a failure, a time-out), so that a worker still running
	// the old run, and every commit it tries, is fenced off from the
	// session's next run (see segment.commitWith and Manager.watch).
	Run int64 `json:"run,omitempty"`

	Steps int                  `json:"steps"`
	Usage map[string]llm.Usage `json:"usage,omitempty"`
	// Deadline is the end of max_time_s, set when the session starts.
	Deadline time.Time `json:"deadline,omitzero"`
	// IdleUntil is when an idle session completes.
	IdleUntil time.Time `json:"idle_until,omitzero"`

	// Feedback and EventFeedback are the owner's judgements of the
	// session and of its events (by index).
	Feedback      *Feedback          `json:"feedback,omitempty"`
	EventFeedback map[int64]Feedback `json:"event_feedback,omitempty"`
	// ShareSecret, when set, makes the session readable by who has it
	// (see package platform/feedback).
	ShareSecret string `json:"share_secret,omitempty"`
	// Children are the child sessions of the agent's delegate calls.
	Children []string `json:"children,omitempty"`
	// CheckChildrenAt is when a session waiting for child sessions looks
	// at them, and a child session that waits at its parent (see
	// Manager.checkChildren).
	CheckChildrenAt time.Time `json:"check_children_at,omitzero"`
	// Files are the files of the session's files folder already reported
	// by an AttachmentEvent (the user's and the agent's), by name;
	// AgentFiles counts those reported as the agent's (see
	// Manager.agentFiles).
	Files      map[string]fileMark `json:"files,omitempty"`
	AgentFiles int                 `json:"agent_files,omitempty"`
}

// checkpoint is the conversation a run continues from. Without Calls,
// Messages ends between turns and the next run starts a turn. With Calls,
// the last message of Messages is the assistant message that made them,
// and each call has its result or says what it waits for.
//
// The transcript is most of a session's data, so it is not in the state:
// the store keeps it as rows (store.Transcript), each step of a run
// appending its new messages, and the checkpoint says how many of them it
// continues from (Length). Only a new session's system prompt, and the
// whole transcript of a session stored before transcripts had rows of
// their own, are kept inline (Messages, still encoded): a run's first
// commit moves them to the store. Callers' input (posting a result, a
// message) reads and writes the state without the transcript.
type checkpoint struct {
	// Messages is the inline transcript, if any; when empty, the
	// transcript is the first Length messages of the stored one.
	Messages transcript `json:"messages,omitempty"`
	Length   int64      `json:"length,omitempty"`
	// Tag changes with each commit of the transcript: a process that
	// keeps the transcript it committed decoded knows it is still the
	// checkpoint's (see transcriptCache).
	Tag   string      `json:"tag,omitempty"`
	Calls []callState `json:"calls,omitempty"`
	// TraceParent is the suspended run's [loop.Suspension.TraceParent],
	// while Calls wait.
	TraceParent string `json:"trace_parent,omitempty"`
	// Counted is the provider's count of the tokens of the transcript's
	// first CountedLength messages (the last step's request and answer,
	// from its usage report), 0 when unknown: a run resumed from the
	// checkpoint estimates its next request from it, for compaction
	// (see [loop.Suspension.Counted]).
	Counted       int64 `json:"counted,omitempty"`
	CountedLength int64 `json:"counted_length,omitempty"`
}

// transcript is an encoded []llm.Message.
type transcript json.RawMessage

func encodeTranscript(msgs []llm.Message) transcript {
	b, err := json.Marshal(msgs)
	if err != nil {
		panic(fmt.Sprintf("session: encoding a transcript: %v", err))
	}
	return b
}

func (t transcript) decode() ([]llm.Message, error) {
	var msgs []llm.Message
	if len(t) == 0 {
		return nil, nil
	}
	if err := json.Unmarshal(t, &msgs); err != nil {
		return nil, fmt.Errorf("session: corrupt transcript: %w", err)
	}
	return msgs, nil
}

// MarshalJSON writes the encoded messages as they are.
func (t transcript) MarshalJSON() ([]byte, error) {
	if len(t) == 0 {
		return []byte("[]"), nil
	}
	return t, nil
}

// UnmarshalJSON keeps the encoded messages.
func (t *transcript) UnmarshalJSON(b []byte) error {
	*t = append((*t)[:0], b...)
	return nil
}

// loadTranscript returns the transcript a checkpoint continues from: the
// inline one, or the first cp.Length messages of the session's stored
// transcript.
func (m *Manager) loadTranscript(ctx context.Context, id string, cp *checkpoint) ([]llm.Message, error) {
	if len(cp.Messages) > 0 || cp.Length == 0 {
		return cp.Messages.decode()
	}
	if msgs, ok := m.transcripts.get(id, cp.Tag, cp.Length); ok {
		return msgs, nil
	}
	encoded, err := m.st.Messages(ctx, id, 0, int(cp.Length))
	if err != nil {
		return nil, &storeError{err}
	}
	var size int64
	for _, b := range encoded {
		size += int64(len(b))
	}
	if int64(len(encoded)) != cp.Length {
		return nil, fmt.Errorf("session: corrupt transcript: %d messages stored, the checkpoint continues from %d", len(encoded), cp.Length)
	}
	msgs := make([]llm.Message, len(encoded))
	for i, b := range encoded {
		if err := json.Unmarshal(b, &msgs[i]); err != nil {
			return nil, fmt.Errorf("session: corrupt transcript: message %d: %w", i, err)
		}
	}
	m.transcripts.put(id, cp.Tag, msgs, size)
	return slices.Clip(msgs), nil
}

// Why a call has no result yet.
const (
	waitResult   = "result"   // a client-side tool: the caller posts it
	waitApproval = "approval" // a decision is needed before it runs
	// waitUnfinished: a server-side call the run has not finished, nor
	// refused: it is committed so before the run evaluates its
	// permission. A call still so when its run stops is cut (see
	// cutCalls): it was never approved, whatever the run did with it.
	waitUnfinished = "run"
)

type callState struct {
	Call   llm.ToolCall    `json:"call"`
	Client bool            `json:"client,omitempty"`
	Result *llm.ToolResult `json:"result,omitempty"`
	// Waiting says why Result is nil.
	Waiting string `json:"waiting,omitempty"`
	// Decision is an approval decision not yet applied by a run: the
	// only thing that lets a call run without the permission evaluation.
	Decision *loop.ApprovalDecision `json:"decision,omitempty"`
	// Child is the child session a delegate call waits for.
	Child string `json:"child,omitempty"`
	// Person is why only a person may decide the call waiting for an
	// approval (its tool's loop.ToolDef.AskPerson), shown with it.
	Person string `json:"person,omitempty"`
}

type inboxMessage struct {
	ID      int64       `json:"id"`
	Message llm.Message `json:"message"`
}

// agentSpec is the agent spec of a state. A session's spec does not change
// once it is created, and it is most of the state's bytes: it is decoded
// once per distinct encoding (see specCache) and written back as it was
// read, instead of being decoded and encoded again at each of the
// session's changes. The *spec may be shared: it is never modified.
type agentSpec struct {
	*spec
	raw json.RawMessage // the encoding read; nil for a spec not read
}

// MarshalJSON implements [json.Marshaler].
func (a agentSpec) MarshalJSON() ([]byte, error) {
	if a.raw != nil {
		return a.raw, nil
	}
	return json.Marshal(a.spec)
}

// UnmarshalJSON implements [json.Unmarshaler].
func (a *agentSpec) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*a = agentSpec{}
		return nil
	}
	d, err := specs.decode(b)
	if err != nil {
		return err
	}
	*a = d
	return nil
}

// specCacheBytes bounds the encoded specs kept decoded.
const specCacheBytes = 4 << 20

// specs keeps specs decoded, by their encoding: a pure memo of
// json.Unmarshal, shared by the managers of the process.
var specs = &specCache{newLRU[agentSpec](specCacheBytes)}

type specCache struct {
	lru[agentSpec]
}

func (c *specCache) decode(b []byte) (agentSpec, error) {
	if a, _, ok := c.get(string(b)); ok {
		return a, nil
	}
	a := agentSpec{spec: &spec{}, raw: bytes.Clone(b)}
	if err := json.Unmarshal(b, a.spec); err != nil {
		return agentSpec{}, err
	}
	c.put(string(b), a, int64(2*len(b))+512)
	return a, nil
}

// statesDecoded counts the states decoded, for the benchmarks' counts.
var statesDecoded atomic.Int64

func decodeState(s *store.Session) (*state, error) {
	statesDecoded.Add(1)
	st := &state{}
	if err := json.Unmarshal(s.State, st); err != nil {
		return nil, fmt.Errorf("session %s: corrupt state: %w", s.ID, err)
	}
	if st.Spec.spec == nil {
		return nil, fmt.Errorf("session %s: state has no agent", s.ID)
	}
	return st, nil
}

// handOver returns st, the state a caller's input just committed into s
// (s.State is its encoding), for the worker that runs the session its
// commit claimed, which then does not decode s.State again (a turn's
// state was decoded three times: the input's, the worker's first pass,
// its step's commit). st must be as decoding s.State would give it, so
// that the run is the same either way: its times lose their monotonic
// reading and take the location decoding gives, what is empty is nil,
// and a state holding
// text that is not UTF-8 (which its encoding gives as \ufffd: only such
// text is encoded so), or media whose bytes are empty but not nil (see
// emptyMedia), is not handed over (nil: the worker decodes it).
// What else an input puts in a state (messages, results, decisions) was
// decoded from the caller's JSON or is made of values read from the
// state; every test of the package checks each state handed over
// against a decoding of its encoding (handOverCheck). nil for nil.
func handOver(s *store.Session, st *state) *state {
	if s == nil || st == nil || bytes.Contains(s.State, []byte(`\ufffd`)) || st.emptyMedia() {
		return nil
	}
	for _, t := range []*time.Time{&st.Deadline, &st.IdleUntil, &st.CheckChildrenAt} {
		*t = asDecoded(*t)
	}
	// What is empty is left out of the encoding, and decodes as nil.
	if len(st.Inbox) == 0 {
		st.Inbox = nil
	}
	if len(st.Usage) == 0 {
		st.Usage = nil
	}
	if len(st.EventFeedback) == 0 {
		st.EventFeedback = nil
	}
	if len(st.Children) == 0 {
		st.Children = nil
	}
	if len(st.Files) == 0 {
		st.Files = nil
	}
	if len(st.Checkpoint.Calls) == 0 {
		st.Checkpoint.Calls = nil
	}
	return st
}

// emptyMedia reports whether a message or a result of st has media whose
// bytes are empty but not nil: the encoding leaves them out (omitempty),
// and decoding gives nil. The API refuses empty images and files, but a
// state written before it did, or the result of an operator's tool, may
// hold them (TestHandOverEmptyMedia).
func (st *state) emptyMedia() bool {
	empty := func(parts []llm.Part) bool {
		return slices.ContainsFunc(parts, func(p llm.Part) bool { return p.Media != nil && p.Media.Data != nil && len(p.Media.Data) == 0 })
	}
	for _, in := range st.Inbox {
		if empty(in.Message.Parts) {
			return true
		}
	}
	for _, c := range st.Checkpoint.Calls {
		if c.Result != nil && empty(c.Result.Content) {
			return true
		}
	}
	return false
}

// asDecoded returns t as decoding its JSON encoding gives it.
func asDecoded(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	b, err := t.MarshalJSON()
	if err != nil {
		return t
	}
	var d time.Time
	if d.UnmarshalJSON(b) != nil {
		return t
	}
	return d
}

// handOverCheck, when set (by the package's tests), is called with each
// state a worker takes from handOver instead of decoding it, and with
// each state a worker's first commit takes from the pass that started
// its segment (change.curState).
var handOverCheck func(s *store.Session, st *state)

// settled reports whether no call waits for the caller: the run can go on.
func (st *state) settled() bool {
	for _, c := range st.Checkpoint.Calls {
		if c.Result == nil && (c.Waiting == waitResult || c.Waiting == waitChild || c.Waiting == waitApproval && c.Decision == nil) {
			return false
		}
	}
	return true
}

// pending lists the calls that wait for a result and for a decision.
func (st *state) pending() (results, approvals []ToolRequest) {
	results, approvals = []ToolRequest{}, nil
	for _, c := range st.Checkpoint.Calls {
		if c.Result != nil {
			continue
		}
		switch {
		case c.Waiting == waitResult:
			results = append(results, toolRequest(c.Call))
		case c.Waiting == waitApproval && c.Decision == nil:
			r := toolRequest(c.Call)
			r.Reason = c.Person
			approvals = append(approvals, r)
		}
	}
	return results, approvals
}

// derive sets the stored fields that follow from the state: the status,
// whether a worker is needed, and when to look at the session again.
func derive(s *store.Session, st *state) {
	if st.Phase == phaseDone {
		s.Runnable, s.WakeAt = false, time.Time{}
		return
	}
	switch {
	case st.Phase == phaseQueued:
		s.Status = string(StatusQueued)
	case st.Paused:
		s.Status = string(StatusPaused)
	case st.Phase == phaseNew:
		s.Status = string(StatusPending)
	case st.Phase == phaseRun:
		s.Status = string(StatusRunning)
	case st.Phase == phaseWait:
		s.Status = string(StatusAwaitingToolResults)
	case st.Phase == phaseIdle:
		s.Status = string(StatusIdle)
	}
	s.Runnable = !st.Paused && (st.Phase == phaseNew || st.Phase == phaseRun)
	s.WakeAt = st.Deadline
	if st.Phase == phaseIdle && !st.IdleUntil.IsZero() && (s.WakeAt.IsZero() || st.IdleUntil.Before(s.WakeAt)) {
		s.WakeAt = st.IdleUntil
	}
	if st.Phase == phaseWait && !st.CheckChildrenAt.IsZero() && (s.WakeAt.IsZero() || st.CheckChildrenAt.Before(s.WakeAt)) {
		s.WakeAt = st.CheckChildrenAt
	}
}

// toolRequest describes a call for events. The reference gives args as an
// object, so arguments that are not one (the model's mistake, which the
// call's error result quotes) are shown as {}.
func toolRequest(c llm.ToolCall) ToolRequest {
	args := json.RawMessage(c.Arguments)
	var obj map[string]json.RawMessage
	if len(args) == 0 || json.Unmarshal(args, &obj) != nil || obj == nil {
		args = json.RawMessage("{}")
	}
	return ToolRequest{ToolName: c.Name, Args: args, ID: c.ID}
}

// event builds a log event.
func event(typ string, data any) store.Event {
	b, err := json.Marshal(data)
	if err != nil {
		panic(fmt.Sprintf("session: event %s: %v", typ, err))
	}
	return store.Event{Type: typ, Data: b}
}

func agentEvent(d AgentEventData) store.Event { return event(EventAgent, d) }

func activeStateEvent(st *state, name string) store.Event {
	results, approvals := st.pending()
	return event(EventActiveState, ActiveState{State: name, PendingToolCalls: results, PendingApprovals: approvals})
}

func flowEvent(flow string) store.Event {
	return agentEvent(AgentEventData{Kind: KindFlow, Flow: flow, Origin: "user"})
}

// messageEvent logs a user message from caller (the message's caller_id).
func messageEvent(m llm.Message, caller string) store.Event {
	var content []any
	for _, p := range m.Parts {
		switch p.Kind {
		case llm.PartText:
			content = append(content, p.Text)
		case llm.PartImage:
			switch {
			case p.Media != nil && p.Media.Name != "":
				// A file attached to the message: its AttachmentEvent
				// reports it.
			case p.Media != nil && p.Media.URL != "":
				content = append(content, map[string]any{"type": "url", "source": p.Media.URL})
			case p.Media != nil:
				content = append(content, map[string]any{"type": "base64", "source": p.Media.Data, "media_type": p.Media.MIMEType})
			}
		}
	}
	return agentEvent(AgentEventData{Kind: KindMessage, CallerID: firstNonEmpty(caller, "user"), MessageContent: content})
}

// resultJSON renders a tool result's text as the API's opaque result.
func resultJSON(text string) json.RawMessage {
	b, _ := json.Marshal(text)
	return b
}

func (st *state) metrics() Metrics {
	m := Metrics{Steps: st.Steps, CostPerModel: []ModelCost{}}
	for _, u := range st.usage() {
		m.CostPerModel = append(m.CostPerModel, ModelCost{ModelUsage: u})
	}
	return m
}

func (st *state) usage() []ModelUsage {
	out := []ModelUsage{}
	for _, name := range sortedKeys(st.Usage) {
		u := st.Usage[name]
		out = append(out, ModelUsage{Name: name, InputTokens: u.InputTokens, CachedTokens: u.CacheReadTokens, OutputTokens: u.OutputTokens, ReasoningTokens: u.ReasoningTokens})
	}
	return out
}
