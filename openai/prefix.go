package openai

import (
	"fmt"

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
		var err error
		if dst, err = e.app.Append(dst, first, &e.r.out[i]); err != nil {
			return dst, fmt.Errorf("openai: encoding request: %w", err)
		}
		first = false
	}
	return dst, nil
}
