package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hrns-dev/hrns/store"
)

var _ store.Profiles = (*Store)(nil)

const profileColumns = `id, owner, ready, upload_token, upload_expires, name, description, browser_name, browser_version,
	labels, size_bytes, checksum, is_default, usage_count, last_used_at, created_at, updated_at`

func scanProfile(sc scanner) (*store.Profile, error) {
	var (
		p                         store.Profile
		ready, isDefault          int
		token, labels             []byte
		description               sql.NullString
		expires, created, updated int64
		lastUsed                  sql.NullInt64
	)
	if err := sc.Scan(&p.ID, &p.Owner, &ready, &token, &expires, &p.Name, &description, &p.BrowserName, &p.BrowserVersion,
		&labels, &p.SizeBytes, &p.Checksum, &isDefault, &p.UsageCount, &lastUsed, &created, &updated); err != nil {
		return nil, err
	}
	p.Ready, p.IsDefault = ready != 0, isDefault != 0
	p.UploadToken = token
	if len(labels) > 0 {
		p.Labels = labels
	}
	if description.Valid {
		p.Description = &description.String
	}
	if lastUsed.Valid {
		t := fromNanos(lastUsed.Int64)
		p.LastUsedAt = &t
	}
	p.UploadExpires, p.CreatedAt, p.UpdatedAt = fromNanos(expires), fromNanos(created), fromNanos(updated)
	return &p, nil
}

// CreateProfile implements [store.Profiles].
func (s *Store) CreateProfile(ctx context.Context, p *store.Profile) (*store.Profile, error) {
	n := *p
	if n.CreatedAt.IsZero() {
		n.CreatedAt = entryTime()
	}
	if n.UpdatedAt.IsZero() {
		n.UpdatedAt = n.CreatedAt
	}
	n.CreatedAt, n.UpdatedAt = n.CreatedAt.UTC().Truncate(time.Microsecond), n.UpdatedAt.UTC().Truncate(time.Microsecond)
	n.UploadExpires = fromNanos(nanos(n.UploadExpires))
	n.Ready, n.IsDefault, n.UsageCount, n.LastUsedAt = false, false, 0, nil
	n.UploadToken, n.Labels = cloneBytes(n.UploadToken), cloneBytes(n.Labels)
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO browser_profiles (`+profileColumns+`) VALUES (?,?,0,?,?,?,?,?,?,?,?,?,0,0,NULL,?,?)`,
			n.ID, n.Owner, notNil(n.UploadToken), nanos(n.UploadExpires), n.Name, n.Description, n.BrowserName, n.BrowserVersion,
			n.Labels, n.SizeBytes, n.Checksum, nanos(n.CreatedAt), nanos(n.UpdatedAt))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create browser profile %s: %w", n.ID, err)
	}
	return &n, nil
}

// GetProfile implements [store.Profiles].
func (s *Store) GetProfile(ctx context.Context, owner, id string) (*store.Profile, error) {
	got, err := scanProfile(s.r.QueryRowContext(ctx, `SELECT `+profileColumns+` FROM browser_profiles WHERE id = ? AND owner = ?`, id, owner))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrProfileNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get browser profile %s: %w", id, s.wrap(err))
	}
	return got, nil
}

// ProfileArchive implements [store.Profiles].
func (s *Store) ProfileArchive(ctx context.Context, owner, id string) ([]byte, error) {
	var archive []byte
	err := s.r.QueryRowContext(ctx, `SELECT archive FROM browser_profiles WHERE id = ? AND owner = ?`, id, owner).Scan(&archive)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrProfileNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read browser profile %s: %w", id, s.wrap(err))
	}
	return archive, nil
}

// PutProfileUpload implements [store.Profiles].
func (s *Store) PutProfileUpload(ctx context.Context, id string, tokenHash []byte, now time.Time, archive []byte) error {
	return s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `UPDATE browser_profiles SET archive = ? WHERE id = ? AND ready = 0 AND upload_token = ? AND upload_expires > ?`,
			notNil(archive), id, notNil(tokenHash), nanos(now))
		if err != nil {
			return fmt.Errorf("upload browser profile %s: %w", id, err)
		}
		if c, err := res.RowsAffected(); err != nil || c == 0 {
			return orErr(err, fmt.Errorf("upload browser profile %s: %w", id, store.ErrProfileNotFound))
		}
		return nil
	})
}

// CompleteProfile implements [store.Profiles].
func (s *Store) CompleteProfile(ctx context.Context, p *store.Profile, archive []byte) (*store.Profile, error) {
	var out *store.Profile
	now := entryTime()
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `UPDATE browser_profiles SET ready = 1, upload_token = X'', name = ?, description = ?, browser_name = ?,
			browser_version = ?, labels = ?, size_bytes = ?, checksum = ?, updated_at = ?
			WHERE id = ? AND owner = ? AND ready = 0 AND archive = ?`,
			p.Name, p.Description, p.BrowserName, p.BrowserVersion, p.Labels, p.SizeBytes, p.Checksum, nanos(now), p.ID, p.Owner, notNil(archive))
		if err != nil {
			return err
		}
		if c, err := res.RowsAffected(); err != nil || c == 0 {
			return orErr(err, store.ErrProfileNotFound)
		}
		out, err = scanProfile(tx.QueryRowContext(ctx, `SELECT `+profileColumns+` FROM browser_profiles WHERE id = ?`, p.ID))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("complete browser profile %s: %w", p.ID, err)
	}
	return out, nil
}

// ListProfiles implements [store.Profiles].
func (s *Store) ListProfiles(ctx context.Context, p *store.ProfileListParams) ([]*store.Profile, int, error) {
	var total int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM browser_profiles WHERE owner = ? AND ready = 1`, p.Owner).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("list browser profiles: %w", s.wrap(err))
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 10
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+profileColumns+` FROM browser_profiles
		WHERE owner = ? AND ready = 1 ORDER BY created_at DESC, id LIMIT ? + 0 OFFSET ? + 0`, p.Owner, limit, max(p.Offset, 0))
	if err != nil {
		return nil, 0, fmt.Errorf("list browser profiles: %w", s.wrap(err))
	}
	out, err := collect(rows, scanProfile)
	if err != nil {
		return nil, 0, fmt.Errorf("list browser profiles: %w", s.wrap(err))
	}
	return out, total, nil
}

