package responses

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

// request is the body of POST /responses. Fields are in the order they
// appear on the wire.
type request struct {
	Model             string      `json:"model"`
	Input             []item      `json:"input"`
	Tools             []tool      `json:"tools,omitempty"`
	ToolChoice        any         `json:"tool_choice,omitempty"` // a string or a namedToolChoice
	ParallelToolCalls *bool       `json:"parallel_tool_calls,omitempty"`
	MaxOutputTokens   int         `json:"max_output_tokens,omitempty"`
	Temperature       *float64    `json:"temperature,omitempty"`
	TopP              *float64    `json:"top_p,omitempty"`
	Reasoning         *Reasoning  `json:"reasoning,omitempty"`
	Text              *textConfig `json:"text,omitempty"`
	PromptCacheKey    string      `json:"prompt_cache_key,omitempty"`
	CacheRetention    string      `json:"prompt_cache_retention,omitempty"`
	Include           []string    `json:"include,omitempty"`
	Truncation        string      `json:"truncation,omitempty"`
	Store             bool        `json:"store"`
	Stream            bool        `json:"stream"`
}

// textConfig is the request's text field: the format of the answer.
type textConfig struct {
	Format textFormat `json:"format"`
}

// textFormat asks for an answer matching a JSON Schema.
type textFormat struct {
	Type        string          `json:"type"` // "json_schema"
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema"`
	Strict      bool            `json:"strict"`
}

// item is one input item. Type says which fields are meaningful:
//
//   - "message": Role and Content (a string, or a []contentPart);
//   - "function_call": CallID, Name and Arguments;
//   - "function_call_output": CallID and Output (a string, or a
//     []contentPart);
//   - "reasoning": Summary and EncryptedContent.
type item struct {
	Type             string         `json:"type"`
	ID               string         `json:"id,omitempty"` // computer_call
	Role             string         `json:"role,omitempty"`
	Content          any            `json:"content,omitempty"`
	CallID           string         `json:"call_id,omitempty"`
	Name             string         `json:"name,omitempty"`
	Arguments        string         `json:"arguments,omitempty"`
	Output           any            `json:"output,omitempty"`
	Summary          *[]summaryPart `json:"summary,omitempty"`
	EncryptedContent string         `json:"encrypted_content,omitempty"`
	// computer_call and computer_call_output
	Action                   json.RawMessage `json:"action,omitempty"`
	Actions                  json.RawMessage `json:"actions,omitempty"`
	PendingSafetyChecks      json.RawMessage `json:"pending_safety_checks,omitempty"`
	AcknowledgedSafetyChecks []safetyCheck   `json:"acknowledged_safety_checks,omitempty"`
	Status                   string          `json:"status,omitempty"`
}

// contentPart is one part of a message's content or of a function call's
// output: input_text, input_image or input_file.
type contentPart struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL string `json:"image_url,omitempty"`
	Detail   string `json:"detail,omitempty"`
	Filename string `json:"filename,omitempty"`
	FileData string `json:"file_data,omitempty"`
	FileURL  string `json:"file_url,omitempty"`
}

// summaryPart is one part of a reasoning item's summary.
type summaryPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// tool is one entry of "tools": a function tool, or the computer tool
// (computer_use_preview: a display and an environment, nothing else; the
// GA computer tool: its type alone).
type tool struct {
	Type          string          `json:"type"`
	Name          string          `json:"name,omitempty"`
	Description   string          `json:"description,omitempty"`
	Parameters    json.RawMessage `json:"parameters,omitempty"`
	Strict        *bool           `json:"strict,omitempty"`
	DisplayWidth  int             `json:"display_width,omitempty"`
	DisplayHeight int             `json:"display_height,omitempty"`
	Environment   string          `json:"environment,omitempty"`
}

// namedToolChoice forces a call of one function.
type namedToolChoice struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

