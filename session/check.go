package session

import "context"

// CheckRequest validates a request for the owner as [Manager.Create]
// would, without creating a session, and returns it normalised as Create
// would store it. Names (agents, environments, skills) are resolved
// against the registry now; a later Create resolves them again.
//
// Errors: a *[ValidationError] for an invalid request.
func (m *Manager) CheckRequest(ctx context.Context, owner string, r *Request) (*Request, error) {
	echo := m.normalize(r)
	req, _, err := m.Registry().forSession(ctx, owner, echo)
	if err != nil {
		return nil, err
	}
	if _, _, err := m.resolve(ctx, owner, req); err != nil {
		return nil, err
	}
	return echo, nil
}
