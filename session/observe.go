package session

import (
	"context"
	"errors"

	"github.com/hrns-dev/hrns/loop"
)

// yieldObserver passes a run's events to the manager's observer, except
// that a run that stops to let the caller's input in (a message, a pause,
// a final-answer request: errYield), or because the session ended
// (errStopped), is reported as stopped, not failed: the session goes on
// from its checkpoint.
type yieldObserver struct{ loop.Observer }

func yielded(err error) bool { return errors.Is(err, errYield) || errors.Is(err, errStopped) }

func (o yieldObserver) TurnEnd(ctx context.Context, e loop.TurnEvent) {
	if yielded(e.Err) {
		e.Err = context.Canceled
	}
	o.Observer.TurnEnd(ctx, e)
}

func (o yieldObserver) RunEnd(ctx context.Context, e loop.RunEvent) {
	if e.Status == loop.StatusFailed && yielded(e.Err) {
		e.Status, e.Err = "", context.Canceled
	}
	o.Observer.RunEnd(ctx, e)
}
