package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/hrns-dev/hrns/store"
)

var _ store.Schedules = (*Store)(nil)

const (
	scheduleColumns = `id, owner, spec, paused, next_run_at, last_run_at, version, created_at, updated_at`
	runColumns      = `id, schedule_id, owner, status, scheduled_for, manual, skipped, session_id, error,
		lease_owner, lease_until, attempts, created_at, updated_at`
)

func scanSchedule(sc scanner) (*store.Schedule, error) {
	var (
		s                            store.Schedule
		spec                         []byte
		next, last, created, updated pgtype.Timestamptz
	)
	if err := sc.Scan(&s.ID, &s.Owner, &spec, &s.Paused, &next, &last, &s.Version, &created, &updated); err != nil {
		return nil, err
	}
	s.Spec = spec
	s.NextRunAt, s.LastRunAt = fromTS(next), fromTS(last)
	s.CreatedAt, s.UpdatedAt = fromTS(created), fromTS(updated)
	return &s, nil
}

func scanRun(sc scanner) (*store.ScheduleRun, error) {
	var (
		r                                       store.ScheduleRun
		scheduled, leaseUntil, created, updated pgtype.Timestamptz
	)
	if err := sc.Scan(&r.ID, &r.ScheduleID, &r.Owner, &r.Status, &scheduled, &r.Manual, &r.Skipped, &r.SessionID, &r.Error,
		&r.LeaseOwner, &leaseUntil, &r.Attempts, &created, &updated); err != nil {
		return nil, err
	}
	r.ScheduledFor, r.LeaseUntil = fromTS(scheduled), fromTS(leaseUntil)
	r.CreatedAt, r.UpdatedAt = fromTS(created), fromTS(updated)
	return &r, nil
}

// micro is a time as the store keeps it: UTC, to the microsecond.
func micro(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

// scheduleTx runs fn in a transaction and, with notify, once it commits,
// announces the change to the schedule workers of every process (see
// [store.ScheduleTopic] and Store.announce).
func (s *Store) scheduleTx(ctx context.Context, notify bool, fn func(tx pgx.Tx) error) error {
	if err := s.check(); err != nil {
		return err
	}
	var ran bool // fn returned nil: the commit was sent
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := fn(tx)
		ran = err == nil
		return err
	})
	switch {
	case !notify:
	case err == nil:
		s.announce(store.ScheduleTopic, false)
	case ran:
		s.announceUncertain(err, store.ScheduleTopic, false)
	}
	return s.wrap(err)
}

// CreateSchedule implements [store.Schedules].
func (s *Store) CreateSchedule(ctx context.Context, sc *store.Schedule) (*store.Schedule, error) {
	n := *sc
	if n.CreatedAt.IsZero() {
		n.CreatedAt = time.Now()
	}
	if n.UpdatedAt.IsZero() {
		n.UpdatedAt = n.CreatedAt
	}
	n.CreatedAt, n.UpdatedAt, n.NextRunAt, n.LastRunAt = micro(n.CreatedAt), micro(n.UpdatedAt), micro(n.NextRunAt), time.Time{}
	n.Version = 1
	err := s.scheduleTx(ctx, true, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO hrns_schedules (`+scheduleColumns+`) VALUES ($1,$2,$3,$4,$5,NULL,$6,$7,$8)`,
			n.ID, n.Owner, specBytes(n.Spec), n.Paused, ts(n.NextRunAt), n.Version, ts(n.CreatedAt), ts(n.UpdatedAt))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create schedule: %w", err)
	}
	return &n, nil
}

// GetSchedule implements [store.Schedules].
func (s *Store) GetSchedule(ctx context.Context, owner, id string) (*store.Schedule, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	got, err := scanSchedule(s.pool.QueryRow(ctx, `SELECT `+scheduleColumns+` FROM hrns_schedules WHERE id = $1 AND owner = $2`, id, owner))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrScheduleNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get schedule: %w", s.wrap(err))
	}
	return got, nil
}

// ListSchedules implements [store.Schedules].
func (s *Store) ListSchedules(ctx context.Context, p *store.ScheduleListParams) ([]*store.Schedule, int, error) {
	if err := s.check(); err != nil {
		return nil, 0, err
	}
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM hrns_schedules WHERE owner = $1`, p.Owner).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("list schedules: %w", s.wrap(err))
	}
	order := "DESC"
	if p.Ascending {
		order = "ASC"
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	rows, err := s.pool.Query(ctx, `SELECT `+scheduleColumns+` FROM hrns_schedules WHERE owner = $1 ORDER BY created_at `+order+`, id `+order+` LIMIT $2 OFFSET $3`,
		p.Owner, limit, max(p.Offset, 0))
	if err != nil {
		return nil, 0, fmt.Errorf("list schedules: %w", s.wrap(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Schedule, error) { return scanSchedule(r) })
	if err != nil {
		return nil, 0, fmt.Errorf("list schedules: %w", s.wrap(err))
	}
	return out, total, nil
}

// scheduleMissing returns ErrScheduleNotFound when the owner has no
// schedule with the id, else otherwise.
func scheduleMissing(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, owner, id string, otherwise error) error {
	var one int
	err := q.QueryRow(ctx, `SELECT 1 FROM hrns_schedules WHERE id = $1 AND owner = $2`, id, owner).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrScheduleNotFound
	}
	if err != nil {
		return err
	}
	return otherwise
}