// includeEncryptedReasoning asks for the encrypted content of reasoning
// items, which a stateless conversation sends back.
const includeEncryptedReasoning = "reasoning.encrypted_content"

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
// [llm.Request.Conversation]) the body is one piece. With one, the input
// items the conversation's earlier requests encoded are reused from its
// [prefixcache.Cache] (a piece that is never written again) and only the
// new messages are encoded; the bytes are the same either way.
func (c *Client) encodeRequest(req *llm.Request) ([][]byte, error) {
	var cache *prefixcache.Cache
	if req != nil {
		cache = prefixcache.For(req.Conversation, prefixKey{})
	}
	var prefix [][]byte
	var rest []byte
	var tc *prefixcache.Tools
	var kept keptTools // the "tools" field, from the conversation's cache
	model := ""
	if cache != nil && len(req.Tools) > 0 && len(req.Extra) == 0 {
		// The same tools as the conversation's last request (the loop
		// sends the same every turn) were rendered and checked then, for
		// the same model and strictness: they are neither rendered nor
		// checked again.
		if model = req.Model; model == "" {
			model = c.Model
		}
		tc = toolsFor(req.Conversation)
		kept.field = tc.Kept(req.Tools, toolsExtra(!c.NoStrict, model))
		kept.computer = kept.field != nil && previewComputer(req.Tools, model)
	}
	w, err := c.buildRequest(req, func(msgs []llm.Message) (items []item, err error) {
		if cache == nil {
			return renderInput(msgs)
		}
		prefix, rest, err = cache.Encode(msgs, new(inputEncoder))
		return []item{}, err
	}, &kept)
	if err != nil {
		return nil, err
	}
	tools := kept.field
	if tc != nil && tools == nil && len(w.Tools) > 0 {
		if tools, err = tc.Encode(providerName, req.Tools, toolsExtra(!c.NoStrict, model), w.Tools); err != nil {
			return nil, err
		}
	}
	if tools != nil {
		w.Tools = nil // spliced in below, where encoding it puts it
	}
	pieces, err := prefixcache.Body(providerName, w, cache, `"input":[]`, prefix, rest, req.Extra)
	if err != nil || tools == nil {
		return pieces, err
	}
	// Without extra fields the last piece is the body from the list's
	// closing bracket on, and "tools" is the field after the list.
	tail := pieces[len(pieces)-1]
	return append(pieces[:len(pieces)-1], tail[:1], tools, tail[1:]), nil
}

// keptTools is a request's "tools" field kept by its conversation (field
// nil for none), and whether a tool of it is computer_use_preview.
type keptTools struct {
	field    []byte
	computer bool
}

