package loop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop/compact"
)

// Step 2 of a turn (see run.runTurns), and the one retry of step 4 after a
// context length refusal: compaction. Both triggers, compactBeforeRequest
// and compactForRetry, run the strategy through compact, which adopts its
// result; contextEstimate and noteProviderCount keep the estimate they use.

// Compaction configures context compaction: shrinking the transcript of a
// long run so that its requests fit the model's context window. See
// [Options.Compaction].
type Compaction struct {
	// ContextWindow is the budget, in tokens, of each request's input:
	// the transcript and the tool specs. Before each turn the loop
	// estimates the next request's input (the input and output tokens the
	// provider reported for the previous request, plus about one token per
	// four bytes of the messages added since; before the first response,
	// or after a compaction, the estimate alone) and compacts when it
	// exceeds Threshold of ContextWindow. 0 means no compaction before a
	// request: only a provider's context length error triggers one.
	ContextWindow int
	// Threshold is the fraction of ContextWindow past which the loop
	// compacts; 0 means 0.8. Leave room for the output tokens.
	Threshold float64
	// Target is the fraction of ContextWindow a compaction aims for; 0
	// means 0.5. After a context length error without a ContextWindow,
	// it is the fraction of the transcript's estimate.
	Target float64
	// KeepTurns is how many of the latest assistant messages, with their
	// tool results and what follows, are never compacted; 0 means 2.
	KeepTurns int
	// Strategy compacts; nil means [compact.Default] (trim old tool
	// results, then summarise old turns with the model if that was not
	// enough).
	Strategy compact.Strategy
}

// CompactionInfo describes a compaction, on a compaction chunk.
type CompactionInfo struct {
	// Reason is what triggered it: "context_window" (the estimate
	// passed the threshold) or "context_length" (the provider refused
	// the request as too long).
	Reason string `json:"reason"`
	// Strategy names what was done, as [compact.Result.Strategy] does
	// ("trim", "summarize", "trim+summarize"); empty when the strategy
	// found nothing to compact.
	Strategy string `json:"strategy"`
	// TokensBefore and TokensAfter estimate the transcript's tokens.
	TokensBefore int `json:"tokens_before"`
	TokensAfter  int `json:"tokens_after"`
	// Window is the context window compaction kept the requests within
	// ([Compaction.ContextWindow]), 0 when unknown.
	Window int `json:"window,omitempty"`
	// MessagesBefore and MessagesAfter count the transcript's messages.
	MessagesBefore int `json:"messages_before"`
	MessagesAfter  int `json:"messages_after"`
	// Trimmed counts tool results replaced by a stub; Summarized counts
	// messages replaced by a summary.
	Trimmed    int `json:"trimmed,omitempty"`
	Summarized int `json:"summarized,omitempty"`
	// Usage counts the tokens of the model requests the compaction made
	// (a summary); they are added to Result.Usage too.
	Usage *llm.Usage `json:"usage,omitempty"`
}

// Compaction reasons.
const (
	reasonContextWindow = "context_window"
	reasonContextLength = "context_length"
)

// contextEstimate returns the token estimate of the next request's input:
// the provider's count for the previous request and its answer plus an
// estimate of the messages added since, or the estimate of the whole
// request (messages and tool specs) if that is larger or there is no count
// that still describes the transcript. The larger of the two: the count is
// exact for what the provider counted, and the estimate guards against
// servers that report partial usage, or none.
func (r *run) contextEstimate() int {
	n := compact.Estimate(r.transcript)
	for _, t := range r.agent.tools.Specs() {
		n += (len(t.Name) + len(t.Description) + len(t.InputSchema) + 3) / 4
	}
	if r.countedMessages > 0 && r.countedMessages <= len(r.transcript) {
		n = max(n, int(r.countedTokens)+compact.Estimate(r.transcript[r.countedMessages:]))
	}
	return n
}

// noteProviderCount records the provider's count for the request just
// answered, whose answer is about to be appended to the transcript.
func (r *run) noteProviderCount(u llm.Usage) {
	if u.InputTokens <= 0 {
		r.countedMessages = 0
		return
	}
	r.countedTokens = u.InputTokens + u.OutputTokens
	r.countedMessages = len(r.transcript) + 1
}

