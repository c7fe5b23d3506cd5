package llm

import (
	"encoding/json"
	"strings"
)

// Role says who wrote a [Message].
type Role string

// The roles of a conversation.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	// RoleTool messages carry the results of tool calls, one [ToolResult]
	// part per call.
	RoleTool Role = "tool"
)

// A Message is one entry of a conversation.
//
// A message is a value: providers and the loop never modify the Parts of a
// message they were given, so a transcript can be shared after it is built.
type Message struct {
	Role  Role   `json:"role"`
	Parts []Part `json:"parts"`
}

// PartKind says which field of a [Part] is set.
type PartKind string

// The kinds of content a [Part] may hold.
const (
	PartText       PartKind = "text"
	PartImage      PartKind = "image"
	PartDocument   PartKind = "document"
	PartToolCall   PartKind = "tool_call"
	PartToolResult PartKind = "tool_result"
	PartReasoning  PartKind = "reasoning"
)

// A Part is one piece of a message's content. Kind says which one of the
// other fields is meaningful; the rest are zero.
type Part struct {
	Kind       PartKind    `json:"type"`
	Text       string      `json:"text,omitempty"`
	Media      *Media      `json:"media,omitempty"`
	ToolCall   *ToolCall   `json:"tool_call,omitempty"`
	ToolResult *ToolResult `json:"tool_result,omitempty"`
	Reasoning  *Reasoning  `json:"reasoning,omitempty"`
}

// Media is an image or a document (for example a PDF), given inline as bytes
// or by URL.
type Media struct {
	// MIMEType is the media type, such as "image/png" or "application/pdf".
	MIMEType string `json:"mime_type"`
	// Data holds the bytes; it is base64 in JSON.
	Data []byte `json:"data,omitempty"`
	// URL points at the media when Data is empty.
	URL string `json:"url,omitempty"`
	// Name is an optional file name, shown to models that take one.
	Name string `json:"name,omitempty"`
}

// A ToolCall is the model's request to run a tool.
type ToolCall struct {
	// ID identifies the call; its result must carry the same ID.
	ID string `json:"id"`
	// Name is the tool's name as the model gave it.
	Name string `json:"name"`
	// Arguments is the argument object as the model wrote it. It may be
	// malformed: the loop validates it before any tool sees it.
	Arguments json.RawMessage `json:"arguments"`
}

// A ToolResult answers one [ToolCall].
type ToolResult struct {
	// CallID is the ID of the call this result answers.
	CallID string `json:"call_id"`
	// Name is the called tool's name; some providers want it.
	Name string `json:"name,omitempty"`
	// Content is what the model reads: text parts, and images or documents
	// where the provider supports them.
	Content []Part `json:"content"`
	// IsError marks a failed call. The model sees the content either way.
	IsError bool `json:"is_error,omitempty"`
}

// Reasoning is a model's thinking, kept so it can be sent back on later turns
// where the provider requires it.
type Reasoning struct {
	Text string `json:"text,omitempty"`
	// Signature is the provider's opaque signature over Text.
	Signature string `json:"signature,omitempty"`
	// Redacted holds encrypted reasoning the provider returned instead of
	// text; it is sent back as it came.
	Redacted string `json:"redacted,omitempty"`
}

// TextPart returns a text part.
func TextPart(text string) Part { return Part{Kind: PartText, Text: text} }

// ImagePart returns an inline image part.
func ImagePart(mimeType string, data []byte) Part {
	return Part{Kind: PartImage, Media: &Media{MIMEType: mimeType, Data: data}}
}

// DocumentPart returns an inline document part, such as a PDF.
func DocumentPart(mimeType, name string, data []byte) Part {
	return Part{Kind: PartDocument, Media: &Media{MIMEType: mimeType, Data: data, Name: name}}
}

// SystemMessage returns a system message holding text.
func SystemMessage(text string) Message {
	return Message{Role: RoleSystem, Parts: []Part{TextPart(text)}}
}

// UserMessage returns a user message holding text.
func UserMessage(text string) Message {
	return Message{Role: RoleUser, Parts: []Part{TextPart(text)}}
}

// AssistantMessage returns an assistant message holding text.
func AssistantMessage(text string) Message {
	return Message{Role: RoleAssistant, Parts: []Part{TextPart(text)}}
}

// ToolResultMessage returns a tool message answering the call with the given
// ID with text.
func ToolResultMessage(callID, text string) Message {
	return Message{Role: RoleTool, Parts: []Part{{
		Kind:       PartToolResult,
		ToolResult: &ToolResult{CallID: callID, Content: []Part{TextPart(text)}},
	}}}
}

// Text returns the concatenated text parts of m (not reasoning, not tool
// results).
func (m Message) Text() string {
	n := 0
	var only string
	for _, p := range m.Parts {
		if p.Kind == PartText {
			n++
			only = p.Text
		}
	}
	if n <= 1 {
		return only
	}
	var b strings.Builder
	for _, p := range m.Parts {
		if p.Kind == PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// ToolCalls returns the tool calls in m, in the order the model made them.
func (m Message) ToolCalls() []ToolCall {
	var calls []ToolCall
	for _, p := range m.Parts {
		if p.Kind == PartToolCall && p.ToolCall != nil {
			calls = append(calls, *p.ToolCall)
		}
	}
	return calls
}

// Text returns the concatenated text parts of a tool result.
func (r *ToolResult) Text() string {
	return Message{Parts: r.Content}.Text()
}
