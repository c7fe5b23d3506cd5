package loop

import (
	"errors"
	"maps"
	"slices"

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
	model  llm.Model
	tools  *Toolset
	opts   Options
	output *outputCheck // from opts.OutputSchema; nil without one
	hooks  *hookSet     // from opts.Hooks; nil without any
}

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
	a.opts.setDefaults()
	a.output = newOutputCheck(a.opts.OutputSchema)
	return a
}

// Tools returns the agent's toolset.
func (a *Agent) Tools() *Toolset { return a.tools }
