// Package prefixtest generates conversations and changes them the ways a
// caller may between turns, to test that the cache of package prefixcache gives the
// bytes encoding from scratch gives: randomised (a seeded source) or driven
// by a fuzzer's bytes.
package prefixtest

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/hrns-dev/hrns/llm"
)

// A Chooser makes the choices of a generated conversation: a seeded random
// source in the tests, the fuzzer's bytes in FuzzPrefixCache.
type Chooser interface {
	Intn(n int) int // in [0, n); n > 0
}

// RandChooser takes its choices from a random source.
type RandChooser struct{ R *rand.Rand }

// Intn returns a choice in [0, n).
func (c RandChooser) Intn(n int) int { return c.R.IntN(n) }

// ByteChooser takes its choices from B, a byte each, then zeros: a
// fuzzer's input.
type ByteChooser struct{ B []byte }

// Intn returns a choice in [0, n).
func (c *ByteChooser) Intn(n int) int {
	if len(c.B) == 0 {
		return 0
	}
	v := int(c.B[0])
	c.B = c.B[1:]
	return v % n
}

// Done reports whether the input is used up.
func (c *ByteChooser) Done() bool { return len(c.B) == 0 }

// texts are the pieces generated strings are made of: JSON escapes, HTML,
// non-ASCII, invalid UTF-8, the field names of the body.
var texts = []string{"", "a", "hello", `"quoted"`, `\back`, "<b>&amp;</b>", "é漢🙂", "\xff\xfe", "\n\t", `"messages":[]`, "\u2028", "{}"}

// String returns a new string (a new pointer, even for equal content).
func String(c Chooser) string {
	var b strings.Builder
	for range c.Intn(3) + 1 {
		b.WriteString(texts[c.Intn(len(texts))])
	}
	return strings.Clone(b.String())
}

// Args returns new argument bytes: an object, or anything a model might
// write.
func Args(c Chooser) llm.Arguments {
	switch c.Intn(4) {
	case 0:
		return llm.Arguments(`{"path":"` + fmt.Sprint(c.Intn(1000)) + `"}`)
	case 1:
		return llm.Arguments(String(c))
	case 2:
		return nil
	}
	return llm.Arguments(` {"a":[1,2]} `)
}

// Media returns new media: an image or a document (doc), by URL or inline.
func Media(c Chooser, doc bool) *llm.Media {
	m := &llm.Media{MIMEType: []string{"", "image/png", "application/pdf", "text/plain"}[c.Intn(4)]}
	if c.Intn(4) == 0 && !doc {
		m.URL = "https://example.com/" + String(c)
		return m
	}
	m.Data = []byte("\x89PNG" + String(c))
	if c.Intn(2) == 0 {
		m.Name = String(c)
	}
	return m
}

// Message returns a new message of any role the wire takes, and now and
// then one it refuses (an image in a system message, an unknown role).
func Message(c Chooser) llm.Message {
	switch c.Intn(10) {
	case 0:
		return llm.SystemMessage(String(c))
	case 1, 2:
		m := llm.UserMessage(String(c))
		switch c.Intn(4) {
		case 0:
			m.Parts = append(m.Parts, llm.Part{Kind: llm.PartImage, Media: Media(c, false)})
		case 1:
			m.Parts = append(m.Parts, llm.Part{Kind: llm.PartDocument, Media: Media(c, true)})
		}
		return m
	case 3, 4:
		m := llm.Message{Role: llm.RoleAssistant}
		if c.Intn(2) == 0 {
			m.Parts = append(m.Parts, llm.TextPart(String(c)))
		}
		if c.Intn(3) == 0 {
			m.Parts = append(m.Parts, llm.Part{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{Text: String(c)}})
		}
		for range c.Intn(3) {
			m.Parts = append(m.Parts, llm.Part{Kind: llm.PartToolCall, ToolCall: &llm.ToolCall{
				ID: String(c), Name: String(c), Arguments: Args(c)}})
		}
		return m
	case 5, 6, 7:
		m := llm.Message{Role: llm.RoleTool}
		for range c.Intn(3) + 1 {
			r := &llm.ToolResult{CallID: String(c), Name: String(c), IsError: c.Intn(4) == 0}
			r.Content = append(r.Content, llm.TextPart(String(c)))
			switch c.Intn(5) {
			case 0:
				r.Content = append(r.Content, llm.Part{Kind: llm.PartImage, Media: Media(c, false)})
			case 1:
				r.Content = append(r.Content, llm.Part{Kind: llm.PartDocument, Media: Media(c, true)})
			}
			m.Parts = append(m.Parts, llm.Part{Kind: llm.PartToolResult, ToolResult: r})
		}
		return m
	case 8:
		return llm.Message{Role: llm.RoleSystem, Parts: []llm.Part{llm.ImagePart("image/png", []byte("x"))}}
	}
	if c.Intn(3) == 0 {
		return llm.Message{Role: "bogus", Parts: []llm.Part{llm.TextPart("x")}}
	}
	return llm.UserMessage(String(c))
}

