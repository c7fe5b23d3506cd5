// Package prefixcache keeps, for a provider whose API is stateless, the
// encoded JSON of the messages a conversation has sent, so that the next
// request of the conversation encodes only the messages that are new: the
// cost of a turn stays flat as the conversation grows, where encoding the
// whole conversation every turn makes it grow with its length.
//
// A [Cache] lives in the [llm.Conversation] of the requests ([For]), one
// per conversation and provider, never in a client shared by concurrent
// conversations. When the conversation has an owner that says what changed
// ([llm.Conversation.Own], as the agent loop does), the cache reuses the
// encoding of the messages it kept as long as the owner has not rewritten
// the transcript since ([llm.Conversation.Version]), without reading them:
// a turn then costs the same at 500 messages as at 10. Otherwise, before
// reusing anything, it compares each message of the request with a copy of
// what it encoded ([keptMessages]), so that a message the caller replaced,
// removed or rewrote in place is encoded again, and everything after it.
// Either way a body assembled from the cache is byte for byte the body
// encoded from scratch. It holds at most a bound of bytes; messages past
// it are encoded at every request.
//
// An encoder whose elements for a message depend on the messages after it
// (Anthropic's and Gemini's, which merge consecutive messages of one role
// into one element and mark the last ones with cache breakpoints) says so
// ([Lookahead]): how far each message's encoding read, and where the tail
// begins whose encoding depends on where the conversation ends, which is
// written at every request and never kept; what it made of each message of
// the tail it may memoize ([Memo]), so that a message is encoded once
// however many requests it stays in the tail for.
package prefixcache

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"unsafe"

	"github.com/hrns-dev/hrns/internal/httpapi"
	"github.com/hrns-dev/hrns/llm"
)

// MaxBytes bounds what one conversation's [Cache] keeps (see [New]): the
// encoded messages and the copies it checks them against; its [Memo] holds
// as much again at most. A conversation past it encodes its later messages
// at every request, as without a cache.
const MaxBytes = 32 << 20

// For returns the cache of conv for the provider whose key is key (a value
// of an unexported type of the provider's own, as for context values); nil
// when conv is nil.
func For(conv *llm.Conversation, key any) *Cache {
	if conv == nil {
		return nil
	}
	return conv.State(key, func() any {
		c := New(MaxBytes)
		c.conv = conv
		return c
	}).(*Cache)
}

// New returns an empty cache that keeps at most limit bytes: the encoded
// messages and their copies, as [Cache.Size] counts them (the spare
// capacity of its arrays aside). A message that does not fit is encoded at
// every request, and so are the messages after it.
func New(limit int) *Cache { return &Cache{limit: limit, memo: Memo{limit: limit}} }

// A Cache keeps the encoded JSON of the messages a conversation has sent.
//
// The encoded array elements of the messages kept, joined by commas, are
// segs then buf, one after the other: a segment is full (its capacity cut
// to its length) and buf is the one appended to, a message's elements
// always within one of them. When buf lacks the room a message needs, the
// cache goes on in a new array rather than growing buf, so that a turn
// copies nothing of what is kept (a conversation of large tool results
// would otherwise copy all it holds at every turn). ends[i] is where the
// elements of message i end, counted over segs and buf (base is the
// length of segs). Bytes that a request has used are never written again:
// buf only grows by append, and when the conversation changes before its
// end the cache goes on in a new array (see truncate), so a body being sent
// never changes under the transport.
type Cache struct {
	mu    sync.Mutex
	segs  [][]byte
	base  int // bytes in segs
	buf   []byte
	kept  keptMessages // copies of the messages kept, then of the tail (see Lookahead)
	ends  []int
	clean []bool // clean[i]: what follows message i encodes the same whatever came before
	// reach[i] is how many leading messages the encodings of messages 0
	// to i read, at most (see [Lookahead]): i+1 unless the encoder
	// looked ahead.
	reach []int
	size  int // bytes kept: buf, and kept's copies
	limit int // the bound of size
	last  int // the number of messages of the last request
	aside Aside

	// conv is the conversation the cache lives in (nil for [New]). When
	// it is owned, what is kept was encoded at its generation gen and
	// kept holds no copies (owned is set): the owner vouches for the
	// messages.
	conv  *llm.Conversation
	owned bool
	gen   uint64

	memo Memo
}

