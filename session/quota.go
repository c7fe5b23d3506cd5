package session

import (
	"context"
	"errors"
	"github.com/hrns-dev/hrns/api"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/store"
)

// A QuotaPolicy is the token quota of [Options.TokenQuota]: which window
// of time a step's tokens count in, and how many an owner may use in one.
// Package platform/quota's *Tokens is one (a day or a month, UTC).
//
// Every model step's tokens (input plus output, as the provider reports
// them) are added to the owner's count for the window in the store
// ([store.Quotas]) by the commit of the step, in its transaction, so the
// count is shared by every replica on the store and survives restarts. A
// step is counted once: a step whose commit fails because the worker lost
// its lease or the store failed is counted when it runs again; one that
// is never committed because its session ended meanwhile is counted on
// its own.
//
// Once an owner has used TokenLimit tokens in the current window,
// creating a session or sending a message answers the policy's Exceeded
// error (the server's 429), and a running session of the owner fails
// before its next model request, with an error saying so (status failed,
// error_code null): the step that crosses the limit is never cut, so the
// count may end above the limit by at most one step per running session.
type QuotaPolicy interface {
	// Window returns the current window: its period (a name the store
	// keeps the count under: "day", "month"), start and end.
	Window() (period string, start, end time.Time)
	// TokenLimit is the tokens an owner may use in one window; 0 (or
	// less) for no limit: tokens are still counted and reported.
	TokenLimit() int64
	// Exceeded is the error of a request refused because its owner used
	// `used` tokens in the window that ends at end: it must match
	// [ErrTokenQuotaExceeded] with errors.Is.
	Exceeded(used int64, end time.Time) error
}

// ErrTokenQuotaExceeded is what the error of a request refused by the
// token quota ([QuotaPolicy.Exceeded]) matches with errors.Is.
var ErrTokenQuotaExceeded = errors.New("token quota exceeded")

// TokenQuotaStatus is an owner's token quota: [api.TokenQuotaStatus].
type TokenQuotaStatus = api.TokenQuotaStatus

// tokenWindow returns the current window of the token quota: its period,
// start and end. Without a quota, tokens are counted per calendar month
// (UTC).
func (m *Manager) tokenWindow() (period string, start, end time.Time) {
	if q := m.opts.TokenQuota; q != nil {
		return q.Window()
	}
	t := time.Now().UTC()
	start = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	return "month", start, start.AddDate(0, 1, 0)
}

// tokenLimit is the token quota's limit; 0 for none.
func (m *Manager) tokenLimit() int64 {
	if q := m.opts.TokenQuota; q != nil {
		return max(q.TokenLimit(), 0)
	}
	return 0
}

// TokenQuota returns the owner's token quota and its use in the current
// window.
func (m *Manager) TokenQuota(ctx context.Context, owner string) (*TokenQuotaStatus, error) {
	period, start, end := m.tokenWindow()
	used, err := m.st.TokensUsed(ctx, owner, period, start)
	if err != nil {
		return nil, err
	}
	st := &TokenQuotaStatus{Used: &used, WindowStart: start, WindowEnd: &end}
	if limit := m.tokenLimit(); limit > 0 {
		remaining := max(limit-used, 0)
		st.Limit, st.Remaining = &limit, &remaining
	}
	return st, nil
}

// checkTokens returns the token quota's error (matching
// ErrTokenQuotaExceeded) when the owner has used its tokens for the
// current window.
func (m *Manager) checkTokens(ctx context.Context, owner string) error {
	limit := m.tokenLimit()
	if limit <= 0 {
		return nil
	}
	period, start, end := m.tokenWindow()
	used, err := m.st.TokensUsed(ctx, owner, period, start)
	if err != nil {
		return err
	}
	if used >= limit {
		return m.opts.TokenQuota.Exceeded(used, end)
	}
	return nil
}

// chargeTokens holds a step's tokens for the segment's next commit,
// which adds them to the owner's count in its own transaction
// ([store.UpdateOptions.Tokens]): they are counted once the step is
// committed, once, and not for a step whose commit fails (the worker that
// runs the step again counts it then).
func (g *segment) chargeTokens(u *llm.Usage) {
	if u == nil {
		return
	}
	if u.InputTokens < 0 || u.OutputTokens < 0 || u.InputTokens > maxStepTokens || u.OutputTokens > maxStepTokens {
		g.m.log.Warn("a step's usage is out of range; not counted", "owner", g.owner, "input", u.InputTokens, "output", u.OutputTokens)
		return
	}
	n := u.InputTokens + u.OutputTokens
	if n == 0 {
		return
	}
	period, start, _ := g.m.tokenWindow()
	if t := g.tokens; t != nil && t.Period == period && t.Start.Equal(start) && t.N <= maxStepTokens {
		t.N += n
		return
	}
	if g.tokens != nil {
		// Another window (or an absurd sum): the held tokens are counted
		// on their own first, as a plain count.
		g.m.addTokens(g.owner, g.tokens)
	}
	g.tokens = &store.TokenCount{Period: period, Start: start, N: n}
}

// addTokens adds t to the owner's count outside any commit; a store that
// fails is logged.
func (m *Manager) addTokens(owner string, t *store.TokenCount) {
	if _, err := m.st.AddTokens(context.Background(), owner, t.Period, t.Start, t.N); err != nil {
		m.log.Error("counting tokens for the token quota", "owner", owner, "tokens", t.N, "err", err)
	}
}

// maxStepTokens bounds the tokens one step may report: more is a
// provider's nonsense, which must not overflow the count.
const maxStepTokens = 1 << 40

// modelAllowed is checkTokens before a model request of a running
// session: a store that fails is logged, and the request goes on.
func (g *segment) modelAllowed(ctx context.Context) error {
	err := g.m.checkTokens(ctx, g.owner)
	if err != nil && !errors.Is(err, ErrTokenQuotaExceeded) {
		g.m.log.Error("checking the token quota", "session", g.id, "err", err)
		return nil
	}
	return err
}

// quotaStopped ends a session whose owner's token quota ran out while it
// ran: failed, with the quota's error and no error_code (the reference's
// codes have none for it).
func (g *segment) quotaStopped(ctx context.Context, err error) error {
	msg := err.Error() + "; the session stopped before its next model request"
	return g.commit(ctx, func(s *store.Session, st *state) []store.Event {
		return finish(s, st, outcomeFailed("", msg))
	})
}