// buildRequest translates req into its wire form; input renders its
// messages. A kept field (see [keptTools]) says that the caller has req's
// tools encoded already, from specs that rendered without error for the
// same model and strictness: they are not rendered (w.Tools stays nil),
// and the fields that go with tools are set.
func (c *Client) buildRequest(req *llm.Request, input func([]llm.Message) ([]item, error), kept *keptTools) (*request, error) {
	if req == nil {
		return nil, errNilRequest
	}
	w := &request{
		Model:       req.Model,
		Temperature: req.Temperature,
		TopP:        req.TopP,
		Reasoning:   c.Reasoning,
		Store:       c.Store,
		Stream:      true,
	}
	// The neutral knobs. The Responses API has no seed and no thinking
	// budget: those are not sent (as docs/providers.md says).
	if r := req.Reasoning; r != nil && r.Effort != "" {
		rc := Reasoning{Effort: r.Effort}
		if c.Reasoning != nil {
			rc.Summary = c.Reasoning.Summary
		}
		w.Reasoning = &rc
	}
	if h := req.Cache; h != nil {
		w.PromptCacheKey = h.Key
		if h.Long {
			w.CacheRetention = "24h"
		}
	}
	if f := req.ResponseFormat; f != nil {
		if !json.Valid(f.Schema) {
			return nil, fmt.Errorf("%s: response format: schema is not valid JSON", providerName)
		}
		name := f.Name
		if name == "" {
			name = "final_answer"
		}
		w.Text = &textConfig{Format: textFormat{Type: "json_schema", Name: name, Description: f.Description, Schema: f.Schema, Strict: f.Strict}}
	}
	if w.Model == "" {
		w.Model = c.Model
	}
	if w.Model == "" {
		return nil, fmt.Errorf("%s: no model: set Request.Model or Client.Model: NewFromEnv reads it from OPENAI_MODEL", providerName)
	}
	if req.MaxTokens < 0 {
		return nil, fmt.Errorf("%s: negative MaxTokens %d", providerName, req.MaxTokens)
	}
	w.MaxOutputTokens = req.MaxTokens
	if len(req.StopSequences) > 0 {
		return nil, fmt.Errorf("%s: %w", providerName, unsupported("stop sequences"))
	}
	switch c.EncryptedReasoning {
	case EncryptedReasoningAuto, EncryptedReasoningAlways, EncryptedReasoningNever:
	default:
		return nil, fmt.Errorf("%s: unknown EncryptedReasoning mode %q", providerName, c.EncryptedReasoning)
	}
	if c.wantsEncryptedReasoning(w.Model) {
		w.Include = []string{includeEncryptedReasoning}
	}

	var err error
	if w.Input, err = input(req.Messages); err != nil {
		return nil, err
	}
	keptField := kept != nil && kept.field != nil
	if keptField {
		if kept.computer {
			w.Truncation = "auto"
		}
	} else if w.Tools, err = renderTools(req.Tools, !c.NoStrict, w.Model); err != nil {
		return nil, err
	}
	for _, t := range w.Tools {
		if t.Type == "computer_use_preview" {
			w.Truncation = "auto" // the computer-use models require it
		}
	}
	// tool_choice and parallel_tool_calls mean nothing without tools.
	if keptField || len(w.Tools) > 0 {
		if w.ToolChoice, err = renderToolChoice(req.ToolChoice); err != nil {
			return nil, err
		}
		w.ParallelToolCalls = req.ParallelToolCalls
	}
	return w, nil
}

// renderTools renders tool specs in their given order, each strict when
// strict is set and its schema allows it (see [strictSchema]); a computer
// tool as computer_use_preview for the models that take it
// ([ComputerUseModel]), as the GA computer tool for those that take that
// ([ComputerToolModel]).
func renderTools(tools []llm.ToolSpec, strict bool, model string) ([]tool, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	out := make([]tool, len(tools))
	computer := false
	for i, t := range tools {
		if t.Name == "" {
			return nil, fmt.Errorf("%s: tool %d has no name", providerName, i)
		}
		if c := t.Computer; c != nil && (ComputerUseModel(model) || ComputerToolModel(model)) {
			if computer {
				return nil, fmt.Errorf("%s: more than one computer tool", providerName)
			}
			if c.Width <= 0 || c.Height <= 0 {
				return nil, fmt.Errorf("%s: computer tool with a display of %dx%d", providerName, c.Width, c.Height)
			}
			computer = true
			if ComputerToolModel(model) {
				// The model reads the display's size from the
				// screenshots.
				out[i] = tool{Type: "computer"}
				continue
			}
			out[i] = tool{Type: "computer_use_preview", DisplayWidth: c.Width, DisplayHeight: c.Height, Environment: "linux"}
			continue
		}
		schema := t.InputSchema
		if len(bytes.TrimSpace(schema)) == 0 {
			schema = emptySchema
		} else if !json.Valid(schema) {
			return nil, fmt.Errorf("%s: tool %q: input schema is not valid JSON", providerName, t.Name)
		}
		w := tool{Type: "function", Name: t.Name, Description: t.Description, Parameters: schema, Strict: new(bool)}
		if strict {
			if s, ok := strictSchema(schema); ok {
				w.Parameters, *w.Strict = s, true
			}
		}
		out[i] = w
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
			return nil, fmt.Errorf("%s: tool choice \"tool\" without a tool name", providerName)
		}
		return namedToolChoice{Type: "function", Name: tc.Name}, nil
	}
	return nil, fmt.Errorf("%s: unknown tool choice mode %q", providerName, tc.Mode)
}

