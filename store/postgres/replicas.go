package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/hrns-dev/hrns/store"
)

// forgetAfter is how long the record of a replica that stopped beating is
// kept.
const forgetAfter = time.Hour

const (
	beatSQL = `WITH forget AS (DELETE FROM hrns_replicas WHERE seen_at < $9 AND id <> $1)
		INSERT INTO hrns_replicas (id, host, pid, started_at, seen_at, expires_at, workers, running)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, started_at = excluded.started_at,
			seen_at = excluded.seen_at, expires_at = excluded.expires_at, workers = excluded.workers, running = excluded.running`

	replicasSQL = `SELECT r.id, r.host, r.pid, r.started_at, r.seen_at, r.expires_at, r.workers, r.running,
			(SELECT count(*) FROM hrns_sessions s WHERE s.lease_owner = r.id AND s.lease_until > $1)
		FROM hrns_replicas r ORDER BY r.id`
)

// Beat implements [store.Replicas].
func (s *Store) Beat(ctx context.Context, r *store.Replica) error {
	if err := s.check(); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, beatSQL, r.ID, r.Host, r.PID, ts(r.StartedAt), ts(r.SeenAt), ts(r.ExpiresAt),
		r.Workers, r.Running, ts(r.SeenAt.Add(-forgetAfter)))
	if err != nil {
		return fmt.Errorf("replica heartbeat: %w", s.wrap(err))
	}
	return nil
}

// Replicas implements [store.Replicas].
func (s *Store) Replicas(ctx context.Context, now time.Time) ([]*store.Replica, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, replicasSQL, ts(now))
	if err != nil {
		return nil, fmt.Errorf("list replicas: %w", s.wrap(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Replica, error) {
		var r store.Replica
		var started, seen, expires pgtype.Timestamptz
		err := row.Scan(&r.ID, &r.Host, &r.PID, &started, &seen, &expires, &r.Workers, &r.Running, &r.Leases)
		r.StartedAt, r.SeenAt, r.ExpiresAt = fromTS(started), fromTS(seen), fromTS(expires)
		return &r, err
	})
	if err != nil {
		return nil, fmt.Errorf("list replicas: %w", s.wrap(err))
	}
	return out, nil
}

// Leave implements [store.Replicas].
func (s *Store) Leave(ctx context.Context, id string) error {
	if err := s.check(); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM hrns_replicas WHERE id = $1`, id); err != nil {
		return fmt.Errorf("replica leave: %w", s.wrap(err))
	}
	return nil
}
