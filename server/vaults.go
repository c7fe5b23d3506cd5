package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/hrns-dev/hrns/platform/vault"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// vaultRoutes adds the vault routes (see [Options.Vaults]):
//
//	POST   /api/v2/vaults                     create (201)
//	GET    /api/v2/vaults                     list (limit, offset)
//	GET    /api/v2/vaults/{vault_id}          one
//	PATCH  /api/v2/vaults/{vault_id}          change name, provider_config
//	DELETE /api/v2/vaults/{vault_id}          204
//	PUT    /api/v2/vaults/{vault_id}/token    replace the contents (204)
//	GET    /api/v2/vaults/{vault_id}/health   {"ok", "error"}
//
// No answer holds a vault's token.
func (s *Server) vaultRoutes() {
	for _, r := range []struct {
		pattern string
		body    body
		h       func(w http.ResponseWriter, r *http.Request, owner string) error
	}{
		{"POST /api/v2/vaults", bodyJSON, s.vaultCreate},
		{"GET /api/v2/vaults", bodyNone, s.vaultList},
		{"GET /api/v2/vaults/{vault_id}", bodyNone, s.vaultGet},
		{"PATCH /api/v2/vaults/{vault_id}", bodyJSON, s.vaultPatch},
		{"DELETE /api/v2/vaults/{vault_id}", bodyNone, s.vaultDelete},
		{"PUT /api/v2/vaults/{vault_id}/token", bodyJSON, s.vaultToken},
		{"GET /api/v2/vaults/{vault_id}/health", bodyNone, s.vaultHealth},
	} {
		s.mux.Handle(r.pattern, s.api(r.body, s.vaultsOn(r.h)))
	}
}

// vaultsOn answers 501 when the server has no vault service, and maps the
// vault errors.
func (s *Server) vaultsOn(h func(w http.ResponseWriter, r *http.Request, owner string) error) func(w http.ResponseWriter, r *http.Request, owner string) error {
	return func(w http.ResponseWriter, r *http.Request, owner string) error {
		err := vault.ErrNotConfigured
		if s.opts.Vaults.Configured() {
			err = h(w, r, owner)
		}
		var inv *vault.InvalidError
		switch {
		case errors.Is(err, vault.ErrNotConfigured):
			writeError(w, http.StatusNotImplemented, err.Error())
		case errors.Is(err, vault.ErrNotFound):
			writeError(w, http.StatusNotFound, "Vault not found")
		case errors.As(err, &inv):
			loc := []any{"body"}
			for _, f := range strings.Split(inv.Field, ".") {
				loc = append(loc, f)
			}
			return &session.ValidationError{Fields: []session.FieldError{{Loc: loc, Msg: inv.Msg, Type: "value_error"}}}
		case errors.Is(err, vault.ErrTooMany):
			writeError(w, http.StatusConflict, err.Error())
		case errors.Is(err, store.ErrConflict):
			writeError(w, http.StatusConflict, "the vault is being changed by other requests: retry")
		default:
			return err
		}
		return nil
	}
}

// vaultRead is the reference's VaultConfigRead: a vault without its token.
type vaultRead struct {
	ID             string               `json:"id"`
	OrgID          string               `json:"org_id"`
	Name           string               `json:"name"`
	ProviderConfig vault.ProviderConfig `json:"provider_config"`
	CreatedAt      time.Time            `json:"created_at"`
	UpdatedAt      time.Time            `json:"updated_at"`
}

func readVault(v *store.Vault) *vaultRead {
	out := &vaultRead{ID: v.ID, OrgID: orgID(v.Owner), Name: v.Name, CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt}
	json.Unmarshal(v.Config, &out.ProviderConfig)
	if out.ProviderConfig.Provider == "" {
		out.ProviderConfig.Provider = vault.ProviderOnePassword
	}
	return out
}

// orgID is the reference's org_id of an owner: hrns's organisations are
// API keys, so it is a UUID derived from the owner (version 8, from
// SHA-256), the same on every replica and never the key itself.
func orgID(owner string) string {
	sum := sha256.Sum256([]byte("hrns org\x00" + owner))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x80
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// vaultID reads the path's vault_id: a UUID, with or without dashes, in
// its canonical form (lower case, dashed).
func vaultID(r *http.Request) (string, error) {
	raw := r.PathValue("vault_id")
	h := strings.ToLower(strings.ReplaceAll(raw, "-", ""))
	if !validUUID(raw) || len(h) != 32 {
		return "", &session.ValidationError{Fields: []session.FieldError{{Loc: []any{"path", "vault_id"}, Msg: "Input should be a valid UUID", Type: "uuid_parsing", Input: raw}}}
	}
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32], nil
}

