package sqlite

import (
	"context"
	"fmt"

	"github.com/hrns-dev/hrns/store"
)

// sealedSQL matches a document column holding the prefix (parameter
// prefix) anywhere but where the prefix and the primary key's id
// (parameter under) start: instr finds the prefix without copying, and
// only a document that holds one is copied by replace.
func sealedSQL(col, prefix, under string) string {
	return `(instr(` + col + `, ` + prefix + `) > 0 AND instr(replace(` + col + `, ` + under + `, ''), ` + prefix + `) > 0)`
}

// SessionsSealed implements [store.Sealed].
func (s *Store) SessionsSealed(ctx context.Context, p *store.SealedParams) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id FROM sessions WHERE id > ?1 AND (`+sealedSQL("request", "?2", "?3")+` OR `+sealedSQL("state", "?2", "?3")+`)
		ORDER BY id LIMIT ?4 + 0`, p.After, p.Prefix, p.Under(), p.PageLimit())
	if err != nil {
		return nil, fmt.Errorf("list sessions to re-encrypt: %w", s.wrap(err))
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("list sessions to re-encrypt: %w", s.wrap(err))
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sessions to re-encrypt: %w", s.wrap(err))
	}
	return out, nil
}

// EntriesSealed implements [store.Sealed].
func (s *Store) EntriesSealed(ctx context.Context, p *store.SealedParams) ([]*store.Entry, error) {
	var kind, owner, name string
	if a := p.AfterEntry; a != nil {
		kind, owner, name = a.Kind, a.Owner, a.Name
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+entryColumns+` FROM registry WHERE (kind, owner, name) > (?1, ?2, ?3) AND `+sealedSQL("spec", "?4", "?5")+`
		ORDER BY kind, owner, name LIMIT ?6 + 0`, kind, owner, name, p.Prefix, p.Under(), p.PageLimit())
	if err != nil {
		return nil, fmt.Errorf("list registry entries to re-encrypt: %w", s.wrap(err))
	}
	out, err := collect(rows, scanEntry)
	if err != nil {
		return nil, fmt.Errorf("list registry entries to re-encrypt: %w", s.wrap(err))
	}
	return out, nil
}

// SchedulesSealed implements [store.Sealed].
func (s *Store) SchedulesSealed(ctx context.Context, p *store.SealedParams) ([]*store.Schedule, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE id > ?1 AND `+sealedSQL("spec", "?2", "?3")+`
		ORDER BY id LIMIT ?4 + 0`, p.After, p.Prefix, p.Under(), p.PageLimit())
	if err != nil {
		return nil, fmt.Errorf("list schedules to re-encrypt: %w", s.wrap(err))
	}
	out, err := collect(rows, scanSchedule)
	if err != nil {
		return nil, fmt.Errorf("list schedules to re-encrypt: %w", s.wrap(err))
	}
	return out, nil
}
