package gemini

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

// request is the body of streamGenerateContent. Fields are in the order
// they appear on the wire.
type request struct {
	Contents          []content         `json:"contents"`
	SystemInstruction *content          `json:"systemInstruction,omitempty"`
	Tools             []toolWire        `json:"tools,omitempty"`
	ToolConfig        *toolConfig       `json:"toolConfig,omitempty"`
	GenerationConfig  *generationConfig `json:"generationConfig,omitempty"`
}

// content is one turn of the conversation: a role ("user" or "model")
// and its parts.
type content struct {
	Role  string `json:"role,omitempty"`
	Parts []part `json:"parts"`
}

// part is one part of a content. Exactly one of Text, InlineData,
// FileData, FunctionCall and FunctionResponse is set; Thought marks a
// thought summary, ThoughtSignature signs the part it is on.
type part struct {
	Text             *string           `json:"text,omitempty"`
	Thought          bool              `json:"thought,omitempty"`
	InlineData       *blob             `json:"inlineData,omitempty"`
	FileData         *fileData         `json:"fileData,omitempty"`
	FunctionCall     *functionCall     `json:"functionCall,omitempty"`
	FunctionResponse *functionResponse `json:"functionResponse,omitempty"`
	ThoughtSignature string            `json:"thoughtSignature,omitempty"`
}

// blob is inline media: base64 data and its MIME type.
type blob struct {
	MIMEType string `json:"mimeType"`
	Data     string `json:"data"`
}

// fileData is media by URI.
type fileData struct {
	MIMEType string `json:"mimeType,omitempty"`
	FileURI  string `json:"fileUri"`
}

// functionCall is a call the model made.
type functionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

// functionResponse answers a call: {"output": ...} or {"error": ...}.
type functionResponse struct {
	ID       string            `json:"id,omitempty"`
	Name     string            `json:"name"`
	Response map[string]string `json:"response"`
}

// toolWire is one entry of "tools": the function declarations.
type toolWire struct {
	FunctionDeclarations []functionDeclaration `json:"functionDeclarations"`
}

// functionDeclaration declares one function; Parameters is omitted for a
// function without any (the API refuses an object without properties).
type functionDeclaration struct {
	Name        string       `json:"name"`
	Description string       `json:"description,omitempty"`
	Parameters  schemaObject `json:"parameters,omitempty"`
}

// toolConfig constrains function calling.
type toolConfig struct {
	FunctionCallingConfig functionCallingConfig `json:"functionCallingConfig"`
}