// An Encoder renders and encodes a conversation one message at a time, as
// the elements of a JSON array. [Cache.Encode] calls it for the messages
// from the first it does not reuse on, in order, on an Encoder that starts
// as for the first message of a conversation: it may only carry state from
// one message to the next when Add reports the message not clean.
type Encoder interface {
	// Add appends to dst the elements message i becomes (none, one or
	// more), each after a comma unless it is the first of the array
	// (first says nothing precedes). clean reports that what the next
	// messages become does not depend on message i or those before it.
	Add(dst []byte, first bool, i int, m *llm.Message) (out []byte, clean bool, err error)
	// Finish appends the elements that end the array, if any.
	Finish(dst []byte, first bool) ([]byte, error)
}

// A Lookahead is an Encoder whose elements for a message may depend on the
// messages after it: one that merges consecutive messages of one role into
// one element, written when the run ends, or that marks the last messages
// of the conversation. [Cache.Encode] reuses what it kept of a message
// only while the messages it read are unchanged, and never keeps the tail.
type Lookahead interface {
	Encoder
	// Tail returns the index of the first message of msgs whose elements
	// may depend on where the conversation ends (len(msgs) for none): it
	// and the messages after it are encoded at every request and never
	// kept. Encode calls it once, before Add. It must not move back as a
	// conversation grows by appending: a message before the tail is one
	// whose elements no message appended later can change.
	Tail(msgs []llm.Message) int
	// Reach returns how many leading messages of the conversation the
	// elements of the message Add last added depend on: i+1 for message i
	// when they depend on it and those before it only, more when the
	// encoder looked ahead at the messages after it.
	Reach() int
}

