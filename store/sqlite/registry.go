package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hrns-dev/hrns/store"
)

var _ store.Registry = (*Store)(nil)

const entryColumns = `kind, owner, name, type, description, spec, files, version, created_at, updated_at`

func scanEntry(sc scanner) (*store.Entry, error) {
	var (
		e                store.Entry
		spec, files      []byte
		created, updated int64
	)
	if err := sc.Scan(&e.Kind, &e.Owner, &e.Name, &e.Type, &e.Description, &spec, &files, &e.Version, &created, &updated); err != nil {
		return nil, err
	}
	e.Spec, e.Files = spec, files
	e.CreatedAt, e.UpdatedAt = fromNanos(created), fromNanos(updated)
	return &e, nil
}

// entryTime is the time the store records changes at, to the microsecond as in
// PostgreSQL, so that both stores return the same times.
func entryTime() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// CreateEntry implements [store.Registry].
func (s *Store) CreateEntry(ctx context.Context, e *store.Entry) (*store.Entry, error) {
	n := *e
	if n.CreatedAt.IsZero() {
		n.CreatedAt = entryTime()
	}
	if n.UpdatedAt.IsZero() {
		n.UpdatedAt = n.CreatedAt
	}
	n.CreatedAt, n.UpdatedAt = n.CreatedAt.UTC().Truncate(time.Microsecond), n.UpdatedAt.UTC().Truncate(time.Microsecond)
	n.Version = 1
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO registry (`+entryColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO NOTHING`,
			n.Kind, n.Owner, n.Name, n.Type, n.Description, specBlob(n.Spec), blob(n.Files), n.Version, nanos(n.CreatedAt), nanos(n.UpdatedAt))
		if err != nil {
			return err
		}
		if c, err := res.RowsAffected(); err != nil || c == 0 {
			return orErr(err, store.ErrEntryExists)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("create %s %q: %w", n.Kind, n.Name, err)
	}
	return &n, nil
}

// specBlob stores a nil spec as JSON null: the column is NOT NULL.
func specBlob(b []byte) []byte {
	if b == nil {
		return []byte("null")
	}
	return []byte(b)
}

// orErr returns err, or else def.
func orErr(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

// GetEntry implements [store.Registry].
func (s *Store) GetEntry(ctx context.Context, kind, owner, name string) (*store.Entry, error) {
	got, err := scanEntry(s.r.QueryRowContext(ctx, `SELECT `+entryColumns+` FROM registry WHERE kind = ? AND owner = ? AND name = ?`, kind, owner, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrEntryNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %q: %w", kind, name, s.wrap(err))
	}
	return got, nil
}

// ListEntries implements [store.Registry].
func (s *Store) ListEntries(ctx context.Context, p *store.EntryListParams) ([]*store.Entry, int, error) {
	where := `kind = ? AND owner = ?`
	args := []any{p.Kind, p.Owner}
	if p.Type != "" {
		where += ` AND type = ?`
		args = append(args, p.Type)
	}
	// lower() of SQLite folds ASCII letters only, as the interface says.
	if p.Name != "" {
		where += ` AND instr(lower(name), lower(?)) > 0`
		args = append(args, p.Name)
	}
	if p.Search != "" {
		where += ` AND (instr(lower(name), lower(?)) > 0 OR instr(lower(description), lower(?)) > 0)`
		args = append(args, p.Search, p.Search)
	}
	order, err := entryOrder(p.Sort)
	if err != nil {
		return nil, 0, err
	}
	var total int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM registry WHERE `+where, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("list %ss: %w", p.Kind, s.wrap(err))
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	rows, err := s.r.QueryContext(ctx, `SELECT kind, owner, name, type, description, spec, NULL, version, created_at, updated_at FROM registry WHERE `+
		where+` ORDER BY `+order+` LIMIT ? + 0 OFFSET ? + 0`, append(args, limit, max(p.Offset, 0))...)
	if err != nil {
		return nil, 0, fmt.Errorf("list %ss: %w", p.Kind, s.wrap(err))
	}
	out, err := collect(rows, scanEntry)
	if err != nil {
		return nil, 0, fmt.Errorf("list %ss: %w", p.Kind, s.wrap(err))
	}
	return out, total, nil
}

// entryOrder is the ORDER BY clause of a sort of [store.EntryListParams].
// Names compare byte by byte, as in PostgreSQL's "C" collation.
func entryOrder(sort string) (string, error) {
	switch sort {
	case "", store.SortCreatedDesc:
		return `created_at DESC, name`, nil
	case store.SortCreatedAsc:
		return `created_at, name`, nil
	case store.SortNameAsc:
		return `name`, nil
	case store.SortNameDesc:
		return `name DESC`, nil
	}
	return "", fmt.Errorf("list entries: unknown sort %q", sort)
}

// UpdateEntry implements [store.Registry].
func (s *Store) UpdateEntry(ctx context.Context, e *store.Entry) (*store.Entry, error) {
	n := *e
	n.UpdatedAt = entryTime()
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		var created int64
		err := tx.QueryRowContext(ctx, `UPDATE registry SET type = ?, description = ?, spec = ?, files = ?, version = version + 1, updated_at = ?
			WHERE kind = ? AND owner = ? AND name = ? AND version = ? RETURNING created_at, version`,
			n.Type, n.Description, specBlob(n.Spec), blob(n.Files), nanos(n.UpdatedAt), n.Kind, n.Owner, n.Name, n.Version).Scan(&created, &n.Version)
		if errors.Is(err, sql.ErrNoRows) {
			var one int
			err = tx.QueryRowContext(ctx, `SELECT 1 FROM registry WHERE kind = ? AND owner = ? AND name = ?`, n.Kind, n.Owner, n.Name).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return store.ErrEntryNotFound
			}
			return orErr(err, store.ErrConflict)
		}
		n.CreatedAt = fromNanos(created)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("update %s %q: %w", n.Kind, n.Name, err)
	}
	return &n, nil
}

// DeleteEntry implements [store.Registry].
func (s *Store) DeleteEntry(ctx context.Context, kind, owner, name string) error {
	return s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM registry WHERE kind = ? AND owner = ? AND name = ?`, kind, owner, name)
		if err != nil {
			return fmt.Errorf("delete %s %q: %w", kind, name, err)
		}
		if c, err := res.RowsAffected(); err != nil || c == 0 {
			return orErr(err, fmt.Errorf("delete %s %q: %w", kind, name, store.ErrEntryNotFound))
		}
		return nil
	})
}
