// Package api holds the wire types of hrns serve's sessions API
// (/api/v2): the bodies the server takes and returns, the session states,
// the events and their data, the registries' entries. It is the contract
// between the runtime (package session), the HTTP server (package server)
// and the Go SDK (package client), and imports nothing of hrns: a client
// of the API does not link the runtime.
//
// The names follow the reference API's schemas (SessionRequest, Session,
// SessionStatus, Changes...), and docs/sessions-api.md says what each
// operation takes and returns.
package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"time"
)

// Status is a session's lifecycle state, as the API names it.
type Status string

// The session states. A session is created pending, runs, may wait for
// tool results, approvals or messages, and ends in one of the last four.
const (
	// StatusQueued: created above the owner's concurrent-session limit
	// (hrns serve's --max-sessions-per-key); it starts when a slot frees.
	StatusQueued  Status = "queued"
	StatusPending Status = "pending" // created, not started yet
	StatusRunning Status = "running" // a worker runs the agent
	StatusPaused  Status = "paused"  // paused by the caller
	// StatusIdle: the agent answered and waits for a follow-up message
	// (only with idle_timeout_s).
	StatusIdle Status = "idle"
	// StatusAwaitingToolResults: calls of client-side tools (or calls
	// waiting for approval) must be answered before the agent goes on.
	StatusAwaitingToolResults Status = "awaiting_tool_results"
	StatusCompleted           Status = "completed"   // the agent answered
	StatusFailed              Status = "failed"      // an error ended the session
	StatusTimedOut            Status = "timed_out"   // max_time_s was reached
	StatusInterrupted         Status = "interrupted" // cancelled by the caller
)

// Terminal reports whether s is a final state.
func (s Status) Terminal() bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusTimedOut, StatusInterrupted:
		return true
	}
	return false
}

// Error codes of failed and timed-out sessions.
const (
	CodeTimeout  = "timeout"
	CodeInternal = "internal"
	CodeNoAnswer = "no_answer"
	// CodeAnswerValidation: the final answer never matched the agent's
	// answer_format.
	CodeAnswerValidation = "answer_validation"
)

// A Request is the body of POST /api/v2/sessions (the reference's
// SessionRequest). A session's request is stored and shown as hrns
// understood it: normalised (see session.Manager.Create) so that it is a valid
// SessionRequest even when the body left out what hrns defaults.
type Request struct {
	// Agent is a named agent of the server, or an inline definition.
	Agent AgentRef `json:"agent"`
	// Messages is the initial task: a string, one message or a list.
	// None means a session that waits, idle, for its first message.
	Messages Messages `json:"messages,omitempty"`
	// MaxSteps bounds the model requests; nil means the server's limit.
	MaxSteps *int `json:"max_steps,omitempty"`
	// MaxTimeS bounds the session's wall time in seconds, waits
	// included, from when it starts; nil means no bound.
	MaxTimeS *float64 `json:"max_time_s,omitempty"`
	// IdleTimeoutS keeps the session open this long for follow-up
	// messages after each answer; nil ends it at the first answer.
	IdleTimeoutS *int `json:"idle_timeout_s,omitempty"`
	// DeleteAfterMin and DeleteScreenshotAfterMin are recorded, not
	// honoured: hrns keeps sessions until their store is cleaned.
	DeleteAfterMin           *int `json:"delete_after_min,omitempty"`
	DeleteScreenshotAfterMin *int `json:"delete_screenshot_after_min,omitempty"`
	// Queue, when the owner is at its concurrent-session limit, accepts
	// the session as queued (the default); false refuses it (429).
	Queue *bool `json:"queue,omitempty"`
	// GroupID groups related sessions (the list filter group_id).
	GroupID *string `json:"group_id,omitempty"`
	// ParentSessionID names the parent of a child run (the list filter
	// parent_session_id).
	ParentSessionID *string `json:"parent_session_id,omitempty"`
	// Overrides change the resolved request by dotted path (see
	// docs/sessions-api.md for the paths hrns supports).
	Overrides map[string]json.RawMessage `json:"overrides,omitempty"`
}

// AgentRef is a named agent (Name) or an inline definition (Inline).
type AgentRef struct {
	Name   string
	Inline *Agent
}

