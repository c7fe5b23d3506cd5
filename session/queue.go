package session

import (
	"context"

	"github.com/hrns-dev/hrns/store"
)

// Promoting queued sessions. A session created above its owner's limit of
// active sessions (Options.MaxActiveSessions) waits as queued; every
// commit that makes one of the owner's sessions stop being active (see
// Manager.followUp) starts the oldest queued ones, as many as there are
// free slots.

// promote starts the owner's queued sessions, oldest first, while the
// owner has fewer active sessions than MaxActiveSessions. It runs after a
// session of the owner stops being active.
func (m *Manager) promote(ctx context.Context, owner string) {
	if m.opts.MaxActiveSessions <= 0 {
		return
	}
	m.admit.Lock()
	defer m.admit.Unlock()
	active, err := m.active(ctx, owner)
	if err != nil {
		m.log.Error("counting active sessions", "err", err)
		return
	}
	free := m.opts.MaxActiveSessions - active
	if free <= 0 {
		return
	}
	queued, _, err := m.st.ListSessions(ctx, &store.ListParams{Owner: owner, Statuses: []string{string(StatusQueued)}, Limit: free, Ascending: true})
	if err != nil {
		m.log.Error("listing queued sessions", "err", err)
		return
	}
	for _, q := range queued {
		_, _, err := m.update(ctx, q.ID, nil, func(s *store.Session, st *state) ([]store.Event, error) {
			if st.Phase != phaseQueued {
				return nil, errNoChange
			}
			return st.toNew(), nil
		})
		if err != nil {
			m.log.Error("starting a queued session", "session", q.ID, "err", err)
		}
	}
}