// compactBeforeRequest, step 2 of a turn, compacts the transcript when the
// next request is estimated past the threshold. A compaction that fails is logged and the
// request goes as it is: it may still fit, and if it does not the
// provider's error gets its own compaction.
func (r *run) compactBeforeRequest(ctx context.Context) error {
	c := r.agent.opts.Compaction
	if c == nil || c.ContextWindow <= 0 {
		return nil
	}
	est := r.contextEstimate()
	if float64(est) <= c.Threshold*float64(c.ContextWindow) {
		return nil
	}
	target := int(c.Target * float64(c.ContextWindow))
	if _, err := r.compact(ctx, reasonContextWindow, est, target); err != nil {
		if r.consumerGone {
			return context.Canceled
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.agent.opts.Logger.DebugContext(ctx, "compaction failed", "err", err)
	}
	return nil
}

// compactForRetry handles a failed request, within step 4 (send.go):
// after a context length error, the first of the turn (*done records it),
// it compacts the transcript and reports whether the request is worth
// sending again (the transcript changed). It returns an error to end the
// run with: the context's, or err with the compaction's failure.
func (r *run) compactForRetry(ctx context.Context, err error, done *bool) (bool, error) {
	c := r.agent.opts.Compaction
	if c == nil || *done || !errors.Is(err, llm.ErrContextLength) {
		return false, nil
	}
	// Once per turn: a transcript that still does not fit after a
	// compaction fails the run.
	*done = true
	est := r.contextEstimate()
	// The provider's count no longer holds, if it ever did: the request
	// did not fit.
	total := compact.Estimate(r.transcript)
	target := int(c.Target * float64(total))
	if c.ContextWindow > 0 {
		target = min(target, int(c.Target*float64(c.ContextWindow)))
	}
	changed, cerr := r.compact(ctx, reasonContextLength, est, target)
	switch {
	case cerr == nil:
		return changed, nil
	case r.consumerGone:
		return false, context.Canceled
	case ctx.Err() != nil:
		return false, ctx.Err()
	}
	return false, fmt.Errorf("%w (compaction failed: %v)", err, cerr)
}

// compact runs the strategy and, if it changed the transcript, adopts the
// result and reports it with a compaction chunk.
func (r *run) compact(ctx context.Context, reason string, before, target int) (bool, error) {
	c := r.agent.opts.Compaction
	if r.hooks != nil {
		r.runEventHooks(ctx, HookPreCompact, &HookInput{Trigger: reason})
	}
	// Strategies count with the estimate alone: scale the target so that
	// the provider's count, when it is what passed the threshold, is what
	// is brought down.
	est := compact.Estimate(r.transcript)
	if before > est && before > 0 {
		target = int(float64(target) * float64(est) / float64(before))
	}
	req := &compact.Request{
		Messages:  r.transcript,
		Target:    target,
		KeepTurns: c.KeepTurns,
		Model:     r.agent.model,
		ModelName: r.agent.opts.Model,
		Window:    c.ContextWindow,
	}
	res, err := c.Strategy.Compact(ctx, req)
	if err != nil {
		return false, err
	}
	if res == nil {
		return false, errors.New("compaction strategy returned no result")
	}
	if reason == reasonContextLength && c.KeepTurns > 1 && compact.Estimate(res.Messages) > target {
		// The provider refused the request, and the turns kept whole
		// are past the target by themselves (large results, parallel
		// calls): keep only the last one whole rather than fail.
		again := *req
		again.Messages, again.KeepTurns = res.Messages, 1
		if more, err := c.Strategy.Compact(ctx, &again); err == nil && more != nil {
			res = mergeCompactions(res, more)
		}
	}
	info := &CompactionInfo{
		Reason:         reason,
		Strategy:       res.Strategy,
		TokensBefore:   before,
		Window:         c.ContextWindow,
		MessagesBefore: len(r.transcript),
		MessagesAfter:  len(res.Messages),
		Trimmed:        res.Trimmed,
		Summarized:     res.Summarized,
	}
	if res.Usage != (llm.Usage{}) {
		// A summary was paid for even if it changed nothing.
		u := res.Usage
		info.Usage = &u
		r.result.Usage.Add(u)
	}
	if res.Strategy == "" {
		// Nothing could be compacted (too few turns): no chunk, or
		// every later turn would report the same nothing.
		return false, nil
	}
	r.transcript = res.Messages
	r.conversation.Rewrote() // not an append: the provider encodes afresh
	r.countedMessages = 0
	info.TokensAfter = r.contextEstimate()
	r.observeCompaction(info)
	if !r.emit(Chunk{Type: ChunkCompaction, Compaction: info}) {
		return false, context.Canceled
	}
	return true, nil
}

// mergeCompactions is what a compaction then another of its result did.
func mergeCompactions(a, b *compact.Result) *compact.Result {
	out := &compact.Result{Messages: b.Messages, Trimmed: a.Trimmed + b.Trimmed, Summarized: a.Summarized + b.Summarized, Usage: a.Usage}
	out.Usage.Add(b.Usage)
	var names []string
	for _, n := range []string{"trim", "summarize"} {
		if slices.Contains(strings.Split(a.Strategy, "+"), n) || slices.Contains(strings.Split(b.Strategy, "+"), n) {
			names = append(names, n)
		}
	}
	for _, s := range []string{a.Strategy, b.Strategy} {
		for _, n := range strings.Split(s, "+") {
			if n != "" && !slices.Contains(names, n) {
				names = append(names, n) // a strategy of the caller's
			}
		}
	}
	out.Strategy = strings.Join(names, "+")
	return out
}

// setDefaults sets the documented defaults of the fields of c left at zero.
func (c *Compaction) setDefaults() {
	if c.Threshold <= 0 {
		c.Threshold = 0.8
	}
	if c.Target <= 0 {
		c.Target = 0.5
	}
	if c.KeepTurns <= 0 {
		c.KeepTurns = 2
	}
	if c.Strategy == nil {
		c.Strategy = compact.Default()
	}
}
