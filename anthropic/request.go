package anthropic

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hrns-dev/hrns/internal/prefixcache"
	"github.com/hrns-dev/hrns/llm"
)

// messagesRequest is the body of POST /v1/messages. Fields are in the order
// they appear on the wire.
type messagesRequest struct {
	Model         string        `json:"model"`
	MaxTokens     int           `json:"max_tokens"`
	System        []block       `json:"system,omitempty"`
	Messages      []wireMessage `json:"messages"`
	Tools         []wireTool    `json:"tools,omitempty"`
	ToolChoice    *toolChoice   `json:"tool_choice,omitempty"`
	Thinking      *thinkingWire `json:"thinking,omitempty"`
	OutputConfig  *outputConfig `json:"output_config,omitempty"`
	Temperature   *float64      `json:"temperature,omitempty"`
	TopP          *float64      `json:"top_p,omitempty"`
	StopSequences []string      `json:"stop_sequences,omitempty"`
	Stream        bool          `json:"stream"`

	// beta is the anthropic-beta flag the request needs (a computer
	// tool's), sent as a header.
	beta string
}

// wireMessage is one entry of "messages": a user or assistant turn.
type wireMessage struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

// block is a content block. Type says which of the other fields are set.
type block struct {
	Type string `json:"type"`
	// Text is the text of a text block.
	Text string `json:"text,omitempty"`
	// Source and Title describe an image or a document.
	Source *source `json:"source,omitempty"`
	Title  string  `json:"title,omitempty"`
	// ID, Name and Input describe a tool_use block.
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// ToolUseID, Content and IsError describe a tool_result block.
	ToolUseID string  `json:"tool_use_id,omitempty"`
	Content   []block `json:"content,omitempty"`
	IsError   bool    `json:"is_error,omitempty"`
	// Thinking and Signature describe a thinking block; thinking is sent
	// even when empty (display "omitted").
	Thinking  *string `json:"thinking,omitempty"`
	Signature string  `json:"signature,omitempty"`
	// Data is the encrypted content of a redacted_thinking block.
	Data string `json:"data,omitempty"`

	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

// source is where an image or a document comes from: inline base64 bytes,
// a URL, or inline plain text.
type source struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// cacheControl is a prompt-caching breakpoint.
type cacheControl struct {
	Type string `json:"type"`
	TTL  string `json:"ttl,omitempty"`
}

// wireTool is one entry of "tools".
type wireTool struct {
	// Type is set for Anthropic's own tools (computer_20250124): they
	// have a size, not a schema or a description.
	Type            string          `json:"type,omitempty"`
	Name            string          `json:"name"`
	Description     string          `json:"description,omitempty"`
	InputSchema     json.RawMessage `json:"input_schema,omitempty"`
	DisplayWidthPx  int             `json:"display_width_px,omitempty"`
	DisplayHeightPx int             `json:"display_height_px,omitempty"`
	CacheControl    *cacheControl   `json:"cache_control,omitempty"`
}

type toolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

type thinkingWire struct {
	Type         ThinkingType `json:"type"`
	BudgetTokens int          `json:"budget_tokens,omitempty"`
	Display      string       `json:"display,omitempty"`
}

type outputConfig struct {
	Effort string      `json:"effort,omitempty"`
	Format *formatWire `json:"format,omitempty"`
}

// formatWire constrains the answer's text to JSON matching a schema
// (structured outputs).
type formatWire struct {
	Type   string          `json:"type"` // "json_schema"
	Schema json.RawMessage `json:"schema"`
}

// Block types.
const (
	typeText             = "text"
	typeImage            = "image"
	typeDocument         = "document"
	typeToolUse          = "tool_use"
	typeToolResult       = "tool_result"
	typeThinking         = "thinking"
	typeRedactedThinking = "redacted_thinking"
)

// emptySchema is sent for a tool without an input schema.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// marshalRequest renders req as the JSON body of a streaming request.
func (c *Client) marshalRequest(req *llm.Request) ([]byte, error) {
	pieces, _, err := c.encodeRequest(req)
	if err != nil {
		return nil, err
	}
	return prefixcache.Join(pieces), nil
}

// encodeRequest renders req as the JSON body of a streaming request, in
// pieces to send one after the other, with the anthropic-beta flag it needs
// ("" for none). Without a conversation (see [llm.Request.Conversation])
// the body is one piece. With one, the turns the conversation's earlier
// requests encoded are reused from its [prefixcache.Cache] (pieces that are
// never written again) and only the messages since, and the last turns
// (see [turnEncoder]), are encoded; the bytes are the same either way.
func (c *Client) encodeRequest(req *llm.Request) ([][]byte, string, error) {
	return c.encodeRequestWith(req, nil)
}

// encodeRequestWith is encodeRequest, which sets *enc, when enc is not nil,
// to the [turnEncoder] of the request's conversation (for tests).
func (c *Client) encodeRequestWith(req *llm.Request, enc **turnEncoder) ([][]byte, string, error) {
	var cache *prefixcache.Cache
	if req != nil {
		cache = prefixcache.For(req.Conversation, prefixKey{})
	}
	var prefix [][]byte
	var rest []byte
	var keep *toolsKeep
	if cache != nil && len(req.Tools) > 0 && len(req.Extra) == 0 {
		// The same tools as the conversation's last request (the loop
		// sends the same every turn) were rendered and checked then:
		// they are neither rendered nor checked again.
		keep = &toolsKeep{tc: prefixcache.ToolsOf(req.Conversation, toolsKey{})}
	}
	w, err := c.buildRequest(req, keep, func(msgs []llm.Message, cc *cacheControl) ([]block, []wireMessage, error) {
		if cache == nil {
			return renderConversation(msgs)
		}
		e, err := newTurnEncoder(msgs, cc, cache)
		if err != nil {
			return nil, nil, err
		}
		if enc != nil {
			*enc = e
		}
		prefix, rest, err = cache.Encode(msgs, e)
		return e.system, []wireMessage{}, err
	})
	if err != nil {
		return nil, "", err
	}
	var tools []byte // the "tools" field, from the conversation
	if keep != nil {
		tools = keep.field
		if tools == nil && len(w.Tools) > 0 {
			if tools, err = keep.tc.Encode(providerName, req.Tools, keep.extra, w.Tools); err != nil {
				return nil, "", err
			}
		}
		if tools != nil {
			w.Tools = placeholderTools // replaced below by the kept field
		}
	}
	pieces, err := prefixcache.Body("anthropic", w, cache, `"messages":[]`, prefix, rest, req.Extra)
	if err != nil || tools == nil {
		return pieces, w.beta, err
	}
	// Without extra fields the last piece is the body from the list's
	// closing bracket on, which the tools field follows: the placeholder
	// is where it goes.
	tail := pieces[len(pieces)-1]
	if !bytes.HasPrefix(tail, []byte("]")) || !bytes.HasPrefix(tail[1:], placeholderField) {
		return nil, "", errors.New("anthropic: encoding request: no tools field") // cannot happen
	}
	out := make([][]byte, 0, len(pieces)+2)
	out = append(out, pieces[:len(pieces)-1]...)
	return append(out, tail[:1], tools, tail[1+len(placeholderField):]), w.beta, nil
}

// toolsKey is the key of a conversation's [prefixcache.Tools] in its
// [llm.Conversation].
type toolsKey struct{}

// toolsKeep is a conversation's kept "tools" field for buildRequest: it
// sets extra, what the field is rendered from besides the specs (the
// model, which picks a computer tool's version, and the tools'
// breakpoint), and field, the kept field when the request's tools render
// as it, in which case it renders none.
type toolsKeep struct {
	tc    *prefixcache.Tools
	extra string
	field []byte
}

// toolsExtra is what a tools field is rendered from besides the specs:
// the model and the tools' breakpoint, if any.
func toolsExtra(model string, p CachePolicy) string {
	if !p.Tools {
		return "-" + model
	}
	return strconv.Itoa(len(p.TTL)) + ":" + p.TTL + model
}

// placeholderTools holds the place of kept tools in a request's wire form,
// encoded as placeholderField, which rendered tools never are (a tool
// with a control character for its name, and nothing else).
var (
	placeholderTools = []wireTool{{Name: "\x00"}}
	placeholderField = []byte(`,"tools":[{"name":"\u0000"}]`)
)

// computerBeta returns the anthropic-beta flag of tools for model, as
// [renderTools] does, without rendering them.
func computerBeta(tools []llm.ToolSpec, model string) string {
	for i := range tools {
		if tools[i].Computer != nil && tools[i].Name == "computer" {
			_, beta := ComputerTool(model)
			return beta
		}
	}
	return ""
}

// buildRequest translates req into its wire form; conversation renders its
// messages as the system blocks and the turns, the turns' breakpoint being
// cc (nil for none).
//
// keep, if not nil, is the conversation's kept tools field: when the
// request's tools render as it, they are not rendered (w.Tools stays nil)
// and keep.field is set; the tool choice that goes with tools is.
func (c *Client) buildRequest(req *llm.Request, keep *toolsKeep, conversation func(msgs []llm.Message, cc *cacheControl) ([]block, []wireMessage, error)) (*messagesRequest, error) {
	if req == nil {
		return nil, errNilRequest
	}
	w := &messagesRequest{
		Model:         req.Model,
		Temperature:   req.Temperature,
		TopP:          req.TopP,
		StopSequences: req.StopSequences,
		Stream:        true,
	}
	thinking, effort := c.Thinking, c.Effort
	if r := req.Reasoning; r != nil {
		// The request's reasoning wins over the client's.
		if r.BudgetTokens > 0 {
			thinking = &Thinking{Type: ThinkingEnabled, BudgetTokens: r.BudgetTokens}
			if c.Thinking != nil {
				thinking.Display = c.Thinking.Display
			}
		}
		switch r.Effort {
		case "":
		case "none":
			// No thinking: the model answers at once.
			thinking, effort = &Thinking{Type: ThinkingDisabled}, ""
		default:
			effort = r.Effort
		}
	}
	if w.Model == "" {
		w.Model = c.Model
	}
	if w.Model == "" {
		return nil, errors.New("anthropic: no model: set Request.Model or Client.Model")
	}
	var err error
	if w.MaxTokens, err = c.maxTokens(req.MaxTokens, thinking); err != nil {
		return nil, err
	}
	policy := DefaultCache
	if c.Cache != nil {
		policy = *c.Cache
	}
	if h := req.Cache; h != nil {
		switch {
		case h.Off:
			policy = CachePolicy{}
		case h.Long:
			policy.TTL = "1h"
		}
	}
	var cc *cacheControl
	if policy.Conversation {
		cc = policy.breakpoint()
	}
	if w.System, w.Messages, err = conversation(req.Messages, cc); err != nil {
		return nil, err
	}
	if keep != nil {
		keep.extra = toolsExtra(w.Model, policy)
		keep.field = keep.tc.Kept(req.Tools, keep.extra)
	}
	kept := keep != nil && keep.field != nil
	if kept {
		w.beta = computerBeta(req.Tools, w.Model)
	} else if w.Tools, w.beta, err = renderTools(req.Tools, w.Model); err != nil {
		return nil, err
	}
	// The API rejects tool_choice without tools.
	if kept || len(w.Tools) > 0 {
		if w.ToolChoice, err = renderToolChoice(req.ToolChoice, req.ParallelToolCalls); err != nil {
			return nil, err
		}
	}
	if th := thinking; th != nil {
		if th.Type == "" {
			return nil, errors.New("anthropic: Client.Thinking has no Type")
		}
		w.Thinking = &thinkingWire{Type: th.Type, BudgetTokens: th.BudgetTokens, Display: th.Display}
	}
	if effort != "" {
		w.OutputConfig = &outputConfig{Effort: effort}
	}
	if err := renderResponseFormat(w, req.ResponseFormat); err != nil {
		return nil, err
	}
	policy.mark(w)
	return w, nil
}

// renderResponseFormat renders a response format. A strict one uses the
// API's structured outputs (output_config.format), which constrain
// decoding and need a closed schema; any other is told to the model in the
// last system block, since the API would refuse it as a format.
func renderResponseFormat(w *messagesRequest, f *llm.ResponseFormat) error {
	if f == nil {
		return nil
	}
	if !json.Valid(f.Schema) {
		return errors.New("anthropic: response format: schema is not valid JSON")
	}
	if f.Strict {
		if w.OutputConfig == nil {
			w.OutputConfig = &outputConfig{}
		}
		w.OutputConfig.Format = &formatWire{Type: "json_schema", Schema: f.Schema}
		return nil
	}
	var schema bytes.Buffer
	if err := json.Compact(&schema, f.Schema); err != nil {
		return fmt.Errorf("anthropic: response format: %w", err)
	}
	text := "Give your final answer as a single JSON value, with no other text, matching this JSON Schema"
	if f.Name != "" {
		text += " (" + f.Name + ")"
	}
	if f.Description != "" {
		text += ": " + f.Description
	}
	text += "\n" + schema.String()
	w.System = append(w.System, block{Type: typeText, Text: text})
	return nil
}

// maxTokens returns the max_tokens of a request whose own cap is n and
// whose thinking is th.
func (c *Client) maxTokens(n int, th *Thinking) (int, error) {
	switch {
	case n < 0:
		return 0, fmt.Errorf("anthropic: negative MaxTokens %d", n)
	case n > 0:
		return n, nil
	case c.MaxTokens < 0:
		return 0, fmt.Errorf("anthropic: negative Client.MaxTokens %d", c.MaxTokens)
	case c.MaxTokens > 0:
		return c.MaxTokens, nil
	}
	// The default must leave room for the answer after a thinking budget,
	// which the API requires to be less than max_tokens.
	if th != nil && th.Type == ThinkingEnabled && th.BudgetTokens >= DefaultMaxTokens {
		return th.BudgetTokens + DefaultMaxTokens, nil
	}
	return DefaultMaxTokens, nil
}

// breakpoint returns the policy's cache breakpoint.
func (p CachePolicy) breakpoint() *cacheControl {
	return &cacheControl{Type: "ephemeral", TTL: p.TTL}
}

// mark puts the policy's cache breakpoints on w. The conversation's are
// put on its turns; a [turnEncoder] puts them on the turns it encodes.
func (p CachePolicy) mark(w *messagesRequest) {
	cc := p.breakpoint
	if p.Tools && len(w.Tools) > 0 {
		w.Tools[len(w.Tools)-1].CacheControl = cc()
	}
	if p.System && len(w.System) > 0 {
		w.System[len(w.System)-1].CacheControl = cc()
	}
	if !p.Conversation || len(w.Messages) == 0 {
		return
	}
	last := len(w.Messages) - 1
	markLastBlock(w.Messages[last].Content, cc())
	// The API looks for an earlier cache entry only about 20 blocks back
	// from a breakpoint. The previous request of an agent loop ended with
	// the last user turn before the model's last turn: a breakpoint there
	// reads what that request wrote, however many blocks the model's turn
	// and its tool results added since.
	for i := last - 1; i >= 0; i-- {
		if w.Messages[i].Role == "user" {
			markLastBlock(w.Messages[i].Content, cc())
			break
		}
	}
}

// markLastBlock puts cc on the last block of content that can carry it.
// Thinking blocks cannot; the block before one caches the same prefix.
func markLastBlock(content []block, cc *cacheControl) {
	for i := len(content) - 1; i >= 0; i-- {
		if t := content[i].Type; t != typeThinking && t != typeRedactedThinking {
			content[i].CacheControl = cc
			return
		}
	}
}

// renderTools renders tool specs in their given order. A computer tool
// ([llm.ToolSpec.Computer]) named computer is rendered as Anthropic's own,
// in the version the model takes, and beta is the anthropic-beta flag it
// needs.
func renderTools(tools []llm.ToolSpec, model string) (out []wireTool, beta string, err error) {
	if len(tools) == 0 {
		return nil, "", nil
	}
	out = make([]wireTool, len(tools))
	for i, t := range tools {
		if t.Name == "" {
			return nil, "", fmt.Errorf("anthropic: tool %d has no name", i)
		}
		if c := t.Computer; c != nil && t.Name == "computer" {
			if typ, b := ComputerTool(model); typ != "" {
				if c.Width <= 0 || c.Height <= 0 {
					return nil, "", fmt.Errorf("anthropic: computer tool with a display of %dx%d", c.Width, c.Height)
				}
				out[i] = wireTool{Type: typ, Name: t.Name, DisplayWidthPx: c.Width, DisplayHeightPx: c.Height}
				beta = b
				continue
			}
		}
		schema := t.InputSchema
		if len(bytes.TrimSpace(schema)) == 0 {
			schema = emptySchema
		} else if !json.Valid(schema) {
			return nil, "", fmt.Errorf("anthropic: tool %q: input schema is not valid JSON", t.Name)
		}
		out[i] = wireTool{Name: t.Name, Description: t.Description, InputSchema: schema}
	}
	return out, beta, nil
}

// ComputerTool returns the type of Anthropic's computer tool that model
// takes and the anthropic-beta flag that enables it, or "" for a model
// trained on none (Claude 3 Haiku, Opus and Sonnet, Claude 2), which gets
// the computer tool as a plain function tool: computer_20251124 for Claude
// Opus 4.5, computer_20241022 for Claude 3.5 Sonnet, computer_20250124 for
// the others (Claude 3.7 and the Claude 4 family, and models of other
// names, such as a proxy's).
func ComputerTool(model string) (typ, beta string) {
	m := strings.ToLower(model)
	switch {
	case strings.Contains(m, "opus-4-5") || strings.Contains(m, "opus-4.5"):
		return "computer_20251124", "computer-use-2025-11-24"
	case strings.Contains(m, "claude-3-5-sonnet") || strings.Contains(m, "claude-3.5-sonnet"):
		return "computer_20241022", "computer-use-2024-10-22"
	case strings.Contains(m, "claude-3-") && !strings.Contains(m, "claude-3-7"),
		strings.Contains(m, "claude-2"), strings.Contains(m, "claude-instant"):
		return "", ""
	}
	return "computer_20250124", "computer-use-2025-01-24"
}

// renderToolChoice renders a tool choice. Auto is the API's default and is
// sent only to disable parallel tool use.
func renderToolChoice(tc llm.ToolChoice, parallel *bool) (*toolChoice, error) {
	noParallel := parallel != nil && !*parallel
	var w toolChoice
	switch tc.Mode {
	case llm.ToolChoiceAuto:
		if !noParallel {
			return nil, nil
		}
		w.Type = "auto"
	case llm.ToolChoiceRequired:
		w.Type = "any"
	case llm.ToolChoiceTool:
		if tc.Name == "" {
			return nil, errors.New("anthropic: tool choice \"tool\" without a tool name")
		}
		w.Type, w.Name = "tool", tc.Name
	case llm.ToolChoiceNone:
		// No calls at all: parallelism is moot, and the API takes no flag.
		return &toolChoice{Type: "none"}, nil
	default:
		return nil, fmt.Errorf("anthropic: unknown tool choice mode %q", tc.Mode)
	}
	w.DisableParallelToolUse = noParallel
	return &w, nil
}

// renderConversation splits msgs into the system prompt and the user and
// assistant turns. Tool messages become user turns, and consecutive turns of
// the same role are merged, since the API wants them to alternate.
func renderConversation(msgs []llm.Message) ([]block, []wireMessage, error) {
	var system []block
	out := make([]wireMessage, 0, len(msgs))
	for i := range msgs {
		r := renderMessage(i, &msgs[i])
		if r.err != nil {
			return nil, nil, r.err
		}
		if r.system != "" {
			system = append(system, block{Type: typeText, Text: r.system})
		}
		if len(r.blocks) == 0 {
			continue // the API rejects empty turns; an empty message says nothing
		}
		if n := len(out); n > 0 && out[n-1].Role == r.role {
			out[n-1].Content = append(out[n-1].Content, r.blocks...)
		} else {
			out = append(out, wireMessage{Role: r.role, Content: r.blocks})
		}
	}
	for i := range out {
		orderBlocks(&out[i])
	}
	return system, out, nil
}

// rendered is what one message of a conversation renders to: the blocks of
// a user or assistant turn, which merges with the turns of the same role
// next to it, or the text of a system message; or the error that makes the
// conversation fail.
type rendered struct {
	role   string // "user" or "assistant", "" for a system message
	blocks []block
	system string // a system message's text, "" for none
	err    error
}

// renderMessage renders m, the message of index i of a conversation. It
// depends on m alone.
func renderMessage(i int, m *llm.Message) rendered {
	var r rendered
	switch m.Role {
	case llm.RoleSystem:
		r.system, r.err = systemText(m.Parts)
	case llm.RoleUser:
		r.role = "user"
		r.blocks, r.err = userBlocks(m.Parts)
	case llm.RoleAssistant:
		r.role = "assistant"
		r.blocks, r.err = assistantBlocks(m.Parts)
	case llm.RoleTool:
		r.role = "user"
		r.blocks, r.err = toolBlocks(m.Parts)
	default:
		r.err = fmt.Errorf("unknown role %q", m.Role)
	}
	if r.err != nil {
		return rendered{err: fmt.Errorf("anthropic: message %d (%s): %w", i, m.Role, r.err)}
	}
	return r
}

// orderBlocks puts the blocks of a turn in the order the API requires: in a
// user turn, tool results before anything else; in an assistant turn that
// holds thinking, thinking first. Blocks keep their order otherwise, so a
// turn already in order, as the API returned it, is sent back unchanged.
func orderBlocks(m *wireMessage) {
	first := func(b block) bool { return b.Type == typeToolResult }
	if m.Role == "assistant" {
		first = func(b block) bool { return b.Type == typeThinking || b.Type == typeRedactedThinking }
	}
	if first(m.Content[0]) || !slices.ContainsFunc(m.Content, first) {
		return
	}
	sorted := make([]block, 0, len(m.Content))
	for _, b := range m.Content {
		if first(b) {
			sorted = append(sorted, b)
		}
	}
	for _, b := range m.Content {
		if !first(b) {
			sorted = append(sorted, b)
		}
	}
	m.Content = sorted
}

// unsupported returns an error wrapping llm.ErrUnsupported for content the
// Messages API cannot take. what is plural, such as "audio/wav images".
func unsupported(what string) error {
	return fmt.Errorf("%s are not supported by the Anthropic Messages API: %w", what, llm.ErrUnsupported)
}

// systemText joins the text parts of a system message, which may hold
// nothing else.
func systemText(parts []llm.Part) (string, error) {
	for _, p := range parts {
		if p.Kind != llm.PartText {
			return "", unsupported(string(p.Kind) + " parts in system messages")
		}
	}
	return llm.Message{Parts: parts}.Text(), nil
}

// userBlocks renders a user message: text, images, documents, and tool
// results (which the API carries in user turns).
func userBlocks(parts []llm.Part) ([]block, error) {
	out := make([]block, 0, len(parts))
	for _, p := range parts {
		if p.Kind == llm.PartToolResult {
			b, err := toolResultBlock(p.ToolResult)
			if err != nil {
				return nil, err
			}
			out = append(out, b)
			continue
		}
		b, ok, err := contentBlock(p, "user messages")
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, b)
		}
	}
	return out, nil
}

