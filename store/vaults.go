package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// ErrVaultNotFound: the owner has no vault with the id. Returned by
// GetVault, UpdateVault and DeleteVault.
var ErrVaultNotFound = errors.New("store: vault not found")

// Vaults keep the vaults that callers create, each scoped to its owner:
// an owner never reads, lists or changes another's vaults. It is part of
// every [Store], so that every replica sees the same vaults.
//
// A store holds a vault's secret as the caller gives it, and the caller
// (package vault) gives it only encrypted: Secret is ciphertext, KeyID
// names the key that encrypted it. A store never sees plaintext.
//
// All methods are safe for concurrent use. Vaults returned are the
// caller's; vaults given are not retained after the call returns.
type Vaults interface {
	// CreateVault inserts v and returns it as stored: Version 1,
	// CreatedAt and UpdatedAt set to now when zero. Its ID is chosen by
	// the caller and unique in the store.
	CreateVault(ctx context.Context, v *Vault) (*Vault, error)

	// GetVault returns the owner's vault with the id, or
	// ErrVaultNotFound (also when another owner has it).
	GetVault(ctx context.Context, owner, id string) (*Vault, error)

	// ListVaults returns a page of the owner's vaults, newest first (ties
	// by id), and how many the owner has in all. Vaults of a list have no
	// Secret.
	ListVaults(ctx context.Context, p *VaultListParams) (page []*Vault, total int, err error)

	// UpdateVault replaces the Name, Config, KeyID and Secret of the
	// vault with v's Owner and ID, if its stored version is v.Version;
	// otherwise it returns ErrConflict and writes nothing
	// (ErrVaultNotFound when the owner has no such vault). It returns
	// the vault as stored: Version incremented, CreatedAt kept,
	// UpdatedAt set to now.
	UpdateVault(ctx context.Context, v *Vault) (*Vault, error)

	// DeleteVault removes the owner's vault, or returns ErrVaultNotFound.
	DeleteVault(ctx context.Context, owner, id string) error

	// VaultsNotUnderKey returns at most limit vaults of any owner whose
	// KeyID is not keyID, with their Secret, ordered by id and starting
	// after the id after (the empty string: from the first). The
	// operator's re-encryption under a new key pages through them.
	VaultsNotUnderKey(ctx context.Context, keyID, after string, limit int) ([]*Vault, error)
}

// A Vault is one stored vault.
type Vault struct {
	// ID is unique in the store (a UUID).
	ID string
	// Owner is who may see and use the vault (an API key's identity).
	Owner string
	// Name is the vault's name, for people.
	Name string
	// Config is the vault's provider configuration (JSON), owned by the
	// caller. It holds no secret.
	Config json.RawMessage
	// KeyID names the key that encrypted Secret.
	KeyID string
	// Secret is the vault's contents, encrypted (nonce and ciphertext).
	// Lists leave it out.
	Secret []byte

	// Version counts committed changes; see UpdateVault.
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// VaultListParams select vaults for [Vaults.ListVaults].
type VaultListParams struct {
	// Owner is required: only the owner's vaults are listed.
	Owner string
	// Offset and Limit select the page; Limit <= 0 means 50.
	Offset, Limit int
}
