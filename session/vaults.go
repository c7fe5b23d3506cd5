package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/hrns-dev/hrns/loop"
)

// A VaultToolsFunc gives a session the tools of the vaults its agent's
// environments name (their vault_id, as the reference binds a vault to a
// browser), such as the one_time_code tool (package
// github.com/hrns-dev/hrns/vault). See [Options.Vaults].
//
// While a request is validated it is called with an empty p.Session: it
// must then check that p.Owner has every vault of p.Vaults, create
// nothing, and return a toolset with the same tool names, whose tools
// are never called. An error wrapping [ErrVaultRefused] is reported to the
// caller as a validation error (422); any other fails the creation.
//
// When the session runs it is called with the session's ID; the tools it
// returns must use only the owner's vaults, and read them when called
// (a vault deleted since the session was created is then not found).
type VaultToolsFunc func(ctx context.Context, p *VaultParams) (*loop.Toolset, error)

// VaultParams are the arguments of a [VaultToolsFunc].
type VaultParams struct {
	// Session is the session's ID; empty while a request is validated.
	Session string
	// Owner is the session's owner (its API key's identity): the only
	// owner whose vaults the session may use.
	Owner string
	// Vaults are the ids of the vaults the session's agent names, in the
	// order of its environments, without repeats.
	Vaults []string
}

// ErrVaultRefused is wrapped by the error of a [VaultToolsFunc] that
// refuses a vault a request names: unknown, another owner's, or not
// usable.
var ErrVaultRefused = errors.New("vault refused")

// vaultsRef starts the toolset reference of a session's vaults:
// "vaults:OWNER\x00ID...".
const vaultsRef = "vaults:"

var vaultIDRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
})

// bindVaults gives a session of owner the tools of the vaults its agent's
// environments name, once it has checked with [Options.Vaults] that the
// owner has them. A request that names a vault on a server without vaults
// is refused.
func (m *Manager) bindVaults(ctx context.Context, owner string, sp *spec) error {
	var ids []string
	for _, kind := range sortedKeys(sp.EnvDefs) {
		var def map[string]json.RawMessage
		json.Unmarshal(sp.EnvDefs[kind], &def)
		raw, ok := def["vault_id"]
		if !ok || string(raw) == "null" {
			continue
		}
		var id string
		if json.Unmarshal(raw, &id) != nil || !vaultIDRE().MatchString(id) {
			return invalid("Input should be a valid UUID", "body", "agent", "environments", kind, "vault_id")
		}
		id = strings.ToLower(id)
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	if m.opts.Vaults == nil {
		return invalid("this server has no vaults (its operator has not configured a vault key): remove vault_id", "body", "agent", "environments")
	}
	if _, err := m.opts.Vaults(ctx, &VaultParams{Owner: owner, Vaults: ids}); err != nil {
		if errors.Is(err, ErrVaultRefused) {
			return invalid(err.Error(), "body", "agent", "environments")
		}
		return err
	}
	sp.Toolsets = append(sp.Toolsets, vaultsRef+owner+"\x00"+strings.Join(ids, "\x00"))
	// The vaults' tools clash with no other tool of the session.
	server, _, err := m.toolsets(sp, "")
	if err != nil {
		return invalid(err.Error(), "body", "agent", "environments")
	}
	for i, t := range sp.ClientTools {
		if slices.Contains(server.Names(), t.Name) {
			return invalid(fmt.Sprintf("tool %q is a tool of the agent's vaults", t.Name), "body", "agent", "tools", i, "name")
		}
	}
	return nil
}

// vaultTools are the tools of a "vaults:OWNER\x00ID..." toolset reference,
// for the session id (empty while validating).
func (m *Manager) vaultTools(ref, id string) (*loop.Toolset, error) {
	if m.opts.Vaults == nil {
		return nil, errors.New("the session uses vaults, and this server has none configured (no vault key)")
	}
	parts := strings.Split(ref, "\x00")
	return m.opts.Vaults(context.Background(), &VaultParams{Session: id, Owner: parts[0], Vaults: parts[1:]})
}