// UpdateSchedule implements [store.Schedules].
func (s *Store) UpdateSchedule(ctx context.Context, sc *store.Schedule) (*store.Schedule, error) {
	var out *store.Schedule
	err := s.scheduleTx(ctx, true, func(tx pgx.Tx) error {
		got, err := scanSchedule(tx.QueryRow(ctx, `UPDATE hrns_schedules SET spec = $1, paused = $2, next_run_at = $3, version = version + 1, updated_at = $4
			WHERE id = $5 AND owner = $6 AND version = $7 RETURNING `+scheduleColumns,
			specBytes(sc.Spec), sc.Paused, ts(micro(sc.NextRunAt)), ts(micro(time.Now())), sc.ID, sc.Owner, sc.Version))
		if errors.Is(err, pgx.ErrNoRows) {
			return scheduleMissing(ctx, tx, sc.Owner, sc.ID, store.ErrConflict)
		}
		out = got
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("update schedule %s: %w", sc.ID, err)
	}
	return out, nil
}

// DeleteSchedule implements [store.Schedules].
func (s *Store) DeleteSchedule(ctx context.Context, owner, id string) error {
	if err := s.check(); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM hrns_schedules WHERE id = $1 AND owner = $2`, id, owner)
	if err != nil {
		return fmt.Errorf("delete schedule %s: %w", id, s.wrap(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete schedule %s: %w", id, store.ErrScheduleNotFound)
	}
	return nil
}

// DueSchedules implements [store.Schedules].
func (s *Store) DueSchedules(ctx context.Context, now time.Time, limit int) ([]*store.Schedule, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, `SELECT `+scheduleColumns+` FROM hrns_schedules
		WHERE NOT paused AND next_run_at IS NOT NULL AND next_run_at <= $1 ORDER BY next_run_at, id LIMIT $2`, ts(now), limit)
	if err != nil {
		return nil, fmt.Errorf("due schedules: %w", s.wrap(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Schedule, error) { return scanSchedule(r) })
	if err != nil {
		return nil, fmt.Errorf("due schedules: %w", s.wrap(err))
	}
	return out, nil
}

// NextScheduleWake implements [store.Schedules].
func (s *Store) NextScheduleWake(ctx context.Context, now time.Time) (time.Time, error) {
	if err := s.check(); err != nil {
		return time.Time{}, err
	}
	var next pgtype.Timestamptz
	err := s.pool.QueryRow(ctx, `SELECT least(
			(SELECT min(next_run_at) FROM hrns_schedules WHERE NOT paused AND next_run_at IS NOT NULL),
			(SELECT min(lease_until) FROM hrns_schedule_runs WHERE status = 'pending'))`).Scan(&next)
	if err != nil {
		return time.Time{}, fmt.Errorf("next schedule wake: %w", s.wrap(err))
	}
	return fromTS(next), nil
}

// newRun completes a run to insert: pending, times to the microsecond.
func newRun(r *store.ScheduleRun, scheduleID, owner string) store.ScheduleRun {
	n := *r
	n.ScheduleID, n.Owner, n.Status = scheduleID, owner, store.RunPending
	if n.CreatedAt.IsZero() {
		n.CreatedAt = time.Now()
	}
	if n.UpdatedAt.IsZero() {
		n.UpdatedAt = n.CreatedAt
	}
	n.CreatedAt, n.UpdatedAt, n.ScheduledFor, n.LeaseUntil = micro(n.CreatedAt), micro(n.UpdatedAt), micro(n.ScheduledFor), micro(n.LeaseUntil)
	n.SessionID, n.Error, n.Attempts = "", "", 0
	return n
}

func insertRun(ctx context.Context, tx pgx.Tx, n *store.ScheduleRun) (bool, error) {
	tag, err := tx.Exec(ctx, `INSERT INTO hrns_schedule_runs (`+runColumns+`, idempotency_key) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15)
		ON CONFLICT DO NOTHING`,
		n.ID, n.ScheduleID, n.Owner, n.Status, ts(n.ScheduledFor), n.Manual, n.Skipped, n.SessionID, n.Error,
		n.LeaseOwner, ts(n.LeaseUntil), n.Attempts, ts(n.CreatedAt), ts(n.UpdatedAt), n.IdempotencyKey)
	return tag.RowsAffected() == 1, err
}

// FireSchedule implements [store.Schedules]. The UPDATE's row lock makes a
// concurrent fire of the same schedule wait for this one, then find
// another version.
func (s *Store) FireSchedule(ctx context.Context, p *store.FireParams) (*store.ScheduleRun, error) {
	n := newRun(p.Run, p.ID, p.Owner)
	n.Manual = false
	err := s.scheduleTx(ctx, true, func(tx pgx.Tx) error {
		// A call again of a fire whose answer was lost: the run it
		// inserted, if it did, is the answer.
		held, err := scanRun(tx.QueryRow(ctx, `SELECT `+runColumns+` FROM hrns_schedule_runs WHERE id = $1 AND schedule_id = $2`, n.ID, p.ID))
		switch {
		case err == nil && held.Status == store.RunPending && held.LeaseOwner == n.LeaseOwner:
			if _, err := tx.Exec(ctx, `UPDATE hrns_schedule_runs SET lease_until = $1 WHERE id = $2`, ts(n.LeaseUntil), n.ID); err != nil {
				return err
			}
			held.LeaseUntil = n.LeaseUntil
			n = *held
			return nil
		case err == nil:
			return store.ErrConflict // finished, or taken over
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE hrns_schedules SET next_run_at = $1, last_run_at = $2, version = version + 1
			WHERE id = $3 AND owner = $4 AND version = $5 AND NOT paused`,
			ts(micro(p.NextRunAt)), ts(n.CreatedAt), p.ID, p.Owner, p.Version)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return scheduleMissing(ctx, tx, p.Owner, p.ID, store.ErrConflict)
		}
		ok, err := insertRun(ctx, tx, &n)
		if err == nil && !ok {
			err = store.ErrConflict // the tick was taken
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("fire schedule %s: %w", p.ID, err)
	}
	return &n, nil
}

