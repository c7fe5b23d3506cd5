package postgres

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hrns-dev/hrns/store"
)

// The plans PostgreSQL chooses for the store's hot statements, given the
// arguments the store gives them (EXPLAIN, text format), for
// TestHotStatementPlans.

func (s *Store) ExplainUpdate(ctx context.Context, sess *store.Session, o *store.UpdateOptions) (string, error) {
	if o == nil {
		o = &store.UpdateOptions{}
	}
	args, err := s.updateArgs(sess, nil, o, time.Now().UTC())
	if err != nil {
		return "", err
	}
	return s.explain(ctx, statements().update, args...)
}

func (s *Store) ExplainClaim(ctx context.Context, p *store.ClaimParams) (string, error) {
	return s.explain(ctx, claimSQL, claimArgs(p)...)
}

func (s *Store) ExplainRenew(ctx context.Context, id, owner string, until time.Time) (string, error) {
	return s.explain(ctx, renewSQL, id, owner, ts(time.Now()), ts(until))
}

func (s *Store) ExplainRelease(ctx context.Context, id, owner string) (string, error) {
	return s.explain(ctx, releaseSQL, id, owner)
}

func (s *Store) ExplainNextWake(ctx context.Context, now time.Time) (string, error) {
	return s.explain(ctx, nextWakeSQL, ts(now))
}

func (s *Store) explain(ctx context.Context, sql string, args ...any) (string, error) {
	rows, err := s.pool.Query(ctx, "EXPLAIN "+sql, args...)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(lines, "\n"), err
}

// ClaimSQL and NextWakeSQL are the statements, for the test that compares
// them with the ones they replaced.
const (
	ClaimSQL    = claimSQL
	NextWakeSQL = nextWakeSQL
)

// UpdateInTx runs UpdateSession's statement in tx, which the caller
// commits or rolls back, so that a test can hold a commit open. It
// reports store.ErrConflict when the statement wrote nothing.
func (s *Store) UpdateInTx(ctx context.Context, tx pgx.Tx, sess *store.Session, o *store.UpdateOptions) error {
	if o == nil {
		o = &store.UpdateOptions{}
	}
	args, err := s.updateArgs(sess, nil, o, time.Now().UTC())
	if err != nil {
		return err
	}
	rows, err := tx.Query(ctx, statements().update, args...)
	if err != nil {
		return err
	}
	n := 0
	for rows.Next() {
		n++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if n == 0 {
		return store.ErrConflict
	}
	return nil
}

// UsageStripes is how many rows the token count of one owner and window
// is spread over.
const UsageStripes = usageStripes

// StripeSQL is the expression of a statement's stripe.
const StripeSQL = stripeSQL

// HoldNotifications keeps the store's notifier from sending until the
// function it returns is called: commits announced meanwhile reach the
// other processes only then.
func (s *Store) HoldNotifications() (release func()) { return s.notifier.hold() }

// DropNotifications stops the store's notifier without sending what it
// holds, and closes its connection, as the process's crash would.
func (s *Store) DropNotifications() { s.notifier.drop() }

// NotifierPID is the server process of the notifier's connection, 0 while
// it has none.
func (s *Store) NotifierPID() uint32 { return s.notifier.pid.Load() }

// Announce announces a change of topic, as a commit does.
func (s *Store) Announce(topic string, work bool) { s.announce(topic, work) }

// SetPeerCheckEvery makes the stores opened until restore is called look
// for other processes' notifiers gone every d.
func SetPeerCheckEvery(d time.Duration) (restore func()) {
	old := testPeerCheckEvery.Swap(int64(d))
	return func() { testPeerCheckEvery.Store(old) }
}

// MaxPending is how many notifications a notifier holds before it sends
// one that wakes everything instead.
const MaxPending = maxPending
