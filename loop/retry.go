package loop

import (
	"context"
	"math/rand/v2"
	"time"
)

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