// contentBlock renders a text, image or document part; where names the
// context for errors. It reports false for an empty text part, which the
// API would reject and which says nothing.
func contentBlock(p llm.Part, where string) (block, bool, error) {
	switch p.Kind {
	case llm.PartText:
		return block{Type: typeText, Text: p.Text}, p.Text != "", nil
	case llm.PartImage:
		b, err := imageBlock(p.Media)
		return b, err == nil, err
	case llm.PartDocument:
		b, err := documentBlock(p.Media)
		return b, err == nil, err
	}
	return block{}, false, unsupported(string(p.Kind) + " parts in " + where)
}

// imageTypes are the image media types the API takes, by the names callers
// may give them.
var imageTypes = map[string]string{
	"image/jpeg": "image/jpeg",
	"image/jpg":  "image/jpeg",
	"image/png":  "image/png",
	"image/gif":  "image/gif",
	"image/webp": "image/webp",
}

// mediaType returns the bare, lower-case media type of m, sniffed from its
// bytes when it has none.
func mediaType(m *llm.Media) string {
	mt := m.MIMEType
	if mt == "" && len(m.Data) > 0 {
		mt = http.DetectContentType(m.Data)
	}
	mt, _, _ = strings.Cut(mt, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// imageBlock renders an image, inline or by URL.
func imageBlock(m *llm.Media) (block, error) {
	switch {
	case m == nil:
		return block{}, errors.New("image part without media")
	case len(m.Data) > 0:
		mt := mediaType(m)
		wire, ok := imageTypes[mt]
		if !ok {
			return block{}, unsupported(fmt.Sprintf("%q images", mt))
		}
		return block{Type: typeImage, Source: &source{Type: "base64", MediaType: wire, Data: base64.StdEncoding.EncodeToString(m.Data)}}, nil
	case m.URL != "":
		if mt := mediaType(m); mt != "" && imageTypes[mt] == "" {
			return block{}, unsupported(fmt.Sprintf("%q images", mt))
		}
		return block{Type: typeImage, Source: &source{Type: "url", URL: m.URL}}, nil
	}
	return block{}, errors.New("image part with neither data nor URL")
}

// documentBlock renders a document: a PDF inline or by URL, or plain text
// inline. The media's name becomes the document's title.
func documentBlock(m *llm.Media) (block, error) {
	if m == nil {
		return block{}, errors.New("document part without media")
	}
	b := block{Type: typeDocument, Title: m.Name}
	mt := mediaType(m)
	switch {
	case len(m.Data) == 0 && m.URL == "":
		return block{}, errors.New("document part with neither data nor URL")
	case len(m.Data) == 0 && (mt == "application/pdf" || mt == ""):
		b.Source = &source{Type: "url", URL: m.URL}
	case len(m.Data) == 0:
		return block{}, unsupported(fmt.Sprintf("%q documents by URL", mt))
	case mt == "application/pdf":
		b.Source = &source{Type: "base64", MediaType: mt, Data: base64.StdEncoding.EncodeToString(m.Data)}
	case strings.HasPrefix(mt, "text/"):
		// Plain-text documents are the API's only other inline kind;
		// any text format reads the same as plain text.
		if !utf8.Valid(m.Data) {
			return block{}, fmt.Errorf("%q document is not valid UTF-8", mt)
		}
		b.Source = &source{Type: "text", MediaType: "text/plain", Data: string(m.Data)}
	default:
		return block{}, unsupported(fmt.Sprintf("%q documents", mt))
	}
	return b, nil
}

// assistantBlocks renders an assistant message: thinking, text and tool
// calls, in the order given.
//
// Reasoning is sent back as a thinking block when it carries a signature,
// and as a redacted_thinking block when it is redacted. Reasoning with
// neither came from another provider: the API would reject it, and the
// model does not need it, so it is left out.
func assistantBlocks(parts []llm.Part) ([]block, error) {
	out := make([]block, 0, len(parts))
	for _, p := range parts {
		switch p.Kind {
		case llm.PartText:
			if p.Text != "" {
				out = append(out, block{Type: typeText, Text: p.Text})
			}
		case llm.PartReasoning:
			r := p.Reasoning
			switch {
			case r == nil:
				return nil, errors.New("reasoning part without reasoning")
			case r.Redacted != "":
				out = append(out, block{Type: typeRedactedThinking, Data: r.Redacted})
			case r.Signature != "":
				text := r.Text
				out = append(out, block{Type: typeThinking, Thinking: &text, Signature: r.Signature})
			}
		case llm.PartToolCall:
			tc := p.ToolCall
			if tc == nil {
				return nil, errors.New("tool call part without a call")
			}
			out = append(out, block{Type: typeToolUse, ID: tc.ID, Name: tc.Name, Input: tc.Arguments.Object()})
		default:
			return nil, unsupported(string(p.Kind) + " parts in assistant messages")
		}
	}
	return out, nil
}

// toolBlocks renders a tool message: one tool_result block per result.
func toolBlocks(parts []llm.Part) ([]block, error) {
	out := make([]block, 0, len(parts))
	for _, p := range parts {
		if p.Kind != llm.PartToolResult {
			return nil, fmt.Errorf("%s part in a tool message; tool messages hold tool results only", p.Kind)
		}
		b, err := toolResultBlock(p.ToolResult)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// toolResultBlock renders a tool result with its text, images and
// documents.
func toolResultBlock(r *llm.ToolResult) (block, error) {
	if r == nil {
		return block{}, errors.New("tool result part without a result")
	}
	b := block{Type: typeToolResult, ToolUseID: r.CallID, IsError: r.IsError}
	for _, p := range r.Content {
		c, ok, err := contentBlock(p, "tool results")
		if err != nil {
			return block{}, err
		}
		if ok {
			b.Content = append(b.Content, c)
		}
	}
	return b, nil
}
