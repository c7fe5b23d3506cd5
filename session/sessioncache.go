package session

import (
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
	c.lru.putUnless(s.ID, *s, sessionSize(s), func(kept *store.Session) bool { return kept.Version > s.Version })
}

// keptStatesBytes bounds the states a manager keeps decoded (keptStates).
const keptStatesBytes = 4 << 20

// keptStates keeps, by session, the state a worker's last commit of a run
// encoded, as decoding it gives it (see handOver), for the next commit
// that starts from that encoding (most often the caller's input that
// answers the run's calls), which takes it instead of decoding the
// session's state: once, since the commit changes it. A state is kept
// for the one encoding it was committed as (the same bytes, not a copy:
// a commit starting from another version of the session decodes its
// own). Least recently used out; a state counts three times its
// encoding.
type keptStates struct {
	lru[keptState]
}

type keptState struct {
	enc []byte // the committed encoding, as held by the session cache
	st  *state
}

func newKeptStates(max int64) *keptStates {
	return &keptStates{newLRU[keptState](max)}
}

// put keeps st, the state just committed as s (whose State is its
// encoding), unless handOver refuses it.
func (k *keptStates) put(s *store.Session, st *state) {
	if st = handOver(s, st); st == nil || len(s.State) == 0 {
		k.drop(s.ID)
		return
	}
	k.lru.put(s.ID, keptState{enc: s.State, st: st}, int64(3*len(s.State))+512)
}

// take returns the state kept for s, if it was kept for s.State itself,
// and forgets it either way.
func (k *keptStates) take(s *store.Session) *state {
	kept, ok := k.lru.take(s.ID)
	if !ok || len(s.State) == 0 || len(kept.enc) != len(s.State) || &kept.enc[0] != &s.State[0] {
		return nil
	}
	return kept.st
}