// UnmarshalJSON reads a string or an object.
func (a *AgentRef) UnmarshalJSON(b []byte) error {
	*a = AgentRef{}
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &a.Name)
	}
	if string(b) == "null" {
		return nil
	}
	a.Inline = new(Agent)
	return json.Unmarshal(b, a.Inline)
}

// MarshalJSON writes a string or an object.
func (a AgentRef) MarshalJSON() ([]byte, error) {
	if a.Inline != nil {
		return json.Marshal(a.Inline)
	}
	if a.Name == "" {
		return []byte("null"), nil
	}
	return json.Marshal(a.Name)
}

// An Agent is an inline agent definition.
type Agent struct {
	Name         string `json:"name"`
	Description  string `json:"description,omitempty"`
	Instructions string `json:"instructions,omitempty"`
	Model        string `json:"model,omitempty"`
	// ReasoningEffort is how much the model thinks before each step:
	// "disabled", "low", "medium", "high" or "xhigh" (see
	// [ReasoningEfforts]); nil leaves it to the model. A model without a
	// reasoning setting takes only "disabled".
	ReasoningEffort *string `json:"reasoning_effort,omitempty"`
	// Environments are the environments the agent works in: an
	// environment's id (a string) or an inline definition with a kind.
	Environments []Environment `json:"environments"`
	// Tools are client-side tools: the caller runs them.
	Tools []ToolDefinition `json:"tools,omitempty"`
	// Subagents are agents this one delegates to: each runs as a child
	// session (see docs/sessions-api.md).
	Subagents []AgentRef `json:"subagents,omitempty"`
	// Skills are skills the agent can load: a name the server knows, or
	// an inline skill.
	Skills []SkillRef `json:"skills,omitempty"`
	// AnswerFormat is a JSON Schema (of an object) the final answer must
	// match; nil means a text answer.
	AnswerFormat json.RawMessage `json:"answer_format,omitempty"`
}

// ReasoningEfforts are the values of an agent's reasoning_effort, least
// first: the API's ("disabled", "low", "medium", "xhigh") and "high",
// which hrns also takes.
var ReasoningEfforts = []string{"disabled", "low", "medium", "high", "xhigh"}

// A SkillRef is a skill named by the server (Name) or inline (Inline).
type SkillRef struct {
	Name   string
	Inline *Skill
}

// UnmarshalJSON reads a string or an object.
func (r *SkillRef) UnmarshalJSON(b []byte) error {
	*r = SkillRef{}
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		return json.Unmarshal(b, &r.Name)
	}
	r.Inline = new(Skill)
	return json.Unmarshal(b, r.Inline)
}

// MarshalJSON writes a string or an object.
func (r SkillRef) MarshalJSON() ([]byte, error) {
	if r.Inline != nil {
		return json.Marshal(r.Inline)
	}
	return json.Marshal(r.Name)
}

// A Skill is an inline skill: instructions the agent loads when it
// decides to use them.
type Skill struct {
	Name        string  `json:"name"`
	Description string  `json:"description"`
	Body        string  `json:"body"`
	Source      *string `json:"source,omitempty"`
	URLPattern  *string `json:"url_pattern,omitempty"`
}

// An Environment is one environment of an agent: a registered
// environment's id (ID set, Fields nil), or an inline definition whose
// fields are kept as given (Fields), with its Kind.
type Environment struct {
	// Kind is "web" or "desktop" for an inline definition.
	Kind string
	// ID is the environment's id: the string form, or the inline
	// definition's "id" field.
	ID string
	// Fields are the inline definition's fields, as given.
	Fields map[string]json.RawMessage
}

// UnmarshalJSON reads an id as a string, or an object with a kind.
func (e *Environment) UnmarshalJSON(b []byte) error {
	*e = Environment{}
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte(`"`)) {
		return json.Unmarshal(b, &e.ID)
	}
	if err := json.Unmarshal(b, &e.Fields); err != nil {
		return err
	}
	if e.Fields == nil {
		return errors.New("an environment must be an id or an object")
	}
	var obj struct {
		Kind string `json:"kind"`
		ID   string `json:"id"`
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return err
	}
	e.Kind, e.ID = obj.Kind, obj.ID
	return nil
}

