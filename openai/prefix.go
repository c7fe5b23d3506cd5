package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/hrns-dev/hrns/llm"
)

// maxPrefixBytes bounds what one conversation's [prefixCache] keeps: the
// encoded messages and the copies of the byte slices it checks them
// against. A conversation past it encodes its later messages at every
// turn, as without a cache.
const maxPrefixBytes = 32 << 20

// partOverhead is what a kept message costs beyond its bytes, per part:
// the copy of the part and of what it points to.
const partOverhead = 128

// prefixKey is the key of a conversation's [prefixCache] in its
// [llm.Conversation].
type prefixKey struct{}

// A prefixCache keeps the encoded JSON of the messages a conversation has
// sent, so that its next request encodes only the messages that are new.
//
// buf holds the encoded wire messages of kept[0:len(kept)], joined by
// commas; ends[i] is where those of kept[i] end in buf. kept holds a copy
// of each message (the same strings, which Go never changes, and copies of
// its byte slices) to tell whether a request's message is still the one
// encoded: a message the caller replaced, removed or rewrote in place,
// down to one byte of its tool call arguments or images, compares unequal,
// and it and everything after it is encoded again.
//
// Bytes of buf that a request has used are never written again: buf only
// grows by append, and when the conversation changes before its end the
// cache goes on in a new array (see encode), so a body being sent never
// changes under the transport.
type prefixCache struct {
	mu    sync.Mutex
	buf   []byte
	kept  []llm.Message
	ends  []int
	clean []bool // clean[i]: no media of tool results wait after kept[i]
	size  int    // bytes kept: buf, and kept's copies and parts
	limit int    // the bound of size: maxPrefixBytes
	full  bool   // size reached limit: kept grows no more
}

// conversationCache returns the prefix cache of conv, nil for none.
func conversationCache(conv *llm.Conversation) *prefixCache {
	if conv == nil {
		return nil
	}
	return conv.State(prefixKey{}, func() any { return &prefixCache{limit: maxPrefixBytes} }).(*prefixCache)
}

// encode renders and encodes msgs as the elements of the messages array,
// without its brackets: prefix, from the cache, followed by rest. prefix
// is never written again; rest is the caller's.
func (p *prefixCache) encode(msgs []llm.Message) (prefix, rest []byte, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()

	// The messages still as kept, back to the last one after which the
	// rendering starts afresh.
	n := 0
	for n < len(p.kept) && n < len(msgs) && equalMessage(&p.kept[n], &msgs[n]) {
		n++
	}
	for n > 0 && !p.clean[n-1] {
		n--
	}
	if n < len(p.kept) {
		p.truncate(n)
	}

	enc := newMessageEncoder()
	var r renderer
	for i := n; i < len(msgs); i++ {
		r.out = r.out[:0]
		if err := r.add(i, msgs[i]); err != nil {
			return nil, nil, err
		}
		if p.full {
			if rest, err = enc.appendMessages(rest, len(p.buf)+len(rest) > 0, r.out); err != nil {
				return nil, nil, err
			}
			continue
		}
		if p.buf, err = enc.appendMessages(p.buf, len(p.buf) > 0, r.out); err != nil {
			// Nothing of it is kept: buf is as it was but for bytes
			// beyond its old length, which no request uses.
			p.buf = p.buf[:p.end(len(p.kept))]
			return nil, nil, err
		}
		c, size := snapshot(msgs[i])
		p.kept = append(p.kept, c)
		p.ends = append(p.ends, len(p.buf))
		p.clean = append(p.clean, len(r.attached) == 0)
		p.size += size + (p.ends[len(p.ends)-1] - p.end(len(p.ends)-1))
		p.full = p.size >= p.limit
	}
	r.out = r.out[:0]
	r.finish()
	if rest, err = enc.appendMessages(rest, len(p.buf)+len(rest) > 0, r.out); err != nil {
		return nil, nil, err
	}
	return p.buf[:len(p.buf):len(p.buf)], rest, nil
}

// end returns where the messages before kept[i] end in buf.
func (p *prefixCache) end(i int) int {
	if i == 0 {
		return 0
	}
	return p.ends[i-1]
}

// truncate drops what is kept from kept[n] on. buf goes on in a new array
// at the next append (its capacity is cut to its length), since requests
// may still be sending the bytes after the cut.
func (p *prefixCache) truncate(n int) {
	end := p.end(n)
	p.buf = p.buf[:end:end]
	clear(p.kept[n:])
	p.kept, p.ends, p.clean = p.kept[:n], p.ends[:n], p.clean[:n]
	size := end
	for i := range p.kept {
		size += snapshotSize(&p.kept[i])
	}
	p.size = size
	p.full = size >= p.limit
}

