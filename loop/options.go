package loop

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/hrns-dev/hrns/llm"
)

// An Option configures an agent made by [New]. There are two, so that
// [Options] stays the one place where an agent is configured: [WithOptions]
// and [WithToolsets].
type Option func(*newConfig)

// newConfig collects the options of New.
type newConfig struct {
	opts     *Options
	toolsets []*Toolset
}

// WithOptions configures the agent with opts, as [NewAgent] does; a nil
// opts means the defaults. Given twice, the last one wins.
func WithOptions(opts *Options) Option {
	return func(c *newConfig) { c.opts = opts }
}

// WithToolsets adds the tools of sets after those of New's map, in order:
// built-in tools (package tools), skills, MCP servers. A name wired twice
// panics in New, like an invalid tool; to handle the error instead, build
// the toolset with [Join] and use [NewAgent]. Nil sets are skipped.
func WithToolsets(sets ...*Toolset) Option {
	return func(c *newConfig) { c.toolsets = append(c.toolsets, sets...) }
}

// Options configure an [Agent]. The zero value of each field picks the
// documented default. In the source, the fields are grouped by the file
// that reads them, starting with what each model request carries
// (request.go).
type Options struct {
	// Model names the model in requests; empty lets the provider choose.
	Model string
	// MaxTokens caps the output tokens of each model response; 0 leaves
	// it to the provider.
	MaxTokens int
	// Temperature, when non-nil, sets the sampling temperature.
	Temperature *float64

	// TopP, when non-nil, sets nucleus sampling.
	TopP *float64
	// Seed, when non-nil, asks for reproducible sampling where the
	// provider supports it (OpenAI).
	Seed *int64
	// StopSequences end a response when the model writes one.
	StopSequences []string
	// ParallelToolCalls, when non-nil, says whether the model may call
	// several tools in one message; nil leaves the provider's default.
	// Independent of MaxParallel, which bounds how many run at once.
	ParallelToolCalls *bool
	// ToolChoice constrains tool use in the first request of a run (not
	// of a resumed one), say to force a lookup before anything else; the
	// zero value lets the model decide. Later requests always let it
	// decide: a choice forced on every turn would never end.
	ToolChoice llm.ToolChoice
	// Reasoning, when non-nil, sets how much the model thinks: an effort
	// level, a thinking budget, or both (each provider uses what it has;
	// see [llm.ReasoningConfig]).
	Reasoning *llm.ReasoningConfig
	// Cache, when non-nil, hints how requests use the provider's prompt
	// cache (see [llm.CacheHint]).
	Cache *llm.CacheHint
	// Extra holds provider-specific body fields, sent as they are; a
	// field the provider sets itself is refused and fails the request
	// (see [llm.Request.Extra]).
	Extra map[string]json.RawMessage

	// The final answer (answer.go, output.go).

	// OutputSchema, when set, requires the final answer to be JSON
	// matching it (see [OutputSchema]); Result.Answer is then that JSON.
	// Nil accepts any answer. [RunTyped] sets it from a Go type.
	OutputSchema *OutputSchema
	// MaxOutputRetries bounds how many times an answer that does not
	// match OutputSchema is sent back to the model with the validation
	// error before the run fails with an [*OutputError]; 0 means 2,
	// negative means none.
	MaxOutputRetries int

	// The budgets, and the last turn's instruction (instructions.go).

	// MaxTurns bounds the model requests of a run; 0 means 50. The last
	// allowed turn asks the model for a final answer without tools.
	MaxTurns int
	// MaxDuration bounds a run's wall time, checked before each turn;
	// once spent, the next turn asks for a final answer without tools.
	// 0 means no bound. Use the context's deadline for a hard stop. The
	// time adds up across [Agent.Resume] (see [Suspension.Elapsed]); the
	// time spent suspended does not count.
	MaxDuration time.Duration
	// MaxOutputTokens bounds the output tokens summed over a run; once
	// spent, the next turn asks for a final answer without tools. 0
	// means no bound.
	MaxOutputTokens int64
	// FinalAnswerPrompt is the user message that asks for a final answer
	// when a budget is spent; empty means a built-in one. It is sent as
	// written, except that each "{budget}" in it is replaced by the name
	// of the budget that was spent (see [Result.Budget]).
	FinalAnswerPrompt string

	// Running the calls (exec.go).

	// ToolTimeout bounds each tool call unless the tool sets its own
	// Timeout; 0 means 5 minutes.
	ToolTimeout time.Duration
	// MaxParallel bounds the calls of one message running at once; 0
	// means 8. Only tools marked Concurrent run in parallel.
	MaxParallel int
	// MaxToolOutput bounds the text of a tool result in bytes; a longer
	// one keeps its head and tail and says how much was elided. 0 means
	// 64 KiB; negative means no bound.
	MaxToolOutput int

	// Each call's permission (authorize.go, approval.go, permission.go)
	// and the hooks (hooks.go).

	// Approver decides calls of tools that require approval. With none,
	// such calls are refused and the model is told why.
	Approver Approver
	// ApprovalTimeout is the approval deadline; 0 means 5 minutes.
	ApprovalTimeout time.Duration
	// Permissions is the permission policy of every call: a mode, deny
	// and allow rules (see [Permissions] for the evaluation order). Nil
	// means the default mode without rules: tools that require
	// approval ask the Approver, others run.
	Permissions *Permissions
	// Hooks are functions called at points of every run: before and
	// after tool calls, on the user's prompt, when the model would stop,
	// before compaction, at the start and end of a run (see [Hook]).
	Hooks []Hook

	// Sending each request (send.go).

	// Retry configures retries of failed model requests.
	Retry RetryPolicy

	// Compaction (compact.go).

	// Compaction, when non-nil, compacts the transcript of long runs so
	// that they fit the model's context window, and makes a provider's
	// context length error ([llm.ErrContextLength]) compact and retry
	// instead of failing the run. Nil means no compaction. See
	// [Compaction].
	Compaction *Compaction

	// Around the turns: logs, BeforeTurn (instructions.go), the observer
	// (observe.go).

	// Logger receives debug logs of the run; nil discards them.
	Logger *slog.Logger
	// BeforeTurn, when non-nil, is called before each model request of
	// a run (the first included), on the run's goroutine, with the turn
	// it is about to make. Returning false stops the run there, between
	// two turns: it ends with [StatusYielded] and a [Suspension] without
	// calls that [Agent.Resume] continues (its ResumeInput.Messages are
	// appended before the next turn). A caller uses it to let outside
	// input in between steps: a durable runtime yields, applies the
	// input, and resumes from its checkpoint. Agents run by [AgentTool]
	// do not inherit it. Nil costs one nil check per turn.
	BeforeTurn func(ctx context.Context, next NextTurn) bool
	// Observer, when non-nil, watches the agent's runs: their model
	// requests, tool calls, retries and compactions (see [Observer];
	// package github.com/hrns-dev/hrns/otel traces them). Agents run by
	// [AgentTool] without their own observer use their parent's.
	Observer Observer
}