// Encode encodes msgs, with e, as the elements of an array, without its
// brackets: the pieces of prefix, from the cache, one after the other,
// followed by rest. prefix's bytes are never written again; prefix and
// rest are the caller's. The error is e's, for the first message e
// refuses, as encoding them all from scratch would give.
func (p *Cache) Encode(msgs []llm.Message, e Encoder) (prefix [][]byte, rest []byte, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()

	la, _ := e.(Lookahead)

	// The messages still as kept (n), back to the last one after which
	// the encoding starts afresh and whose encoding read only messages
	// known unchanged (same).
	n, same := 0, 0
	gen, owned := p.conv.Version()
	switch {
	case owned:
		// The owner vouches for the messages kept unless it rewrote the
		// transcript; fewer messages than kept is a rewrite too.
		if !p.owned || gen != p.gen || len(msgs) < len(p.ends) {
			p.truncate(0)
			p.owned, p.gen = true, gen
			p.last = 0
		}
		// It vouches for the last request's messages, kept or not.
		n, same = len(p.ends), min(len(msgs), p.last)
	default:
		if p.owned {
			p.truncate(0) // no copies to compare with
			p.owned = false
		}
		// The copies go on past the messages kept, over the tail the
		// last request encoded: the messages kept may have read it.
		for same < p.kept.len() && same < len(msgs) && p.kept.equal(same, &msgs[same]) {
			same++
		}
		n = min(same, len(p.ends))
	}
	p.last = len(msgs)
	// What the encoder memoized of a message that may have changed is
	// forgotten before it looks; what it memoized of the messages before
	// the tail, once the request is encoded (the cache keeps them).
	p.memo.dropFrom(same)
	p.memo.floor = len(msgs)
	tail := len(msgs)
	if la != nil {
		tail = la.Tail(msgs)
	}
	defer func() { p.memo.dropBefore(min(tail, p.memo.floor)) }()
	n = min(n, tail)
	for n > 0 && (!p.clean[n-1] || p.reach[n-1] > same) {
		n--
	}
	switch {
	case n < len(p.ends):
		p.truncate(n)
	case p.kept.len() > n:
		p.size = p.end(n) + p.kept.truncate(n) // the tail's copies
	}
	p.aside.drop(n) // the encoder adds it again for the messages it adds

	full := false // a message did not fit in limit: the rest are not kept
	for i := n; i < len(msgs); i++ {
		if full || i >= tail {
			if rest == nil {
				// Room for all of it at once: the tail is encoded at
				// every request.
				n := 0
				for j := i; j < len(msgs); j++ {
					n += estimate(&msgs[j])
				}
				rest = make([]byte, 0, n+n/8)
			}
			if rest, _, err = e.Add(rest, p.base+len(p.buf)+len(rest) == 0, i, &msgs[i]); err != nil {
				return nil, nil, err
			}
			switch {
			case full || p.owned:
			case p.size+keptSize(&msgs[i]) > p.limit:
				full = true
			default:
				// A copy of a message of the tail, which is encoded at
				// every request: the messages kept may have read it.
				p.size += p.kept.add(&msgs[i])
			}
			continue
		}
		p.reserve(estimate(&msgs[i]))
		old := len(p.buf)
		var clean bool
		if p.buf, clean, err = e.Add(p.buf, p.base+old == 0, i, &msgs[i]); err != nil {
			// Nothing of it is kept: buf is as it was but for bytes
			// beyond its old length, which no request uses.
			p.buf = p.buf[:old]
			return nil, nil, err
		}
		copies := 0
		if !p.owned {
			copies = keptSize(&msgs[i])
		}
		if size := p.size + len(p.buf) - old + copies; size > p.limit {
			// Past the bound: this message and the next ones go to rest,
			// at every request.
			rest = append(rest, p.buf[old:]...)
			p.buf = p.buf[:old]
			full = true
			continue
		}
		if !p.owned {
			p.size += p.kept.add(&msgs[i])
		}
		p.size += len(p.buf) - old
		p.ends = append(p.ends, p.base+len(p.buf))
		p.clean = append(p.clean, clean)
		reach := i + 1
		if la != nil {
			reach = max(reach, la.Reach())
		}
		if i > 0 {
			reach = max(reach, p.reach[i-1])
		}
		p.reach = append(p.reach, reach)
	}
	if rest, err = e.Finish(rest, p.base+len(p.buf)+len(rest) == 0); err != nil {
		return nil, nil, err
	}
	prefix = make([][]byte, 0, len(p.segs)+1)
	prefix = append(prefix, p.segs...)
	if len(p.buf) > 0 {
		prefix = append(prefix, p.buf[:len(p.buf):len(p.buf)])
	}
	return prefix, rest, nil
}

// Aside returns where the encoders of p keep what their messages give
// outside the array (see [Aside]). Use it only in the methods of an
// Encoder of p, which [Cache.Encode] calls with p locked.
func (p *Cache) Aside() *Aside { return &p.aside }

// Memo returns where a [Lookahead] encoder of p memoizes what it made of
// the messages of its tail (see [Memo]). Use it only in the methods of an
// Encoder of p, which [Cache.Encode] calls with p locked.
func (p *Cache) Memo() *Memo { return &p.memo }

// Memo keeps, across the requests of a conversation, what a [Lookahead]
// encoder made of single messages, by message index, for the messages of
// its tail: the tail is encoded at every request and a message stays in it
// for several (Anthropic's last three turns of an agent loop), so that,
// memoized, each message is rendered and encoded once in its life, and
// only the elements it joins (a merged turn, a breakpoint) are written
// again. [Cache.Encode] forgets the value of a message as soon as the
// message may have changed (from the first message it does not know
// unchanged on, before it calls Tail, as for what it keeps), and, after
// each request, the values of the messages before the tail, which it keeps
// from then on. A Memo holds at most the cache's limit of bytes, as the
// encoder counts them.
type Memo struct {
	start int   // the index of vals[0]
	vals  []any // nil for none
	sizes []int
	size  int
	limit int
	floor int // KeepFrom's, for the request being encoded
}

