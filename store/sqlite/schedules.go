package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

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
		paused                       int
		next, last, created, updated int64
	)
	if err := sc.Scan(&s.ID, &s.Owner, &spec, &paused, &next, &last, &s.Version, &created, &updated); err != nil {
		return nil, err
	}
	s.Spec, s.Paused = spec, paused != 0
	s.NextRunAt, s.LastRunAt = fromNanos(next), fromNanos(last)
	s.CreatedAt, s.UpdatedAt = fromNanos(created), fromNanos(updated)
	return &s, nil
}

func scanRun(sc scanner) (*store.ScheduleRun, error) {
	var (
		r                                       store.ScheduleRun
		manual                                  int
		scheduled, leaseUntil, created, updated int64
	)
	if err := sc.Scan(&r.ID, &r.ScheduleID, &r.Owner, &r.Status, &scheduled, &manual, &r.Skipped, &r.SessionID, &r.Error,
		&r.LeaseOwner, &leaseUntil, &r.Attempts, &created, &updated); err != nil {
		return nil, err
	}
	r.Manual = manual != 0
	r.ScheduledFor, r.LeaseUntil = fromNanos(scheduled), fromNanos(leaseUntil)
	r.CreatedAt, r.UpdatedAt = fromNanos(created), fromNanos(updated)
	return &r, nil
}

// micro is a time as both stores keep it: UTC, to the microsecond.
func micro(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

// CreateSchedule implements [store.Schedules].
func (s *Store) CreateSchedule(ctx context.Context, sc *store.Schedule) (*store.Schedule, error) {
	n := *sc
	if n.CreatedAt.IsZero() {
		n.CreatedAt = entryTime()
	}
	if n.UpdatedAt.IsZero() {
		n.UpdatedAt = n.CreatedAt
	}
	n.CreatedAt, n.UpdatedAt, n.NextRunAt, n.LastRunAt = micro(n.CreatedAt), micro(n.UpdatedAt), micro(n.NextRunAt), time.Time{}
	n.Version = 1
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO schedules (`+scheduleColumns+`) VALUES (?,?,?,?,?,?,?,?,?)`,
			n.ID, n.Owner, specBlob(n.Spec), boolInt(n.Paused), nanos(n.NextRunAt), 0, n.Version, nanos(n.CreatedAt), nanos(n.UpdatedAt))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create schedule: %w", err)
	}
	s.hub.Notify(store.ScheduleTopic)
	return &n, nil
}

// GetSchedule implements [store.Schedules].
func (s *Store) GetSchedule(ctx context.Context, owner, id string) (*store.Schedule, error) {
	got, err := scanSchedule(s.r.QueryRowContext(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE id = ? AND owner = ?`, id, owner))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrScheduleNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get schedule: %w", s.wrap(err))
	}
	return got, nil
}

// ListSchedules implements [store.Schedules].
func (s *Store) ListSchedules(ctx context.Context, p *store.ScheduleListParams) ([]*store.Schedule, int, error) {
	var total int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM schedules WHERE owner = ?`, p.Owner).Scan(&total); err != nil {
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
	rows, err := s.r.QueryContext(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE owner = ? ORDER BY created_at `+order+`, id `+order+` LIMIT ? + 0 OFFSET ? + 0`,
		p.Owner, limit, max(p.Offset, 0))
	if err != nil {
		return nil, 0, fmt.Errorf("list schedules: %w", s.wrap(err))
	}
	out, err := collect(rows, scanSchedule)
	if err != nil {
		return nil, 0, fmt.Errorf("list schedules: %w", s.wrap(err))
	}
	return out, total, nil
}