// CountProfiles implements [store.Profiles].
func (s *Store) CountProfiles(ctx context.Context, owner string, now time.Time) (ready, pending int, err error) {
	err = s.r.QueryRowContext(ctx, `SELECT COALESCE(SUM(ready), 0), COALESCE(SUM(ready = 0 AND upload_expires > ?), 0)
		FROM browser_profiles WHERE owner = ?`, nanos(now), owner).Scan(&ready, &pending)
	if err != nil {
		return 0, 0, fmt.Errorf("count browser profiles: %w", s.wrap(err))
	}
	return ready, pending, nil
}

// DeleteProfile implements [store.Profiles].
func (s *Store) DeleteProfile(ctx context.Context, owner, id string) error {
	return s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM browser_profiles WHERE id = ? AND owner = ?`, id, owner)
		if err != nil {
			return fmt.Errorf("delete browser profile %s: %w", id, err)
		}
		if c, err := res.RowsAffected(); err != nil || c == 0 {
			return orErr(err, fmt.Errorf("delete browser profile %s: %w", id, store.ErrProfileNotFound))
		}
		return nil
	})
}

// DeleteExpiredUploads implements [store.Profiles].
func (s *Store) DeleteExpiredUploads(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM browser_profiles WHERE ready = 0 AND upload_expires <= ?`, nanos(before))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("delete expired browser profile uploads: %w", err)
	}
	return int(n), nil
}

// SetDefaultProfile implements [store.Profiles].
func (s *Store) SetDefaultProfile(ctx context.Context, owner, id string, on bool) (*store.Profile, error) {
	var out *store.Profile
	now := entryTime()
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		var browser string
		err := tx.QueryRowContext(ctx, `SELECT browser_name FROM browser_profiles WHERE id = ? AND owner = ? AND ready = 1`, id, owner).Scan(&browser)
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrProfileNotFound
		}
		if err != nil {
			return err
		}
		if on {
			if _, err := tx.ExecContext(ctx, `UPDATE browser_profiles SET is_default = 0, updated_at = ?
				WHERE owner = ? AND browser_name = ? AND is_default = 1 AND id <> ?`, nanos(now), owner, browser, id); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE browser_profiles SET is_default = ?, updated_at = ? WHERE id = ?`, boolInt(on), nanos(now), id); err != nil {
			return err
		}
		out, err = scanProfile(tx.QueryRowContext(ctx, `SELECT `+profileColumns+` FROM browser_profiles WHERE id = ?`, id))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("set the default browser profile %s: %w", id, err)
	}
	return out, nil
}

// DefaultProfile implements [store.Profiles].
func (s *Store) DefaultProfile(ctx context.Context, owner, browserName string) (*store.Profile, error) {
	got, err := scanProfile(s.r.QueryRowContext(ctx, `SELECT `+profileColumns+` FROM browser_profiles
		WHERE owner = ? AND browser_name = ? AND is_default = 1 AND ready = 1`, owner, browserName))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrProfileNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get the default browser profile: %w", s.wrap(err))
	}
	return got, nil
}

// UseProfile implements [store.Profiles].
func (s *Store) UseProfile(ctx context.Context, owner, id string, at time.Time) error {
	return s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `UPDATE browser_profiles SET usage_count = usage_count + 1, last_used_at = ?
			WHERE id = ? AND owner = ? AND ready = 1`, nanos(at.UTC().Truncate(time.Microsecond)), id, owner)
		if err != nil {
			return fmt.Errorf("use browser profile %s: %w", id, err)
		}
		if c, err := res.RowsAffected(); err != nil || c == 0 {
			return orErr(err, fmt.Errorf("use browser profile %s: %w", id, store.ErrProfileNotFound))
		}
		return nil
	})
}

// SaveProfileArchive implements [store.Profiles].
func (s *Store) SaveProfileArchive(ctx context.Context, owner, id string, archive []byte, checksum string, at time.Time) (*store.Profile, error) {
	var out *store.Profile
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `UPDATE browser_profiles SET archive = ?, size_bytes = ?, checksum = ?, updated_at = ?
			WHERE id = ? AND owner = ? AND ready = 1`, notNil(archive), len(archive), checksum, nanos(at.UTC().Truncate(time.Microsecond)), id, owner)
		if err != nil {
			return err
		}
		if c, err := res.RowsAffected(); err != nil || c == 0 {
			return orErr(err, store.ErrProfileNotFound)
		}
		out, err = scanProfile(tx.QueryRowContext(ctx, `SELECT `+profileColumns+` FROM browser_profiles WHERE id = ?`, id))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("save browser profile %s: %w", id, err)
	}
	return out, nil
}