// KeepFrom asks [Cache.Encode] to keep, after the request it encodes, the
// values of the messages from i on, if i is before the tail: those a Tail
// reads before the tail to find where it begins, which the next request's
// Tail reads again.
func (m *Memo) KeepFrom(i int) { m.floor = min(m.floor, max(i, 0)) }

// Get returns the value memoized for message i, nil for none.
func (m *Memo) Get(i int) any {
	if k := i - m.start; k >= 0 && k < len(m.vals) {
		return m.vals[k]
	}
	return nil
}

// Put memoizes v, of about size bytes, for message i, in place of what
// was; it reports false, keeping nothing, when the Memo would hold more
// than its limit.
func (m *Memo) Put(i int, v any, size int) bool {
	if i < 0 || v == nil {
		return false
	}
	old := 0
	if k := i - m.start; k >= 0 && k < len(m.vals) {
		old = m.sizes[k]
	}
	if m.size-old+size > m.limit {
		return false
	}
	switch {
	case len(m.vals) == 0:
		m.start = i
		m.vals, m.sizes = append(m.vals, nil), append(m.sizes, 0)
	case i < m.start:
		// Room in front, for the messages a Tail scans from the end.
		grow := m.start - i
		m.vals = append(m.vals, make([]any, grow)...)
		m.sizes = append(m.sizes, make([]int, grow)...)
		copy(m.vals[grow:], m.vals)
		copy(m.sizes[grow:], m.sizes)
		clear(m.vals[:grow])
		clear(m.sizes[:grow])
		m.start = i
	}
	for i-m.start >= len(m.vals) {
		m.vals, m.sizes = append(m.vals, nil), append(m.sizes, 0)
	}
	k := i - m.start
	m.vals[k], m.sizes[k] = v, size
	m.size += size - old
	return true
}

// Len returns the number of messages with a value memoized.
func (m *Memo) Len() int {
	n := 0
	for _, v := range m.vals {
		if v != nil {
			n++
		}
	}
	return n
}

// dropFrom forgets the values of the messages from n on.
func (m *Memo) dropFrom(n int) {
	k := max(n-m.start, 0)
	if k >= len(m.vals) {
		return
	}
	for _, s := range m.sizes[k:] {
		m.size -= s
	}
	clear(m.vals[k:])
	m.vals, m.sizes = m.vals[:k], m.sizes[:k]
}

// dropBefore forgets the values of the messages before n.
func (m *Memo) dropBefore(n int) {
	k := n - m.start
	if k <= 0 {
		return
	}
	if k >= len(m.vals) {
		m.dropFrom(m.start)
		return
	}
	for _, s := range m.sizes[:k] {
		m.size -= s
	}
	left := copy(m.vals, m.vals[k:])
	copy(m.sizes, m.sizes[k:])
	clear(m.vals[left:])
	m.vals, m.sizes = m.vals[:left], m.sizes[:left]
	m.start = n
}

// Aside keeps, across the requests of a conversation, what its messages
// give outside the array, by message index: a provider that sends system
// messages as a field of their own keeps their texts here, so that it need
// not read again the messages [Cache.Encode] reuses. Encode drops what was
// kept of the messages from the first it adds on, which the encoder adds
// again: what is kept is always that of the messages before it, as they
// are now.
type Aside struct {
	at    []int
	texts []string
}

// Add keeps text for message i, after those of the messages before it.
func (a *Aside) Add(i int, text string) {
	a.at = append(a.at, i)
	a.texts = append(a.texts, text)
}

// Texts returns the texts kept, in the order of their messages; the slice
// is the Aside's own, valid until the next Encode.
func (a *Aside) Texts() []string { return a.texts }

// drop forgets what was kept of the messages from n on.
func (a *Aside) drop(n int) {
	k := len(a.at)
	for k > 0 && a.at[k-1] >= n {
		k--
	}
	clear(a.texts[k:])
	a.at, a.texts = a.at[:k], a.texts[:k]
}

// minSegment is the least capacity of a new segment of a Cache.
const minSegment = 4 << 10