// RetryPolicy configures retries of model requests that fail with a
// transient error (see [llm.IsRetryable]): exponential backoff with jitter,
// or the provider's Retry-After when it gives one.
type RetryPolicy struct {
	// MaxAttempts bounds the attempts of one request, the first one
	// included; 0 means 5, 1 disables retries.
	MaxAttempts int
	// BaseDelay is the backoff before the second attempt, doubled after
	// each failure; 0 means 500ms.
	BaseDelay time.Duration
	// MaxDelay caps the backoff; 0 means 30s.
	MaxDelay time.Duration
	// MaxRetryAfter is the longest Retry-After the loop waits for; a
	// provider asking for more fails the run at once. 0 means 2 minutes.
	MaxRetryAfter time.Duration
}

const defaultFinalAnswerPrompt = "You have reached the limit of this run ({budget}). Do not call any more tools. " +
	"Give your final answer now, based on what you have found so far."

// setDefaults sets the documented defaults of the fields left at zero.
func (o *Options) setDefaults() {
	if o.MaxTurns <= 0 {
		o.MaxTurns = 50
	}
	if o.ToolTimeout <= 0 {
		o.ToolTimeout = 5 * time.Minute
	}
	if o.MaxParallel <= 0 {
		o.MaxParallel = 8
	}
	if o.MaxToolOutput == 0 {
		o.MaxToolOutput = 64 << 10
	}
	if o.ApprovalTimeout <= 0 {
		o.ApprovalTimeout = 5 * time.Minute
	}
	if o.FinalAnswerPrompt == "" {
		o.FinalAnswerPrompt = defaultFinalAnswerPrompt
	}
	r := &o.Retry
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = 5
	}
	if r.BaseDelay <= 0 {
		r.BaseDelay = 500 * time.Millisecond
	}
	if r.MaxDelay <= 0 {
		r.MaxDelay = 30 * time.Second
	}
	if r.MaxRetryAfter <= 0 {
		r.MaxRetryAfter = 2 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Compaction != nil {
		c := *o.Compaction
		c.setDefaults()
		o.Compaction = &c
	}
}
