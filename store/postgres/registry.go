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

var _ store.Registry = (*Store)(nil)

const entryColumns = `kind, owner, name, type, description, spec, files, version, created_at, updated_at`

func scanEntry(row pgx.Row) (*store.Entry, error) {
	var (
		e                store.Entry
		spec, files      []byte
		created, updated pgtype.Timestamptz
	)
	if err := row.Scan(&e.Kind, &e.Owner, &e.Name, &e.Type, &e.Description, &spec, &files, &e.Version, &created, &updated); err != nil {
		return nil, err
	}
	e.Spec, e.Files = spec, files
	e.CreatedAt, e.UpdatedAt = fromTS(created), fromTS(updated)
	return &e, nil
}

// entryTime is the time the store records changes at: PostgreSQL keeps
// microseconds, and the entry returned is the one stored.
func entryTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// specBytes stores a nil spec as JSON null: the column is NOT NULL.
func specBytes(b []byte) []byte {
	if b == nil {
		return []byte("null")
	}
	return b
}

// CreateEntry implements [store.Registry].
func (s *Store) CreateEntry(ctx context.Context, e *store.Entry) (*store.Entry, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	n := *e
	if n.CreatedAt.IsZero() {
		n.CreatedAt = time.Now()
	}
	if n.UpdatedAt.IsZero() {
		n.UpdatedAt = n.CreatedAt
	}
	n.CreatedAt, n.UpdatedAt = entryTime(n.CreatedAt), entryTime(n.UpdatedAt)
	n.Version = 1
	tag, err := s.pool.Exec(ctx, `INSERT INTO hrns_registry (`+entryColumns+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10) ON CONFLICT DO NOTHING`,
		n.Kind, n.Owner, n.Name, n.Type, text(n.Description), specBytes(n.Spec), []byte(n.Files), n.Version, ts(n.CreatedAt), ts(n.UpdatedAt))
	if err != nil {
		return nil, fmt.Errorf("create %s %q: %w", n.Kind, n.Name, s.wrap(err))
	}
	if tag.RowsAffected() == 0 {
		return nil, fmt.Errorf("create %s %q: %w", n.Kind, n.Name, store.ErrEntryExists)
	}
	return &n, nil
}

// GetEntry implements [store.Registry].
func (s *Store) GetEntry(ctx context.Context, kind, owner, name string) (*store.Entry, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	got, err := scanEntry(s.pool.QueryRow(ctx, `SELECT `+entryColumns+` FROM hrns_registry WHERE kind = $1 AND owner = $2 AND name = $3`, kind, owner, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrEntryNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %q: %w", kind, name, s.wrap(err))
	}
	return got, nil
}

// ListEntries implements [store.Registry]. Matching and ordering use the
// "C" collation, whatever the database's: lower() then folds ASCII letters
// only and names compare byte by byte, as in SQLite.
func (s *Store) ListEntries(ctx context.Context, p *store.EntryListParams) ([]*store.Entry, int, error) {
	if err := s.check(); err != nil {
		return nil, 0, err
	}
	where := `kind = $1 AND owner = $2`
	args := []any{p.Kind, p.Owner}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if p.Type != "" {
		where += ` AND type = ` + arg(p.Type)
	}
	if p.Name != "" {
		where += ` AND strpos(lower(name COLLATE "C"), lower(` + arg(p.Name) + ` COLLATE "C")) > 0`
	}
	if p.Search != "" {
		q := arg(p.Search)
		where += ` AND (strpos(lower(name COLLATE "C"), lower(` + q + ` COLLATE "C")) > 0 OR strpos(lower(description COLLATE "C"), lower(` + q + ` COLLATE "C")) > 0)`
	}
	var order string
	switch p.Sort {
	case "", store.SortCreatedDesc:
		order = `created_at DESC, name COLLATE "C"`
	case store.SortCreatedAsc:
		order = `created_at, name COLLATE "C"`
	case store.SortNameAsc:
		order = `name COLLATE "C"`
	case store.SortNameDesc:
		order = `name COLLATE "C" DESC`
	default:
		return nil, 0, fmt.Errorf("list entries: unknown sort %q", p.Sort)
	}
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM hrns_registry WHERE `+where, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("list %ss: %w", p.Kind, s.wrap(err))
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	sql := `SELECT kind, owner, name, type, description, spec, NULL::bytea, version, created_at, updated_at FROM hrns_registry WHERE ` +
		where + ` ORDER BY ` + order + ` LIMIT ` + arg(limit) + ` OFFSET ` + arg(max(p.Offset, 0))
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("list %ss: %w", p.Kind, s.wrap(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Entry, error) { return scanEntry(r) })
	if err != nil {
		return nil, 0, fmt.Errorf("list %ss: %w", p.Kind, s.wrap(err))
	}
	return out, total, nil
}

// UpdateEntry implements [store.Registry].
func (s *Store) UpdateEntry(ctx context.Context, e *store.Entry) (*store.Entry, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	n := *e
	n.UpdatedAt = entryTime(time.Now())
	var created pgtype.Timestamptz
	err := s.pool.QueryRow(ctx, `UPDATE hrns_registry SET type = $1, description = $2, spec = $3, files = $4, version = version + 1, updated_at = $5
		WHERE kind = $6 AND owner = $7 AND name = $8 AND version = $9 RETURNING created_at, version`,
		n.Type, text(n.Description), specBytes(n.Spec), []byte(n.Files), ts(n.UpdatedAt), n.Kind, n.Owner, n.Name, n.Version).Scan(&created, &n.Version)
	if errors.Is(err, pgx.ErrNoRows) {
		var one int
		err = s.pool.QueryRow(ctx, `SELECT 1 FROM hrns_registry WHERE kind = $1 AND owner = $2 AND name = $3`, n.Kind, n.Owner, n.Name).Scan(&one)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			err = store.ErrEntryNotFound
		case err == nil:
			err = store.ErrConflict
		}
	}
	if err != nil {
		return nil, fmt.Errorf("update %s %q: %w", n.Kind, n.Name, s.wrap(err))
	}
	n.CreatedAt = fromTS(created)
	return &n, nil
}

// DeleteEntry implements [store.Registry].
func (s *Store) DeleteEntry(ctx context.Context, kind, owner, name string) error {
	if err := s.check(); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM hrns_registry WHERE kind = $1 AND owner = $2 AND name = $3`, kind, owner, name)
	if err != nil {
		return fmt.Errorf("delete %s %q: %w", kind, name, s.wrap(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete %s %q: %w", kind, name, store.ErrEntryNotFound)
	}
	return nil
}
