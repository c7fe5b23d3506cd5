package loop

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/hrns-dev/hrns/llm"
)

// Errors that end a run. The [Result] of a failed run holds one of them, or
// the provider's error (an *llm.APIError, for example), or the context's.
var (
	// ErrRetriesExhausted: the model kept failing with transient errors.
	// It wraps the last one.
	ErrRetriesExhausted = errors.New("model request retries exhausted")
	// ErrCancelled: an Approver cancelled the run.
	ErrCancelled = errors.New("run cancelled by approver")
	// ErrUnknownCall: Resume was given a result or decision for a call
	// that the suspension does not hold.
	ErrUnknownCall = errors.New("unknown tool call id")
	// ErrNoAnswer: a budget was spent and the model, asked for a final
	// answer without tools, gave none (it called tools anyway, which were
	// dropped, or wrote nothing). The run fails; Result.Budget names the
	// budget and Result.Messages holds the transcript.
	ErrNoAnswer = errors.New("no final answer")
)

// An Agent runs a model with tools until the job is done. It holds no state
// between runs and is safe for concurrent use: each call of [Agent.RunLoop]
// is an independent run.
type Agent struct {
	model llm.Model
	tools *Toolset
	opts  Options
	out   *outputCheck // from opts.OutputSchema; nil without one
	hooks *hookSet     // from opts.Hooks; nil without any
}

// Options configure an [Agent]. The zero value of each field picks the
// documented default.
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

	// OutputSchema, when set, requires the final answer to be JSON
	// matching it (see [OutputSchema]); Result.Answer is then that JSON.
	// Nil accepts any answer. [RunTyped] sets it from a Go type.
	OutputSchema *OutputSchema
	// MaxOutputRetries bounds how many times an answer that does not
	// match OutputSchema is sent back to the model with the validation
	// error before the run fails with an [*OutputError]; 0 means 2,
	// negative means none.
	MaxOutputRetries int

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

	// Retry configures retries of failed model requests.
	Retry RetryPolicy

	// Compaction, when non-nil, compacts the transcript of long runs so
	// that they fit the model's context window, and makes a provider's
	// context length error ([llm.ErrContextLength]) compact and retry
	// instead of failing the run. Nil means no compaction. See
	// [Compaction].
	Compaction *Compaction

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

// New returns an agent that runs model with the tools of m, each exposed
// under its key, offered in the order of the sorted names, then the tools of
// the toolsets given by [WithToolsets]. [WithOptions] configures it as
// [NewAgent]'s opts do; without it the defaults apply. A nil m means no
// tools of its own. New panics if a tool is nil or declares invalid
// arguments, or if a name is wired twice: programming errors.
//
//	agent := loop.New(client, tools,
//		loop.WithToolsets(files),
//		loop.WithOptions(&loop.Options{MaxTurns: 10, Approver: approver}))
func New(model llm.Model, m map[string]Tool, opts ...Option) *Agent {
	ts, err := ToolsetFromMap(m)
	if err != nil {
		panic("loop.New: " + err.Error())
	}
	var c newConfig
	for _, o := range opts {
		o(&c)
	}
	if len(c.toolsets) > 0 {
		if ts, err = Join(append([]*Toolset{ts}, c.toolsets...)...); err != nil {
			panic("loop.New: " + err.Error())
		}
	}
	return NewAgent(model, ts, c.opts)
}

// NewAgent returns an agent that runs model with tools. A nil tools means no
// tools; a nil opts means the defaults.
func NewAgent(model llm.Model, tools *Toolset, opts *Options) *Agent {
	if model == nil {
		panic("loop.NewAgent: nil model")
	}
	a := &Agent{model: model, tools: tools}
	if opts != nil {
		a.opts = *opts
	}
	a.opts.StopSequences = slices.Clone(a.opts.StopSequences)
	a.opts.Extra = maps.Clone(a.opts.Extra)
	a.opts.Hooks = slices.Clone(a.opts.Hooks)
	a.hooks = newHookSet(a.opts.Hooks)
	a.opts.fill()
	a.out = newOutputCheck(a.opts.OutputSchema)
	return a
}

// fill sets the documented defaults of the fields left at zero.
func (o *Options) fill() {
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
		c.fill()
		o.Compaction = &c
	}
}

// Tools returns the agent's toolset.
func (a *Agent) Tools() *Toolset { return a.tools }