// Rich returns a new message as [Message] does, now and then with what the
// wires that merge the messages of one role carry: signed, redacted and
// signature-only reasoning (after the text, where a wire may move it
// first), signatures on tool calls, tool results in a user message, and
// tool results that name no tool but answer a call of msgs, the
// conversation so far.
func Rich(c Chooser, msgs []llm.Message) llm.Message {
	m := Message(c)
	for j := range m.Parts {
		p := &m.Parts[j]
		switch {
		case p.Reasoning != nil:
			signed(c, p.Reasoning)
		case p.ToolCall != nil && c.Intn(2) == 0:
			p.ToolCall.Signature = String(c)
		case p.ToolResult != nil && c.Intn(3) == 0:
			p.ToolResult.Name = ""
			if ids := callIDs(msgs); len(ids) > 0 && c.Intn(4) != 0 {
				p.ToolResult.CallID = ids[c.Intn(len(ids))]
			}
		}
	}
	switch {
	case m.Role == llm.RoleAssistant && c.Intn(3) == 0:
		r := &llm.Reasoning{Text: String(c)}
		signed(c, r)
		m.Parts = append(m.Parts, llm.Part{Kind: llm.PartReasoning, Reasoning: r})
	case m.Role == llm.RoleUser && c.Intn(4) == 0:
		r := &llm.ToolResult{CallID: String(c), Name: String(c), Content: []llm.Part{llm.TextPart(String(c))}}
		m.Parts = append(m.Parts, llm.Part{Kind: llm.PartToolResult, ToolResult: r})
	}
	return m
}

// signed gives r a signature, or only a signature, or redacted content,
// or leaves it as it is.
func signed(c Chooser, r *llm.Reasoning) {
	switch c.Intn(4) {
	case 0:
		r.Signature = "sig" + String(c)
	case 1:
		r.Redacted = "enc" + String(c)
		r.Text = ""
	case 2:
		r.Signature = "sig" + String(c)
		r.Text = ""
	}
}

// callIDs returns the IDs of the tool calls of msgs.
func callIDs(msgs []llm.Message) []string {
	var ids []string
	for i := range msgs {
		for _, p := range msgs[i].Parts {
			if p.ToolCall != nil {
				ids = append(ids, p.ToolCall.ID)
			}
		}
	}
	return ids
}

// Mutate changes msgs the ways a caller may between turns: in place (a
// string replaced, a byte rewritten in the arrays the request points to,
// a message overwritten in the slice) or by a new slice (messages dropped,
// a summary in place of the start). It returns the messages to send next.
func Mutate(c Chooser, msgs []llm.Message) []llm.Message {
	if len(msgs) == 0 {
		return msgs
	}
	i := c.Intn(len(msgs))
	m := &msgs[i]
	switch c.Intn(9) {
	case 0:
		msgs[i] = Message(c)
	case 1:
		return msgs[:i] // dropped at the end
	case 2:
		return append([]llm.Message{llm.UserMessage("summary: " + String(c))}, msgs[i:]...)
	case 3:
		m.Role = []llm.Role{llm.RoleSystem, llm.RoleUser, llm.RoleAssistant, llm.RoleTool}[c.Intn(4)]
	case 4:
		if m.Parts = append(m.Parts[:0:0], m.Parts...); len(m.Parts) > 0 {
			m.Parts = m.Parts[:len(m.Parts)-1]
		}
	}
	for j := range m.Parts {
		p := &m.Parts[j]
		if c.Intn(2) == 0 {
			continue
		}
		switch {
		case p.Kind == llm.PartText:
			p.Text = String(c)
		case p.ToolCall != nil:
			switch a := p.ToolCall.Arguments; {
			case len(a) > 0 && c.Intn(2) == 0:
				a[c.Intn(len(a))] ^= byte(c.Intn(255) + 1) // in place
			case c.Intn(2) == 0:
				p.ToolCall.ID = String(c)
			default:
				p.ToolCall.Name = String(c)
			}
		case p.Media != nil && len(p.Media.Data) > 0:
			p.Media.Data[c.Intn(len(p.Media.Data))]++ // in place
		case p.ToolResult != nil:
			r := p.ToolResult
			switch k := c.Intn(len(r.Content) + 1); {
			case k == len(r.Content):
				r.IsError = !r.IsError
				r.CallID = String(c)
			case r.Content[k].Media != nil && len(r.Content[k].Media.Data) > 0:
				r.Content[k].Media.Data[0] ^= 1
			default:
				r.Content[k].Text = String(c)
			}
		case p.Reasoning != nil:
			p.Reasoning.Text = String(c)
		}
	}
	return msgs
}