// reserve makes room for n more bytes in buf: when it lacks them, buf
// becomes a segment and a new array, at least twice as large as buf, takes
// its place (what is kept is not copied).
func (p *Cache) reserve(n int) {
	if cap(p.buf)-len(p.buf) >= n {
		return
	}
	if len(p.buf) > 0 {
		p.segs = append(p.segs, p.buf[:len(p.buf):len(p.buf)])
		p.base += len(p.buf)
	}
	p.buf = make([]byte, 0, max(n+n/8+512, 2*len(p.buf), minSegment))
}

// estimate is about the bytes message m encodes to, for [Cache.reserve]:
// its texts, names and arguments, its media as base64, and some for the
// JSON around them. It need not be exact: an Encoder appends beyond it as
// it needs.
func estimate(m *llm.Message) int {
	return 64 + partsEstimate(m.Parts)
}

func partsEstimate(parts []llm.Part) int {
	n := 0
	for i := range parts {
		p := &parts[i]
		n += 64 + len(p.Text) + len(p.Text)/16
		if m := p.Media; m != nil {
			n += 64 + len(m.URL) + len(m.Data)*4/3
		}
		if c := p.ToolCall; c != nil {
			n += 64 + len(c.ID) + len(c.Name) + len(c.Arguments)
		}
		if r := p.ToolResult; r != nil {
			n += 64 + len(r.CallID) + len(r.Name) + partsEstimate(r.Content)
		}
	}
	return n
}

// Len returns the number of messages kept.
func (p *Cache) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ends)
}

// Size returns the bytes kept: the encoded messages and the copies (none
// for an owned conversation).
func (p *Cache) Size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.size
}

// end returns where the messages before message i end, counted over segs
// and buf.
func (p *Cache) end(i int) int {
	if i == 0 {
		return 0
	}
	return p.ends[i-1]
}

// truncate drops what is kept from message n on. buf goes on in a new
// array at the next append (its capacity is cut to its length), since
// requests may still be sending the bytes after the cut.
func (p *Cache) truncate(n int) {
	end := p.end(n)
	for end < p.base {
		// The cut is in an earlier segment: it becomes buf again.
		last := len(p.segs) - 1
		p.buf = p.segs[last]
		p.segs[last] = nil
		p.segs = p.segs[:last]
		p.base -= len(p.buf)
	}
	p.buf = p.buf[: end-p.base : end-p.base]
	p.ends, p.clean, p.reach = p.ends[:n], p.clean[:n], p.reach[:n]
	p.size = end + p.kept.truncate(n)
}

// Split splits body, a JSON object encoded with the empty array field
// (such as `"messages":[]`), around the array's elements: head ends with
// its "[", tail begins with its "]". It finds the first occurrence, so
// nothing before the field in body may hold the same bytes: a JSON string
// cannot (a quote in it is escaped).
func Split(body []byte, field string) (head, tail []byte, ok bool) {
	i := bytes.Index(body, []byte(field))
	if i < 0 {
		return nil, nil, false
	}
	i += len(field) - 1 // at the closing bracket
	return body[:i], body[i:], true
}

// Body encodes w, a provider's request in its wire form, as the pieces of
// its JSON body (HTML escaping off, no trailing newline) and merges the
// request's extra fields into it (see [httpapi.MergeExtra]). Without a
// cache (c nil) the body is one piece. With one, w holds an empty list in
// the field (such as `"messages":[]`) and prefix and rest are what
// [Cache.Encode] returned for the messages: the pieces are the body up to
// the list, prefix's pieces, rest and the rest of the body, the bytes of the body
// encoded in one piece; extra fields, checked against the whole body, make
// it one piece again.
func Body(provider string, w any, c *Cache, field string, prefix [][]byte, rest []byte, extra map[string]json.RawMessage) ([][]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // APIs need no HTML escaping; keep text as written
	if err := enc.Encode(w); err != nil {
		return nil, fmt.Errorf("%s: encoding request: %w", provider, err)
	}
	body := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if c == nil {
		body, err := httpapi.MergeExtra(provider, body, extra)
		if err != nil {
			return nil, err
		}
		return [][]byte{body}, nil
	}
	// Only the model precedes the list, a JSON string, which cannot hold
	// the field's bytes.
	head, tail, ok := Split(body, field)
	if !ok {
		return nil, fmt.Errorf("%s: encoding request: no %s field", provider, field) // cannot happen
	}
	pieces := make([][]byte, 0, len(prefix)+3)
	pieces = append(pieces, head)
	pieces = append(pieces, prefix...)
	pieces = append(pieces, rest, tail)
	if len(extra) > 0 {
		body, err := httpapi.MergeExtra(provider, bytes.Join(pieces, nil), extra)
		if err != nil {
			return nil, err
		}
		return [][]byte{body}, nil
	}
	return pieces, nil
}

