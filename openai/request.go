package openai

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/hrns-dev/hrns/internal/prefixcache"
	"github.com/hrns-dev/hrns/llm"
)

// chatRequest is the body of POST /chat/completions. Fields are in the order
// they appear on the wire.
type chatRequest struct {
	Model                string          `json:"model"`
	Messages             []wireMessage   `json:"messages"`
	Tools                []wireTool      `json:"tools,omitempty"`
	ToolChoice           any             `json:"tool_choice,omitempty"` // a string or a namedToolChoice
	ParallelToolCalls    *bool           `json:"parallel_tool_calls,omitempty"`
	MaxTokens            int             `json:"max_tokens,omitempty"`
	MaxCompletionTokens  int             `json:"max_completion_tokens,omitempty"`
	Temperature          *float64        `json:"temperature,omitempty"`
	TopP                 *float64        `json:"top_p,omitempty"`
	Seed                 *int64          `json:"seed,omitempty"`
	ReasoningEffort      string          `json:"reasoning_effort,omitempty"`
	PromptCacheKey       string          `json:"prompt_cache_key,omitempty"`
	PromptCacheRetention string          `json:"prompt_cache_retention,omitempty"`
	Stop                 []string        `json:"stop,omitempty"`
	ResponseFormat       *responseFormat `json:"response_format,omitempty"`
	Stream               bool            `json:"stream"`
	StreamOptions        *streamOptions  `json:"stream_options,omitempty"`
}

// responseFormat asks for a JSON answer matching a schema.
type responseFormat struct {
	Type       string          `json:"type"` // "json_schema"
	JSONSchema *jsonSchemaWire `json:"json_schema"`
}

type jsonSchemaWire struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema"`
	Strict      bool            `json:"strict"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// wireMessage is one entry of "messages".
type wireMessage struct {
	Role string `json:"role"`
	// Content is a string, a []wirePart, or nil for null.
	Content    any            `json:"content"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

// wirePart is one element of an array content.
type wirePart struct {
	Type     string        `json:"type"`
	Text     string        `json:"text,omitempty"`
	ImageURL *wireImageURL `json:"image_url,omitempty"`
	File     *wireFile     `json:"file,omitempty"`
}

type wireImageURL struct {
	URL string `json:"url"`
}

type wireFile struct {
	Filename string `json:"filename"`
	FileData string `json:"file_data"`
}

// wireToolCall is a tool call of an assistant message.
type wireToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function wireFunctionCall `json:"function"`
}

type wireFunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// wireTool is one entry of "tools".
type wireTool struct {
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// namedToolChoice forces a call of one function.
type namedToolChoice struct {
	Type     string       `json:"type"`
	Function functionName `json:"function"`
}

type functionName struct {
	Name string `json:"name"`
}

// emptySchema is sent for a tool without an input schema.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// marshalRequest renders req as the JSON body of a streaming request.
func (c *Client) marshalRequest(req *llm.Request) ([]byte, error) {
	pieces, err := c.encodeRequest(req)
	if err != nil {
		return nil, err
	}
	return prefixcache.Join(pieces), nil
}

// encodeRequest renders req as the JSON body of a streaming request, in
// pieces to send one after the other. Without a conversation (see
// [llm.Request.Conversation]) the body is one piece. With one, the messages
// the conversation's earlier requests encoded are reused from its
// [prefixcache.Cache] (a piece that is never written again) and only the new
// ones are encoded; the bytes are the same either way.
func (c *Client) encodeRequest(req *llm.Request) ([][]byte, error) {
	var cache *prefixcache.Cache
	if req != nil {
		cache = prefixcache.For(req.Conversation, prefixKey{})
	}
	var prefix [][]byte
	var rest []byte
	var tc *prefixcache.Tools
	var tools []byte // the "tools" field, from the conversation's cache
	if cache != nil && len(req.Tools) > 0 && len(req.Extra) == 0 {
		// The same tools as the conversation's last request (the loop
		// sends the same every turn) were rendered and checked then:
		// they are neither rendered nor checked again.
		tc = toolsFor(req.Conversation)
		tools = tc.Kept(req.Tools, "")
	}
	w, err := c.buildRequest(req, func(msgs []llm.Message) (wm []wireMessage, err error) {
		if cache == nil {
			return renderMessages(msgs)
		}
		prefix, rest, err = cache.Encode(msgs, new(chatEncoder))
		return []wireMessage{}, err
	}, tools != nil)
	if err != nil {
		return nil, err
	}
	if tc != nil && tools == nil && len(w.Tools) > 0 {
		if tools, err = tc.Encode("openai", req.Tools, "", w.Tools); err != nil {
			return nil, err
		}
	}
	if tools != nil {
		w.Tools = nil // spliced in below, where encoding it puts it
	}
	pieces, err := prefixcache.Body("openai", w, cache, `"messages":[]`, prefix, rest, req.Extra)
	if err != nil || tools == nil {
		return pieces, err
	}
	// Without extra fields the last piece is the body from the list's
	// closing bracket on, and "tools" is the field after the list.
	tail := pieces[len(pieces)-1]
	return append(pieces[:len(pieces)-1], tail[:1], tools, tail[1:]), nil
}

// buildRequest translates req into its wire form; messages renders its
// messages. keptTools says that the caller has req's tools encoded
// already, from specs that rendered without error: they are not rendered
// (w.Tools stays nil), and the fields that go with tools are set.
func (c *Client) buildRequest(req *llm.Request, messages func([]llm.Message) ([]wireMessage, error), keptTools bool) (*chatRequest, error) {
	if req == nil {
		return nil, errNilRequest
	}
	w := &chatRequest{
		Model:         req.Model,
		Temperature:   req.Temperature,
		TopP:          req.TopP,
		Seed:          req.Seed,
		Stop:          req.StopSequences,
		Stream:        true,
		StreamOptions: &streamOptions{IncludeUsage: true},
	}
	if w.Model == "" {
		w.Model = c.Model
	}
	if w.Model == "" {
		return nil, errors.New("openai: no model: set Request.Model or Client.Model: NewFromEnv reads it from OPENAI_MODEL")
	}
	if req.MaxTokens < 0 {
		return nil, fmt.Errorf("openai: negative MaxTokens %d", req.MaxTokens)
	}
	if c.UseMaxCompletionTokens {
		w.MaxCompletionTokens = req.MaxTokens
	} else {
		w.MaxTokens = req.MaxTokens
	}

	if r := req.Reasoning; r != nil {
		w.ReasoningEffort = r.Effort // Chat Completions has no budget
	}
	if h := req.Cache; h != nil {
		w.PromptCacheKey = h.Key
		if h.Long {
			w.PromptCacheRetention = "24h"
		}
	}
	var err error
	if w.Messages, err = messages(req.Messages); err != nil {
		return nil, err
	}
	if w.ResponseFormat, err = renderResponseFormat(req.ResponseFormat); err != nil {
		return nil, err
	}
	if !keptTools {
		if w.Tools, err = renderTools(req.Tools); err != nil {
			return nil, err
		}
	}
	// OpenAI rejects tool_choice and parallel_tool_calls without tools.
	if keptTools || len(w.Tools) > 0 {
		if w.ToolChoice, err = renderToolChoice(req.ToolChoice); err != nil {
			return nil, err
		}
		w.ParallelToolCalls = req.ParallelToolCalls
	}
	return w, nil
}

// renderResponseFormat renders a response format as a json_schema
// response_format; strict is sent as the request says, false included.
func renderResponseFormat(f *llm.ResponseFormat) (*responseFormat, error) {
	if f == nil {
		return nil, nil
	}
	if !json.Valid(f.Schema) {
		return nil, errors.New("openai: response format: schema is not valid JSON")
	}
	name := f.Name
	if name == "" {
		name = "final_answer"
	}
	return &responseFormat{Type: "json_schema", JSONSchema: &jsonSchemaWire{
		Name: name, Description: f.Description, Schema: f.Schema, Strict: f.Strict,
	}}, nil
}

// renderTools renders tool specs in their given order.
func renderTools(tools []llm.ToolSpec) ([]wireTool, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	out := make([]wireTool, len(tools))
	for i, t := range tools {
		if t.Name == "" {
			return nil, fmt.Errorf("openai: tool %d has no name", i)
		}
		schema := t.InputSchema
		if len(bytes.TrimSpace(schema)) == 0 {
			schema = emptySchema
		} else if !json.Valid(schema) {
			return nil, fmt.Errorf("openai: tool %q: input schema is not valid JSON", t.Name)
		}
		out[i] = wireTool{Type: "function", Function: wireFunction{
			Name: t.Name, Description: t.Description, Parameters: schema,
		}}
	}
	return out, nil
}

// renderToolChoice renders a tool choice; auto is the default and omitted.
func renderToolChoice(tc llm.ToolChoice) (any, error) {
	switch tc.Mode {
	case llm.ToolChoiceAuto:
		return nil, nil
	case llm.ToolChoiceNone, llm.ToolChoiceRequired:
		return string(tc.Mode), nil
	case llm.ToolChoiceTool:
		if tc.Name == "" {
			return nil, errors.New("openai: tool choice \"tool\" without a tool name")
		}
		return namedToolChoice{Type: "function", Function: functionName{Name: tc.Name}}, nil
	}
	return nil, fmt.Errorf("openai: unknown tool choice mode %q", tc.Mode)
}

// renderMessages renders a conversation. Tool messages expand to one wire
// message per tool result; images and documents of tool results, which
// tool messages cannot hold, follow them in one user message.
func renderMessages(msgs []llm.Message) ([]wireMessage, error) {
	r := renderer{out: make([]wireMessage, 0, len(msgs))}
	for i, m := range msgs {
		if err := r.add(i, m); err != nil {
			return nil, err
		}
	}
	r.finish()
	return r.out, nil
}

// A renderer renders a conversation one message at a time, appending to
// out. What it appends for a message depends on the messages before it only
// through attached: when attached is empty after a message, what follows
// renders the same whatever came before, which is what lets [prefixcache.Cache]
// reuse the rendering of a conversation's start.
type renderer struct {
	out      []wireMessage
	attached []wirePart // media of the tool messages just rendered
}

// add renders m, the message of index i.
func (r *renderer) add(i int, m llm.Message) error {
	if m.Role != llm.RoleTool && len(r.attached) > 0 {
		r.out = append(r.out, wireMessage{Role: "user", Content: r.attached})
		r.attached = nil
	}
	var err error
	switch m.Role {
	case llm.RoleSystem:
		var text string
		if text, err = textOnly(m.Parts); err == nil {
			r.out = append(r.out, wireMessage{Role: "system", Content: text})
		}
	case llm.RoleUser:
		var content any
		if content, err = userContent(m.Parts); err == nil {
			r.out = append(r.out, wireMessage{Role: "user", Content: content})
		}
	case llm.RoleAssistant:
		var wm wireMessage
		if wm, err = assistantMessage(m.Parts); err == nil {
			r.out = append(r.out, wm)
		}
	case llm.RoleTool:
		var out []wireMessage
		var attached []wirePart
		if out, attached, err = appendToolMessages(r.out, r.attached, m.Parts); err == nil {
			r.out, r.attached = out, attached
		}
	default:
		err = fmt.Errorf("unknown role %q", m.Role)
	}
	if err != nil {
		return fmt.Errorf("openai: message %d (%s): %w", i, m.Role, err)
	}
	return nil
}

// finish renders the media of the last tool messages, if any.
func (r *renderer) finish() {
	if len(r.attached) > 0 {
		r.out = append(r.out, wireMessage{Role: "user", Content: r.attached})
		r.attached = nil
	}
}

// unsupported returns an error wrapping llm.ErrUnsupported for content
// Chat Completions cannot express. what is plural, such as "images in tool
// results".
func unsupported(what string) error {
	return fmt.Errorf("%s are not supported by Chat Completions: %w", what, llm.ErrUnsupported)
}

// textOnly joins the text parts of a message that may hold nothing else.
func textOnly(parts []llm.Part) (string, error) {
	for _, p := range parts {
		if p.Kind != llm.PartText {
			return "", unsupported(string(p.Kind) + " parts in system messages")
		}
	}
	return llm.Message{Parts: parts}.Text(), nil
}

// userContent renders a user message: a string when it holds only text, an
// array of parts otherwise.
func userContent(parts []llm.Part) (any, error) {
	onlyText := true
	for _, p := range parts {
		if p.Kind != llm.PartText {
			onlyText = false
			break
		}
	}
	if onlyText {
		return llm.Message{Parts: parts}.Text(), nil
	}
	out := make([]wirePart, 0, len(parts))
	for _, p := range parts {
		switch p.Kind {
		case llm.PartText:
			if p.Text != "" {
				out = append(out, wirePart{Type: "text", Text: p.Text})
			}
		case llm.PartImage:
			u, err := imageURL(p.Media)
			if err != nil {
				return nil, err
			}
			out = append(out, wirePart{Type: "image_url", ImageURL: &wireImageURL{URL: u}})
		case llm.PartDocument:
			f, err := fileData(p.Media)
			if err != nil {
				return nil, err
			}
			out = append(out, wirePart{Type: "file", File: f})
		default:
			return nil, unsupported(string(p.Kind) + " parts in user messages")
		}
	}
	return out, nil
}

// imageURL returns an image's URL, or its bytes as a data URL.
func imageURL(m *llm.Media) (string, error) {
	switch {
	case m == nil:
		return "", errors.New("image part without media")
	case len(m.Data) > 0:
		mime := m.MIMEType
		if mime == "" {
			mime = http.DetectContentType(m.Data)
		}
		return dataURL(mime, m.Data), nil
	case m.URL != "":
		return m.URL, nil
	}
	return "", errors.New("image part with neither data nor URL")
}

// fileData renders an inline document as a file part.
func fileData(m *llm.Media) (*wireFile, error) {
	switch {
	case m == nil:
		return nil, errors.New("document part without media")
	case len(m.Data) == 0 && m.URL != "":
		return nil, unsupported("documents by URL")
	case len(m.Data) == 0:
		return nil, errors.New("document part without data")
	}
	mime := m.MIMEType
	if mime == "" {
		mime = "application/pdf"
	}
	name := m.Name
	if name == "" {
		name = "document.pdf"
		if mime != "application/pdf" {
			name = "document"
		}
	}
	return &wireFile{Filename: name, FileData: dataURL(mime, m.Data)}, nil
}

// dataURL encodes data as a base64 data URL.
func dataURL(mime string, data []byte) string {
	const sep = ";base64,"
	var b strings.Builder
	b.Grow(len("data:") + len(mime) + len(sep) + base64.StdEncoding.EncodedLen(len(data)))
	b.WriteString("data:")
	b.WriteString(mime)
	b.WriteString(sep)
	enc := base64.NewEncoder(base64.StdEncoding, &b)
	enc.Write(data)
	enc.Close()
	return b.String()
}

// assistantMessage renders an assistant message: text and tool calls.
// Reasoning is left out; Chat Completions has no field for it.
func assistantMessage(parts []llm.Part) (wireMessage, error) {
	wm := wireMessage{Role: "assistant"}
	var text strings.Builder
	for _, p := range parts {
		switch p.Kind {
		case llm.PartText:
			text.WriteString(p.Text)
		case llm.PartReasoning:
			// Not representable; the model does not need it back.
		case llm.PartToolCall:
			tc := p.ToolCall
			if tc == nil {
				return wireMessage{}, errors.New("tool call part without a call")
			}
			// Compatible servers (Ollama, llama.cpp) parse the arguments
			// and refuse the request when they are not an object.
			args := string(tc.Arguments.Object())
			wm.ToolCalls = append(wm.ToolCalls, wireToolCall{
				ID: tc.ID, Type: "function",
				Function: wireFunctionCall{Name: tc.Name, Arguments: args},
			})
		default:
			return wireMessage{}, unsupported(string(p.Kind) + " parts in assistant messages")
		}
	}
	// Content is optional with tool_calls; null is what OpenAI's own
	// clients send then.
	if text.Len() > 0 || len(wm.ToolCalls) == 0 {
		wm.Content = text.String()
	}
	return wm, nil
}

// appendToolMessages renders each tool result of a tool message as its own
// role "tool" message. Chat Completions takes only text in tool messages,
// so the images and documents of a result are appended to attached, after
// a line naming the call, for the user message that follows the tool
// messages; the tool message says they follow.
func appendToolMessages(out []wireMessage, attached []wirePart, parts []llm.Part) ([]wireMessage, []wirePart, error) {
	for _, p := range parts {
		if p.Kind != llm.PartToolResult {
			return nil, nil, fmt.Errorf("%s part in a tool message; tool messages hold tool results only", p.Kind)
		}
		r := p.ToolResult
		if r == nil {
			return nil, nil, errors.New("tool result part without a result")
		}
		var media []wirePart
		for _, c := range r.Content {
			switch c.Kind {
			case llm.PartText:
			case llm.PartImage:
				u, err := imageURL(c.Media)
				if err != nil {
					return nil, nil, err
				}
				media = append(media, wirePart{Type: "image_url", ImageURL: &wireImageURL{URL: u}})
			case llm.PartDocument:
				f, err := fileData(c.Media)
				if err != nil {
					return nil, nil, err
				}
				media = append(media, wirePart{Type: "file", File: f})
			default:
				return nil, nil, unsupported(string(c.Kind) + " parts in tool results")
			}
		}
		text := r.Text()
		if len(media) > 0 {
			call := r.CallID
			if r.Name != "" {
				call += " (" + r.Name + ")"
			}
			note := fmt.Sprintf("[%d attachment(s) of this result follow in a user message: tool messages cannot hold them]", len(media))
			if text != "" {
				note = "\n" + note
			}
			text += note
			attached = append(attached, wirePart{Type: "text", Text: "Attached by tool call " + call + ":"})
			attached = append(attached, media...)
		}
		out = append(out, wireMessage{Role: "tool", Content: text, ToolCallID: r.CallID})
	}
	return out, attached, nil
}
