package session

import (
	"context"

	"github.com/hrns-dev/hrns/store"
)

// The internals the seams tests (seams_longpoll_test.go) compare.

// SeamsRecorded answers a long-poll from m's commit records only, as
// Changes does first, with the version of the record (ok false: none).
func SeamsRecorded(m *Manager, owner, id string, p *ChangesParams) (c *Changes, count, version int64, ok bool) {
	rec, _, found := m.lastCommits.get(id)
	c, count, ok = m.lastCommits.changes(owner, id, p)
	after, _, still := m.lastCommits.get(id)
	if !ok || !found || !still || after.s.Version != rec.s.Version {
		return nil, 0, 0, false // none, or changed meanwhile
	}
	return m.withinBudget(c), count, rec.s.Version, true
}

// SeamsRead answers a long-poll from s, as read, and the store's events,
// as Changes does when no record answers it.
func SeamsRead(ctx context.Context, m *Manager, s *store.Session, p *ChangesParams) (*Changes, int64, error) {
	return m.changes(ctx, s, p)
}

// SeamsCachedVersion is the version of the session m's session cache
// holds (-1: none).
func SeamsCachedVersion(m *Manager, id string) int64 {
	if s := m.committed.get(id); s != nil {
		return s.Version
	}
	return -1
}