// Join returns pieces as one body.
func Join(pieces [][]byte) []byte {
	if len(pieces) == 1 {
		return pieces[0]
	}
	return bytes.Join(pieces, nil)
}

// An Appender appends values encoded as encoding/json does the elements of
// an array, with HTML escaping off: a body assembled from them is byte for
// byte the body encoded in one piece. Its encoder writes each value
// straight onto the slice it is appended to, with no buffer in between.
type Appender struct {
	w   appendWriter
	enc *json.Encoder
}

// appendWriter appends what is written to b.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// Append appends the encoding of v to dst, after a comma unless first. On
// an error dst is returned at its old length: whatever was written past it
// is dropped (only its spare capacity was written to).
func (a *Appender) Append(dst []byte, first bool, v any) ([]byte, error) {
	if a.enc == nil {
		a.enc = json.NewEncoder(&a.w)
		a.enc.SetEscapeHTML(false)
	}
	old := len(dst)
	if !first {
		dst = append(dst, ',')
	}
	a.w.b = dst
	err := a.enc.Encode(v)
	dst, a.w.b = a.w.b, nil // the Appender keeps no hold on dst
	if err != nil {
		return dst[:old], err
	}
	return bytes.TrimSuffix(dst, []byte("\n")), nil
}

// keptMessages holds what the messages of a prefixCache were, to tell
// whether a request's messages are still those: a copy of each message,
// of each of its parts and of what they point to, with copies of their byte
// slices (tool call arguments, media data), each kind in one array, in the
// order [keptMessages.add] visits them.
//
// A message is equal to its copy when each struct of it holds the same
// words as the copy, compared whole (the same string and slice headers:
// Go strings never change, so the same header is the same text), and each
// byte slice holds the same bytes as the copy's (the caller may rewrite
// those in place). A field replaced by an equal string at another address
// compares unequal, which only costs an encoding. Comparing so is a few
// wide compares per part, which is what keeps a turn of a long
// conversation cheap.
type keptMessages struct {
	msgs    []llm.Message
	parts   []llm.Part
	calls   []llm.ToolCall
	results []llm.ToolResult
	media   []llm.Media
	reasons []llm.Reasoning
	data    []byte
	at      []keptAt // where each message's copies begin
}

// keptAt is where a message's copies begin in each array of keptMessages.
type keptAt struct{ parts, calls, results, media, reasons, data int }

// The sizes, in words, of the structs compared whole. Each line fails to
// compile when its struct changes size: a field added to one of them must
// be considered here (and TestEqualMessageSeesEveryField fails until it is
// compared).
const (
	messageWords   = 5
	partWords      = 8
	callWords      = 9
	resultWords    = 7 // IsError, after them, is compared apart
	mediaWords     = 9
	reasoningWords = 6
)

var (
	_ = [1]int{}[unsafe.Sizeof(llm.Message{})-messageWords*8]
	_ = [1]int{}[unsafe.Sizeof(llm.Part{})-partWords*8]
	_ = [1]int{}[unsafe.Sizeof(llm.ToolCall{})-callWords*8]
	_ = [1]int{}[unsafe.Sizeof(llm.ToolResult{})-resultWords*8-8]
	_ = [1]int{}[unsafe.Offsetof(llm.ToolResult{}.IsError)-resultWords*8]
	_ = [1]int{}[unsafe.Sizeof(llm.Media{})-mediaWords*8]
	_ = [1]int{}[unsafe.Sizeof(llm.Reasoning{})-reasoningWords*8]
	_ = [1]int{}[unsafe.Sizeof(uintptr(0))-8]
)