// AddScheduleRun implements [store.Schedules].
func (s *Store) AddScheduleRun(ctx context.Context, r *store.ScheduleRun) (*store.ScheduleRun, error) {
	if !r.Manual {
		return nil, errors.New("add schedule run: only manual runs are added (ticks are fired)")
	}
	n := newRun(r, r.ScheduleID, r.Owner)
	var held *store.ScheduleRun
	err := s.scheduleTx(ctx, true, func(tx pgx.Tx) error {
		if n.IdempotencyKey != "" {
			// A trigger repeated with its key: the run the first made,
			// if it did, is the answer. The schedule's row lock makes a
			// concurrent trigger with the key wait for this one's
			// commit, and then find its run.
			var one int
			err := tx.QueryRow(ctx, `SELECT 1 FROM hrns_schedules WHERE id = $1 AND owner = $2 FOR UPDATE`, n.ScheduleID, n.Owner).Scan(&one)
			if errors.Is(err, pgx.ErrNoRows) {
				return store.ErrScheduleNotFound
			}
			if err != nil {
				return err
			}
			held, err = scanRun(tx.QueryRow(ctx, `SELECT `+runColumns+` FROM hrns_schedule_runs
				WHERE schedule_id = $1 AND idempotency_key = $2 AND idempotency_key <> '' AND owner = $3`, n.ScheduleID, n.IdempotencyKey, n.Owner))
			if err == nil {
				held.IdempotencyKey = n.IdempotencyKey
				return nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			held = nil
		}
		tag, err := tx.Exec(ctx, `UPDATE hrns_schedules SET last_run_at = $1 WHERE id = $2 AND owner = $3`, ts(n.CreatedAt), n.ScheduleID, n.Owner)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return store.ErrScheduleNotFound
		}
		ok, err := insertRun(ctx, tx, &n)
		if err == nil && !ok {
			err = fmt.Errorf("run %s exists", n.ID)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("add run to schedule %s: %w", r.ScheduleID, err)
	}
	if held != nil {
		return held, nil
	}
	return &n, nil
}

// ClaimScheduleRuns implements [store.Schedules]. SKIP LOCKED: a run
// another worker is claiming is that worker's.
func (s *Store) ClaimScheduleRuns(ctx context.Context, p *store.ClaimParams) ([]*store.ScheduleRun, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	until := micro(p.Now.Add(p.TTL))
	if p.Token != "" {
		// A call again of a claim whose answer was lost: what it took,
		// if anything, is the answer.
		rows, err := s.pool.Query(ctx, `UPDATE hrns_schedule_runs SET lease_until = $3
			WHERE claim_token = $1 AND claim_token <> '' AND lease_owner = $2 AND status = 'pending'
			RETURNING `+runColumns, p.Token, p.Owner, ts(until))
		if err != nil {
			return nil, fmt.Errorf("claim schedule runs: %w", s.wrap(err))
		}
		held, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.ScheduleRun, error) { return scanRun(r) })
		if err != nil {
			return nil, fmt.Errorf("claim schedule runs: %w", s.wrap(err))
		}
		if len(held) > 0 {
			return held, nil
		}
	}
	rows, err := s.pool.Query(ctx, `WITH c AS (
			SELECT id FROM hrns_schedule_runs
			WHERE status = 'pending' AND (lease_until IS NULL OR lease_until <= $1)
			ORDER BY created_at, id LIMIT $2
			FOR UPDATE SKIP LOCKED)
		UPDATE hrns_schedule_runs SET lease_owner = $3, lease_until = $4, claim_token = $5, attempts = attempts + 1
		WHERE id IN (SELECT id FROM c)
		RETURNING `+runColumns, ts(p.Now), max(p.Limit, 1), p.Owner, ts(until), p.Token)
	if err != nil {
		return nil, fmt.Errorf("claim schedule runs: %w", s.wrap(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.ScheduleRun, error) { return scanRun(r) })
	if err != nil {
		return nil, fmt.Errorf("claim schedule runs: %w", s.wrap(err))
	}
	return out, nil
}

// FinishScheduleRun implements [store.Schedules].
func (s *Store) FinishScheduleRun(ctx context.Context, r *store.ScheduleRun, owner string, keep int) error {
	if r.Status == store.RunPending || r.Status == "" {
		return fmt.Errorf("finish schedule run %s: status %q is not an outcome", r.ID, r.Status)
	}
	now := micro(time.Now())
	err := s.scheduleTx(ctx, false, func(tx pgx.Tx) error {
		var holder, scheduleID string
		err := tx.QueryRow(ctx, `SELECT lease_owner, schedule_id FROM hrns_schedule_runs WHERE id = $1 AND status = 'pending' FOR UPDATE`, r.ID).Scan(&holder, &scheduleID)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrScheduleRunNotFound
		}
		if err != nil {
			return err
		}
		if holder != owner {
			return store.ErrLeaseLost
		}
		if _, err := tx.Exec(ctx, `UPDATE hrns_schedule_runs SET status = $1, session_id = $2, error = $3, lease_owner = '', lease_until = NULL, updated_at = $4
			WHERE id = $5`, r.Status, r.SessionID, r.Error, ts(now), r.ID); err != nil {
			return err
		}
		if keep > 0 {
			_, err = tx.Exec(ctx, `DELETE FROM hrns_schedule_runs WHERE schedule_id = $1 AND status <> 'pending' AND id NOT IN (
				SELECT id FROM hrns_schedule_runs WHERE schedule_id = $1 AND status <> 'pending' ORDER BY scheduled_for DESC, id DESC LIMIT $2)`, scheduleID, keep)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("finish schedule run %s: %w", r.ID, err)
	}
	r.LeaseOwner, r.LeaseUntil, r.UpdatedAt = "", time.Time{}, now
	return nil
}

// ListScheduleRuns implements [store.Schedules].
func (s *Store) ListScheduleRuns(ctx context.Context, p *store.ScheduleRunListParams) ([]*store.ScheduleRun, int, error) {
	if err := s.check(); err != nil {
		return nil, 0, err
	}
	if err := scheduleMissing(ctx, s.pool, p.Owner, p.ScheduleID, nil); err != nil {
		if errors.Is(err, store.ErrScheduleNotFound) {
			return nil, 0, err
		}
		return nil, 0, fmt.Errorf("list schedule runs: %w", s.wrap(err))
	}
	where := `schedule_id = $1 AND owner = $2`
	if p.Finished {
		where += ` AND status <> 'pending'`
	}
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM hrns_schedule_runs WHERE `+where, p.ScheduleID, p.Owner).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("list schedule runs: %w", s.wrap(err))
	}
	order := "DESC"
	if p.Ascending {
		order = "ASC"
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	rows, err := s.pool.Query(ctx, `SELECT `+runColumns+` FROM hrns_schedule_runs WHERE `+where+
		` ORDER BY scheduled_for `+order+`, id `+order+` LIMIT $3 OFFSET $4`, p.ScheduleID, p.Owner, limit, max(p.Offset, 0))
	if err != nil {
		return nil, 0, fmt.Errorf("list schedule runs: %w", s.wrap(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.ScheduleRun, error) { return scanRun(r) })
	if err != nil {
		return nil, 0, fmt.Errorf("list schedule runs: %w", s.wrap(err))
	}
	return out, total, nil
}
