package loop

import (
	"github.com/hrns-dev/hrns/llm"
)

// Step 3 of a turn (see run.runTurns): the model request. The request fields
// of Options (Model to Extra, ToolChoice on the first turn) and the
// output schema become the request here.

// buildRequest builds the model request of the turn from the agent's
// Options and the transcript as it stands after compaction; final says a
// budget is spent and the model must answer without tools.
func (r *run) buildRequest(final bool) *llm.Request {
	o := &r.agent.opts
	req := &llm.Request{
		Model:             o.Model,
		Messages:          r.transcript,
		Tools:             r.agent.tools.Specs(),
		MaxTokens:         o.MaxTokens,
		Temperature:       o.Temperature,
		TopP:              o.TopP,
		Seed:              o.Seed,
		StopSequences:     o.StopSequences,
		ParallelToolCalls: o.ParallelToolCalls,
		Reasoning:         o.Reasoning,
		Cache:             o.Cache,
		Extra:             o.Extra,
		Conversation:      &r.conversation,
	}
	if r.turn == 1 {
		req.ToolChoice = o.ToolChoice
	}
	if final && len(req.Tools) > 0 {
		// Tools stay declared (some providers require it when the
		// transcript holds tool calls) but may not be called.
		req.ToolChoice = llm.ToolChoice{Mode: llm.ToolChoiceNone}
	}
	if r.agent.output != nil {
		req.ResponseFormat = r.agent.output.format
	}
	return req
}
