package session

import (
	"bytes"
	"context"
	"encoding/json"
)

// CheckRequest validates a request for the owner as [Manager.Create]
// would, without creating a session, and returns it normalised as Create
// would store it. Names (agents, environments, skills) are resolved
// against the registry now, and the vaults the agent names are checked to
// be the owner's ([Options.Vaults], called without a session); a later
// Create resolves and checks them again. The env and headers values of
// its MCP servers come back sealed for the owner (as a stored template
// keeps them: [MCPServerOptions.Secrets]), which Create accepts.
//
// Errors: a *[ValidationError] for an invalid request.
func (m *Manager) CheckRequest(ctx context.Context, owner string, r *Request) (*Request, error) {
	// The steps of Manager.create up to the session's state.
	echo := m.normalize(r)
	req, reg, err := m.forSession(ctx, owner, echo)
	if err != nil {
		return nil, err
	}
	sp, _, err := m.resolve(ctx, owner, req)
	if err != nil {
		return nil, err
	}
	reg.apply(sp)
	if err := m.bindVaults(ctx, owner, sp); err != nil {
		return nil, err
	}
	if err := m.bindProfiles(ctx, owner, sp); err != nil {
		return nil, err
	}
	// A template stored (a schedule's) holds the MCP servers' secrets
	// sealed for the owner (mcpsecrets.go).
	raw, err := json.Marshal(echo)
	if err != nil {
		return nil, err
	}
	sealed, err := m.sealDoc(owner, raw)
	if err != nil || bytes.Equal(sealed, raw) {
		return echo, err
	}
	var out Request
	if err := json.Unmarshal(sealed, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