// The same* functions report whether the first words of the structs at a
// and b are equal: unrolled word compares, far cheaper for structs this
// small than the call of memequal that comparing arrays compiles to. Each
// reads no further than its struct (the sizes are checked above).

func sameMessage(a, b *llm.Message) bool {
	x, y := (*[messageWords]uintptr)(unsafe.Pointer(a)), (*[messageWords]uintptr)(unsafe.Pointer(b))
	return (x[0]^y[0])|(x[1]^y[1])|(x[2]^y[2])|(x[3]^y[3])|(x[4]^y[4]) == 0
}

func samePart(a, b *llm.Part) bool {
	x, y := (*[partWords]uintptr)(unsafe.Pointer(a)), (*[partWords]uintptr)(unsafe.Pointer(b))
	return (x[0]^y[0])|(x[1]^y[1])|(x[2]^y[2])|(x[3]^y[3])|(x[4]^y[4])|(x[5]^y[5])|(x[6]^y[6])|(x[7]^y[7]) == 0
}

func sameCall(a, b *llm.ToolCall) bool {
	x, y := (*[callWords]uintptr)(unsafe.Pointer(a)), (*[callWords]uintptr)(unsafe.Pointer(b))
	return (x[0]^y[0])|(x[1]^y[1])|(x[2]^y[2])|(x[3]^y[3])|(x[4]^y[4])|(x[5]^y[5])|(x[6]^y[6])|(x[7]^y[7])|(x[8]^y[8]) == 0
}

func sameResult(a, b *llm.ToolResult) bool {
	x, y := (*[resultWords]uintptr)(unsafe.Pointer(a)), (*[resultWords]uintptr)(unsafe.Pointer(b))
	return (x[0]^y[0])|(x[1]^y[1])|(x[2]^y[2])|(x[3]^y[3])|(x[4]^y[4])|(x[5]^y[5])|(x[6]^y[6]) == 0 && a.IsError == b.IsError
}

func sameMedia(a, b *llm.Media) bool {
	x, y := (*[mediaWords]uintptr)(unsafe.Pointer(a)), (*[mediaWords]uintptr)(unsafe.Pointer(b))
	return (x[0]^y[0])|(x[1]^y[1])|(x[2]^y[2])|(x[3]^y[3])|(x[4]^y[4])|(x[5]^y[5])|(x[6]^y[6])|(x[7]^y[7])|(x[8]^y[8]) == 0
}

func sameReasoning(a, b *llm.Reasoning) bool {
	x, y := (*[reasoningWords]uintptr)(unsafe.Pointer(a)), (*[reasoningWords]uintptr)(unsafe.Pointer(b))
	return (x[0]^y[0])|(x[1]^y[1])|(x[2]^y[2])|(x[3]^y[3])|(x[4]^y[4])|(x[5]^y[5]) == 0
}

// len returns the number of messages kept.
func (k *keptMessages) len() int { return len(k.at) }

// add keeps a copy of m after the others and returns the bytes it holds.
func (k *keptMessages) add(m *llm.Message) int {
	before := k.size()
	k.at = append(k.at, k.end())
	k.msgs = append(k.msgs, *m)
	k.addParts(m.Parts)
	return k.size() - before
}

func (k *keptMessages) addParts(parts []llm.Part) {
	k.parts = append(k.parts, parts...)
	for i := range parts {
		p := &parts[i]
		if m := p.Media; m != nil {
			k.media = append(k.media, *m)
			k.data = append(k.data, m.Data...)
		}
		if c := p.ToolCall; c != nil {
			k.calls = append(k.calls, *c)
			k.data = append(k.data, c.Arguments...)
		}
		if r := p.ToolResult; r != nil {
			k.results = append(k.results, *r)
			k.addParts(r.Content)
		}
		if r := p.Reasoning; r != nil {
			k.reasons = append(k.reasons, *r)
		}
	}
}