type functionCallingConfig struct {
	Mode                 string   `json:"mode"` // AUTO, ANY, NONE
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

// generationConfig holds the sampling and output settings.
type generationConfig struct {
	StopSequences    []string        `json:"stopSequences,omitempty"`
	ResponseMIMEType string          `json:"responseMimeType,omitempty"`
	ResponseSchema   schemaObject    `json:"responseSchema,omitempty"`
	MaxOutputTokens  int             `json:"maxOutputTokens,omitempty"`
	Temperature      *float64        `json:"temperature,omitempty"`
	TopP             *float64        `json:"topP,omitempty"`
	Seed             *int64          `json:"seed,omitempty"`
	ThinkingConfig   *thinkingConfig `json:"thinkingConfig,omitempty"`
}

// thinkingConfig sets how much the model thinks and whether its thought
// summaries come back.
type thinkingConfig struct {
	IncludeThoughts bool   `json:"includeThoughts,omitempty"`
	ThinkingBudget  *int   `json:"thinkingBudget,omitempty"`
	ThinkingLevel   string `json:"thinkingLevel,omitempty"`
}

// generatedIDPrefix begins the IDs the decoder gives calls that came
// without one. Such IDs are not sent back: the API never saw them.
const generatedIDPrefix = "gemini_call_"

// marshalRequest renders req as the JSON body of a request.
func (c *Client) marshalRequest(req *llm.Request) ([]byte, error) {
	pieces, err := c.encodeRequest(req)
	if err != nil {
		return nil, err
	}
	return prefixcache.Join(pieces), nil
}

// encodeRequest renders req as the JSON body of a request, in pieces to
// send one after the other. Without a conversation (see
// [llm.Request.Conversation]) the body is one piece. With one, the
// contents the conversation's earlier requests encoded are reused from its
// [prefixcache.Cache] (pieces that are never written again) and only the
// messages since, and the last content (see [contentEncoder]), are
// encoded; the bytes are the same either way.
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
	w, err := c.buildRequest(req, func(msgs []llm.Message) ([]content, *content, error) {
		if cache == nil {
			return renderContents(msgs)
		}
		e := newContentEncoder(msgs, cache)
		var err error
		prefix, rest, err = cache.Encode(msgs, e)
		return []content{}, e.system, err
	}, tools != nil)
	if err != nil {
		return nil, err
	}
	if tc != nil && tools == nil && len(w.Tools) > 0 {
		if tools, err = tc.Encode(providerName, req.Tools, "", w.Tools); err != nil {
			return nil, err
		}
	}
	if tools != nil {
		w.Tools = placeholderTools // replaced below by the kept field
	}
	pieces, err := prefixcache.Body(providerName, w, cache, `"contents":[]`, prefix, rest, req.Extra)
	if err != nil || tools == nil {
		return pieces, err
	}
	// Without extra fields the last piece is the body from the list's
	// closing bracket on: the system instruction (fixed keys and a string,
	// which cannot hold the placeholder's bytes: its quotes are escaped),
	// then the placeholder, where "tools" goes.
	tail := pieces[len(pieces)-1]
	i := bytes.Index(tail, placeholderField)
	if i < 0 {
		return nil, fmt.Errorf("%s: encoding request: no tools field", providerName) // cannot happen
	}
	return append(pieces[:len(pieces)-1], tail[:i], tools, tail[i+len(placeholderField):]), nil
}

// placeholderTools holds the place of kept tools in a request's wire form,
// encoded as placeholderField, which a rendering of tools never is (it
// has at least one declaration).
var (
	placeholderTools = []toolWire{{}}
	placeholderField = []byte(`,"tools":[{"functionDeclarations":null}]`)
)

// buildRequest translates req into its wire form; conversation renders its
// messages as the contents and the system instruction. keptTools says that
// the caller has req's tools encoded already, from specs that rendered
// without error: they are not rendered (w.Tools stays nil), and the tool
// config that goes with tools is set.
func (c *Client) buildRequest(req *llm.Request, conversation func([]llm.Message) ([]content, *content, error), keptTools bool) (*request, error) {
	if req == nil {
		return nil, errNilRequest
	}
	if req.MaxTokens < 0 {
		return nil, fmt.Errorf("%s: negative MaxTokens %d", providerName, req.MaxTokens)
	}
	w := &request{}
	var err error
	if w.Contents, w.SystemInstruction, err = conversation(req.Messages); err != nil {
		return nil, err
	}
	if !keptTools {
		if w.Tools, err = renderTools(req.Tools); err != nil {
			return nil, err
		}
	}
	if keptTools || len(w.Tools) > 0 {
		if w.ToolConfig, err = renderToolChoice(req.ToolChoice); err != nil {
			return nil, err
		}
	}
	g := generationConfig{
		StopSequences:   req.StopSequences,
		MaxOutputTokens: req.MaxTokens,
		Temperature:     req.Temperature,
		TopP:            req.TopP,
		Seed:            req.Seed,
	}
	if f := req.ResponseFormat; f != nil {
		if !json.Valid(f.Schema) {
			return nil, fmt.Errorf("%s: response format: schema is not valid JSON", providerName)
		}
		s, err := renderSchema(f.Schema)
		if err != nil {
			return nil, fmt.Errorf("%s: response format: %w", providerName, err)
		}
		if f.Description != "" && s.get("description") == nil {
			s = append(schemaObject{{"description", f.Description}}, s...)
		}
		g.ResponseMIMEType = "application/json"
		g.ResponseSchema = s
	}
	if r := req.Reasoning; r != nil || c.IncludeThoughts {
		tc := &thinkingConfig{IncludeThoughts: true}
		if r != nil {
			switch {
			case r.BudgetTokens < 0:
				return nil, fmt.Errorf("%s: negative reasoning budget %d", providerName, r.BudgetTokens)
			case r.BudgetTokens > 0:
				b := r.BudgetTokens
				tc.ThinkingBudget = &b
			case r.Effort == "none":
				zero := 0
				tc.ThinkingBudget, tc.IncludeThoughts = &zero, false
			case r.Effort != "":
				tc.ThinkingLevel = r.Effort
			}
		}
		g.ThinkingConfig = tc
	}
	if g.StopSequences != nil || g.ResponseMIMEType != "" || g.MaxOutputTokens != 0 || g.Temperature != nil ||
		g.TopP != nil || g.Seed != nil || g.ThinkingConfig != nil {
		w.GenerationConfig = &g
	}
	return w, nil
}

