package gemini

import (
	"fmt"

	"github.com/hrns-dev/hrns/internal/prefixcache"
	"github.com/hrns-dev/hrns/llm"
)

// prefixKey is the key of a conversation's [prefixcache.Cache] for this
// provider in its [llm.Conversation].
type prefixKey struct{}

// contentEncoder renders and encodes a conversation one message at a time
// for a [prefixcache.Cache], byte for byte as [renderContents] and the
// request's encoding do. It is a [prefixcache.Lookahead]:
//
//   - A content (consecutive messages of one role, merged) is written by
//     its last message, once the next message with parts shows that it
//     ends there: each message's encoding reads up to that next message
//     (Reach), and the messages of a content before its last are not
//     clean.
//   - The last content may merge with a message appended later: its
//     messages (Tail) are encoded at every request.
//   - A tool result that names no tool takes the name of the last call of
//     the messages before it with its ID: the encoder reads those messages
//     back from it (they are unchanged when it is encoded again, or the
//     cache would not reuse what comes before it), rather than keep every
//     call of the conversation.
//   - System messages go to the request's system instruction: their texts
//     are kept in the cache's [prefixcache.Aside], so that the messages the
//     cache reuses are not read again.
type contentEncoder struct {
	msgs  []llm.Message
	aside *prefixcache.Aside
	app   prefixcache.Appender

	// back holds the renders of Tail's scan: back[k] is message
	// len(msgs)-1-k's. next is message nextAt's, from the last look
	// ahead.
	back   []rendered
	next   rendered
	nextAt int

	run   content // the content being merged
	reach int     // what the last Add read: see [prefixcache.Lookahead]

	system *content // the system instruction, which Finish sets
}

// newContentEncoder returns an encoder of msgs for cache.
func newContentEncoder(msgs []llm.Message, cache *prefixcache.Cache) *contentEncoder {
	return &contentEncoder{msgs: msgs, aside: cache.Aside(), nextAt: -1}
}

// render renders message i.
func (e *contentEncoder) render(i int) rendered {
	return renderMessage(i, &e.msgs[i], func(id string) *llm.ToolCall { return lastCall(e.msgs[:i], id) })
}

// lastCall returns the last tool call with the ID id of the assistant
// messages of msgs, nil for none: what renderContents's map of calls holds
// for id after msgs.
func lastCall(msgs []llm.Message, id string) *llm.ToolCall {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := &msgs[i]
		if m.Role != llm.RoleAssistant {
			continue
		}
		for j := len(m.Parts) - 1; j >= 0; j-- {
			if p := &m.Parts[j]; p.Kind == llm.PartToolCall && p.ToolCall != nil && p.ToolCall.ID == id {
				return p.ToolCall
			}
		}
	}
	return nil
}

// get returns the render of message i.
func (e *contentEncoder) get(i int) rendered {
	if k := len(e.msgs) - 1 - i; k < len(e.back) {
		return e.back[k]
	}
	if i != e.nextAt {
		e.next, e.nextAt = e.render(i), i
	}
	return e.next
}

// Tail returns the first message of the last content, rendering the
// messages from the end back to the content before it.
func (e *contentEncoder) Tail(msgs []llm.Message) int {
	start, role := len(msgs), ""
	for i := len(msgs) - 1; i >= 0; i-- {
		r := e.render(i)
		e.back = append(e.back, r)
		if r.err != nil {
			// The request fails at this message, or before it.
			return i
		}
		if !r.turn() {
			continue
		}
		if role != "" && r.role != role {
			break
		}
		start, role = i, r.role
	}
	return start
}

// Reach returns how many messages the last Add read.
func (e *contentEncoder) Reach() int { return e.reach }

// Add appends the content message i ends, if it ends one.
func (e *contentEncoder) Add(dst []byte, first bool, i int, _ *llm.Message) ([]byte, bool, error) {
	e.reach = i + 1
	r := e.get(i)
	if r.err != nil {
		return dst, false, r.err
	}
	if r.system != "" {
		e.aside.Add(i, r.system)
	}
	open := len(e.run.Parts) > 0
	if !r.turn() {
		return dst, !open, nil
	}
	if open {
		e.run.Parts = append(e.run.Parts, r.parts...)
	} else {
		e.run = content{Role: r.role, Parts: r.parts}
	}
	// The content goes on if the next message with parts is of its role.
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
	dst, err := e.app.Append(dst, first, &e.run)
	e.run = content{}
	if err != nil {
		return dst, false, fmt.Errorf("%s: encoding request: %w", providerName, err)
	}
	return dst, true, nil
}

// Finish sets the system instruction, from the texts of the
// conversation's system messages; every content was written by its last
// message.
func (e *contentEncoder) Finish(dst []byte, _ bool) ([]byte, error) {
	e.system = systemInstruction(e.aside.Texts())
	return dst, nil
}

// toolsKey is the key of a conversation's [prefixcache.Tools] in its
// [llm.Conversation]: the "tools" field of Gemini depends on the specs
// alone (see [renderTools]; nothing but names, descriptions and schemas
// reaches it), so that a turn whose tools are the same neither renders
// their schemas again (see [renderSchema]) nor encodes them: two thirds
// of the allocations of a turn did that. The tool choice is rendered at
// every request into its own field.
type toolsKey struct{}

// toolsFor returns the tools cache of conv.
func toolsFor(conv *llm.Conversation) *prefixcache.Tools {
	return prefixcache.ToolsOf(conv, toolsKey{})
}