// UpdateSchedule implements [store.Schedules].
func (s *Store) UpdateSchedule(ctx context.Context, sc *store.Schedule) (*store.Schedule, error) {
	var out *store.Schedule
	now := entryTime()
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		got, err := scanSchedule(tx.QueryRowContext(ctx, `UPDATE schedules SET spec = ?, paused = ?, next_run_at = ?, version = version + 1, updated_at = ?
			WHERE id = ? AND owner = ? AND version = ? RETURNING `+scheduleColumns,
			specBlob(sc.Spec), boolInt(sc.Paused), nanos(micro(sc.NextRunAt)), nanos(now), sc.ID, sc.Owner, sc.Version))
		if errors.Is(err, sql.ErrNoRows) {
			return s.scheduleMissing(ctx, tx, sc.Owner, sc.ID, store.ErrConflict)
		}
		out = got
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("update schedule %s: %w", sc.ID, err)
	}
	s.hub.Notify(store.ScheduleTopic)
	return out, nil
}

// scheduleMissing returns ErrScheduleNotFound when the owner has no
// schedule with the id, else otherwise.
func (s *Store) scheduleMissing(ctx context.Context, tx *writeTx, owner, id string, otherwise error) error {
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM schedules WHERE id = ? AND owner = ?`, id, owner).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrScheduleNotFound
	}
	return orErr(err, otherwise)
}

// DeleteSchedule implements [store.Schedules].
func (s *Store) DeleteSchedule(ctx context.Context, owner, id string) error {
	return s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM schedules WHERE id = ? AND owner = ?`, id, owner)
		if err != nil {
			return fmt.Errorf("delete schedule %s: %w", id, err)
		}
		if c, err := res.RowsAffected(); err != nil || c == 0 {
			return orErr(err, fmt.Errorf("delete schedule %s: %w", id, store.ErrScheduleNotFound))
		}
		return nil
	})
}

// DueSchedules implements [store.Schedules].
func (s *Store) DueSchedules(ctx context.Context, now time.Time, limit int) ([]*store.Schedule, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+scheduleColumns+` FROM schedules
		WHERE paused = 0 AND next_run_at != 0 AND next_run_at <= ? ORDER BY next_run_at, id LIMIT ? + 0`, nanos(now), limit)
	if err != nil {
		return nil, fmt.Errorf("due schedules: %w", s.wrap(err))
	}
	out, err := collect(rows, scanSchedule)
	if err != nil {
		return nil, fmt.Errorf("due schedules: %w", s.wrap(err))
	}
	return out, nil
}

// NextScheduleWake implements [store.Schedules].
func (s *Store) NextScheduleWake(ctx context.Context, now time.Time) (time.Time, error) {
	var next sql.NullInt64
	err := s.r.QueryRowContext(ctx, `SELECT MIN(t) FROM (
			SELECT MIN(next_run_at) AS t FROM schedules WHERE paused = 0 AND next_run_at != 0
			UNION ALL
			SELECT MIN(lease_until) FROM schedule_runs WHERE status = 'pending')`).Scan(&next)
	if err != nil {
		return time.Time{}, fmt.Errorf("next schedule wake: %w", s.wrap(err))
	}
	if !next.Valid {
		return time.Time{}, nil
	}
	return fromNanos(next.Int64), nil
}

// newRun completes a run to insert: pending, times to the microsecond.
func newRun(r *store.ScheduleRun, scheduleID, owner string) store.ScheduleRun {
	n := *r
	n.ScheduleID, n.Owner, n.Status = scheduleID, owner, store.RunPending
	if n.CreatedAt.IsZero() {
		n.CreatedAt = entryTime()
	}
	if n.UpdatedAt.IsZero() {
		n.UpdatedAt = n.CreatedAt
	}
	n.CreatedAt, n.UpdatedAt, n.ScheduledFor, n.LeaseUntil = micro(n.CreatedAt), micro(n.UpdatedAt), micro(n.ScheduledFor), micro(n.LeaseUntil)
	n.SessionID, n.Error, n.Attempts = "", "", 0
	return n
}

func insertRun(ctx context.Context, tx *writeTx, n *store.ScheduleRun) (bool, error) {
	res, err := tx.ExecContext(ctx, `INSERT INTO schedule_runs (`+runColumns+`, idempotency_key) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
		ON CONFLICT DO NOTHING`,
		n.ID, n.ScheduleID, n.Owner, n.Status, nanos(n.ScheduledFor), boolInt(n.Manual), n.Skipped, n.SessionID, n.Error,
		n.LeaseOwner, nanos(n.LeaseUntil), n.Attempts, nanos(n.CreatedAt), nanos(n.UpdatedAt), n.IdempotencyKey)
	if err != nil {
		return false, err
	}
	c, err := res.RowsAffected()
	return c == 1, err
}