// renderTools renders tool specs, in their order, as one tools entry of
// function declarations.
func renderTools(tools []llm.ToolSpec) ([]toolWire, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	decls := make([]functionDeclaration, len(tools))
	for i, t := range tools {
		if t.Name == "" {
			return nil, fmt.Errorf("%s: tool %d has no name", providerName, i)
		}
		d := functionDeclaration{Name: t.Name, Description: t.Description}
		if len(bytes.TrimSpace(t.InputSchema)) > 0 {
			if !json.Valid(t.InputSchema) {
				return nil, fmt.Errorf("%s: tool %q: input schema is not valid JSON", providerName, t.Name)
			}
			s, err := renderSchema(t.InputSchema)
			if err != nil {
				return nil, fmt.Errorf("%s: tool %q: %w", providerName, t.Name, err)
			}
			if s.get("properties") != nil {
				d.Parameters = s
			}
		}
		decls[i] = d
	}
	return []toolWire{{FunctionDeclarations: decls}}, nil
}

// renderToolChoice renders a tool choice; auto is the default and omitted.
func renderToolChoice(tc llm.ToolChoice) (*toolConfig, error) {
	switch tc.Mode {
	case llm.ToolChoiceAuto:
		return nil, nil
	case llm.ToolChoiceNone:
		return &toolConfig{functionCallingConfig{Mode: "NONE"}}, nil
	case llm.ToolChoiceRequired:
		return &toolConfig{functionCallingConfig{Mode: "ANY"}}, nil
	case llm.ToolChoiceTool:
		if tc.Name == "" {
			return nil, fmt.Errorf("%s: tool choice \"tool\" without a tool name", providerName)
		}
		return &toolConfig{functionCallingConfig{Mode: "ANY", AllowedFunctionNames: []string{tc.Name}}}, nil
	}
	return nil, fmt.Errorf("%s: unknown tool choice mode %q", providerName, tc.Mode)
}

// unsupported returns an error wrapping llm.ErrUnsupported for content the
// Gemini API cannot take. what is plural.
func unsupported(what string) error {
	return fmt.Errorf("%s are not supported by the Gemini API: %w", what, llm.ErrUnsupported)
}

// renderContents renders a conversation: the system messages, joined, as
// the system instruction; the others as contents, consecutive ones of the
// same role merged into one (the API wants turns to alternate).
func renderContents(msgs []llm.Message) ([]content, *content, error) {
	var system []string
	out := make([]content, 0, len(msgs))
	calls := map[string]*llm.ToolCall{} // the calls so far, by ID
	for i := range msgs {
		m := &msgs[i]
		r := renderMessage(i, m, func(id string) *llm.ToolCall { return calls[id] })
		if r.err != nil {
			return nil, nil, r.err
		}
		if m.Role == llm.RoleAssistant {
			for _, p := range m.Parts {
				if p.Kind == llm.PartToolCall && p.ToolCall != nil {
					calls[p.ToolCall.ID] = p.ToolCall
				}
			}
		}
		if r.system != "" {
			system = append(system, r.system)
		}
		if len(r.parts) == 0 {
			continue // the API refuses a content without parts
		}
		if n := len(out); n > 0 && out[n-1].Role == r.role {
			out[n-1].Parts = append(out[n-1].Parts, r.parts...)
			continue
		}
		out = append(out, content{Role: r.role, Parts: r.parts})
	}
	return out, systemInstruction(system), nil
}

