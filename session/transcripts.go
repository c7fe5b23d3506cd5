package session

import (
	"container/list"
	"slices"
	"sync"

	"github.com/hrns-dev/hrns/llm"
)

// transcriptCacheBytes bounds the transcripts a manager keeps decoded, by
// the size of their encoded messages.
const transcriptCacheBytes = 64 << 20

// transcriptCache keeps the decoded transcripts of the sessions this
// process ran last, so that a run resumed here (after a tool result, a
// message, an approval) does not read and decode again the conversation
// it committed: without it, each step of a session would cost in
// proportion to its length. An entry is valid for the checkpoint whose
// tag it has: each commit of a transcript tags its checkpoint anew, so a
// transcript another process committed is read from the store.
type transcriptCache struct {
	mu      sync.Mutex
	max     int64
	size    int64
	order   *list.List // of *cachedTranscript, most recent first
	entries map[string]*list.Element
}

type cachedTranscript struct {
	id, tag string
	msgs    []llm.Message
	size    int64 // of the encoded messages
}

func newTranscriptCache(max int64) *transcriptCache {
	return &transcriptCache{max: max, order: list.New(), entries: map[string]*list.Element{}}
}

// get returns the session's transcript if the cache holds the one tagged
// tag, of n messages. The slice is the caller's to append to.
func (c *transcriptCache) get(id, tag string, n int64) ([]llm.Message, bool) {
	if tag == "" {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[id]
	if !ok {
		return nil, false
	}
	t := e.Value.(*cachedTranscript)
	if t.tag != tag || int64(len(t.msgs)) != n {
		return nil, false
	}
	c.order.MoveToFront(e)
	return slices.Clip(t.msgs), true
}

// put records the session's transcript tagged tag, replacing the one it
// had; msgs must not change afterwards (the run that made them may
// append to the slice).
func (c *transcriptCache) put(id, tag string, msgs []llm.Message, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(id)
	if tag == "" || size > c.max {
		return
	}
	c.entries[id] = c.order.PushFront(&cachedTranscript{id: id, tag: tag, msgs: slices.Clip(msgs), size: size})
	c.size += size
	for c.size > c.max {
		c.dropLocked(c.order.Back().Value.(*cachedTranscript).id)
	}
}

// drop forgets the session's transcript.
func (c *transcriptCache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(id)
}

func (c *transcriptCache) dropLocked(id string) {
	if e, ok := c.entries[id]; ok {
		c.size -= e.Value.(*cachedTranscript).size
		c.order.Remove(e)
		delete(c.entries, id)
	}
}

// sizeOf returns the encoded size of the session's cached transcript, 0
// if none.
func (c *transcriptCache) sizeOf(id string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[id]; ok {
		return e.Value.(*cachedTranscript).size
	}
	return 0
}
