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

var _ store.Profiles = (*Store)(nil)

const profileColumns = `id, owner, ready, upload_token, upload_expires, name, description, browser_name, browser_version,
	labels, size_bytes, checksum, is_default, usage_count, last_used_at, created_at, updated_at`

func scanProfile(row pgx.Row) (*store.Profile, error) {
	var (
		p                         store.Profile
		token, labels             []byte
		description               pgtype.Text
		expires, created, updated pgtype.Timestamptz
		lastUsed                  pgtype.Timestamptz
	)
	if err := row.Scan(&p.ID, &p.Owner, &p.Ready, &token, &expires, &p.Name, &description, &p.BrowserName, &p.BrowserVersion,
		&labels, &p.SizeBytes, &p.Checksum, &p.IsDefault, &p.UsageCount, &lastUsed, &created, &updated); err != nil {
		return nil, err
	}
	p.UploadToken = token
	if len(labels) > 0 {
		p.Labels = labels
	}
	if description.Valid {
		p.Description = &description.String
	}
	if lastUsed.Valid {
		t := fromTS(lastUsed)
		p.LastUsedAt = &t
	}
	p.UploadExpires, p.CreatedAt, p.UpdatedAt = fromTS(expires), fromTS(created), fromTS(updated)
	return &p, nil
}

// CreateProfile implements [store.Profiles].
func (s *Store) CreateProfile(ctx context.Context, p *store.Profile) (*store.Profile, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	n := *p
	if n.CreatedAt.IsZero() {
		n.CreatedAt = time.Now()
	}
	if n.UpdatedAt.IsZero() {
		n.UpdatedAt = n.CreatedAt
	}
	n.CreatedAt, n.UpdatedAt, n.UploadExpires = entryTime(n.CreatedAt), entryTime(n.UpdatedAt), entryTime(n.UploadExpires)
	n.Ready, n.IsDefault, n.UsageCount, n.LastUsedAt = false, false, 0, nil
	n.UploadToken, n.Labels = cloneBytes(n.UploadToken), cloneBytes(n.Labels)
	_, err := s.pool.Exec(ctx, `INSERT INTO hrns_browser_profiles (`+profileColumns+`)
		VALUES ($1,$2,false,$3,$4,$5,$6,$7,$8,$9,$10,$11,false,0,NULL,$12,$13)`,
		n.ID, n.Owner, notNil(n.UploadToken), ts(n.UploadExpires), text(n.Name), textPtr(n.Description), n.BrowserName, text(n.BrowserVersion),
		[]byte(n.Labels), n.SizeBytes, n.Checksum, ts(n.CreatedAt), ts(n.UpdatedAt))
	if err != nil {
		return nil, fmt.Errorf("create browser profile %s: %w", n.ID, s.wrap(err))
	}
	return &n, nil
}

// GetProfile implements [store.Profiles].
func (s *Store) GetProfile(ctx context.Context, owner, id string) (*store.Profile, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	got, err := scanProfile(s.pool.QueryRow(ctx, `SELECT `+profileColumns+` FROM hrns_browser_profiles WHERE id = $1 AND owner = $2`, id, owner))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrProfileNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get browser profile %s: %w", id, s.wrap(err))
	}
	return got, nil
}

// ProfileArchive implements [store.Profiles].
func (s *Store) ProfileArchive(ctx context.Context, owner, id string) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var archive []byte
	err := s.pool.QueryRow(ctx, `SELECT archive FROM hrns_browser_profiles WHERE id = $1 AND owner = $2`, id, owner).Scan(&archive)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrProfileNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read browser profile %s: %w", id, s.wrap(err))
	}
	return archive, nil
}

// PutProfileUpload implements [store.Profiles].
func (s *Store) PutProfileUpload(ctx context.Context, id string, tokenHash []byte, now time.Time, archive []byte) error {
	if err := s.check(); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE hrns_browser_profiles SET archive = $1
		WHERE id = $2 AND NOT ready AND upload_token = $3 AND upload_expires > $4`, notNil(archive), id, notNil(tokenHash), ts(now))
	if err != nil {
		return fmt.Errorf("upload browser profile %s: %w", id, s.wrap(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("upload browser profile %s: %w", id, store.ErrProfileNotFound)
	}
	return nil
}

// CompleteProfile implements [store.Profiles].
func (s *Store) CompleteProfile(ctx context.Context, p *store.Profile, archive []byte) (*store.Profile, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	got, err := scanProfile(s.pool.QueryRow(ctx, `UPDATE hrns_browser_profiles SET ready = true, upload_token = '', name = $1,
		description = $2, browser_name = $3, browser_version = $4, labels = $5, size_bytes = $6, checksum = $7, updated_at = $8
		WHERE id = $9 AND owner = $10 AND NOT ready AND archive = $11 RETURNING `+profileColumns,
		text(p.Name), textPtr(p.Description), p.BrowserName, text(p.BrowserVersion), []byte(p.Labels), p.SizeBytes, p.Checksum, ts(entryTime(time.Now())), p.ID, p.Owner, notNil(archive)))
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrProfileNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("complete browser profile %s: %w", p.ID, s.wrap(err))
	}
	return got, nil
}

// ListProfiles implements [store.Profiles]. Ids compare byte by byte, as
// in SQLite.
func (s *Store) ListProfiles(ctx context.Context, p *store.ProfileListParams) ([]*store.Profile, int, error) {
	if err := s.check(); err != nil {
		return nil, 0, err
	}
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM hrns_browser_profiles WHERE owner = $1 AND ready`, p.Owner).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("list browser profiles: %w", s.wrap(err))
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 10
	}
	rows, err := s.pool.Query(ctx, `SELECT `+profileColumns+` FROM hrns_browser_profiles
		WHERE owner = $1 AND ready ORDER BY created_at DESC, id COLLATE "C" LIMIT $2 OFFSET $3`, p.Owner, limit, max(p.Offset, 0))
	if err != nil {
		return nil, 0, fmt.Errorf("list browser profiles: %w", s.wrap(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Profile, error) { return scanProfile(r) })
	if err != nil {
		return nil, 0, fmt.Errorf("list browser profiles: %w", s.wrap(err))
	}
	return out, total, nil
}

