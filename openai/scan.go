package openai

import (
	"encoding/json"
	"unicode/utf8"
)

// This file decodes the data of a streamed chat.completion.chunk by hand.
// Decoding is half of what a streamed turn costs with encoding/json, and the
// chunks most servers send have a handful of fields, always spelled the same.
//
// The scanner is a fast path, not a second decoder: it either decodes an
// event exactly as encoding/json would decode it into a chunkWire, or it
// gives up, and the caller decodes the event with encoding/json. It gives up
// on anything outside the plain case, so that it never has to reproduce
// encoding/json's rules there: a key that is not plain lower-case ASCII
// (encoding/json matches keys without regard to case), a field given twice,
// a value of the wrong type, a number that is not a small integer, invalid
// UTF-8, nesting deeper than [maxScanDepth], an error object, a
// non-streamed message, and anything that is not valid JSON. FuzzScanChunk
// checks the equivalence on any input.

// maxScanDepth bounds the nesting of the values the scanner skips.
const maxScanDepth = 64

// scanner reads JSON from data, from pos on. The zero value is ready to
// use; a scanner kept from event to event reuses its scratch buffer.
type scanner struct {
	data []byte
	pos  int
	buf  []byte // scratch for unescaping strings
}

// chunk decodes data, the data of one event, into w, which must have been
// cleared by reset. It reports false if it gave up; w then holds anything,
// and must be reset before it is decoded otherwise.
func (s *scanner) chunk(data []byte, w *chunkWire) bool {
	s.data, s.pos = data, 0
	ok := s.topLevel(w)
	if ok {
		s.ws()
		ok = s.pos == len(s.data)
	}
	s.data = nil
	return ok
}

// ws skips JSON white space.
func (s *scanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// next skips white space and consumes c if it comes next.
func (s *scanner) next(c byte) bool {
	s.ws()
	if s.pos < len(s.data) && s.data[s.pos] == c {
		s.pos++
		return true
	}
	return false
}

// null consumes a null literal if one comes next.
func (s *scanner) null() bool {
	s.ws()
	if len(s.data)-s.pos >= 4 && string(s.data[s.pos:s.pos+4]) == "null" {
		s.pos += 4
		return true
	}
	return false
}

// object reads an object, calling member for each key with the scanner
// at the value, which member must consume. A key must be plain: ASCII,
// without escapes or upper-case letters, so that it matches a field name
// exactly or none at all. A key repeated among the known fields (whose
// indexes member returns, or -1 for a key it skipped) gives up.
func (s *scanner) object(member func(key []byte) (field int, ok bool)) bool {
	if !s.next('{') {
		return false
	}
	if s.next('}') {
		return true
	}
	var seen uint64
	for {
		s.ws()
		key, ok := s.key()
		if !ok || !s.next(':') {
			return false
		}
		field, ok := member(key)
		if !ok {
			return false
		}
		if field >= 0 {
			if seen&(1<<field) != 0 {
				return false
			}
			seen |= 1 << field
		}
		if s.next(',') {
			continue
		}
		return s.next('}')
	}
}

// key reads a plain object key and returns it without its quotes.
func (s *scanner) key() ([]byte, bool) {
	if s.pos >= len(s.data) || s.data[s.pos] != '"' {
		return nil, false
	}
	for i := s.pos + 1; i < len(s.data); i++ {
		switch c := s.data[i]; {
		case c == '"':
			k := s.data[s.pos+1 : i]
			s.pos = i + 1
			return k, true
		case c < 0x20 || c >= 0x80 || c == '\\' || 'A' <= c && c <= 'Z':
			return nil, false
		}
	}
	return nil, false
}

// rawString reads a string or gives up, and returns its text with quotes
// and escapes as they are, as [json.RawMessage] keeps it.
func (s *scanner) rawString() ([]byte, bool) {
	s.ws()
	start := s.pos
	if _, ok := s.str(false); !ok {
		return nil, false
	}
	return s.data[start:s.pos], true
}

// stringOrNull reads a string into dst; null leaves dst as it is, as
// encoding/json does.
func (s *scanner) stringOrNull(dst *string) bool {
	if s.null() {
		return true
	}
	v, ok := s.str(true)
	if ok {
		*dst = v
	}
	return ok
}

// str reads a string. With decode, it returns its value; without, it only
// checks it.
func (s *scanner) str(decode bool) (string, bool) {
	s.ws()
	if s.pos >= len(s.data) || s.data[s.pos] != '"' {
		return "", false
	}
	start := s.pos + 1
	ascii, escaped := true, false
	i := start
	for ; ; i++ {
		if i >= len(s.data) {
			return "", false
		}
		c := s.data[i]
		if c == '"' {
			break
		}
		switch {
		case c < 0x20:
			return "", false
		case c >= 0x80:
			ascii = false
		case c == '\\':
			escaped = true
			i++ // the escaped byte, checked when unescaping
			if i >= len(s.data) {
				return "", false
			}
		}
	}
	raw := s.data[start:i]
	s.pos = i + 1
	// encoding/json replaces invalid UTF-8: leave that to it.
	if !ascii && !utf8.Valid(raw) {
		return "", false
	}
	if !escaped {
		if !decode {
			return "", true
		}
		return string(raw), true
	}
	return s.unescape(raw, decode)
}

// unescape decodes the escapes of a string's text. A \u escape makes the
// whole string go through encoding/json, whose handling of surrogates it
// then need not repeat.
func (s *scanner) unescape(raw []byte, decode bool) (string, bool) {
	b := s.buf[:0]
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			b = append(b, c)
			continue
		}
		i++
		switch raw[i] {
		case '"', '\\', '/':
			b = append(b, raw[i])
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			s.buf = b
			return unquoteJSON(raw)
		default:
			return "", false
		}
	}
	s.buf = b
	if !decode {
		return "", true
	}
	return string(b), true
}