// MarshalJSON writes the id, or the inline definition.
func (e Environment) MarshalJSON() ([]byte, error) {
	if e.Fields == nil {
		if e.Kind != "" && e.ID == "" {
			return json.Marshal(map[string]string{"kind": e.Kind, "id": e.Kind})
		}
		return json.Marshal(e.ID)
	}
	return json.Marshal(e.Fields)
}

// Set sets an inline environment's field to v.
func (e *Environment) Set(field string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	if e.Fields == nil {
		e.Fields = map[string]json.RawMessage{}
	}
	e.Fields[field] = b
}

// A ToolDefinition declares a client-side tool.
type ToolDefinition struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// A UserMessage is a message from the caller to the agent.
type UserMessage struct {
	Type    string `json:"type,omitempty"` // "user_message"
	Message string `json:"message"`
	// Images are base64 data URIs ("data:image/png;base64,...").
	Images []string `json:"images,omitempty"`
	// Files are files attached to the message (at most 10 a message,
	// 7 MB in all a request): saved in the session's workspace, under
	// files/, and shown to the model (see docs/sessions-api.md).
	Files    []FileContent `json:"files,omitempty"`
	CallerID string        `json:"caller_id,omitempty"`
}

// FileContent is a file attached to a user message: sent as base64
// (Type "base64", Source the standard padded encoding) or named by a URL
// the server fetches (Type "url", Source the URL); a stored request shows
// each file as Type "url" with the URL that downloads the saved file.
type FileContent struct {
	Type   string `json:"type,omitempty"`
	Source string `json:"source"`
	// Name is the file's name, without a directory.
	Name string `json:"name"`
	// MediaType is its MIME type; guessed from the name or the bytes
	// when empty.
	MediaType string `json:"media_type,omitempty"`
	// SizeBytes is the file's size; the server sets it, and refuses a
	// request whose size differs from the file's.
	SizeBytes *int64 `json:"size_bytes,omitempty"`
}

// AttachmentData is the data of an AttachmentEvent: a file passed
// between the caller and the agent's environment.
type AttachmentData struct {
	// Origin is "user" for a file attached to a message, "agent" for one
	// the agent produced.
	Origin string `json:"origin"`
	Name   string `json:"name"`
	// Path is where the file is, relative to the session's workspace
	// ("files/report.pdf").
	Path      string `json:"path"`
	MediaType string `json:"media_type"`
	SizeBytes int64  `json:"size_bytes"`
	// URL downloads it with the session's API key: the resources
	// operation of the session's files, an absolute URL from the
	// server's public address, or a path from its root without one.
	URL string `json:"url"`
}

// Messages is a list of user messages that reads from JSON as a string,
// one message object, a list of them, or null.
type Messages []UserMessage

// UnmarshalJSON implements the forms above.
func (m *Messages) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case string(b) == "null":
		*m = nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*m = Messages{{Type: "user_message", Message: s}}
	case len(b) > 0 && b[0] == '{':
		var one UserMessage
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*m = Messages{one}
	case len(b) > 0 && b[0] == '[':
		var list []UserMessage
		if err := json.Unmarshal(b, &list); err != nil {
			return err
		}
		*m = list
	default:
		return errors.New("messages must be a string, a message or a list of messages")
	}
	return nil
}

// A ToolRequest is a tool call as the API shows it.
type ToolRequest struct {
	ToolName string          `json:"tool_name"`
	Args     json.RawMessage `json:"args"`
	ID       string          `json:"id"`
	// Reason, on a pending approval only, is why a person must decide
	// the call, as its tool says (a provider's safety check, typing into
	// a password field, with what the page says of the field): an hrns
	// addition.
	Reason string `json:"reason,omitempty"`
}

