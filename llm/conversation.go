package llm

import "sync"

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
// sends: before it reuses anything it compares the request's messages
// with a copy of those it was made from, and anything changed (a message
// replaced, removed or rewritten in place, including the bytes of tool
// call arguments, images and documents) is encoded again. Each provider
// bounds what it keeps per Conversation.
//
// The zero value is ready to use, and a Conversation is safe for
// concurrent use.
type Conversation struct {
	mu    sync.Mutex
	state map[any]any
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
