package session

import (
	"context"
)

// WorkspaceName returns the name of the workspace of the session id of
// owner: the name its agent's [AgentConfig.Workspace] is given, so the
// directory its file tools work in, or for a session whose agent has
// none, the session's ID without its dashes. Either is 32 lower-case hex
// digits, fixed for the session's life. It returns ErrNotFound for a
// session owner cannot see.
//
// The server serves a session's files from the directory of that name
// (see docs/serve.md, "Session files").
func (m *Manager) WorkspaceName(ctx context.Context, owner, id string) (string, error) {
	s, err := m.get(ctx, owner, id)
	if err != nil {
		return "", err
	}
	st, err := stateOf(s)
	if err != nil {
		return "", err
	}
	return workspaceOf(st.Spec.spec, s.ID), nil
}

// toolsets are sp's toolset references; none for a nil spec.
func (sp *spec) toolsets() []string {
	if sp == nil {
		return nil
	}
	return sp.Toolsets
}