// A ToolResult answers a pending call: a tool_result (Result) or an
// error_event (Error, Origin).
type ToolResult struct {
	Kind    string          `json:"kind"` // "tool_result" or "error_event"
	ToolReq ToolRequest     `json:"tool_req"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   string          `json:"error,omitempty"`
	Origin  string          `json:"origin,omitempty"`
}

// A Decision approves or rejects a call waiting for approval (the hrns
// extension POST /api/v2/sessions/{id}/approvals).
type Decision struct {
	ID       string `json:"id"`
	Approved bool   `json:"approved"`
	// Reason is shown to the model when the call is rejected.
	Reason string `json:"reason,omitempty"`
}

// An Event is one entry of a session's log, as the API shows it.
type Event struct {
	// Index is the event's position in the log (an hrns addition: the
	// cursor after it is Index+1).
	Index     int64           `json:"index"`
	Type      string          `json:"type"`
	Data      json.RawMessage `json:"data"`
	Timestamp time.Time       `json:"timestamp"`
}

// Event types.
const (
	EventAgentStarted    = "AgentStartedEvent"
	EventAgentCompletion = "AgentCompletionEvent"
	EventAgentError      = "AgentErrorEvent"
	EventRunStatusChange = "AgentRunStatusChangeEvent"
	EventActiveState     = "ActiveStateChangeEvent"
	EventMetricsUpdate   = "MetricsUpdateEvent"
	EventAgent           = "AgentEvent"
	// EventContextCompacted (an hrns addition) says that the session's
	// transcript was compacted to fit the model's context window; its
	// data is a [ContextCompacted].
	EventContextCompacted = "ContextCompactedEvent"
	// EventAttachment reports a file given with a message or produced
	// by the agent (data: [AttachmentData]).
	EventAttachment = "AttachmentEvent"
)

// ContextCompacted is the data of a ContextCompactedEvent: why the
// transcript was compacted, how, and from what to what. Token counts are
// estimates of the transcript's input tokens.
type ContextCompacted struct {
	// Reason is "context_window" (the next request would have passed the
	// threshold of the window) or "context_length" (the provider refused
	// a request as too long; it was sent again compacted).
	Reason string `json:"reason"`
	// Strategy is what was done: "trim" (old tool results replaced by a
	// stub), "summarize" (old turns replaced by a summary the model
	// wrote), or "trim+summarize".
	Strategy       string `json:"strategy"`
	TokensBefore   int    `json:"tokens_before"`
	TokensAfter    int    `json:"tokens_after"`
	MessagesBefore int    `json:"messages_before"`
	MessagesAfter  int    `json:"messages_after"`
	// Window is the model's context window in tokens, 0 when unknown.
	Window int `json:"window,omitempty"`
	// Trimmed counts the tool results dropped; Summarized the messages
	// replaced by a summary.
	Trimmed    int `json:"trimmed,omitempty"`
	Summarized int `json:"summarized,omitempty"`
}

// Kinds of AgentEvent data.
const (
	KindPolicy     = "policy_event"
	KindToolResult = "tool_result"
	KindAnswer     = "answer_event"
	KindError      = "error_event"
	KindMessage    = "message_event"
	KindFlow       = "flow_event"
	// KindObservation carries what a tool showed the agent beside its
	// text: a screenshot (an hrns tool_result is text only).
	KindObservation = "observation_event"
)

// ActiveState is the data of an ActiveStateChangeEvent.
type ActiveState struct {
	// State is "running", "idle" or "awaiting_tool_results".
	State string `json:"state"`
	// PendingToolCalls are the client-side calls still without a result.
	PendingToolCalls []ToolRequest `json:"pending_tool_calls"`
	// PendingApprovals are the calls still waiting for a decision (an
	// hrns addition).
	PendingApprovals []ToolRequest `json:"pending_approvals,omitempty"`
}

// AgentEventData is the data of an AgentEvent; Kind says which fields are
// set.
type AgentEventData struct {
	Kind string `json:"kind"`
	// policy_event
	ReasoningContent *string       `json:"reasoning_content,omitempty"`
	Content          *string       `json:"content,omitempty"`
	ToolReqs         []ToolRequest `json:"tool_reqs,omitempty"`
	ValidationErrors []string      `json:"validation_errors,omitempty"`
	// tool_result, error_event (and flow_event for approvals)
	ToolReq *ToolRequest    `json:"tool_req,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	// answer_event
	Answer  json.RawMessage `json:"answer,omitempty"`
	Outcome *string         `json:"outcome,omitempty"`
	// error_event
	Error  string `json:"error,omitempty"`
	Origin string `json:"origin,omitempty"`
	// message_event
	CallerID       string `json:"caller_id,omitempty"`
	MessageContent []any  `json:"-"`
	// flow_event
	Flow string `json:"flow,omitempty"`
	// observation_event: the environment ("web" for the browser tools,
	// "desktop" for the computer tool),
	// and the image, after the tool_result event of the call (ToolReq)
	// that returned it.
	ObservationType string        `json:"type,omitempty"`
	Image           *ImageContent `json:"image,omitempty"`
}

