package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hrns-dev/hrns/store"
)

var _ store.Quotas = (*Store)(nil)

// AddTokens implements [store.Quotas]. The one writer connection
// serialises additions; the upsert adds in the database, so that
// processes sharing the file (one at a time: the file is locked) count
// into the same row.
func (s *Store) AddTokens(ctx context.Context, owner, period string, start time.Time, n int64) (int64, error) {
	if n < 0 {
		return 0, store.ErrNegativeTokens
	}
	var total int64
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		return tx.StmtContext(ctx, s.addTokensStmt).QueryRowContext(ctx, owner, period, windowNanos(start), n).Scan(&total)
	})
	if err != nil {
		return 0, fmt.Errorf("add tokens: %w", err)
	}
	return total, nil
}

// addTokensSQL adds to a window's count and returns the total;
// countTokensSQL, a commit's (UpdateOptions.Tokens), only adds: a
// statement that returns no row spares the driver's result set.
const (
	countTokensSQL = `INSERT INTO token_usage (owner, period, window_start, tokens) VALUES (?, ?, ?, ?)
	ON CONFLICT (owner, period, window_start) DO UPDATE SET tokens = tokens + excluded.tokens`
	addTokensSQL = countTokensSQL + `
	RETURNING tokens`
)

// TokensUsed implements [store.Quotas].
func (s *Store) TokensUsed(ctx context.Context, owner, period string, start time.Time) (int64, error) {
	var total int64
	err := s.r.QueryRowContext(ctx, `SELECT tokens FROM token_usage WHERE owner = ? AND period = ? AND window_start = ?`,
		owner, period, windowNanos(start)).Scan(&total)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("tokens used: %w", s.wrap(err))
	}
	return total, nil
}

// windowNanos is a window's start as stored: to the microsecond, as in
// PostgreSQL.
func windowNanos(t time.Time) int64 { return t.Truncate(time.Microsecond).UnixNano() }
