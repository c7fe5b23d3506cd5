package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/hrns-dev/hrns/store"
)

// sealedSQL matches a bytea document column holding the prefix
// (parameter prefix, bytea) anywhere but where the prefix and the primary
// key's id (parameter under, text) start. position finds the prefix in
// the bytes; only a document that holds one is turned into text, by the
// escape encoding, which keeps ASCII as it is (but the backslash, which
// neither parameter holds) so that it finds them as in the bytes, and
// fails on no byte (convert_from would on a document that is not UTF-8).
func sealedSQL(col, prefix, under string) string {
	return `(position(` + prefix + `::bytea in ` + col + `) > 0 AND
		strpos(replace(encode(` + col + `, 'escape'), ` + under + `::text, ''), convert_from(` + prefix + `::bytea, 'UTF8')) > 0)`
}

// SessionsSealed implements [store.Sealed]. The pages follow the primary
// key's order (the column's collation), so that each reads on from where
// the last stopped.
func (s *Store) SessionsSealed(ctx context.Context, p *store.SealedParams) ([]string, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT id FROM hrns_sessions WHERE id > $1 AND (`+sealedSQL("request", "$2", "$3")+` OR `+sealedSQL("state", "$2", "$3")+`)
		ORDER BY id LIMIT $4`, p.After, []byte(p.Prefix), p.Under(), p.PageLimit())
	if err != nil {
		return nil, fmt.Errorf("list sessions to re-encrypt: %w", s.wrap(err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list sessions to re-encrypt: %w", s.wrap(err))
	}
	return out, nil
}

// EntriesSealed implements [store.Sealed].
func (s *Store) EntriesSealed(ctx context.Context, p *store.SealedParams) ([]*store.Entry, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var kind, owner, name string
	if a := p.AfterEntry; a != nil {
		kind, owner, name = a.Kind, a.Owner, a.Name
	}
	rows, err := s.pool.Query(ctx, `SELECT `+entryColumns+` FROM hrns_registry WHERE (kind, owner, name) > ($1, $2, $3) AND `+sealedSQL("spec", "$4", "$5")+`
		ORDER BY kind, owner, name LIMIT $6`, kind, owner, name, []byte(p.Prefix), p.Under(), p.PageLimit())
	if err != nil {
		return nil, fmt.Errorf("list registry entries to re-encrypt: %w", s.wrap(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Entry, error) { return scanEntry(r) })
	if err != nil {
		return nil, fmt.Errorf("list registry entries to re-encrypt: %w", s.wrap(err))
	}
	return out, nil
}

// SchedulesSealed implements [store.Sealed].
func (s *Store) SchedulesSealed(ctx context.Context, p *store.SealedParams) ([]*store.Schedule, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+scheduleColumns+` FROM hrns_schedules WHERE id > $1 AND `+sealedSQL("spec", "$2", "$3")+`
		ORDER BY id LIMIT $4`, p.After, []byte(p.Prefix), p.Under(), p.PageLimit())
	if err != nil {
		return nil, fmt.Errorf("list schedules to re-encrypt: %w", s.wrap(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Schedule, error) { return scanSchedule(r) })
	if err != nil {
		return nil, fmt.Errorf("list schedules to re-encrypt: %w", s.wrap(err))
	}
	return out, nil
}