// systemInstruction returns the system instruction of the texts of a
// conversation's system messages, nil for none.
func systemInstruction(system []string) *content {
	if len(system) == 0 {
		return nil
	}
	text := strings.Join(system, "\n\n")
	return &content{Parts: []part{{Text: &text}}}
}

// rendered is what one message of a conversation renders to: the parts of
// a user or model turn, which merges with the turns of the same role next
// to it, or the text of a system message; or the error that makes the
// conversation fail.
type rendered struct {
	role   string // "user" or "model", "" for a system message
	parts  []part
	system string // a system message's text, "" for none
	err    error
}

// turn reports whether r is part of a turn: a message with parts, not a
// system message.
func (r *rendered) turn() bool { return len(r.parts) > 0 }

// renderMessage renders m, the message of index i of a conversation; call
// returns the last call of the messages before it with an ID, nil for
// none (the name of a tool result that gives none). It depends on m and
// those calls alone.
func renderMessage(i int, m *llm.Message, call func(id string) *llm.ToolCall) rendered {
	var r rendered
	switch m.Role {
	case llm.RoleSystem:
		r.system, r.err = textOnly(m.Parts)
	case llm.RoleUser:
		r.role = "user"
		r.parts, r.err = userParts(m.Parts)
	case llm.RoleAssistant:
		r.role = "model"
		r.parts, r.err = modelParts(m.Parts)
	case llm.RoleTool:
		r.role = "user"
		r.parts, r.err = resultParts(m.Parts, call)
	default:
		r.err = fmt.Errorf("unknown role %q", m.Role)
	}
	if r.err != nil {
		return rendered{err: fmt.Errorf("%s: message %d (%s): %w", providerName, i, m.Role, r.err)}
	}
	return r
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

// textPart returns a text part.
func textPart(s string) part { return part{Text: &s} }

// userParts renders a user message: text, images and documents.
func userParts(parts []llm.Part) ([]part, error) {
	out := make([]part, 0, len(parts))
	for _, p := range parts {
		switch p.Kind {
		case llm.PartText:
			if p.Text != "" {
				out = append(out, textPart(p.Text))
			}
		case llm.PartImage, llm.PartDocument:
			mp, err := mediaPart(p)
			if err != nil {
				return nil, err
			}
			out = append(out, mp)
		default:
			return nil, unsupported(string(p.Kind) + " parts in user messages")
		}
	}
	return out, nil
}

// mediaPart renders an image or a document: inlineData for bytes,
// fileData for a URL.
func mediaPart(p llm.Part) (part, error) {
	m := p.Media
	if m == nil {
		return part{}, fmt.Errorf("%s part without media", p.Kind)
	}
	mime := m.MIMEType
	switch {
	case len(m.Data) > 0:
		if mime == "" {
			if p.Kind == llm.PartImage {
				mime = http.DetectContentType(m.Data)
			} else {
				mime = "application/pdf"
			}
		}
		return part{InlineData: &blob{MIMEType: mime, Data: base64.StdEncoding.EncodeToString(m.Data)}}, nil
	case m.URL != "":
		if mime == "" && p.Kind == llm.PartDocument {
			mime = "application/pdf"
		}
		return part{FileData: &fileData{MIMEType: mime, FileURI: m.URL}}, nil
	}
	return part{}, fmt.Errorf("%s part with neither data nor URL", p.Kind)
}

// modelParts renders an assistant message as the parts the model
// produced, each signature on the part it came with:
//
//   - text as text parts;
//   - reasoning with text as thought parts, with its signature;
//   - a reasoning part holding only a signature signs the text part just
//     before it (where the decoder found it), or, with no such part, is
//     sent as an empty text part with the signature, as Gemini sends it;
//   - reasoning with only Redacted content (another provider's encrypted
//     reasoning) is not sent;
//   - tool calls as functionCall parts with their signatures; the call's
//     id only when the API gave it.
func modelParts(parts []llm.Part) ([]part, error) {
	out := make([]part, 0, len(parts))
	for _, p := range parts {
		switch p.Kind {
		case llm.PartText:
			if p.Text != "" {
				out = append(out, textPart(p.Text))
			}
		case llm.PartReasoning:
			r := p.Reasoning
			if r == nil {
				return nil, errors.New("reasoning part without reasoning")
			}
			switch {
			case r.Text != "":
				t := r.Text
				out = append(out, part{Text: &t, Thought: true, ThoughtSignature: r.Signature})
			case r.Signature == "":
				// Nothing Gemini can take.
			case len(out) > 0 && out[len(out)-1].Text != nil && !out[len(out)-1].Thought && out[len(out)-1].ThoughtSignature == "":
				out[len(out)-1].ThoughtSignature = r.Signature
			default:
				out = append(out, part{Text: new(string), ThoughtSignature: r.Signature})
			}
		case llm.PartToolCall:
			tc := p.ToolCall
			if tc == nil {
				return nil, errors.New("tool call part without a call")
			}
			out = append(out, part{
				FunctionCall:     &functionCall{ID: wireID(tc.ID), Name: tc.Name, Args: tc.Arguments.Object()},
				ThoughtSignature: tc.Signature,
			})
		default:
			return nil, unsupported(string(p.Kind) + " parts in assistant messages")
		}
	}
	return out, nil
}

// wireID returns the ID to send for a call: its ID unless the decoder
// made it up.
func wireID(id string) string {
	if strings.HasPrefix(id, generatedIDPrefix) {
		return ""
	}
	return id
}

// resultParts renders the results of a tool message as functionResponse
// parts, in order: {"output": text}, or {"error": text} for a failed call.
// Images and documents of the results follow all of them, each result's
// after a text part naming its call: function responses take no media on
// most models.
func resultParts(parts []llm.Part, call func(id string) *llm.ToolCall) ([]part, error) {
	out := make([]part, 0, len(parts))
	var media []part
	for _, p := range parts {
		if p.Kind != llm.PartToolResult {
			return nil, fmt.Errorf("%s part in a tool message; tool messages hold tool results only", p.Kind)
		}
		r := p.ToolResult
		if r == nil {
			return nil, errors.New("tool result part without a result")
		}
		name := r.Name
		if name == "" {
			if c := call(r.CallID); c != nil {
				name = c.Name
			}
		}
		if name == "" {
			return nil, fmt.Errorf("tool result for call %q names no tool and answers no call of the conversation", r.CallID)
		}
		var text strings.Builder
		var mine []part
		for _, c := range r.Content {
			switch c.Kind {
			case llm.PartText:
				text.WriteString(c.Text)
			case llm.PartImage, llm.PartDocument:
				mp, err := mediaPart(c)
				if err != nil {
					return nil, err
				}
				mine = append(mine, mp)
			default:
				return nil, unsupported(string(c.Kind) + " parts in tool results")
			}
		}
		key := "output"
		if r.IsError {
			key = "error"
		}
		s := text.String()
		if len(mine) > 0 {
			s += fmt.Sprintf("\n[%d attachment(s) of this result follow the function responses]", len(mine))
			media = append(media, textPart("Attached by tool call "+r.CallID+" ("+name+"):"))
			media = append(media, mine...)
		}
		out = append(out, part{FunctionResponse: &functionResponse{ID: wireID(r.CallID), Name: name, Response: map[string]string{key: s}}})
	}
	return append(out, media...), nil
}
