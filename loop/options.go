package loop

import (
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

// request builds the model request of the next turn; final says a budget
// is spent and the model must answer without tools.
func (r *run) request(final bool) *llm.Request {
	o := &r.a.opts
	req := &llm.Request{
		Model:             o.Model,
		Messages:          r.msgs,
		Tools:             r.a.tools.Specs(),
		MaxTokens:         o.MaxTokens,
		Temperature:       o.Temperature,
		TopP:              o.TopP,
		Seed:              o.Seed,
		StopSequences:     o.StopSequences,
		ParallelToolCalls: o.ParallelToolCalls,
		Reasoning:         o.Reasoning,
		Cache:             o.Cache,
		Extra:             o.Extra,
		Conversation:      &r.conv,
	}
	if r.turn == 1 {
		req.ToolChoice = o.ToolChoice
	}
	if final && len(req.Tools) > 0 {
		// Tools stay declared (some providers require it when the
		// transcript holds tool calls) but may not be called.
		req.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceNone}
	}
	if r.a.out != nil {
		req.ResponseFormat = r.a.out.format
	}
	return req
}
