package anthropic

import (
	"encoding/json"

	"github.com/hrns-dev/hrns/internal/prefixcache"
)

// appendBlock appends b, byte for byte as encoding/json encodes it with
// HTML escaping off, without its reflection and its buffer: a tool
// result's text is escaped once, straight onto dst (FuzzBlockEncoding
// holds it to encoding/json). It reports false, dst unchanged, for a
// block whose input is not valid JSON, which encoding/json refuses with
// its own error (the input of a rendered block is always valid).
func appendBlock(dst []byte, b *block) ([]byte, bool) {
	old := len(dst)
	dst = append(dst, `{"type":`...)
	dst = prefixcache.AppendString(dst, b.Type)
	if b.Text != "" {
		dst = append(dst, `,"text":`...)
		dst = prefixcache.AppendString(dst, b.Text)
	}
	if s := b.Source; s != nil {
		dst = append(dst, `,"source":{"type":`...)
		dst = prefixcache.AppendString(dst, s.Type)
		if s.MediaType != "" {
			dst = append(dst, `,"media_type":`...)
			dst = prefixcache.AppendString(dst, s.MediaType)
		}
		if s.Data != "" {
			dst = append(dst, `,"data":`...)
			dst = prefixcache.AppendString(dst, s.Data)
		}
		if s.URL != "" {
			dst = append(dst, `,"url":`...)
			dst = prefixcache.AppendString(dst, s.URL)
		}
		dst = append(dst, '}')
	}
	if b.Title != "" {
		dst = append(dst, `,"title":`...)
		dst = prefixcache.AppendString(dst, b.Title)
	}
	if b.ID != "" {
		dst = append(dst, `,"id":`...)
		dst = prefixcache.AppendString(dst, b.ID)
	}
	if b.Name != "" {
		dst = append(dst, `,"name":`...)
		dst = prefixcache.AppendString(dst, b.Name)
	}
	if len(b.Input) > 0 {
		if !json.Valid(b.Input) {
			return dst[:old], false
		}
		dst = append(dst, `,"input":`...)
		dst = appendCompact(dst, b.Input)
	}
	if b.ToolUseID != "" {
		dst = append(dst, `,"tool_use_id":`...)
		dst = prefixcache.AppendString(dst, b.ToolUseID)
	}
	if len(b.Content) > 0 {
		dst = append(dst, `,"content":[`...)
		for i := range b.Content {
			if i > 0 {
				dst = append(dst, ',')
			}
			var ok bool
			if dst, ok = appendBlock(dst, &b.Content[i]); !ok {
				return dst[:old], false
			}
		}
		dst = append(dst, ']')
	}
	if b.IsError {
		dst = append(dst, `,"is_error":true`...)
	}
	if b.Thinking != nil {
		dst = append(dst, `,"thinking":`...)
		dst = prefixcache.AppendString(dst, *b.Thinking)
	}
	if b.Signature != "" {
		dst = append(dst, `,"signature":`...)
		dst = prefixcache.AppendString(dst, b.Signature)
	}
	if b.Data != "" {
		dst = append(dst, `,"data":`...)
		dst = prefixcache.AppendString(dst, b.Data)
	}
	if cc := b.CacheControl; cc != nil {
		dst = append(dst, `,"cache_control":{"type":`...)
		dst = prefixcache.AppendString(dst, cc.Type)
		if cc.TTL != "" {
			dst = append(dst, `,"ttl":`...)
			dst = prefixcache.AppendString(dst, cc.TTL)
		}
		dst = append(dst, '}')
	}
	return append(dst, '}'), true
}

// appendCompact appends src, valid JSON, without the white space outside
// its strings, as encoding/json writes a json.RawMessage with HTML
// escaping off.
func appendCompact(dst, src []byte) []byte {
	start := 0
	in, esc := false, false
	for i, c := range src {
		switch {
		case in:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				in = false
			}
		case c == '"':
			in = true
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			dst = append(dst, src[start:i]...)
			start = i + 1
		}
	}
	return append(dst, src[start:]...)
}

// blockSize is about the bytes appendBlock appends for b, for the room a
// message's encoding is given at once: the field names and punctuation of
// a block that has the fields it holds, its strings and a sixteenth more
// for their escapes. A block past it is encoded all the same, with a
// larger array.
func blockSize(b *block) int {
	n := 48 + len(b.Text) + len(b.Title) + len(b.ID) + len(b.Name) + len(b.Input) + len(b.ToolUseID) + len(b.Signature) + len(b.Data)
	if s := b.Source; s != nil {
		n += 40 + len(s.MediaType) + len(s.Data) + len(s.URL)
	}
	if b.Thinking != nil {
		n += len(*b.Thinking)
	}
	for i := range b.Content {
		n += blockSize(&b.Content[i])
	}
	return n + n/16
}
