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

var _ store.Vaults = (*Store)(nil)

const vaultColumns = `id, owner, name, config, key_id, secret, version, created_at, updated_at`

func scanVault(row pgx.Row) (*store.Vault, error) {
	var (
		v                store.Vault
		config, secret   []byte
		created, updated pgtype.Timestamptz
	)
	if err := row.Scan(&v.ID, &v.Owner, &v.Name, &config, &v.KeyID, &secret, &v.Version, &created, &updated); err != nil {
		return nil, err
	}
	v.Config, v.Secret = config, secret
	v.CreatedAt, v.UpdatedAt = fromTS(created), fromTS(updated)
	return &v, nil
}

// CreateVault implements [store.Vaults].
func (s *Store) CreateVault(ctx context.Context, v *store.Vault) (*store.Vault, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	n := *v
	if n.CreatedAt.IsZero() {
		n.CreatedAt = time.Now()
	}
	if n.UpdatedAt.IsZero() {
		n.UpdatedAt = n.CreatedAt
	}
	n.CreatedAt, n.UpdatedAt = entryTime(n.CreatedAt), entryTime(n.UpdatedAt)
	n.Version = 1
	n.Config, n.Secret = cloneBytes(n.Config), cloneBytes(n.Secret)
	_, err := s.pool.Exec(ctx, `INSERT INTO hrns_vaults (`+vaultColumns+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)`,
		n.ID, n.Owner, n.Name, specBytes(n.Config), n.KeyID, notNil(n.Secret), n.Version, ts(n.CreatedAt), ts(n.UpdatedAt))
	if err != nil {
		return nil, fmt.Errorf("create vault %s: %w", n.ID, s.wrap(err))
	}
	return &n, nil
}

// GetVault implements [store.Vaults].
func (s *Store) GetVault(ctx context.Context, owner, id string) (*store.Vault, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	got, err := scanVault(s.pool.QueryRow(ctx, `SELECT `+vaultColumns+` FROM hrns_vaults WHERE id = $1 AND owner = $2`, id, owner))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrVaultNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get vault %s: %w", id, s.wrap(err))
	}
	return got, nil
}

// ListVaults implements [store.Vaults]. Ids compare byte by byte, as in
// SQLite.
func (s *Store) ListVaults(ctx context.Context, p *store.VaultListParams) ([]*store.Vault, int, error) {
	if err := s.check(); err != nil {
		return nil, 0, err
	}
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM hrns_vaults WHERE owner = $1`, p.Owner).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("list vaults: %w", s.wrap(err))
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	rows, err := s.pool.Query(ctx, `SELECT id, owner, name, config, key_id, NULL::bytea, version, created_at, updated_at FROM hrns_vaults
		WHERE owner = $1 ORDER BY created_at DESC, id COLLATE "C" LIMIT $2 OFFSET $3`, p.Owner, limit, max(p.Offset, 0))
	if err != nil {
		return nil, 0, fmt.Errorf("list vaults: %w", s.wrap(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Vault, error) { return scanVault(r) })
	if err != nil {
		return nil, 0, fmt.Errorf("list vaults: %w", s.wrap(err))
	}
	return out, total, nil
}

// UpdateVault implements [store.Vaults].
func (s *Store) UpdateVault(ctx context.Context, v *store.Vault) (*store.Vault, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	n := *v
	n.UpdatedAt = entryTime(time.Now())
	n.Config, n.Secret = cloneBytes(n.Config), cloneBytes(n.Secret)
	var created pgtype.Timestamptz
	err := s.pool.QueryRow(ctx, `UPDATE hrns_vaults SET name = $1, config = $2, key_id = $3, secret = $4, version = version + 1, updated_at = $5
		WHERE id = $6 AND owner = $7 AND version = $8 RETURNING created_at, version`,
		n.Name, specBytes(n.Config), n.KeyID, notNil(n.Secret), ts(n.UpdatedAt), n.ID, n.Owner, n.Version).Scan(&created, &n.Version)
	if errors.Is(err, pgx.ErrNoRows) {
		var one int
		err = s.pool.QueryRow(ctx, `SELECT 1 FROM hrns_vaults WHERE id = $1 AND owner = $2`, n.ID, n.Owner).Scan(&one)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			err = store.ErrVaultNotFound
		case err == nil:
			err = store.ErrConflict
		}
	}
	if err != nil {
		return nil, fmt.Errorf("update vault %s: %w", n.ID, s.wrap(err))
	}
	n.CreatedAt = fromTS(created)
	return &n, nil
}

// DeleteVault implements [store.Vaults].
func (s *Store) DeleteVault(ctx context.Context, owner, id string) error {
	if err := s.check(); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM hrns_vaults WHERE id = $1 AND owner = $2`, id, owner)
	if err != nil {
		return fmt.Errorf("delete vault %s: %w", id, s.wrap(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete vault %s: %w", id, store.ErrVaultNotFound)
	}
	return nil
}

// VaultsNotUnderKey implements [store.Vaults].
func (s *Store) VaultsNotUnderKey(ctx context.Context, keyID, after string, limit int) ([]*store.Vault, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+vaultColumns+` FROM hrns_vaults WHERE key_id <> $1 AND id COLLATE "C" > $2
		ORDER BY id COLLATE "C" LIMIT $3`, keyID, after, max(limit, 1))
	if err != nil {
		return nil, fmt.Errorf("list vaults to re-encrypt: %w", s.wrap(err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.Vault, error) { return scanVault(r) })
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
