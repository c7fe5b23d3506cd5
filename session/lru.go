package session

import (
	"container/list"
	"sync"
)

// An lru keeps values by key within a bound on their total size, the
// least recently used going first. The caches of a manager are built on
// it (transcriptCache, sessionCache). Safe for concurrent use.
type lru[V any] struct {
	mu      sync.Mutex
	max     int64
	size    int64
	order   *list.List // of *lruEntry[V], most recent first
	entries map[string]*list.Element
}

type lruEntry[V any] struct {
	key  string
	val  V
	size int64
}

func newLRU[V any](max int64) lru[V] {
	return lru[V]{max: max, order: list.New(), entries: map[string]*list.Element{}}
}

// get returns the value kept for key and its size, and makes it the most
// recently used.
func (c *lru[V]) get(key string) (val V, size int64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		return val, 0, false
	}
	c.order.MoveToFront(e)
	le := e.Value.(*lruEntry[V])
	return le.val, le.size, true
}

// put keeps val for key, replacing what it had; a value larger than the
// bound is not kept (and the old one is dropped all the same).
func (c *lru[V]) put(key string, val V, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(key, val, size)
}

// putUnless is put, unless stays says the value kept for key stays: then
// it only makes that value the most recently used. Both in one critical
// section, so that what stays is judged on the value put replaces.
func (c *lru[V]) putUnless(key string, val V, size int64, stays func(kept *V) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok && stays(&e.Value.(*lruEntry[V]).val) {
		c.order.MoveToFront(e)
		return
	}
	c.putLocked(key, val, size)
}

func (c *lru[V]) putLocked(key string, val V, size int64) {
	c.dropLocked(key)
	if size > c.max {
		return
	}
	c.entries[key] = c.order.PushFront(&lruEntry[V]{key: key, val: val, size: size})
	c.size += size
	for c.size > c.max {
		c.dropLocked(c.order.Back().Value.(*lruEntry[V]).key)
	}
}

// take returns the value kept for key and forgets it.
func (c *lru[V]) take(key string) (val V, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		return val, false
	}
	val = e.Value.(*lruEntry[V]).val
	c.dropLocked(key)
	return val, true
}

// drop forgets key.
func (c *lru[V]) drop(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(key)
}

func (c *lru[V]) dropLocked(key string) {
	if e, ok := c.entries[key]; ok {
		c.size -= e.Value.(*lruEntry[V]).size
		c.order.Remove(e)
		delete(c.entries, key)
	}
}
