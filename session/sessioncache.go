package session

import (
	"sync"

	"github.com/hrns-dev/hrns/store"
)

// sessionCacheBytes bounds the sessions a manager keeps as it last
// committed them.
const sessionCacheBytes = 32 << 20

// A sessionCache keeps the sessions this process last committed, as
// committed, so that a caller's input (a tool result, a message) starts
// from the session instead of reading it again: the store's version check
// makes that safe, since a session someone else changed since is refused
// with store.ErrConflict, and the update then reads it (see updateFrom).
// Only a session's lease fields may be out of date in it, and no update
// writes them from the session given. Least recently used out.
type sessionCache struct {
	mu sync.Mutex // serialises put's read and write of a session
	lru[store.Session]
}

func newSessionCache(max int64) *sessionCache {
	return &sessionCache{lru: newLRU[store.Session](max)}
}

// sessionSize is what a cached session counts for: its documents and a
// bound on the rest.
func sessionSize(s *store.Session) int64 {
	return int64(len(s.State)+len(s.Request)+len(s.Answer)+len(s.FirstMessage)+len(s.Error)) + 512
}

// get returns a copy of the session with the id as last committed here,
// or nil. The copy's documents are shared: they are replaced, never
// modified in place.
func (c *sessionCache) get(id string) *store.Session {
	s, _, ok := c.lru.get(id)
	if !ok {
		return nil
	}
	return &s
}

// put keeps a copy of s, as just committed, unless it keeps a later
// version: two commits of a session that return at once may be put in
// either order, and an input that started from the older would fail its
// version check and read the session again.
func (c *sessionCache) put(s *store.Session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, _, ok := c.lru.get(s.ID); ok && old.Version > s.Version {
		return
	}
	c.lru.put(s.ID, *s, sessionSize(s))
}
