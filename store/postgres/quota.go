package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hrns-dev/hrns/store"
)

var _ store.Quotas = (*Store)(nil)

// AddTokens implements [store.Quotas]: one upsert that adds in the
// database, so that concurrent additions from any replica all count.
func (s *Store) AddTokens(ctx context.Context, owner, period string, start time.Time, n int64) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, store.ErrNegativeTokens
	}
	var total int64
	err := s.pool.QueryRow(ctx, `INSERT INTO hrns_token_usage (owner, period, window_start, tokens) VALUES ($1, $2, $3, $4)
		ON CONFLICT (owner, period, window_start) DO UPDATE SET tokens = hrns_token_usage.tokens + excluded.tokens
		RETURNING tokens`, owner, period, ts(start.Truncate(time.Microsecond)), n).Scan(&total)
	if err != nil {
		return 0, fmt.Errorf("add tokens: %w", s.wrap(err))
	}
	return total, nil
}

// TokensUsed implements [store.Quotas].
func (s *Store) TokensUsed(ctx context.Context, owner, period string, start time.Time) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	var total int64
	err := s.pool.QueryRow(ctx, `SELECT tokens FROM hrns_token_usage WHERE owner = $1 AND period = $2 AND window_start = $3`,
		owner, period, ts(start.Truncate(time.Microsecond))).Scan(&total)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("tokens used: %w", s.wrap(err))
	}
	return total, nil
}