// A messageEncoder encodes wire messages as encoding/json does the
// elements of an array: a body assembled from them is byte for byte the
// body encoded in one piece.
type messageEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

func newMessageEncoder() *messageEncoder {
	e := new(messageEncoder)
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false) // as marshalRequest
	return e
}

// appendMessages appends the encoding of msgs to dst, each after a comma
// unless it is the first of the array (comma false for the first).
func (e *messageEncoder) appendMessages(dst []byte, comma bool, msgs []wireMessage) ([]byte, error) {
	for i := range msgs {
		e.buf.Reset()
		if err := e.enc.Encode(&msgs[i]); err != nil {
			return dst, fmt.Errorf("openai: encoding request: %w", err)
		}
		if comma {
			dst = append(dst, ',')
		}
		comma = true
		dst = append(dst, bytes.TrimSuffix(e.buf.Bytes(), []byte("\n"))...)
	}
	return dst, nil
}

// snapshot returns a copy of m to compare later requests' messages with,
// and the bytes it holds: the same strings, new copies of every slice and
// of what every pointer points to.
func snapshot(m llm.Message) (llm.Message, int) {
	c := llm.Message{Role: m.Role, Parts: snapshotParts(m.Parts)}
	return c, snapshotSize(&c)
}

func snapshotParts(parts []llm.Part) []llm.Part {
	if parts == nil {
		return nil
	}
	out := make([]llm.Part, len(parts))
	for i, p := range parts {
		out[i] = p
		if p.Media != nil {
			m := *p.Media
			m.Data = cloneBytes(m.Data)
			out[i].Media = &m
		}
		if p.ToolCall != nil {
			tc := *p.ToolCall
			tc.Arguments = cloneBytes(tc.Arguments)
			out[i].ToolCall = &tc
		}
		if p.ToolResult != nil {
			tr := *p.ToolResult
			tr.Content = snapshotParts(tr.Content)
			out[i].ToolResult = &tr
		}
		if p.Reasoning != nil {
			r := *p.Reasoning
			out[i].Reasoning = &r
		}
	}
	return out
}

// cloneBytes copies b, keeping nil and empty apart.
func cloneBytes[S ~[]byte](b S) S {
	if b == nil {
		return nil
	}
	return append(S{}, b...)
}

// snapshotSize is what a snapshot holds beyond its strings (shared with
// the request it was made from).
func snapshotSize(m *llm.Message) int {
	return partsSize(m.Parts)
}

func partsSize(parts []llm.Part) int {
	n := len(parts) * partOverhead
	for _, p := range parts {
		if p.Media != nil {
			n += len(p.Media.Data)
		}
		if p.ToolCall != nil {
			n += len(p.ToolCall.Arguments)
		}
		if p.ToolResult != nil {
			n += partsSize(p.ToolResult.Content)
		}
	}
	return n
}

// equalMessage reports whether m is k, the snapshot of a message: every
// field equal, strings and bytes by content. It reads each byte slice of m
// whole (tool call arguments, media), and compares each string by its
// pointer first, which is what makes a message the caller did not touch
// cheap to check.
func equalMessage(k, m *llm.Message) bool {
	return k.Role == m.Role && equalParts(k.Parts, m.Parts)
}

func equalParts(k, m []llm.Part) bool {
	if len(k) != len(m) || (k == nil) != (m == nil) {
		return false
	}
	for i := range k {
		a, b := &k[i], &m[i]
		if a.Kind != b.Kind || a.Text != b.Text ||
			!equalMedia(a.Media, b.Media) || !equalToolCall(a.ToolCall, b.ToolCall) ||
			!equalToolResult(a.ToolResult, b.ToolResult) || !equalReasoning(a.Reasoning, b.Reasoning) {
			return false
		}
	}
	return true
}

func equalMedia(a, b *llm.Media) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.MIMEType == b.MIMEType && equalBytes(a.Data, b.Data) && a.URL == b.URL && a.Name == b.Name
}

func equalToolCall(a, b *llm.ToolCall) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ID == b.ID && a.Name == b.Name && equalBytes(a.Arguments, b.Arguments) && a.Signature == b.Signature
}

func equalToolResult(a, b *llm.ToolResult) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.CallID == b.CallID && a.Name == b.Name && a.IsError == b.IsError && equalParts(a.Content, b.Content)
}

func equalReasoning(a, b *llm.Reasoning) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// equalBytes is bytes.Equal, but tells nil from empty as encoding may.
func equalBytes[S ~[]byte](a, b S) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}
