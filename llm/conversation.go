package llm

import (
	"sync"
	"sync/atomic"
)

// A Conversation is the scope of what a provider may keep from one request
// to the next of the same conversation, to do less work for each: the
// OpenAI provider keeps the encoded JSON of the messages it has sent, so
// that a turn encodes only the messages that are new since the last one
// (see [Request.Conversation]).
//
// One Conversation belongs to one conversation: a run of the agent loop
// makes one for itself and drops it when the run ends, so what a provider
// keeps lives as long as the run and is never shared with another run
// (concurrent runs sharing one client each have their own). Sharing a
// Conversation between conversations is safe, since providers check what
// they reuse against the request, but it makes the reuse useless.
//
// What a provider keeps is an optimisation and never changes what it
// sends. By default, before it reuses anything it compares the request's
// messages with a copy of those it was made from, and anything changed (a
// message replaced, removed or rewritten in place, including the bytes of
// tool call arguments, images and documents) is encoded again. A
// conversation whose transcript has an owner that knows what changed
// ([Conversation.Own]) spares that comparison, which grows with the
// conversation: the owner says when the transcript changed other than by
// appending ([Conversation.Rewrote]), and providers reuse what they
// encoded of the earlier messages without reading them. Each provider
// bounds what it keeps per Conversation.
//
// The zero value is ready to use, and a Conversation is safe for
// concurrent use.
type Conversation struct {
	mu    sync.Mutex
	state map[any]any

	owned atomic.Bool
	gen   atomic.Uint64
}

// Own declares that the caller owns the transcript of the conversation's
// requests: from now on, each request's Messages begins with the Messages
// of the conversation's previous request, the same messages unchanged
// (nothing replaced, removed, inserted or modified in place, the bytes
// they point to included), followed by the messages appended since;
// unless the owner called [Conversation.Rewrote] in between. Providers then
// reuse what they encoded of the earlier messages without comparing them
// with what they kept, so that a turn costs the same at any length of the
// conversation.
//
// The agent loop owns the conversation of each of its runs: its
// transcript only grows, but for compaction, which calls Rewrote. A
// request whose Messages are fewer than the previous request's is taken
// as a rewrite. Call Own before the first request; a provider that kept
// something before it starts afresh.
func (c *Conversation) Own() {
	if c != nil {
		c.owned.Store(true)
	}
}

// Rewrote tells the providers that the owner of the conversation (see
// [Conversation.Own]) changed its transcript other than by appending
// messages: what they kept of the earlier messages is not reused as it
// is. It is cheap; call it for every such change, before the next
// request.
func (c *Conversation) Rewrote() {
	if c != nil {
		c.gen.Add(1)
	}
}

// Version returns how many times the owner called [Conversation.Rewrote]
// and whether the conversation is owned (see [Conversation.Own]). A
// provider may reuse what it encoded of an owned conversation's earlier
// messages as long as gen is the one it encoded them at. A nil
// Conversation is not owned.
func (c *Conversation) Version() (gen uint64, owned bool) {
	if c == nil {
		return 0, false
	}
	return c.gen.Load(), c.owned.Load()
}

// State returns the value kept under key, calling init to make it the
// first time key is asked for. Providers use an unexported key type of
// their own, as with context values, and keep in the value whatever
// synchronisation it needs: State only guards the map. A nil Conversation
// keeps nothing: State returns init's value, new each call.
func (c *Conversation) State(key any, init func() any) any {
	if c == nil {
		return init()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.state[key]; ok {
		return v
	}
	if c.state == nil {
		c.state = make(map[any]any)
	}
	v := init()
	c.state[key] = v
	return v
}
