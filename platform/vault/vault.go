package vault

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hrns-dev/hrns/store"
)

// Errors of a [Service]. Test with errors.Is.
var (
	// ErrNotConfigured: the server has no vault key, so vaults can be
	// neither written nor read. Every method but New returns it then.
	ErrNotConfigured = errors.New("vaults are not configured on this server: the operator must give hrns serve a vault key (HRNS_VAULT_KEY or --vault-key-file)")
	// ErrNotFound: the owner has no vault with the id (another owner's
	// vault is not found either).
	ErrNotFound = errors.New("vault not found")
	// ErrTooMany: Create was called by an owner who has
	// Options.MaxPerOwner vaults already.
	ErrTooMany = errors.New("too many vaults")
)

// An InvalidError is a request that fails validation: Field says which
// part of it ("name", "provider_config", "token"...). Its message never
// quotes a secret.
type InvalidError struct {
	Field string
	Msg   string
}

func (e *InvalidError) Error() string { return e.Field + ": " + e.Msg }

// The provider of [ProviderConfig]: the reference's only one.
const ProviderOnePassword = "onepassword"

// ProviderConfig is a vault's provider configuration as the reference
// shapes it (OnePasswordConfig). hrns keeps and returns it; it holds the
// vault's contents itself (see the package doc) and contacts no provider.
type ProviderConfig struct {
	Provider  string `json:"provider"`
	OpVaultID string `json:"op_vault_id"`
}

// Options configure a [Service]. A nil *Options means the defaults.
type Options struct {
	// Now is the clock of one-time codes; nil means time.Now.
	Now func() time.Time
	// Logger receives what the service logs (re-encryption); nil
	// discards it. It never receives a secret.
	Logger *slog.Logger
	// MaxPerOwner bounds the vaults of one owner; 0 means 1000. With
	// several replicas creating at once the bound is approximate.
	MaxPerOwner int
}

// A Service keeps vaults in a store, encrypted with a [Keyring], and
// makes one-time codes from their entries. All methods are safe for
// concurrent use.
type Service struct {
	// fixed at creation
	st     store.Vaults
	keys   *Keyring
	now    func() time.Time
	log    *slog.Logger
	maxPer int
}

// New returns the vaults of st, encrypted with keys. With nil keys every
// method returns [ErrNotConfigured]: nothing is written in plaintext.
func New(st store.Vaults, keys *Keyring, opts *Options) *Service {
	if st == nil {
		panic("vault.New: nil store")
	}
	s := &Service{st: st, keys: keys, now: time.Now, log: slog.New(slog.DiscardHandler), maxPer: 1000}
	if opts != nil {
		if opts.Now != nil {
			s.now = opts.Now
		}
		if opts.Logger != nil {
			s.log = opts.Logger
		}
		if opts.MaxPerOwner > 0 {
			s.maxPer = opts.MaxPerOwner
		}
	}
	return s
}

// Configured reports whether the service has keys.
func (s *Service) Configured() bool { return s != nil && s.keys != nil }

func (s *Service) check() error {
	if !s.Configured() {
		return ErrNotConfigured
	}
	return nil
}

// aad binds a ciphertext to its vault and owner: a ciphertext copied to
// another row does not decrypt.
func aad(id, owner string) []byte {
	return []byte("hrns vault v1\x00" + id + "\x00" + owner)
}

// CreateParams are the fields of a new vault.
type CreateParams struct {
	Name   string
	Config ProviderConfig
	// Token is the vault's contents (see the package doc); it is
	// validated, encrypted and never returned.
	Token string
}

// Create validates p, encrypts its token and stores a new vault of owner.
// The vault returned has no Secret. Errors: *[InvalidError],
// [ErrTooMany], [ErrNotConfigured].
func (s *Service) Create(ctx context.Context, owner string, p *CreateParams) (*store.Vault, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := checkName(p.Name); err != nil {
		return nil, err
	}
	cfg, err := checkConfig(p.Config)
	if err != nil {
		return nil, err
	}
	if _, err := parseToken(p.Token); err != nil {
		return nil, &InvalidError{Field: "token", Msg: err.Error()}
	}
	if _, n, err := s.st.ListVaults(ctx, &store.VaultListParams{Owner: owner, Limit: 1}); err != nil {
		return nil, err
	} else if n >= s.maxPer {
		return nil, fmt.Errorf("%w: this key has %d vaults, the most it may have; delete one first", ErrTooMany, n)
	}
	v := &store.Vault{ID: newUUID(), Owner: owner, Name: p.Name, Config: cfg}
	if v.KeyID, v.Secret, err = s.keys.seal([]byte(p.Token), aad(v.ID, owner)); err != nil {
		return nil, err
	}
	got, err := s.st.CreateVault(ctx, v)
	if err != nil {
		return nil, err
	}
	got.Secret = nil
	return got, nil
}

