package store

import (
	"context"
	"errors"
	"time"
)

// ErrNegativeTokens: [Quotas.AddTokens] was given a negative count.
var ErrNegativeTokens = errors.New("store: negative token count")

// Quotas counts the tokens each owner's sessions use, per window of time,
// for the token quota the server enforces. It is part of every [Store], so
// that every replica sharing a store counts into, and reads, the same
// totals: a limit holds across replicas, and survives restarts.
//
// A window is named by its period ("day", "month": the store only keys on
// it) and its start; package session decides where windows start. A store
// keeps one row per owner and window.
//
// All methods are safe for concurrent use.
type Quotas interface {
	// AddTokens adds n (zero or more) tokens to what owner used in the
	// window of period that starts at start, and returns the window's
	// new total. Concurrent additions, from any number of processes
	// sharing the store, all count: none is lost. A negative n is
	// refused with ErrNegativeTokens. start is kept to the microsecond.
	AddTokens(ctx context.Context, owner, period string, start time.Time, n int64) (total int64, err error)
	// TokensUsed returns what owner used in the window of period that
	// starts at start: 0 when nothing was added to it.
	TokensUsed(ctx context.Context, owner, period string, start time.Time) (int64, error)
}