// ImageContent is an image in an event: inline, base64 (Type "base64").
type ImageContent struct {
	Source    string `json:"source"`
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
}

// MarshalJSON writes message_event content under "content".
func (d AgentEventData) MarshalJSON() ([]byte, error) {
	type plain AgentEventData
	if d.Kind != KindMessage {
		return json.Marshal(plain(d))
	}
	return json.Marshal(struct {
		plain
		Content []any `json:"content"`
	}{plain(d), d.MessageContent})
}

// UnmarshalJSON reads message_event content from "content".
func (d *AgentEventData) UnmarshalJSON(b []byte) error {
	type plain AgentEventData
	var raw struct {
		plain
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*d = AgentEventData(raw.plain)
	if len(raw.Content) == 0 || string(raw.Content) == "null" {
		return nil
	}
	if d.Kind == KindMessage {
		return json.Unmarshal(raw.Content, &d.MessageContent)
	}
	var s string
	if err := json.Unmarshal(raw.Content, &s); err != nil {
		return err
	}
	d.Content = &s
	return nil
}

// Metrics roll up a session's usage.
type Metrics struct {
	Steps        int         `json:"steps"`
	CostPerModel []ModelCost `json:"cost_per_model"`
	// Costs are in US dollars, at the prices the server was given
	// (session.Options.Prices); they are null when a model used is not
	// priced. ReasoningCost is the part of OutputCost spent on
	// reasoning; TotalCost is InputCost plus OutputCost.
	InputCost     *float64 `json:"input_cost"`
	OutputCost    *float64 `json:"output_cost"`
	ReasoningCost *float64 `json:"reasoning_cost"`
	TotalCost     *float64 `json:"total_cost"`
}

// ModelCost is one model's usage and its costs, null when the model is
// not priced (see [Metrics]).
type ModelCost struct {
	ModelUsage
	InputCost     *float64 `json:"input_cost"`
	OutputCost    *float64 `json:"output_cost"`
	ReasoningCost *float64 `json:"reasoning_cost"`
	TotalCost     *float64 `json:"total_cost"`
}

// ModelUsage is one model's token usage.
type ModelUsage struct {
	Name string `json:"name"`
	// InputTokens counts all input tokens, CachedTokens among them.
	InputTokens int64 `json:"input_tokens"`
	// CachedTokens counts the input tokens served from the provider's
	// prompt cache, which cost less (the costs of [ModelCost] price them
	// at the cached input price).
	CachedTokens    int64 `json:"cached_tokens"`
	OutputTokens    int64 `json:"output_tokens"`
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// StatusView is the body of GET /api/v2/sessions/{id}/status.
type StatusView struct {
	Status             Status       `json:"status"`
	Error              *string      `json:"error"`
	ErrorCode          *string      `json:"error_code"`
	Outcome            *string      `json:"outcome"`
	Steps              int          `json:"steps"`
	UsagePerModel      []ModelUsage `json:"usage_per_model"`
	SubagentSessionIDs []string     `json:"subagent_session_ids"`
}

// View is a session as GET /api/v2/sessions/{id} shows it.
type View struct {
	ID string `json:"id"`
	// Request is the request as hrns understood it (normalised).
	Request      json.RawMessage `json:"request"`
	Status       StatusView      `json:"status"`
	AgentViewURL *string         `json:"agent_view_url"`
	LatestAnswer json.RawMessage `json:"latest_answer"`
	CreatedAt    time.Time       `json:"created_at"`
	StartedAt    *time.Time      `json:"started_at"`
	FinishedAt   *time.Time      `json:"finished_at"`
	// Lease names the replica that drives the session, while one does
	// (for operators). It is not part of the body: the reference's
	// Session allows no other field, so the server sends it in the
	// Hrns-Lease header.
	Lease *Lease `json:"-"`
	// NotHonoured lists, as dotted paths, the fields of the request that
	// hrns accepted and keeps but does not act on (set by
	// session.Manager.Create; the server sends it in the Hrns-Not-Honoured
	// header).
	NotHonoured []string `json:"-"`
}

// A Lease is a replica's hold on a session: that replica alone runs it
// until Until, and renews the lease while it does. A lease whose Until
// has passed belongs to a replica that stopped renewing it (it died or
// lost the database): another replica takes the session over and goes on
// from its last checkpoint.
type Lease struct {
	Replica string    `json:"replica"`
	Until   time.Time `json:"until"`
}

// A Replica is one server process sharing the store, as GET
// /api/v2/replicas shows it (an hrns addition).
type Replica struct {
	// ID is the replica's name in leases (session.Options.ReplicaID).
	ID string `json:"id"`
	// Host and PID say where it runs.
	Host string `json:"host,omitempty"`
	PID  int    `json:"pid,omitempty"`
	// Self marks the replica that answered.
	Self bool `json:"self"`
	// Healthy says that its last heartbeat is recent: less than its
	// lease TTL old. A replica that stopped beating died, or cannot
	// reach the database.
	Healthy    bool      `json:"healthy"`
	StartedAt  time.Time `json:"started_at"`
	LastSeenAt time.Time `json:"last_seen_at"`
	// Workers is how many sessions it runs at most at once, Running how
	// many it ran at its last heartbeat.
	Workers int `json:"workers"`
	Running int `json:"running"`
	// Leases is how many sessions it holds now; those of a replica
	// that is not healthy wait for their leases to expire, and are then
	// taken over.
	Leases int `json:"leases"`
}

// Summary is a session in a listing.
type Summary struct {
	ID             string       `json:"id"`
	Agent          *string      `json:"agent"`
	Status         Status       `json:"status"`
	AgentViewURL   *string      `json:"agent_view_url"`
	FirstMessage   *UserMessage `json:"first_message"`
	CreatedAt      time.Time    `json:"created_at"`
	StartedAt      *time.Time   `json:"started_at"`
	FinishedAt     *time.Time   `json:"finished_at"`
	LastActivityAt *time.Time   `json:"last_activity_at"`
	AnonymizedAt   *time.Time   `json:"anonymized_at"`
}

// A Page is one page of a listing.
type Page[T any] struct {
	Items []T `json:"items"`
	Total int `json:"total"`
	Page  int `json:"page"`
	// NextIndex (an hrns addition, on pages of events only) is set when
	// the page stopped early at the server's bound on the bytes one read
	// loads: the rest of the page, and the pages after it, are read with
	// from_index=NextIndex (see docs/sessions-api.md).
	NextIndex *int64 `json:"next_index,omitempty"`
}

// Changes is the body of GET /api/v2/sessions/{id}/changes.
type Changes struct {
	Status     Status          `json:"status"`
	StartedAt  *time.Time      `json:"started_at"`
	FinishedAt *time.Time      `json:"finished_at"`
	Error      *string         `json:"error"`
	ErrorCode  *string         `json:"error_code"`
	NewEvents  []Event         `json:"new_events"`
	Answer     json.RawMessage `json:"answer"`
	Outcome    *string         `json:"outcome"`
	Metrics    Metrics         `json:"metrics"`
}

// Quota is the owner's concurrent-session quota, as GET
// /api/v2/sessions/quota shows it.
type Quota struct {
	// Scope is "user": the limit applies to each API key.
	Scope string `json:"scope"`
	// Limit is [Options.MaxActiveSessions]; without a limit it is the
	// largest 32-bit integer.
	Limit     int `json:"limit"`
	Active    int `json:"active"`
	Available int `json:"available"`
}

// Feedback is a caller's judgement of a session or of one of its events
// (the reference's Feedback): whether it succeeded, and why.
type Feedback struct {
	Success bool    `json:"success"`
	Message *string `json:"message,omitempty"`
}