// FireSchedule implements [store.Schedules].
func (s *Store) FireSchedule(ctx context.Context, p *store.FireParams) (*store.ScheduleRun, error) {
	n := newRun(p.Run, p.ID, p.Owner)
	n.Manual = false
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		// A call again of a fire whose answer was lost: the run it
		// inserted, if it did, is the answer.
		held, err := scanRun(tx.QueryRowContext(ctx, `SELECT `+runColumns+` FROM schedule_runs WHERE id = ? AND schedule_id = ?`, n.ID, p.ID))
		switch {
		case err == nil && held.Status == store.RunPending && held.LeaseOwner == n.LeaseOwner:
			if _, err := tx.ExecContext(ctx, `UPDATE schedule_runs SET lease_until = ? WHERE id = ?`, nanos(n.LeaseUntil), n.ID); err != nil {
				return err
			}
			held.LeaseUntil = n.LeaseUntil
			n = *held
			return nil
		case err == nil:
			return store.ErrConflict // finished, or taken over
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE schedules SET next_run_at = ?, last_run_at = ?, version = version + 1
			WHERE id = ? AND owner = ? AND version = ? AND paused = 0`,
			nanos(micro(p.NextRunAt)), nanos(n.CreatedAt), p.ID, p.Owner, p.Version)
		if err != nil {
			return err
		}
		if c, err := res.RowsAffected(); err != nil || c == 0 {
			return orErr(err, s.scheduleMissing(ctx, tx, p.Owner, p.ID, store.ErrConflict))
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
	s.hub.Notify(store.ScheduleTopic)
	return &n, nil
}

// AddScheduleRun implements [store.Schedules].
func (s *Store) AddScheduleRun(ctx context.Context, r *store.ScheduleRun) (*store.ScheduleRun, error) {
	if !r.Manual {
		return nil, errors.New("add schedule run: only manual runs are added (ticks are fired)")
	}
	n := newRun(r, r.ScheduleID, r.Owner)
	var held *store.ScheduleRun
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		if n.IdempotencyKey != "" {
			// A trigger repeated with its key: the run the first made,
			// if it did, is the answer. Writes are serial: no other
			// can insert the key between this read and the insert.
			var err error
			held, err = scanRun(tx.QueryRowContext(ctx, `SELECT `+runColumns+` FROM schedule_runs
				WHERE schedule_id = ? AND idempotency_key = ? AND idempotency_key != '' AND owner = ?`, n.ScheduleID, n.IdempotencyKey, n.Owner))
			if err == nil {
				held.IdempotencyKey = n.IdempotencyKey
				return nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		res, err := tx.ExecContext(ctx, `UPDATE schedules SET last_run_at = ? WHERE id = ? AND owner = ?`, nanos(n.CreatedAt), n.ScheduleID, n.Owner)
		if err != nil {
			return err
		}
		if c, err := res.RowsAffected(); err != nil || c == 0 {
			return orErr(err, store.ErrScheduleNotFound)
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
	s.hub.Notify(store.ScheduleTopic)
	return &n, nil
}

// ClaimScheduleRuns implements [store.Schedules].
func (s *Store) ClaimScheduleRuns(ctx context.Context, p *store.ClaimParams) ([]*store.ScheduleRun, error) {
	var out []*store.ScheduleRun
	until := micro(p.Now.Add(p.TTL))
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		if p.Token != "" {
			// A call again of a claim whose answer was lost: what it
			// took, if anything, is the answer.
			rows, err := tx.QueryContext(ctx, runsClaimedSQL, p.Token, p.Owner)
			if err != nil {
				return err
			}
			if out, err = collect(rows, scanRun); err != nil {
				return err
			}
			for _, r := range out {
				if _, err := tx.ExecContext(ctx, `UPDATE schedule_runs SET lease_until = ? WHERE id = ?`, nanos(until), r.ID); err != nil {
					return err
				}
				r.LeaseUntil = until
			}
			if len(out) > 0 {
				return nil
			}
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+runColumns+` FROM schedule_runs
			WHERE status = 'pending' AND lease_until <= ? ORDER BY created_at, id LIMIT ? + 0`, nanos(p.Now), max(p.Limit, 1))
		if err != nil {
			return err
		}
		if out, err = collect(rows, scanRun); err != nil {
			return err
		}
		for _, r := range out {
			if _, err := tx.ExecContext(ctx, `UPDATE schedule_runs SET lease_owner = ?, lease_until = ?, claim_token = ?, attempts = attempts + 1 WHERE id = ?`,
				p.Owner, nanos(until), p.Token, r.ID); err != nil {
				return err
			}
			r.LeaseOwner, r.LeaseUntil = p.Owner, until
			r.Attempts++
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim schedule runs: %w", err)
	}
	return out, nil
}

// runsClaimedSQL reads the pending runs the claim of token ?1 (of owner
// ?2) holds, through schedule_runs_by_claim_token (whose condition it
// repeats, so that SQLite may use it).
const runsClaimedSQL = `SELECT ` + runColumns + ` FROM schedule_runs
	WHERE claim_token = ?1 AND claim_token != '' AND lease_owner = ?2 AND status = 'pending' ORDER BY created_at, id`

// FinishScheduleRun implements [store.Schedules].
func (s *Store) FinishScheduleRun(ctx context.Context, r *store.ScheduleRun, owner string, keep int) error {
	if r.Status == store.RunPending || r.Status == "" {
		return fmt.Errorf("finish schedule run %s: status %q is not an outcome", r.ID, r.Status)
	}
	now := entryTime()
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		var holder, scheduleID string
		err := tx.QueryRowContext(ctx, `SELECT lease_owner, schedule_id FROM schedule_runs WHERE id = ? AND status = 'pending'`, r.ID).Scan(&holder, &scheduleID)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrScheduleRunNotFound
		}
		if err != nil {
			return err
		}
		if holder != owner {
			return store.ErrLeaseLost
		}
		if _, err := tx.ExecContext(ctx, `UPDATE schedule_runs SET status = ?, session_id = ?, error = ?, lease_owner = '', lease_until = 0, updated_at = ?
			WHERE id = ?`, r.Status, r.SessionID, r.Error, nanos(now), r.ID); err != nil {
			return err
		}
		if keep > 0 {
			_, err = tx.ExecContext(ctx, `DELETE FROM schedule_runs WHERE schedule_id = ?1 AND status != 'pending' AND id NOT IN (
				SELECT id FROM schedule_runs WHERE schedule_id = ?1 AND status != 'pending' ORDER BY scheduled_for DESC, id DESC LIMIT ?2 + 0)`, scheduleID, keep)
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
	var one int
	err := s.r.QueryRowContext(ctx, `SELECT 1 FROM schedules WHERE id = ? AND owner = ?`, p.ScheduleID, p.Owner).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, store.ErrScheduleNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("list schedule runs: %w", s.wrap(err))
	}
	where := `schedule_id = ? AND owner = ?`
	if p.Finished {
		where += ` AND status != 'pending'`
	}
	var total int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM schedule_runs WHERE `+where, p.ScheduleID, p.Owner).Scan(&total); err != nil {
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
	rows, err := s.r.QueryContext(ctx, `SELECT `+runColumns+` FROM schedule_runs WHERE `+where+
		` ORDER BY scheduled_for `+order+`, id `+order+` LIMIT ? + 0 OFFSET ? + 0`, p.ScheduleID, p.Owner, limit, max(p.Offset, 0))
	if err != nil {
		return nil, 0, fmt.Errorf("list schedule runs: %w", s.wrap(err))
	}
	out, err := collect(rows, scanRun)
	if err != nil {
		return nil, 0, fmt.Errorf("list schedule runs: %w", s.wrap(err))
	}
	return out, total, nil
}
