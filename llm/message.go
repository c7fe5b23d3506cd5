package llm

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
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
	// Arguments is what the model wrote as the call's arguments, byte for
	// byte. It may be anything (not JSON, not an object, empty): the loop
	// validates it before any tool sees it, and every serialisation
	// carries it unchanged.
	Arguments Arguments `json:"arguments"`
	// Signature is the provider's opaque signature that came with the
	// call (Gemini's thought signature), to be sent back with the call on
	// later turns; empty for providers that sign none.
	Signature string `json:"signature,omitempty"`
}

// Arguments are the bytes a model wrote as a tool call's arguments. A model
// usually writes a JSON object, but small models, truncated streams and
// hostile output give anything at all, and those bytes must still be kept:
// sent back to the provider as written, stored, recorded and shown.
//
// In JSON, Arguments encode as a string holding the bytes (as the Chat
// Completions wire format does), so a transcript with malformed arguments
// encodes and decodes back to the same bytes. Decoding also accepts any
// other JSON value (transcripts written before this encoding held the
// object itself) and keeps its bytes. JSON strings hold UTF-8 only: the loop
// replaces invalid UTF-8 in arguments when it receives them (see
// [Arguments.Sanitize]), so what it holds is what every encoding carries.
//
// Use [Arguments.JSON] to show arguments to a person or a client.
type Arguments []byte

// MarshalJSON encodes a as a JSON string holding its bytes.
func (a Arguments) MarshalJSON() ([]byte, error) {
	return json.Marshal(string(a))
}

// UnmarshalJSON decodes a JSON string into its bytes; null gives nil; any
// other JSON value is kept as its own bytes.
func (a *Arguments) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*a = Arguments(s)
	case string(b) == "null":
		*a = nil
	default:
		*a = append((*a)[:0:0], b...)
	}
	return nil
}

// Valid reports whether a is one valid JSON value.
func (a Arguments) Valid() bool { return json.Valid(a) }

// JSON returns a valid JSON value standing for a, to show it to a person or
// a client: a itself when it is valid JSON, otherwise a JSON string holding
// what the model wrote. Unlike [Arguments.MarshalJSON] this does not round
// trip (a model that wrote the JSON string "x" and one that wrote x look
// the same); it is for display and events, never for transcripts.
func (a Arguments) JSON() json.RawMessage {
	if json.Valid(a) {
		return json.RawMessage(a)
	}
	b, _ := json.Marshal(string(a))
	return b
}

// Object returns a, without surrounding white space, when it is one valid
// JSON object, and {} otherwise. Providers whose wire format (or whose
// compatible servers) require an object send this back in later requests,
// so that a transcript holding malformed arguments is not refused; the
// call's error result is what tells the model what was wrong.
func (a Arguments) Object() json.RawMessage {
	t := bytes.TrimSpace(a)
	if len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		return json.RawMessage("{}")
	}
	return json.RawMessage(t)
}

// Sanitize returns a with invalid UTF-8 replaced by U+FFFD, so that it
// survives JSON unchanged; a is returned as it is when it is valid UTF-8.
func (a Arguments) Sanitize() Arguments {
	if utf8.Valid(a) {
		return a
	}
	return Arguments(strings.ToValidUTF8(string(a), "\uFFFD"))
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
	// Signature is the provider's opaque signature over Text. A
	// reasoning part may hold a signature and no text: Gemini signs the
	// text that follows the model's thoughts, and its provider keeps such a
	// signature as a reasoning part right after the text it came with.
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