// keptSize returns what keeping a copy of m would add to the size of a
// keptMessages, without copying anything.
func keptSize(m *llm.Message) int {
	const w = 8
	return messageWords*w + 6*w + partsSize(m.Parts)
}

func partsSize(parts []llm.Part) int {
	const w = 8
	n := len(parts) * partWords * w
	for i := range parts {
		p := &parts[i]
		if m := p.Media; m != nil {
			n += mediaWords*w + len(m.Data)
		}
		if c := p.ToolCall; c != nil {
			n += callWords*w + len(c.Arguments)
		}
		if r := p.ToolResult; r != nil {
			n += (resultWords+1)*w + partsSize(r.Content)
		}
		if p.Reasoning != nil {
			n += reasoningWords * w
		}
	}
	return n
}

// end is where the next message's copies begin.
func (k *keptMessages) end() keptAt {
	return keptAt{len(k.parts), len(k.calls), len(k.results), len(k.media), len(k.reasons), len(k.data)}
}

// equal reports whether m is the message kept at i.
func (k *keptMessages) equal(i int, m *llm.Message) bool {
	if !sameMessage(&k.msgs[i], m) {
		return false
	}
	c := k.at[i]
	return k.equalParts(&c, m.Parts)
}

// equalParts compares parts with the copies at c, moving c past them.
func (k *keptMessages) equalParts(c *keptAt, parts []llm.Part) bool {
	if c.parts+len(parts) > len(k.parts) {
		return false
	}
	kept := k.parts[c.parts : c.parts+len(parts)]
	c.parts += len(parts)
	for i := range parts {
		p := &parts[i]
		if !samePart(&kept[i], p) {
			return false
		}
		// The same pointers as kept: compare what they point to.
		if m := p.Media; m != nil {
			km := &k.media[c.media]
			c.media++
			if !sameMedia(km, m) || !k.equalData(c, m.Data) {
				return false
			}
		}
		if tc := p.ToolCall; tc != nil {
			kc := &k.calls[c.calls]
			c.calls++
			if !sameCall(kc, tc) || !k.equalData(c, tc.Arguments) {
				return false
			}
		}
		if r := p.ToolResult; r != nil {
			kr := &k.results[c.results]
			c.results++
			if !sameResult(kr, r) ||
				!k.equalParts(c, r.Content) {
				return false
			}
		}
		if r := p.Reasoning; r != nil {
			kr := &k.reasons[c.reasons]
			c.reasons++
			if !sameReasoning(kr, r) {
				return false
			}
		}
	}
	return true
}

// equalData compares b with the copy at c, moving c past it. The headers
// are equal already (so are the lengths); the bytes may not be.
func (k *keptMessages) equalData(c *keptAt, b []byte) bool {
	if c.data+len(b) > len(k.data) || !bytes.Equal(k.data[c.data:c.data+len(b)], b) {
		return false
	}
	c.data += len(b)
	return true
}

// truncate keeps the first n messages only, and returns the bytes they
// hold.
func (k *keptMessages) truncate(n int) int {
	if n < len(k.at) {
		at := k.at[n]
		// Cleared for the collector: the copies hold the caller's strings.
		clear(k.msgs[n:])
		clear(k.parts[at.parts:])
		clear(k.calls[at.calls:])
		clear(k.results[at.results:])
		clear(k.media[at.media:])
		clear(k.reasons[at.reasons:])
		k.msgs, k.parts, k.calls, k.results = k.msgs[:n], k.parts[:at.parts], k.calls[:at.calls], k.results[:at.results]
		k.media, k.reasons, k.data, k.at = k.media[:at.media], k.reasons[:at.reasons], k.data[:at.data], k.at[:n]
	}
	return k.size()
}

// size is the bytes the copies hold.
func (k *keptMessages) size() int {
	const w = 8
	return len(k.msgs)*messageWords*w + len(k.parts)*partWords*w + len(k.calls)*callWords*w +
		len(k.results)*(resultWords+1)*w + len(k.media)*mediaWords*w + len(k.reasons)*reasoningWords*w +
		len(k.data) + len(k.at)*6*w
}