// required reports a field a body lacks.
func required(loc ...any) error {
	return &session.ValidationError{Fields: []session.FieldError{{Loc: append([]any{"body"}, loc...), Msg: "Field required", Type: "missing"}}}
}

// providerConfig is the body's provider_config: a JSON object whose
// op_vault_id is required.
type providerConfig struct {
	Provider  *string `json:"provider"`
	OpVaultID *string `json:"op_vault_id"`
}

func (p *providerConfig) config(loc ...any) (*vault.ProviderConfig, error) {
	if p.OpVaultID == nil {
		return nil, required(append(loc, "op_vault_id")...)
	}
	c := &vault.ProviderConfig{OpVaultID: *p.OpVaultID}
	if p.Provider != nil {
		c.Provider = *p.Provider
	}
	return c, nil
}

func (s *Server) vaultCreate(w http.ResponseWriter, r *http.Request, owner string) error {
	var in struct {
		Name           *string         `json:"name"`
		ProviderConfig *providerConfig `json:"provider_config"`
		Token          *string         `json:"token"`
	}
	if err := decode(r, &in); err != nil {
		return err
	}
	switch {
	case in.Name == nil:
		return required("name")
	case in.ProviderConfig == nil:
		return required("provider_config")
	case in.Token == nil:
		return required("token")
	}
	cfg, err := in.ProviderConfig.config("provider_config")
	if err != nil {
		return err
	}
	v, err := s.opts.Vaults.Create(r.Context(), owner, &vault.CreateParams{Name: *in.Name, Config: *cfg, Token: *in.Token})
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v2/vaults/"+v.ID)
	writeJSON(w, http.StatusCreated, readVault(v))
	return nil
}

func (s *Server) vaultList(w http.ResponseWriter, r *http.Request, owner string) error {
	q := &query{r: r}
	limit := q.int("limit", 50, 1, 1000)
	offset := q.int("offset", 0, 0, 1<<30)
	if err := q.err(); err != nil {
		return err
	}
	page, total, err := s.opts.Vaults.List(r.Context(), owner, offset, limit)
	if err != nil {
		return err
	}
	out := make([]*vaultRead, len(page))
	for i, v := range page {
		out[i] = readVault(v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"total": total, "limit": limit, "offset": offset, "vaults": out})
	return nil
}

func (s *Server) vaultGet(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := vaultID(r)
	if err != nil {
		return err
	}
	v, err := s.opts.Vaults.Get(r.Context(), owner, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, readVault(v))
	return nil
}

func (s *Server) vaultPatch(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := vaultID(r)
	if err != nil {
		return err
	}
	var in struct {
		Name           *string         `json:"name"`
		ProviderConfig *providerConfig `json:"provider_config"`
	}
	if err := decode(r, &in); err != nil {
		return err
	}
	p := &vault.UpdateParams{Name: in.Name}
	if in.ProviderConfig != nil {
		if p.Config, err = in.ProviderConfig.config("provider_config"); err != nil {
			return err
		}
	}
	v, err := s.opts.Vaults.Update(r.Context(), owner, id, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, readVault(v))
	return nil
}

func (s *Server) vaultDelete(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := vaultID(r)
	if err != nil {
		return err
	}
	if err := s.opts.Vaults.Delete(r.Context(), owner, id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) vaultToken(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := vaultID(r)
	if err != nil {
		return err
	}
	var in struct {
		Token *string `json:"token"`
	}
	if err := decode(r, &in); err != nil {
		return err
	}
	if in.Token == nil {
		return required("token")
	}
	if err := s.opts.Vaults.SetToken(r.Context(), owner, id, *in.Token); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// vaultHealth answers 200 for a vault of the caller's, with ok false and
// the reason when it cannot be used (see [vault.Service.Health]).
func (s *Server) vaultHealth(w http.ResponseWriter, r *http.Request, owner string) error {
	id, err := vaultID(r)
	if err != nil {
		return err
	}
	problem, err := s.opts.Vaults.Health(r.Context(), owner, id)
	if err != nil {
		return err
	}
	if problem != "" {
		writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": problem})
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "error": nil})
	return nil
}
