package session

import (
	"slices"

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
	lru[cachedTranscript]
}

type cachedTranscript struct {
	tag  string
	msgs []llm.Message
}

func newTranscriptCache(max int64) *transcriptCache {
	return &transcriptCache{newLRU[cachedTranscript](max)}
}

// get returns the session's transcript if the cache holds the one tagged
// tag, of n messages. The slice is the caller's to append to.
func (c *transcriptCache) get(id, tag string, n int64) ([]llm.Message, bool) {
	if tag == "" {
		return nil, false
	}
	t, _, ok := c.lru.get(id)
	if !ok || t.tag != tag || int64(len(t.msgs)) != n {
		return nil, false
	}
	return slices.Clip(t.msgs), true
}

// put records the session's transcript tagged tag, of size bytes encoded,
// replacing the one it had; msgs must not change afterwards (the run that
// made them may append to the slice).
func (c *transcriptCache) put(id, tag string, msgs []llm.Message, size int64) {
	if tag == "" {
		c.drop(id)
		return
	}
	c.lru.put(id, cachedTranscript{tag: tag, msgs: slices.Clip(msgs)}, size)
}

// sizeOf returns the encoded size of the session's cached transcript, 0
// if none.
func (c *transcriptCache) sizeOf(id string) int64 {
	_, size, _ := c.lru.get(id)
	return size
}