// Get returns the owner's vault, without its Secret. Errors:
// [ErrNotFound], [ErrNotConfigured].
func (s *Service) Get(ctx context.Context, owner, id string) (*store.Vault, error) {
	v, err := s.get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	v.Secret = nil
	return v, nil
}

func (s *Service) get(ctx context.Context, owner, id string) (*store.Vault, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	v, err := s.st.GetVault(ctx, owner, id)
	if errors.Is(err, store.ErrVaultNotFound) {
		return nil, ErrNotFound
	}
	return v, err
}

// List returns a page of the owner's vaults, newest first, and their
// number. Errors: [ErrNotConfigured].
func (s *Service) List(ctx context.Context, owner string, offset, limit int) ([]*store.Vault, int, error) {
	if err := s.check(); err != nil {
		return nil, 0, err
	}
	return s.st.ListVaults(ctx, &store.VaultListParams{Owner: owner, Offset: offset, Limit: limit})
}

// UpdateParams are the fields of a vault to change; nil leaves one as it
// is.
type UpdateParams struct {
	Name   *string
	Config *ProviderConfig
}

// Update changes the owner's vault's name and provider configuration. The
// token is changed by SetToken only. Errors: *[InvalidError],
// [ErrNotFound], [ErrNotConfigured].
func (s *Service) Update(ctx context.Context, owner, id string, p *UpdateParams) (*store.Vault, error) {
	if p.Name != nil {
		if err := checkName(*p.Name); err != nil {
			return nil, err
		}
	}
	var cfg json.RawMessage
	if p.Config != nil {
		var err error
		if cfg, err = checkConfig(*p.Config); err != nil {
			return nil, err
		}
	}
	if p.Name == nil && p.Config == nil {
		return s.Get(ctx, owner, id)
	}
	return s.change(ctx, owner, id, func(v *store.Vault) error {
		if p.Name != nil {
			v.Name = *p.Name
		}
		if cfg != nil {
			v.Config = cfg
		}
		return nil
	})
}

// SetToken replaces the owner's vault's contents with token, validated
// and encrypted. Errors: *[InvalidError], [ErrNotFound],
// [ErrNotConfigured].
func (s *Service) SetToken(ctx context.Context, owner, id, token string) error {
	if _, err := parseToken(token); err != nil {
		return &InvalidError{Field: "token", Msg: err.Error()}
	}
	_, err := s.change(ctx, owner, id, func(v *store.Vault) (err error) {
		v.KeyID, v.Secret, err = s.keys.seal([]byte(token), aad(v.ID, v.Owner))
		return err
	})
	return err
}

// change applies fn to the stored vault and writes it, again when another
// change came in between.
func (s *Service) change(ctx context.Context, owner, id string, fn func(v *store.Vault) error) (*store.Vault, error) {
	for range 10 {
		v, err := s.get(ctx, owner, id)
		if err != nil {
			return nil, err
		}
		if err := fn(v); err != nil {
			return nil, err
		}
		got, err := s.st.UpdateVault(ctx, v)
		switch {
		case errors.Is(err, store.ErrConflict):
			continue
		case errors.Is(err, store.ErrVaultNotFound):
			return nil, ErrNotFound
		case err != nil:
			return nil, err
		}
		got.Secret = nil
		return got, nil
	}
	return nil, fmt.Errorf("vault %s: %w (changed by others ten times in a row)", id, store.ErrConflict)
}

// Delete removes the owner's vault. Errors: [ErrNotFound],
// [ErrNotConfigured].
func (s *Service) Delete(ctx context.Context, owner, id string) error {
	if err := s.check(); err != nil {
		return err
	}
	err := s.st.DeleteVault(ctx, owner, id)
	if errors.Is(err, store.ErrVaultNotFound) {
		return ErrNotFound
	}
	return err
}

// Health checks that the owner's vault can be used: it decrypts with the
// configured keys and holds valid entries. problem is empty when it can,
// and otherwise says why, without quoting a secret. Errors:
// [ErrNotFound], [ErrNotConfigured], and the store's.
func (s *Service) Health(ctx context.Context, owner, id string) (problem string, err error) {
	_, err = s.contents(ctx, owner, id)
	var bad *badVaultError
	if errors.As(err, &bad) {
		return bad.msg, nil
	}
	return "", err
}

