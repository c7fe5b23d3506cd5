// Package quota is the token quota of hrns serve: how many tokens each
// API key's sessions may use in a window of time (a calendar day or
// month, UTC), and what a request refused by it is told.
//
// It is a service of the platform beside the sessions runtime (package
// session): a [*Tokens] is the runtime's [session.QuotaPolicy]
// ([session.Options.TokenQuota]). The runtime counts each step's tokens
// in the store, in the commit of the step, so that every replica sees
// the same count, and asks the policy at its doors (a new session, a
// message, each model request); the policy says which window a count
// falls in and when an owner has used its tokens.
package quota

import (
	"fmt"
	"time"

	"github.com/hrns-dev/hrns/session"
)

// Token quota periods: the length of a window of [Tokens]. Windows are
// calendar days or months in UTC.
const (
	PeriodDay   = "day"
	PeriodMonth = "month"
)

// Tokens limits the tokens each owner's (each API key's) sessions may
// use in a window of time. Every model step's tokens (input plus output,
// as the provider reports them) are added to the owner's count in the
// store ([store.Quotas]) by the commit of the step, in its transaction,
// so the count is shared by every replica on the store and survives
// restarts. A step is counted once: a step whose commit fails because
// the worker lost its lease or the store failed is counted when it runs
// again; one that is never committed because its session ended meanwhile
// is counted on its own.
//
// Once an owner has used Limit tokens in the current window, creating a
// session or sending a message answers [*Error] (the server's 429), and a
// running session of the owner fails before its next model request, with
// an error saying so (status failed, error_code null): the step that
// crosses the limit is never cut, so the count may end above Limit by at
// most one step per running session.
//
// A nil *Tokens counts per month without a limit.
type Tokens struct {
	// Limit is the tokens an owner may use in one window; 0 means no
	// limit (tokens are still counted and reported).
	Limit int64
	// Period is PeriodDay or PeriodMonth; empty, or any other value,
	// means PeriodMonth.
	Period string
	// Now returns the current time, which picks the window; nil means
	// time.Now (tests set a fake clock).
	Now func() time.Time
}

var _ session.QuotaPolicy = (*Tokens)(nil)

// Window returns the current window: its period, start and end.
func (q *Tokens) Window() (period string, start, end time.Time) {
	now := time.Now
	if q != nil && q.Now != nil {
		now = q.Now
	}
	t := now().UTC()
	if q != nil && q.Period == PeriodDay {
		start = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		return PeriodDay, start, start.AddDate(0, 0, 1)
	}
	start = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	return PeriodMonth, start, start.AddDate(0, 1, 0)
}

// TokenLimit is the tokens an owner may use in one window; 0 for no
// limit.
func (q *Tokens) TokenLimit() int64 {
	if q == nil || q.Limit <= 0 {
		return 0
	}
	return q.Limit
}

// Exceeded is the error of a request refused because its owner used
// `used` tokens in the window that ends at end: an [*Error].
func (q *Tokens) Exceeded(used int64, end time.Time) error {
	return &Error{Limit: q.TokenLimit(), Used: used, WindowEnd: end}
}

// An Error says that an owner has used its tokens for the current window
// of [Tokens]. It matches [session.ErrTokenQuotaExceeded] with errors.Is.
type Error struct {
	Limit, Used int64
	// WindowEnd is when the next window starts, with a fresh count.
	WindowEnd time.Time
}

func (e *Error) Error() string {
	return fmt.Sprintf("token quota exceeded: this API key used %d of its %d tokens for the window that ends %s",
		e.Used, e.Limit, e.WindowEnd.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, session.ErrTokenQuotaExceeded) true.
func (e *Error) Is(target error) bool { return target == session.ErrTokenQuotaExceeded }
