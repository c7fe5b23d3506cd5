package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/hrns-dev/hrns/store"
)

var _ store.Quotas = (*Store)(nil)

// A window's token count is spread over rows, its stripes
// (hrns_token_usage_stripes): an addition, whether AddTokens or the
// commit of a step ([store.UpdateOptions.Tokens]), adds to the stripe of
// the server process that runs it, pg_backend_pid() modulo usageStripes.
// A server process runs one transaction at a time, so two commits of one
// owner's sessions in flight at once are on two connections and, unless
// their pids are congruent, update two rows: neither waits for the
// other's row lock until the other is durable, as they did when the
// window had one row (every commit of a key's sessions that counted
// tokens waited for the one before it). A window's count is its stripes'
// sum plus its row of hrns_token_usage, the table of the previous
// release: its counts are read in place, and its replicas still running
// during a rolling deploy keep adding to it.
//
// Readers see what they saw with one row: a count is read in one
// statement, so from one snapshot, which holds every addition committed
// before it and none in flight; a sum is exact once the additions are
// committed. The quota's checks (package session) read the count and
// compare it outside any transaction that adds, so the single row never
// made a check and an addition atomic: two sessions of a key could pass
// their checks at once and both commit before, as after.
//
// The count of an addition is written in the transaction of its commit,
// as before: a commit acknowledged is durable with its tokens, and one
// that fails counts nothing, so its retry counts once.
//
// A window has at most usageStripes+1 rows; a read visits them by the
// primary key's prefix.
const usageStripes = 64

// stripeSQL is the stripe of the statement's server process: its pid
// modulo usageStripes (TestUsageStripesSQL).
const stripeSQL = `mod(pg_backend_pid(), 64)::smallint`

// windowSumSQL is the count of the window ($1 owner, $2 period, $3
// start) in the statement's snapshot: the sum of its stripes (those
// other than the stripe %s when not empty) and its row of
// hrns_token_usage.
const windowSumSQL = `(SELECT coalesce(sum(tokens), 0)::bigint FROM hrns_token_usage_stripes
		WHERE owner = $1 AND period = $2 AND window_start = $3%s)
	+ coalesce((SELECT tokens FROM hrns_token_usage WHERE owner = $1 AND period = $2 AND window_start = $3), 0)`

var (
	// addTokensSQL adds $4 to the stripe of the window, and returns the
	// window's new total: the stripe as written (with every addition to
	// it committed before, which the upsert waited for) plus the other
	// rows in the statement's snapshot.
	addTokensSQL = `WITH a AS (
		INSERT INTO hrns_token_usage_stripes (owner, period, window_start, stripe, tokens)
		VALUES ($1, $2, $3, ` + stripeSQL + `, $4)
		ON CONFLICT (owner, period, window_start, stripe) DO UPDATE SET tokens = hrns_token_usage_stripes.tokens + excluded.tokens
		RETURNING stripe, tokens
	)
	SELECT a.tokens + ` + fmt.Sprintf(windowSumSQL, ` AND stripe <> a.stripe`) + ` FROM a`

	tokensUsedSQL = `SELECT ` + fmt.Sprintf(windowSumSQL, ``)
)

// AddTokens implements [store.Quotas]: one upsert that adds in the
// database, to the stripe of its server process, so that concurrent
// additions from any replica all count. The total returned has this
// addition and every one committed before the call; one committed while
// it runs may be missing, as it may from a [Store.TokensUsed] at that
// time.
func (s *Store) AddTokens(ctx context.Context, owner, period string, start time.Time, n int64) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, store.ErrNegativeTokens
	}
	var total int64
	err := s.pool.QueryRow(ctx, addTokensSQL, owner, period, ts(start.Truncate(time.Microsecond)), n).Scan(&total)
	if err != nil {
		return 0, fmt.Errorf("add tokens: %w", s.wrap(err))
	}
	return total, nil
}

// TokensUsed implements [store.Quotas]: the window's rows summed in one
// statement.
func (s *Store) TokensUsed(ctx context.Context, owner, period string, start time.Time) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	var total int64
	err := s.pool.QueryRow(ctx, tokensUsedSQL, owner, period, ts(start.Truncate(time.Microsecond))).Scan(&total)
	if err != nil {
		return 0, fmt.Errorf("tokens used: %w", s.wrap(err))
	}
	return total, nil
}
