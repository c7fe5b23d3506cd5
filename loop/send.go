package loop

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/hrns-dev/hrns/llm"
)

// Step 4 of a turn (see run.runTurns): sending the request, as many times as
// the retry policy allows.

// sendRequest sends the turn's request and returns the model's response:
// each attempt's stream is read by readStream; a transient failure is
// retried after a backoff (Options.Retry), a context length refusal is
// compacted once (compactForRetry) and sent again. The response's usage is
// added to the run's. An error ends the run.
func (r *run) sendRequest(ctx context.Context, req *llm.Request) (resp *llm.Response, err error) {
	o := &r.agent.opts
	ctx, ot := r.observeTurn(ctx, req)
	defer func() { r.observeTurnEnd(ot, resp, err) }()
	compacted := false
	for attempt := 1; ; attempt++ {
		resp, err := r.readStream(ctx, req)
		if err == nil {
			r.noteProviderCount(resp.Usage)
			info := TurnInfo{Usage: resp.Usage, FinishReason: resp.FinishReason, Retries: attempt - 1}
			r.result.Turns = append(r.result.Turns, info)
			r.result.Usage.Add(resp.Usage)
			return resp, nil
		}
		if r.consumerGone {
			return nil, context.Canceled
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if retry, err := r.compactForRetry(ctx, err, &compacted); err != nil {
			return nil, err
		} else if retry {
			req.Messages = r.transcript
			continue
		}
		if !llm.IsRetryable(err) {
			return nil, err
		}
		if attempt >= o.Retry.MaxAttempts {
			return nil, fmt.Errorf("%w after %d attempts: %w", ErrRetriesExhausted, attempt, err)
		}
		after := llm.RetryAfter(err)
		if after > o.Retry.MaxRetryAfter {
			return nil, fmt.Errorf("provider asked to retry after %v, more than the %v allowed: %w", after, o.Retry.MaxRetryAfter, err)
		}
		delay := o.Retry.backoff(attempt, after)
		o.Logger.DebugContext(ctx, "retrying model request", "attempt", attempt, "delay", delay, "err", err)
		r.observeRetry(ot, attempt, delay, err)
		if !r.emit(Chunk{Type: ChunkRetry, Retry: &RetryInfo{Attempt: attempt, Delay: delay}, Err: err}) {
			return nil, context.Canceled
		}
		if err := sleep(ctx, delay); err != nil {
			return nil, err
		}
	}
}

// backoff returns the wait after the given failed attempt (from 1): the
// provider's Retry-After if it gave one, else exponential backoff capped at
// MaxDelay with "equal jitter" (half fixed, half random), so that many
// clients failing together do not retry together.
func (p RetryPolicy) backoff(attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return retryAfter
	}
	d := p.BaseDelay
	for i := 1; i < attempt && d < p.MaxDelay; i++ {
		d *= 2
	}
	d = min(d, p.MaxDelay)
	half := d / 2
	return half + rand.N(half+1)
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