// unsupported returns an error wrapping llm.ErrUnsupported for content the
// Responses API cannot take. what is plural, such as "stop sequences".
func unsupported(what string) error {
	return fmt.Errorf("%s are not supported by the Responses API: %w", what, llm.ErrUnsupported)
}

// renderInput renders a conversation as input items, in order.
func renderInput(msgs []llm.Message) ([]item, error) {
	out := make([]item, 0, len(msgs))
	for i := range msgs {
		var err error
		if out, err = appendMessage(out, i, &msgs[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// appendMessage appends the input items of m, the message of index i.
// They depend on m alone, which is what lets a [prefixcache.Cache] reuse
// the items of a conversation's start.
func appendMessage(out []item, i int, m *llm.Message) ([]item, error) {
	var err error
	switch m.Role {
	case llm.RoleSystem:
		var text string
		if text, err = textOnly(m.Parts); err == nil {
			out = append(out, item{Type: "message", Role: "system", Content: text})
		}
	case llm.RoleUser:
		var content any
		if content, err = userContent(m.Parts); err == nil {
			out = append(out, item{Type: "message", Role: "user", Content: content})
		}
	case llm.RoleAssistant:
		out, err = appendAssistant(out, m.Parts)
	case llm.RoleTool:
		out, err = appendToolOutputs(out, m.Parts)
	default:
		err = fmt.Errorf("unknown role %q", m.Role)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: message %d (%s): %w", providerName, i, m.Role, err)
	}
	return out, nil
}

// prefixKey is the key of a conversation's [prefixcache.Cache] for this
// provider in its [llm.Conversation].
type prefixKey struct{}

// inputEncoder renders and encodes messages one at a time for a
// [prefixcache.Cache]; every message is clean, its items being its own.
type inputEncoder struct {
	out []item
	app prefixcache.Appender
}

// Add appends the input items of m, the message of index i.
func (e *inputEncoder) Add(dst []byte, first bool, i int, m *llm.Message) ([]byte, bool, error) {
	var err error
	if e.out, err = appendMessage(e.out[:0], i, m); err != nil {
		return dst, false, err
	}
	for j := range e.out {
		if dst, err = e.app.Append(dst, first, &e.out[j]); err != nil {
			return dst, false, fmt.Errorf("%s: encoding request: %w", providerName, err)
		}
		first = false
	}
	return dst, true, nil
}

// Finish appends nothing: no item ends the input.
func (e *inputEncoder) Finish(dst []byte, _ bool) ([]byte, error) { return dst, nil }

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
	out := make([]contentPart, 0, len(parts))
	for _, p := range parts {
		switch p.Kind {
		case llm.PartText:
			if p.Text != "" {
				out = append(out, contentPart{Type: "input_text", Text: p.Text})
			}
		case llm.PartImage, llm.PartDocument:
			cp, err := mediaPart(p)
			if err != nil {
				return nil, err
			}
			out = append(out, cp)
		default:
			return nil, unsupported(string(p.Kind) + " parts in user messages")
		}
	}
	return out, nil
}

// mediaPart renders an image as input_image and a document as input_file,
// inline as a base64 data URL or by URL.
func mediaPart(p llm.Part) (contentPart, error) {
	m := p.Media
	if m == nil {
		return contentPart{}, fmt.Errorf("%s part without media", p.Kind)
	}
	if p.Kind == llm.PartImage {
		switch {
		case len(m.Data) > 0:
			mime := m.MIMEType
			if mime == "" {
				mime = http.DetectContentType(m.Data)
			}
			return contentPart{Type: "input_image", ImageURL: dataURL(mime, m.Data), Detail: "auto"}, nil
		case m.URL != "":
			return contentPart{Type: "input_image", ImageURL: m.URL, Detail: "auto"}, nil
		}
		return contentPart{}, errors.New("image part with neither data nor URL")
	}
	switch {
	case len(m.Data) > 0:
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
		return contentPart{Type: "input_file", Filename: name, FileData: dataURL(mime, m.Data)}, nil
	case m.URL != "":
		return contentPart{Type: "input_file", Filename: m.Name, FileURL: m.URL}, nil
	}
	return contentPart{}, errors.New("document part with neither data nor URL")
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

// appendAssistant renders an assistant message as the items the model
// produced, in order: reasoning items, a message item for each run of text,
// and a function_call item per call.
//
// Items are sent without their ids: with store false the API keeps no item
// to refer to, and would refuse an id it cannot find.
func appendAssistant(out []item, parts []llm.Part) ([]item, error) {
	var text strings.Builder
	flush := func() {
		if text.Len() > 0 {
			out = append(out, item{Type: "message", Role: "assistant", Content: text.String()})
			text.Reset()
		}
	}
	for _, p := range parts {
		switch p.Kind {
		case llm.PartText:
			text.WriteString(p.Text)
		case llm.PartReasoning:
			r := p.Reasoning
			if r == nil {
				return nil, errors.New("reasoning part without reasoning")
			}
			if r.Redacted == "" {
				// Only encrypted reasoning can go back: a summary alone
				// (or another provider's thinking) has no item to send.
				continue
			}
			flush()
			summary := []summaryPart{}
			if r.Text != "" {
				summary = append(summary, summaryPart{Type: "summary_text", Text: r.Text})
			}
			out = append(out, item{Type: "reasoning", Summary: &summary, EncryptedContent: r.Redacted})
		case llm.PartToolCall:
			tc := p.ToolCall
			if tc == nil {
				return nil, errors.New("tool call part without a call")
			}
			flush()
			if strings.HasPrefix(tc.ID, computerCallPrefix) && tc.Signature != "" {
				it, err := computerCallItem(tc)
				if err != nil {
					return nil, err
				}
				out = append(out, it)
				continue
			}
			// The arguments are documented as a JSON string; what the model
			// wrote is sent when it is an object, {} otherwise (the call's
			// error result tells the model what was wrong).
			out = append(out, item{Type: "function_call", CallID: tc.ID, Name: tc.Name, Arguments: string(tc.Arguments.Object())})
		default:
			return nil, unsupported(string(p.Kind) + " parts in assistant messages")
		}
	}
	flush()
	return out, nil
}

// appendToolOutputs renders each tool result of a tool message as a
// function_call_output item: its text as a string, or, when the result
// holds images or documents, an array of input_text, input_image and
// input_file parts, which the API takes there.
func appendToolOutputs(out []item, parts []llm.Part) ([]item, error) {
	for _, p := range parts {
		if p.Kind != llm.PartToolResult {
			return nil, fmt.Errorf("%s part in a tool message; tool messages hold tool results only", p.Kind)
		}
		r := p.ToolResult
		if r == nil {
			return nil, errors.New("tool result part without a result")
		}
		if strings.HasPrefix(r.CallID, computerCallPrefix) {
			var err error
			if out, err = appendComputerOutput(out, r); err != nil {
				return nil, err
			}
			continue
		}
		hasMedia := false
		for _, c := range r.Content {
			switch c.Kind {
			case llm.PartText:
			case llm.PartImage, llm.PartDocument:
				hasMedia = true
			default:
				return nil, unsupported(string(c.Kind) + " parts in tool results")
			}
		}
		if !hasMedia {
			out = append(out, item{Type: "function_call_output", CallID: r.CallID, Output: r.Text()})
			continue
		}
		content := make([]contentPart, 0, len(r.Content))
		for _, c := range r.Content {
			if c.Kind == llm.PartText {
				if c.Text != "" {
					content = append(content, contentPart{Type: "input_text", Text: c.Text})
				}
				continue
			}
			cp, err := mediaPart(c)
			if err != nil {
				return nil, err
			}
			content = append(content, cp)
		}
		out = append(out, item{Type: "function_call_output", CallID: r.CallID, Output: content})
	}
	return out, nil
}
