package openai

import (
	"fmt"
	"slices"

	"github.com/hrns-dev/hrns/internal/prefixcache"
	"github.com/hrns-dev/hrns/llm"
)

// prefixKey is the key of a conversation's [prefixcache.Cache] for this
// provider in its [llm.Conversation].
type prefixKey struct{}

// chatEncoder renders and encodes messages one at a time for a
// [prefixcache.Cache]: a message is clean when no media of tool results
// wait for the user message that follows them (see [renderer]).
type chatEncoder struct {
	r   renderer
	app prefixcache.Appender
}

// Add appends the wire messages of m, the message of index i.
func (e *chatEncoder) Add(dst []byte, first bool, i int, m *llm.Message) ([]byte, bool, error) {
	e.r.out = e.r.out[:0]
	if err := e.r.add(i, *m); err != nil {
		return dst, false, err
	}
	dst, err := e.append(dst, first)
	return dst, len(e.r.attached) == 0, err
}

// Finish appends the user message of the last tool messages' media, if any.
func (e *chatEncoder) Finish(dst []byte, first bool) ([]byte, error) {
	e.r.out = e.r.out[:0]
	e.r.finish()
	return e.append(dst, first)
}

func (e *chatEncoder) append(dst []byte, first bool) ([]byte, error) {
	for i := range e.r.out {
		if m := &e.r.out[i]; appendsTextMessage(m) {
			dst = appendTextMessage(dst, first, m)
		} else {
			var err error
			if dst, err = e.app.Append(dst, first, m); err != nil {
				return dst, fmt.Errorf("openai: encoding request: %w", err)
			}
		}
		first = false
	}
	return dst, nil
}

// appendsTextMessage reports whether appendTextMessage encodes m: a
// message whose content is a string and that has no tool calls (system,
// user text and tool messages, the ones large text comes in).
func appendsTextMessage(m *wireMessage) bool {
	_, ok := m.Content.(string)
	return ok && len(m.ToolCalls) == 0
}

// appendTextMessage appends m, after a comma unless first, byte for byte
// as encoding/json (HTML escaping off) encodes it, without its reflection
// and its buffer: a large tool result is escaped once, straight onto dst
// (FuzzTextMessageEncoding holds it to encoding/json).
func appendTextMessage(dst []byte, first bool, m *wireMessage) []byte {
	content := m.Content.(string)
	dst = slices.Grow(dst, len(content)+len(m.Role)+len(m.ToolCallID)+48)
	if !first {
		dst = append(dst, ',')
	}
	dst = append(dst, `{"role":`...)
	dst = prefixcache.AppendString(dst, m.Role)
	dst = append(dst, `,"content":`...)
	dst = prefixcache.AppendString(dst, content)
	if m.ToolCallID != "" {
		dst = append(dst, `,"tool_call_id":`...)
		dst = prefixcache.AppendString(dst, m.ToolCallID)
	}
	return append(dst, '}')
}

// toolsKey is the key of a conversation's [prefixcache.Tools] in its
// [llm.Conversation].
type toolsKey struct{}

// toolsFor returns the tools cache of conv.
func toolsFor(conv *llm.Conversation) *prefixcache.Tools {
	return prefixcache.ToolsOf(conv, toolsKey{})
}