// CountProfiles implements [store.Profiles].
func (s *Store) CountProfiles(ctx context.Context, owner string, now time.Time) (ready, pending int, err error) {
	if err := s.check(); err != nil {
		return 0, 0, err
	}
	err = s.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE ready), count(*) FILTER (WHERE NOT ready AND upload_expires > $2)
		FROM hrns_browser_profiles WHERE owner = $1`, owner, ts(now)).Scan(&ready, &pending)
	if err != nil {
		return 0, 0, fmt.Errorf("count browser profiles: %w", s.wrap(err))
	}
	return ready, pending, nil
}

// DeleteProfile implements [store.Profiles].
func (s *Store) DeleteProfile(ctx context.Context, owner, id string) error {
	if err := s.check(); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM hrns_browser_profiles WHERE id = $1 AND owner = $2`, id, owner)
	if err != nil {
		return fmt.Errorf("delete browser profile %s: %w", id, s.wrap(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete browser profile %s: %w", id, store.ErrProfileNotFound)
	}
	return nil
}

// DeleteExpiredUploads implements [store.Profiles].
func (s *Store) DeleteExpiredUploads(ctx context.Context, before time.Time) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM hrns_browser_profiles WHERE NOT ready AND upload_expires <= $1`, ts(before))
	if err != nil {
		return 0, fmt.Errorf("delete expired browser profile uploads: %w", s.wrap(err))
	}
	return int(tag.RowsAffected()), nil
}

// SetDefaultProfile implements [store.Profiles].
func (s *Store) SetDefaultProfile(ctx context.Context, owner, id string, on bool) (*store.Profile, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var out *store.Profile
	now := ts(entryTime(time.Now()))
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var browser string
		// The owner's profiles of the browser are locked in one order, so
		// that two concurrent sets of one browser's default serialise.
		err := tx.QueryRow(ctx, `SELECT browser_name FROM hrns_browser_profiles WHERE id = $1 AND owner = $2 AND ready`, id, owner).Scan(&browser)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrProfileNotFound
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT 1 FROM hrns_browser_profiles WHERE owner = $1 AND browser_name = $2 ORDER BY id FOR UPDATE`, owner, browser); err != nil {
			return err
		}
		if on {
			if _, err := tx.Exec(ctx, `UPDATE hrns_browser_profiles SET is_default = false, updated_at = $1
				WHERE owner = $2 AND browser_name = $3 AND is_default AND id <> $4`, now, owner, browser, id); err != nil {
				return err
			}
		}
		out, err = scanProfile(tx.QueryRow(ctx, `UPDATE hrns_browser_profiles SET is_default = $1, updated_at = $2
			WHERE id = $3 AND owner = $4 AND ready RETURNING `+profileColumns, on, now, id, owner))
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrProfileNotFound
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("set the default browser profile %s: %w", id, s.wrap(err))
	}
	return out, nil
}

// DefaultProfile implements [store.Profiles].
func (s *Store) DefaultProfile(ctx context.Context, owner, browserName string) (*store.Profile, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	got, err := scanProfile(s.pool.QueryRow(ctx, `SELECT `+profileColumns+` FROM hrns_browser_profiles
		WHERE owner = $1 AND browser_name = $2 AND is_default AND ready`, owner, browserName))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrProfileNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get the default browser profile: %w", s.wrap(err))
	}
	return got, nil
}

// UseProfile implements [store.Profiles].
func (s *Store) UseProfile(ctx context.Context, owner, id string, at time.Time) error {
	if err := s.check(); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `UPDATE hrns_browser_profiles SET usage_count = usage_count + 1, last_used_at = $1
		WHERE id = $2 AND owner = $3 AND ready`, ts(entryTime(at)), id, owner)
	if err != nil {
		return fmt.Errorf("use browser profile %s: %w", id, s.wrap(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("use browser profile %s: %w", id, store.ErrProfileNotFound)
	}
	return nil
}

// SaveProfileArchive implements [store.Profiles].
func (s *Store) SaveProfileArchive(ctx context.Context, owner, id string, archive []byte, checksum string, at time.Time) (*store.Profile, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	got, err := scanProfile(s.pool.QueryRow(ctx, `UPDATE hrns_browser_profiles SET archive = $1, size_bytes = $2, checksum = $3, updated_at = $4
		WHERE id = $5 AND owner = $6 AND ready RETURNING `+profileColumns,
		notNil(archive), int64(len(archive)), checksum, ts(entryTime(at)), id, owner))
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrProfileNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("save browser profile %s: %w", id, s.wrap(err))
	}
	return got, nil
}
