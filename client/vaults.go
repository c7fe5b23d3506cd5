package client

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"time"
)

// A Vault is a vault as the API returns it (the reference's
// VaultConfigRead): never its token.
type Vault struct {
	ID string `json:"id"`
	// OrgID identifies the API key that owns the vault.
	OrgID          string              `json:"org_id"`
	Name           string              `json:"name"`
	ProviderConfig VaultProviderConfig `json:"provider_config"`
	CreatedAt      time.Time           `json:"created_at"`
	UpdatedAt      time.Time           `json:"updated_at"`
}

// VaultProviderConfig is a vault's provider_config. hrns stores and
// returns it; it contacts no password manager (docs/serve.md, "Vaults").
type VaultProviderConfig struct {
	// Provider is "onepassword", the reference's only provider; empty
	// means it.
	Provider  string `json:"provider,omitempty"`
	OpVaultID string `json:"op_vault_id"`
}

// VaultCreate is the body of [Client.CreateVault].
type VaultCreate struct {
	Name           string              `json:"name"`
	ProviderConfig VaultProviderConfig `json:"provider_config"`
	// Token is the vault's contents: a JSON object of entries, each an
	// otpauth://totp/ URI or a base32 TOTP seed, or a single such
	// secret. It is never returned.
	Token string `json:"token"`
}

// VaultUpdate is the body of [Client.UpdateVault]: nil fields are left as
// they are.
type VaultUpdate struct {
	Name           *string              `json:"name,omitempty"`
	ProviderConfig *VaultProviderConfig `json:"provider_config,omitempty"`
}

// A VaultList is a page of vaults.
type VaultList struct {
	Total  int     `json:"total"`
	Limit  int     `json:"limit"`
	Offset int     `json:"offset"`
	Vaults []Vault `json:"vaults"`
}

// VaultHealth says whether a vault can be used: it decrypts with the
// server's keys and holds valid entries. Error says why not.
type VaultHealth struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

const vaultsPath = "/api/v2/vaults"

func vaultPath(id string) string { return vaultsPath + "/" + url.PathEscape(id) }

// CreateVault creates a vault of this key. An invalid token is
// [ErrInvalid]; a server without a vault key answers an [APIError] with
// StatusCode 501.
func (c *Client) CreateVault(ctx context.Context, v *VaultCreate) (*Vault, error) {
	return send[Vault](ctx, c, "POST", vaultsPath, v, false)
}

// ListVaults returns a page of this key's vaults, newest first: limit (1
// to 1000; 0 means 50) from offset.
func (c *Client) ListVaults(ctx context.Context, limit, offset int) (*VaultList, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	path := vaultsPath
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return send[VaultList](ctx, c, "GET", path, nil, true)
}

// GetVault returns the vault; another key's is [ErrNotFound].
func (c *Client) GetVault(ctx context.Context, id string) (*Vault, error) {
	return send[Vault](ctx, c, "GET", vaultPath(id), nil, true)
}

// UpdateVault changes the vault's name or provider configuration; its
// token is changed by SetVaultToken.
func (c *Client) UpdateVault(ctx context.Context, id string, u *VaultUpdate) (*Vault, error) {
	return send[Vault](ctx, c, "PATCH", vaultPath(id), u, true)
}

// SetVaultToken replaces the vault's contents. Sessions that use the vault
// read the new token from their next call.
func (c *Client) SetVaultToken(ctx context.Context, id, token string) error {
	_, _, err := c.call(ctx, "PUT", vaultPath(id)+"/token", nil, map[string]string{"token": token}, nil, true)
	return err
}

// DeleteVault removes the vault.
func (c *Client) DeleteVault(ctx context.Context, id string) error {
	_, _, err := c.call(ctx, "DELETE", vaultPath(id), nil, nil, nil, false)
	return err
}

// CheckVault reports whether the vault can be used (GET
// /api/v2/vaults/{id}/health).
func (c *Client) CheckVault(ctx context.Context, id string) (*VaultHealth, error) {
	return send[VaultHealth](ctx, c, "GET", vaultPath(id)+"/health", nil, true)
}

// WebWithVault is a web environment bound to a vault: the session's agent
// gets the one_time_code tool of the vault's entries.
func WebWithVault(vaultID string) Environment {
	id, _ := json.Marshal(vaultID)
	return Environment{Kind: "web", ID: "web", Fields: map[string]json.RawMessage{"kind": json.RawMessage(`"web"`), "id": json.RawMessage(`"web"`), "vault_id": id}}
}