// Entries returns the names of the entries of the owner's vault, sorted.
func (s *Service) Entries(ctx context.Context, owner, id string) ([]string, error) {
	c, err := s.contents(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return c.names(), nil
}

// A Code is a one-time code of a vault entry.
type Code struct {
	// Code is the current code.
	Code string
	// ValidFor is how long it stays the current code.
	ValidFor time.Duration
}

// Code returns the current TOTP code (RFC 6238) of the entry of the
// owner's vault, at the service's clock. Errors: [ErrNotFound],
// [ErrNotConfigured], *[EntryNotFoundError], and a vault that cannot be
// used (see Health).
func (s *Service) Code(ctx context.Context, owner, id, entry string) (*Code, error) {
	c, err := s.contents(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	k := c[entry]
	if k == nil {
		return nil, &EntryNotFoundError{Entry: entry, Entries: c.names()}
	}
	code, left, err := k.code(s.now())
	if err != nil {
		return nil, err
	}
	return &Code{Code: code, ValidFor: left}, nil
}

// An EntryNotFoundError is a code asked of an entry the vault lacks.
type EntryNotFoundError struct {
	Entry   string
	Entries []string // the vault's entries
}

func (e *EntryNotFoundError) Error() string {
	return fmt.Sprintf("the vault has no entry %q (its entries: %s)", e.Entry, strings.Join(e.Entries, ", "))
}

// badVaultError is a vault that cannot be used: its message is safe to
// show.
type badVaultError struct{ msg string }

func (e *badVaultError) Error() string { return e.msg }

// contents decrypts and parses the owner's vault.
func (s *Service) contents(ctx context.Context, owner, id string) (contents, error) {
	v, err := s.get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	plain, err := s.keys.open(v.KeyID, v.Secret, aad(v.ID, v.Owner))
	if err != nil {
		return nil, &badVaultError{msg: err.Error()}
	}
	c, err := parseToken(string(plain))
	clear(plain)
	if err != nil {
		return nil, &badVaultError{msg: "the vault's contents are not valid: " + err.Error()}
	}
	return c, nil
}

// Reencrypt re-encrypts under the primary key every vault, of every owner,
// that another key encrypted: the middle step of a key rotation. It
// returns how many it re-encrypted. A vault no configured key decrypts is
// logged and left as it is, and counted in failed. It is safe to run on
// several replicas at once.
func (s *Service) Reencrypt(ctx context.Context) (done, failed int, err error) {
	if err := s.check(); err != nil {
		return 0, 0, err
	}
	after := ""
	for {
		page, err := s.st.VaultsNotUnderKey(ctx, s.keys.Primary(), after, 100)
		if err != nil || len(page) == 0 {
			return done, failed, err
		}
		for _, v := range page {
			after = v.ID
			plain, err := s.keys.open(v.KeyID, v.Secret, aad(v.ID, v.Owner))
			if err != nil {
				s.log.Error("vault re-encryption: a vault cannot be decrypted", "vault", v.ID, "key", v.KeyID, "err", err)
				failed++
				continue
			}
			v.KeyID, v.Secret, err = s.keys.seal(plain, aad(v.ID, v.Owner))
			clear(plain)
			if err != nil {
				return done, failed, err
			}
			_, err = s.st.UpdateVault(ctx, v)
			switch {
			case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrVaultNotFound):
				// Changed (so written under the primary key) or deleted
				// meanwhile.
			case err != nil:
				return done, failed, err
			default:
				done++
			}
		}
	}
}

// checkName accepts 1 to 255 bytes of printable text.
func checkName(name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return &InvalidError{Field: "name", Msg: "the name is empty"}
	case len(name) > 255:
		return &InvalidError{Field: "name", Msg: "the name is longer than 255 bytes"}
	case !utf8.ValidString(name):
		return &InvalidError{Field: "name", Msg: "the name is not valid UTF-8"}
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return &InvalidError{Field: "name", Msg: "the name has a control or invisible character"}
		}
	}
	return nil
}

// checkConfig completes and checks a provider configuration and returns
// it as stored.
func checkConfig(c ProviderConfig) (json.RawMessage, error) {
	if c.Provider == "" {
		c.Provider = ProviderOnePassword
	}
	if c.Provider != ProviderOnePassword {
		return nil, &InvalidError{Field: "provider_config.provider", Msg: fmt.Sprintf("Input should be '%s'", ProviderOnePassword)}
	}
	if len(c.OpVaultID) > 255 || !utf8.ValidString(c.OpVaultID) {
		return nil, &InvalidError{Field: "provider_config.op_vault_id", Msg: "op_vault_id must be valid UTF-8 of at most 255 bytes"}
	}
	return json.Marshal(c)
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
