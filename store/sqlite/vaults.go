package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/hrns-dev/hrns/store"
)

var _ store.Vaults = (*Store)(nil)

const vaultColumns = `id, owner, name, config, key_id, secret, version, created_at, updated_at`

func scanVault(sc scanner) (*store.Vault, error) {
	var (
		v                store.Vault
		config, secret   []byte
		created, updated int64
	)
	if err := sc.Scan(&v.ID, &v.Owner, &v.Name, &config, &v.KeyID, &secret, &v.Version, &created, &updated); err != nil {
		return nil, err
	}
	v.Config, v.Secret = config, secret
	v.CreatedAt, v.UpdatedAt = fromNanos(created), fromNanos(updated)
	return &v, nil
}

// CreateVault implements [store.Vaults].
func (s *Store) CreateVault(ctx context.Context, v *store.Vault) (*store.Vault, error) {
	n := *v
	if n.CreatedAt.IsZero() {
		n.CreatedAt = entryTime()
	}
	if n.UpdatedAt.IsZero() {
		n.UpdatedAt = n.CreatedAt
	}
	n.CreatedAt, n.UpdatedAt = n.CreatedAt.UTC().Truncate(time.Microsecond), n.UpdatedAt.UTC().Truncate(time.Microsecond)
	n.Version = 1
	n.Config, n.Secret = cloneBytes(n.Config), cloneBytes(n.Secret)
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO vaults (`+vaultColumns+`) VALUES (?,?,?,?,?,?,?,?,?)`,
			n.ID, n.Owner, n.Name, specBlob(n.Config), n.KeyID, notNil(n.Secret), n.Version, nanos(n.CreatedAt), nanos(n.UpdatedAt))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create vault %s: %w", n.ID, err)
	}
	return &n, nil
}

// GetVault implements [store.Vaults].
func (s *Store) GetVault(ctx context.Context, owner, id string) (*store.Vault, error) {
	got, err := scanVault(s.r.QueryRowContext(ctx, `SELECT `+vaultColumns+` FROM vaults WHERE id = ? AND owner = ?`, id, owner))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrVaultNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get vault %s: %w", id, s.wrap(err))
	}
	return got, nil
}

// ListVaults implements [store.Vaults].
func (s *Store) ListVaults(ctx context.Context, p *store.VaultListParams) ([]*store.Vault, int, error) {
	var total int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM vaults WHERE owner = ?`, p.Owner).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("list vaults: %w", s.wrap(err))
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	rows, err := s.r.QueryContext(ctx, `SELECT id, owner, name, config, key_id, NULL, version, created_at, updated_at FROM vaults
		WHERE owner = ? ORDER BY created_at DESC, id LIMIT ? + 0 OFFSET ? + 0`, p.Owner, limit, max(p.Offset, 0))
	if err != nil {
		return nil, 0, fmt.Errorf("list vaults: %w", s.wrap(err))
	}
	out, err := collect(rows, scanVault)
	if err != nil {
		return nil, 0, fmt.Errorf("list vaults: %w", s.wrap(err))
	}
	return out, total, nil
}

// UpdateVault implements [store.Vaults].
func (s *Store) UpdateVault(ctx context.Context, v *store.Vault) (*store.Vault, error) {
	n := *v
	n.UpdatedAt = entryTime()
	n.Config, n.Secret = cloneBytes(n.Config), cloneBytes(n.Secret)
	err := s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		var created int64
		err := tx.QueryRowContext(ctx, `UPDATE vaults SET name = ?, config = ?, key_id = ?, secret = ?, version = version + 1, updated_at = ?
			WHERE id = ? AND owner = ? AND version = ? RETURNING created_at, version`,
			n.Name, specBlob(n.Config), n.KeyID, notNil(n.Secret), nanos(n.UpdatedAt), n.ID, n.Owner, n.Version).Scan(&created, &n.Version)
		if errors.Is(err, sql.ErrNoRows) {
			var one int
			err = tx.QueryRowContext(ctx, `SELECT 1 FROM vaults WHERE id = ? AND owner = ?`, n.ID, n.Owner).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return store.ErrVaultNotFound
			}
			return orErr(err, store.ErrConflict)
		}
		n.CreatedAt = fromNanos(created)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("update vault %s: %w", n.ID, err)
	}
	return &n, nil
}

// DeleteVault implements [store.Vaults].
func (s *Store) DeleteVault(ctx context.Context, owner, id string) error {
	return s.write(ctx, func(ctx context.Context, tx *writeTx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM vaults WHERE id = ? AND owner = ?`, id, owner)
		if err != nil {
			return fmt.Errorf("delete vault %s: %w", id, err)
		}
		if c, err := res.RowsAffected(); err != nil || c == 0 {
			return orErr(err, fmt.Errorf("delete vault %s: %w", id, store.ErrVaultNotFound))
		}
		return nil
	})
}

// VaultsNotUnderKey implements [store.Vaults].
func (s *Store) VaultsNotUnderKey(ctx context.Context, keyID, after string, limit int) ([]*store.Vault, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+vaultColumns+` FROM vaults WHERE key_id <> ? AND id > ? ORDER BY id LIMIT ? + 0`, keyID, after, max(limit, 1))
	if err != nil {
		return nil, fmt.Errorf("list vaults to re-encrypt: %w", s.wrap(err))
	}
	out, err := collect(rows, scanVault)
	if err != nil {
		return nil, fmt.Errorf("list vaults to re-encrypt: %w", s.wrap(err))
	}
	return out, nil
}

// cloneBytes copies b, so that what is returned does not share the
// caller's array.
func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// notNil stores a nil secret as an empty one: the column is NOT NULL.
func notNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
