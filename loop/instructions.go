package loop

import (
	"context"
	"strings"
	"time"

	"github.com/hrns-dev/hrns/llm"
)

// Step 1 of a turn (see run.runTurns): what happens before the request is
// built. The budgets (Options.MaxTurns, MaxDuration, MaxOutputTokens)
// decide whether this is the run's last turn, Options.BeforeTurn whether
// there is a turn at all, and the last turn's instruction, the
// final-answer prompt, is added to the transcript.

// beginTurn starts the next turn: it returns the budget that makes it the
// run's last one ("" for an ordinary turn), having appended the
// final-answer prompt for it. It reports false when Options.BeforeTurn
// ended the run instead (yielded: see suspend.go).
func (r *run) beginTurn(ctx context.Context) (budget string, ok bool) {
	budget = r.budgetSpent()
	if r.agent.opts.BeforeTurn != nil && !r.agent.opts.BeforeTurn(ctx, NextTurn{Turn: r.turn + 1, Budget: budget}) {
		r.yieldBetweenTurns()
		return "", false
	}
	if budget != "" {
		r.result.Budget = budget
		r.transcript = append(r.transcript, llm.UserMessage(strings.ReplaceAll(r.agent.opts.FinalAnswerPrompt, "{budget}", budget)))
	}
	r.turn++
	return budget, true
}

// budgetSpent names the budget that makes the next turn the last, or "".
func (r *run) budgetSpent() string {
	o := &r.agent.opts
	switch {
	case r.turn+1 >= o.MaxTurns:
		return "max_turns"
	case o.MaxDuration > 0 && time.Since(r.start) >= o.MaxDuration:
		return "max_duration"
	case o.MaxOutputTokens > 0 && r.result.Usage.OutputTokens >= o.MaxOutputTokens:
		return "max_output_tokens"
	}
	return ""
}

// NextTurn describes the model request a run is about to make, for
// [Options.BeforeTurn].
type NextTurn struct {
	// Turn is the number the request will have (see Chunk.Turn).
	Turn int
	// Budget names the budget that makes it the run's last turn, one
	// that asks for a final answer without tools ("max_turns",
	// "max_duration" or "max_output_tokens"; see [Result.Budget]);
	// empty for an ordinary turn.
	Budget string
}

// Final reports whether the turn asks for a final answer without tools.
func (t NextTurn) Final() bool { return t.Budget != "" }