// unquoteJSON decodes the text of a string, quotes excluded, with
// encoding/json.
func unquoteJSON(raw []byte) (string, bool) {
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	var v string
	if json.Unmarshal(q, &v) != nil {
		return "", false
	}
	return v, true
}

// number reads a JSON number and returns its text.
func (s *scanner) number() ([]byte, bool) {
	s.ws()
	d, start := s.data, s.pos
	i := start
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
	default:
		return nil, false
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return nil, false
		}
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return nil, false
		}
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
	}
	s.pos = i
	return d[start:i], true
}

// smallInt reads a number that is an integer of at most nine digits, and
// gives up on any other.
func (s *scanner) smallInt() (int, bool) {
	t, ok := s.number()
	if !ok {
		return 0, false
	}
	neg := t[0] == '-'
	if neg {
		t = t[1:]
	}
	if len(t) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range t {
		if c < '0' || c > '9' {
			return 0, false // a fraction or an exponent
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// skip checks and skips any JSON value.
func (s *scanner) skip(depth int) bool {
	s.ws()
	if s.pos >= len(s.data) || depth > maxScanDepth {
		return false
	}
	switch c := s.data[s.pos]; c {
	case '"':
		_, ok := s.str(false)
		return ok
	case '{':
		s.pos++
		if s.next('}') {
			return true
		}
		for {
			if _, ok := s.str(false); !ok || !s.next(':') || !s.skip(depth+1) {
				return false
			}
			if s.next(',') {
				continue
			}
			return s.next('}')
		}
	case '[':
		s.pos++
		if s.next(']') {
			return true
		}
		for {
			if !s.skip(depth + 1) {
				return false
			}
			if s.next(',') {
				continue
			}
			return s.next(']')
		}
	case 't', 'f', 'n':
		for _, lit := range [...]string{"true", "false", "null"} {
			if len(s.data)-s.pos >= len(lit) && string(s.data[s.pos:s.pos+len(lit)]) == lit {
				s.pos += len(lit)
				return true
			}
		}
		return false
	default:
		_, ok := s.number()
		return ok
	}
}

// skipMember skips the value of a key the scanner does not decode.
func (s *scanner) skipMember() (int, bool) {
	return -1, s.skip(1)
}

// topLevel reads the chunk object.
func (s *scanner) topLevel(w *chunkWire) bool {
	return s.object(func(key []byte) (int, bool) {
		switch string(key) {
		case "id":
			return 0, s.raw(&w.ID)
		case "model":
			return 1, s.raw(&w.Model)
		case "object":
			return 2, s.raw(&w.Object)
		case "choices":
			return 3, s.choices(w)
		case "usage":
			if s.null() {
				return 4, true // w.Usage is nil already
			}
			w.Usage = new(usageWire)
			return 4, s.usage(w.Usage)
		case "error":
			return 5, s.null()
		case "message", "type", "code":
			return -1, false // an error object
		}
		return s.skipMember()
	})
}

// raw reads a string into a raw field.
func (s *scanner) raw(dst *json.RawMessage) bool {
	v, ok := s.rawString()
	if ok {
		*dst = append((*dst)[:0], v...)
	}
	return ok
}

// choices reads the choices array into w.Choices, reusing the elements
// reset cleared, as encoding/json does.
func (s *scanner) choices(w *chunkWire) bool {
	if s.null() {
		w.Choices = nil
		return true
	}
	if !s.next('[') {
		return false
	}
	if s.next(']') {
		w.Choices = []choiceWire{}
		return true
	}
	for {
		i := len(w.Choices)
		if i < cap(w.Choices) {
			w.Choices = w.Choices[:i+1]
		} else {
			w.Choices = append(w.Choices, choiceWire{})
		}
		if !s.choice(&w.Choices[i]) {
			return false
		}
		if s.next(',') {
			continue
		}
		return s.next(']')
	}
}

// choice reads one element of choices.
func (s *scanner) choice(ch *choiceWire) bool {
	return s.object(func(key []byte) (int, bool) {
		switch string(key) {
		case "index":
			if s.null() {
				return 0, true
			}
			n, ok := s.smallInt()
			ch.Index = n
			return 0, ok
		case "delta":
			if s.null() {
				return 1, true
			}
			return 1, s.delta(&ch.Delta)
		case "message":
			return -1, false // a whole completion
		case "finish_reason":
			return 2, s.stringOrNull(&ch.FinishReason)
		}
		return s.skipMember()
	})
}

// delta reads a choice's delta.
func (s *scanner) delta(d *deltaWire) bool {
	return s.object(func(key []byte) (int, bool) {
		switch string(key) {
		case "content":
			return 0, s.stringOrNull(&d.Content)
		case "refusal":
			return 1, s.stringOrNull(&d.Refusal)
		case "reasoning":
			return 2, s.stringOrNull(&d.Reasoning)
		case "reasoning_content":
			return 3, s.stringOrNull(&d.ReasoningContent)
		case "tool_calls":
			return 4, s.toolCalls(d)
		}
		return s.skipMember()
	})
}

// toolCalls reads the tool_calls array of a delta, as choices does.
func (s *scanner) toolCalls(d *deltaWire) bool {
	if s.null() {
		d.ToolCalls = nil
		return true
	}
	if !s.next('[') {
		return false
	}
	if s.next(']') {
		d.ToolCalls = []toolCallDelta{}
		return true
	}
	for {
		i := len(d.ToolCalls)
		if i < cap(d.ToolCalls) {
			d.ToolCalls = d.ToolCalls[:i+1]
		} else {
			d.ToolCalls = append(d.ToolCalls, toolCallDelta{})
		}
		if !s.toolCall(&d.ToolCalls[i]) {
			return false
		}
		if s.next(',') {
			continue
		}
		return s.next(']')
	}
}

// toolCall reads one tool-call delta.
func (s *scanner) toolCall(c *toolCallDelta) bool {
	return s.object(func(key []byte) (int, bool) {
		switch string(key) {
		case "index":
			if s.null() {
				c.Index = optInt{}
				return 0, true
			}
			n, ok := s.smallInt()
			c.Index = optInt{v: n, ok: true}
			return 0, ok
		case "id":
			return 1, s.stringOrNull(&c.ID)
		case "function":
			if s.null() {
				return 2, true
			}
			return 2, s.function(&c.Function)
		}
		return s.skipMember()
	})
}

// function reads the function of a tool-call delta.
func (s *scanner) function(f *functionCallDelta) bool {
	return s.object(func(key []byte) (int, bool) {
		switch string(key) {
		case "name":
			return 0, s.stringOrNull(&f.Name)
		case "arguments":
			return 1, s.stringOrNull(&f.Arguments)
		}
		return s.skipMember()
	})
}

// usage reads the usage object.
func (s *scanner) usage(u *usageWire) bool {
	return s.object(func(key []byte) (int, bool) {
		switch string(key) {
		case "prompt_tokens":
			return 0, s.count(&u.PromptTokens)
		case "completion_tokens":
			return 1, s.count(&u.CompletionTokens)
		case "prompt_cache_hit_tokens":
			return 2, s.count(&u.PromptCacheHitTokens)
		case "prompt_tokens_details":
			if s.null() {
				return 3, true
			}
			return 3, s.object(func(key []byte) (int, bool) {
				if string(key) == "cached_tokens" {
					return 0, s.count(&u.PromptTokensDetails.CachedTokens)
				}
				return s.skipMember()
			})
		case "completion_tokens_details":
			if s.null() {
				return 4, true
			}
			return 4, s.object(func(key []byte) (int, bool) {
				if string(key) == "reasoning_tokens" {
					return 0, s.count(&u.CompletionTokensDetails.ReasoningTokens)
				}
				return s.skipMember()
			})
		}
		return s.skipMember()
	})
}

// count reads a token count into dst; null leaves dst as it is, as
// encoding/json does.
func (s *scanner) count(dst *int64) bool {
	if s.null() {
		return true
	}
	n, ok := s.smallInt()
	if ok {
		*dst = int64(n)
	}
	return ok
}
