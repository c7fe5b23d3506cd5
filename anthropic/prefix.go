package anthropic

import (
	"fmt"

	"github.com/hrns-dev/hrns/internal/prefixcache"
	"github.com/hrns-dev/hrns/llm"
)

// prefixKey is the key of a conversation's [prefixcache.Cache] for this
// provider in its [llm.Conversation].
type prefixKey struct{}

// turnEncoder renders and encodes a conversation one message at a time
// for a [prefixcache.Cache], byte for byte as [renderConversation] and the
// request's encoding do. It is a [prefixcache.Lookahead]:
//
//   - A turn (consecutive messages of one role, merged, their blocks put in
//     the order the API wants) is written by its last message, once the
//     next message with blocks shows that the turn ends there: each
//     message's encoding reads up to that next message (Reach), and the
//     messages of a turn before its last are not clean.
//   - The last turn, and the last user turn before it, carry the
//     conversation's cache breakpoints (cc), which move as the
//     conversation grows: the messages from the start of that user turn
//     on (Tail) are encoded at every request, and a message before it
//     never carries a breakpoint whatever is appended.
//   - System messages go to the request's system field: their texts are
//     kept in the cache's [prefixcache.Aside], so that the messages the
//     cache reuses are not read again.
type turnEncoder struct {
	msgs  []llm.Message
	cc    *cacheControl // the conversation's breakpoint; nil for none
	aside *prefixcache.Aside
	app   prefixcache.Appender

	// back holds the renders of Tail's scan: back[k] is message
	// len(msgs)-1-k's. next is message nextAt's, from the last look
	// ahead. Add renders each message once, but for the system and empty
	// messages a look ahead passes over.
	back   []rendered
	next   rendered
	nextAt int

	// lastEnd and userEnd are the last messages of the last turn and of
	// the last user turn before it (-1 for none): their turns carry cc.
	lastEnd, userEnd int

	run   wireMessage // the turn being merged
	reach int         // what the last Add read: see [prefixcache.Lookahead]

	system []block // the system blocks, which Finish sets
}

// newTurnEncoder returns an encoder of msgs for cache, whose last turns
// carry the breakpoint cc (nil for none).
func newTurnEncoder(msgs []llm.Message, cc *cacheControl, cache *prefixcache.Cache) *turnEncoder {
	return &turnEncoder{msgs: msgs, cc: cc, aside: cache.Aside(), nextAt: -1, lastEnd: -1, userEnd: -1}
}

// get returns the render of message i.
func (e *turnEncoder) get(i int) rendered {
	if k := len(e.msgs) - 1 - i; k < len(e.back) {
		return e.back[k]
	}
	if i != e.nextAt {
		e.next, e.nextAt = renderMessage(i, &e.msgs[i]), i
	}
	return e.next
}

// Tail returns the first message of the last user turn before the last
// turn (the last turn's when there is none), and finds the messages whose
// turns carry the breakpoints. It renders the messages from the end back
// to the turn before that one.
func (e *turnEncoder) Tail(msgs []llm.Message) int {
	type turn struct {
		role       string
		start, end int // its first and last messages
	}
	var turns [3]turn
	n := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		r := renderMessage(i, &msgs[i])
		e.back = append(e.back, r)
		if r.err != nil {
			// The request fails at this message, or before it.
			return i
		}
		if !r.turn() {
			continue
		}
		if n > 0 && turns[n-1].role == r.role {
			turns[n-1].start = i
			continue
		}
		// A user turn is the last turn, or the one before the last
		// assistant turn, or the one before the last user turn's
		// assistant turn: at most three.
		if n == len(turns) || (n == 2 && turns[0].role == "assistant") {
			break
		}
		turns[n] = turn{r.role, i, i}
		n++
	}
	if n == 0 {
		return len(msgs)
	}
	e.lastEnd = turns[0].end
	u := 1
	if turns[0].role == "user" {
		u = 2
	}
	if u < n {
		e.userEnd = turns[u].end
		return turns[u].start
	}
	return turns[0].start
}

// Reach returns how many messages the last Add read.
func (e *turnEncoder) Reach() int { return e.reach }

// Add appends the turn message i ends, if it ends one.
func (e *turnEncoder) Add(dst []byte, first bool, i int, _ *llm.Message) ([]byte, bool, error) {
	e.reach = i + 1
	r := e.get(i)
	if r.err != nil {
		return dst, false, r.err
	}
	if r.system != "" {
		e.aside.Add(i, r.system)
	}
	open := len(e.run.Content) > 0
	if !r.turn() {
		return dst, !open, nil
	}
	if open {
		e.run.Content = append(e.run.Content, r.blocks...)
	} else {
		e.run = wireMessage{Role: r.role, Content: r.blocks}
	}
	// The turn goes on if the next message with blocks is of its role.
	j := i + 1
	for ; j < len(e.msgs); j++ {
		if n := e.get(j); n.err != nil || n.turn() {
			break
		}
	}
	e.reach = j + 1
	if j < len(e.msgs) {
		if n := e.get(j); n.err == nil && n.role == r.role {
			return dst, false, nil
		}
	}
	orderBlocks(&e.run)
	if e.cc != nil && (i == e.lastEnd || i == e.userEnd) {
		markLastBlock(e.run.Content, e.cc)
	}
	dst, err := e.app.Append(dst, first, &e.run)
	e.run = wireMessage{}
	if err != nil {
		return dst, false, fmt.Errorf("anthropic: encoding request: %w", err)
	}
	return dst, true, nil
}

// Finish sets the system blocks, from the texts of the conversation's
// system messages; every turn was written by its last message.
func (e *turnEncoder) Finish(dst []byte, _ bool) ([]byte, error) {
	if texts := e.aside.Texts(); len(texts) > 0 {
		e.system = make([]block, len(texts))
		for i, t := range texts {
			e.system[i] = block{Type: typeText, Text: t}
		}
	}
	return dst, nil
}
