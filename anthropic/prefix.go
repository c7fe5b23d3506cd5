package anthropic

import (
	"fmt"
	"slices"

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
//     on (Tail) are written at every request, and a message before it
//     never carries a breakpoint whatever is appended.
//   - System messages go to the request's system field: their texts are
//     kept in the cache's [prefixcache.Aside], so that the messages the
//     cache reuses are not read again.
//
// A message is rendered and its blocks encoded once ([encoded]): the
// messages of the tail are memoized in the cache's [prefixcache.Memo]
// across the requests they stay in the tail for (an agent loop's tool
// results, three), and a turn is written from its messages' encoded
// blocks, in the API's order, the breakpoint spliced into its last block
// (see [encoded.appendTurn]), never encoded again.
type turnEncoder struct {
	msgs  []llm.Message
	cc    []byte // `,"cache_control":{…}}`, the end of a marked block; nil for no breakpoint
	aside *prefixcache.Aside
	memo  *prefixcache.Memo
	app   prefixcache.Appender

	// tail is the first message of the tail once Tail has found it (0
	// before): get memoizes the messages from it on. next is message
	// nextAt's, from the last look ahead before the tail.
	tail   int
	next   *encoded
	nextAt int

	// lastEnd and userEnd are the last messages of the last turn and of
	// the last user turn before it (-1 for none): their turns carry cc.
	lastEnd, userEnd int

	run   []*encoded // the messages of the turn being merged
	order []blockRef // scratch of appendTurn
	reach int        // what the last Add read: see [prefixcache.Lookahead]

	system []block // the system blocks, which Finish sets

	encodes int // messages rendered and encoded, for tests
}

// newTurnEncoder returns an encoder of msgs for cache, whose last turns
// carry the breakpoint cc (nil for none).
func newTurnEncoder(msgs []llm.Message, cc *cacheControl, cache *prefixcache.Cache) (*turnEncoder, error) {
	e := &turnEncoder{msgs: msgs, aside: cache.Aside(), memo: cache.Memo(), nextAt: -1, lastEnd: -1, userEnd: -1}
	if cc != nil {
		b, err := e.app.Append(nil, true, cc)
		if err != nil {
			return nil, fmt.Errorf("anthropic: encoding request: %w", err)
		}
		e.cc = append(append([]byte(`,"cache_control":`), b...), '}')
	}
	return e, nil
}

// encoded is a message of a conversation rendered and its blocks encoded,
// each as encoding/json encodes it (HTML escaping off) without a
// breakpoint: the blocks of a user or assistant turn, or the text of a
// system message. It depends on the message alone.
type encoded struct {
	role   string // "user" or "assistant", "" for a system message
	system string // a system message's text, "" for none
	json   []byte // the blocks' encodings, one after the other
	blocks []encodedBlock
}

// encodedBlock is where a block of an [encoded] ends in its json, and what
// [orderBlocks] and [markLastBlock] need of it.
type encodedBlock struct {
	end  int
	kind blockKind
}

// blockKind sorts blocks as [orderBlocks] and [markLastBlock] do.
type blockKind uint8

const (
	kindOther      blockKind = iota
	kindToolResult           // tool_result, first in a user turn
	kindThinking             // thinking or redacted_thinking: first in an assistant turn, never marked
)

// turn reports whether m is part of a turn: a message of user or assistant
// content, not a system message, not one without blocks.
func (m *encoded) turn() bool { return len(m.blocks) > 0 }

// size is about the bytes m holds, for the memo's bound.
func (m *encoded) size() int { return 96 + len(m.json) + len(m.system) + 16*len(m.blocks) }

// block returns the encoding of block k of m.
func (m *encoded) block(k int) []byte {
	start := 0
	if k > 0 {
		start = m.blocks[k-1].end
	}
	return m.json[start:m.blocks[k].end]
}

// encodeMessage renders message i, m, and encodes its blocks.
func (e *turnEncoder) encodeMessage(i int, m *llm.Message) (*encoded, error) {
	e.encodes++
	r := renderMessage(i, m)
	if r.err != nil {
		return nil, r.err
	}
	out := &encoded{role: r.role, system: r.system}
	if len(r.blocks) > 0 {
		out.blocks = make([]encodedBlock, len(r.blocks))
		n := 0
		for k := range r.blocks {
			n += blockSize(&r.blocks[k])
		}
		out.json = make([]byte, 0, n)
	}
	for k := range r.blocks {
		b := &r.blocks[k]
		var ok bool
		if out.json, ok = appendBlock(out.json, b); !ok {
			// encoding/json's error, word for word.
			var err error
			if out.json, err = e.app.Append(out.json, true, b); err != nil {
				return nil, fmt.Errorf("anthropic: encoding request: %w", err)
			}
		}
		kind := kindOther
		switch b.Type {
		case typeToolResult:
			kind = kindToolResult
		case typeThinking, typeRedactedThinking:
			kind = kindThinking
		}
		out.blocks[k] = encodedBlock{end: len(out.json), kind: kind}
	}
	return out, nil
}

// get returns message i rendered and encoded: from the memo, or encoded
// now and memoized if it is in the tail.
func (e *turnEncoder) get(i int) (*encoded, error) {
	if v := e.memo.Get(i); v != nil {
		return v.(*encoded), nil
	}
	if i == e.nextAt {
		return e.next, nil
	}
	m, err := e.encodeMessage(i, &e.msgs[i])
	if err != nil {
		return nil, err
	}
	if i < e.tail || !e.memo.Put(i, m, m.size()) {
		e.next, e.nextAt = m, i
	}
	return m, nil
}

// Tail returns the first message of the last user turn before the last
// turn (the last turn's when there is none), and finds the messages whose
// turns carry the breakpoints. It encodes the messages from the end back
// to the turn before that one, those not memoized already.
func (e *turnEncoder) Tail(msgs []llm.Message) int {
	e.tail = e.findTail(msgs)
	return e.tail
}

// findTail is Tail. It memoizes the messages it reads, and asks the memo
// to keep them all (see [prefixcache.Memo.KeepFrom]), which the next
// request's Tail reads again: the last message of the turn before the
// tail, whose role ends the scan (and a request after one that ended with
// the model's turn has its tail start a turn later), or the system
// messages before the first turn.
func (e *turnEncoder) findTail(msgs []llm.Message) int {
	type turn struct {
		role       string
		start, end int // its first and last messages
	}
	var turns [3]turn
	n := 0
	low := len(msgs) // the first message read
	for i := len(msgs) - 1; i >= 0; i-- {
		low = i
		r, err := e.get(i)
		if err != nil {
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
	e.memo.KeepFrom(low)
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
	r, err := e.get(i)
	if err != nil {
		return dst, false, err
	}
	if r.system != "" {
		e.aside.Add(i, r.system)
	}
	open := len(e.run) > 0
	if !r.turn() {
		return dst, !open, nil
	}
	e.run = append(e.run, r)
	// The turn goes on if the next message with blocks is of its role.
	j := i + 1
	var next *encoded
	for ; j < len(e.msgs); j++ {
		if next, err = e.get(j); err != nil || next.turn() {
			break
		}
	}
	e.reach = j + 1
	if j < len(e.msgs) && err == nil && next.role == r.role {
		return dst, false, nil
	}
	dst = e.appendTurn(dst, first, e.cc != nil && (i == e.lastEnd || i == e.userEnd))
	clear(e.run)
	e.run = e.run[:0]
	return dst, true, nil
}

// blockRef is block k of message m of a turn.
type blockRef struct {
	m *encoded
	k int
}

// appendTurn appends the turn of e.run, after a comma unless first, byte
// for byte as encoding/json encodes the wireMessage [renderConversation]
// makes of its messages, with [orderBlocks]' order and, when marked, the
// breakpoint [markLastBlock] puts: a block's encoding is the same alone
// as in the turn's array, and a breakpoint, the last field of a block,
// goes before its closing brace.
func (e *turnEncoder) appendTurn(dst []byte, first, marked bool) []byte {
	role := e.run[0].role
	lead := kindToolResult
	if role == "assistant" {
		lead = kindThinking
	}
	e.order = e.order[:0]
	leads := 0
	for _, m := range e.run {
		for k, b := range m.blocks {
			e.order = append(e.order, blockRef{m, k})
			if b.kind == lead {
				leads++
			}
		}
	}
	if leads > 0 && e.order[0].kind() != lead {
		// The blocks of lead kind first, each part in its order; a turn
		// that starts with one stays as it is.
		sorted := make([]blockRef, 0, len(e.order))
		for _, b := range e.order {
			if b.kind() == lead {
				sorted = append(sorted, b)
			}
		}
		for _, b := range e.order {
			if b.kind() != lead {
				sorted = append(sorted, b)
			}
		}
		copy(e.order, sorted)
	}
	mark := -1
	if marked {
		for k := len(e.order) - 1; k >= 0; k-- {
			if e.order[k].kind() != kindThinking {
				mark = k
				break
			}
		}
	}
	n := len(e.cc) + 32
	for _, b := range e.order {
		n += len(b.bytes()) + 1
	}
	dst = slices.Grow(dst, n)
	if !first {
		dst = append(dst, ',')
	}
	dst = append(dst, `{"role":"`...)
	dst = append(dst, role...)
	dst = append(dst, `","content":[`...)
	for k, b := range e.order {
		if k > 0 {
			dst = append(dst, ',')
		}
		j := b.bytes()
		if k == mark {
			dst = append(dst, j[:len(j)-1]...)
			dst = append(dst, e.cc...)
			continue
		}
		dst = append(dst, j...)
	}
	clear(e.order)
	return append(dst, "]}"...)
}

func (b blockRef) kind() blockKind { return b.m.blocks[b.k].kind }
func (b blockRef) bytes() []byte   { return b.m.block(b.k) }

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
