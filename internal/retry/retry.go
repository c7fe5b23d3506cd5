// Package retry makes a call again after it answered an error, a bounded
// number of times, and bounds what a stopping process still waits for.
//
// Its use is the claims of the runtime (session's dispatcher,
// platform/webhook's deliveries, platform/schedule's runs and fires): a
// claim's transaction may commit and its answer be lost (its bound
// passed, or the connection broke, while the answer was on its way), and
// the same call made again (with the claim's token, or the same run)
// answers with what the first took. Each caller keeps its own call; Do
// is the loop around it, so that the three loops read alike and are
// bounded alike.
package retry

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Policy bounds the calls of one operation.
type Policy struct {
	// Tries is how many calls Do makes at most, the first included
	// (at least one).
	Tries int
	// Bound bounds each call, on a context of its own derived from
	// Do's; 0: a call is bounded by Do's context alone.
	Bound time.Duration
	// Pause is how long Do waits between two calls (cut when Do's
	// context ends).
	Pause time.Duration
}

// Do calls call until it answers nil or an error matching one of final
// (errors.Is), at most p.Tries times, pausing p.Pause between two calls;
// it makes no call once ctx is done. It returns the error of the last
// call, nil when a call succeeded (ctx's cause when ctx ended before
// any call, or with the last error when it cut the calls short), and
// the errors of the calls before that one, joined (nil when there were
// none): a caller that succeeded after errors may say so.
func Do(ctx context.Context, p Policy, call func(ctx context.Context) error, final ...error) (err, earlier error) {
	var errs []error
	for i := range max(p.Tries, 1) {
		if i > 0 && p.Pause > 0 {
			Sleep(ctx, p.Pause)
		}
		if ctx.Err() != nil {
			cause := fmt.Errorf("no call made again: %w", context.Cause(ctx))
			if len(errs) == 0 {
				return cause, nil
			}
			return errors.Join(errs[len(errs)-1], cause), errors.Join(errs[:len(errs)-1]...)
		}
		err = bounded(ctx, p.Bound, call)
		if err == nil || isAny(err, final) {
			return err, errors.Join(errs...)
		}
		errs = append(errs, err)
	}
	return errs[len(errs)-1], errors.Join(errs[:len(errs)-1]...)
}

func bounded(ctx context.Context, d time.Duration, call func(ctx context.Context) error) error {
	if d <= 0 {
		return call(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return call(ctx)
}

func isAny(err error, targets []error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// Grace returns a context with ctx's values that ends d after ctx ends
// (or when cancel is called): the bound of what a process that stops
// still waits for, such as a claim in flight whose answer, if it comes
// soon, lets the process give back what it took instead of leaving it
// leased to itself until the lease lapses. Its cause then says that ctx
// ended and the grace passed.
func Grace(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	g, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			cancel(fmt.Errorf("%w (and a grace of %v passed since)", context.Cause(ctx), d))
		case <-g.Done():
		}
	})
	return g, func() {
		stop()
		cancel(context.Canceled)
	}
}

// Sleep waits d, or until ctx ends if that is sooner.
func Sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
