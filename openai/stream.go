package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/hrns-dev/hrns/internal/httpapi"
	"github.com/hrns-dev/hrns/internal/sse"
	"github.com/hrns-dev/hrns/llm"
)

// chunkWire is one streamed chat.completion.chunk, or a whole
// chat.completion when a server does not stream. It is reused from event to
// event: the fields that repeat on every chunk are raw so that decoding them
// reuses their buffers.
type chunkWire struct {
	ID      json.RawMessage `json:"id"`
	Model   json.RawMessage `json:"model"`
	Object  json.RawMessage `json:"object"`
	Choices []choiceWire    `json:"choices"`
	Usage   *usageWire      `json:"usage"`
	Error   *errorWire      `json:"error"`

	// Message, Type and Code hold an error sent as a top-level object with
	// "object": "error", as some vLLM versions do.
	Message string     `json:"message"`
	Type    string     `json:"type"`
	Code    flexString `json:"code"`
}

// reset clears w for the next event, keeping its buffers.
func (w *chunkWire) reset() {
	// encoding/json decodes into reused slice elements without zeroing
	// them, so every element up to the capacity is cleared.
	choices := w.Choices[:cap(w.Choices)]
	for i := range choices {
		calls := choices[i].Delta.ToolCalls[:cap(choices[i].Delta.ToolCalls)]
		clear(calls)
		choices[i] = choiceWire{Delta: deltaWire{ToolCalls: calls[:0]}}
	}
	*w = chunkWire{ID: w.ID[:0], Model: w.Model[:0], Object: w.Object[:0], Choices: choices[:0]}
}

type choiceWire struct {
	Index int       `json:"index"`
	Delta deltaWire `json:"delta"`
	// Message replaces Delta in a non-streamed completion.
	Message      *deltaWire `json:"message"`
	FinishReason string     `json:"finish_reason"`
}

type deltaWire struct {
	Content string `json:"content"`
	Refusal string `json:"refusal"`
	// Reasoning is where OpenRouter, Ollama and newer vLLM put reasoning;
	// ReasoningContent is where DeepSeek and older vLLM do.
	Reasoning        string          `json:"reasoning"`
	ReasoningContent string          `json:"reasoning_content"`
	ToolCalls        []toolCallDelta `json:"tool_calls"`
}

// toolCallDelta is one fragment of a streamed tool call.
type toolCallDelta struct {
	Index    optInt            `json:"index"`
	ID       string            `json:"id"`
	Function functionCallDelta `json:"function"`
}

type functionCallDelta struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// usageWire is the usage object. Counts in the details objects and
// DeepSeek's prompt_cache_hit_tokens are parts of the top-level counts.
type usageWire struct {
	PromptTokens         int64 `json:"prompt_tokens"`
	CompletionTokens     int64 `json:"completion_tokens"`
	PromptCacheHitTokens int64 `json:"prompt_cache_hit_tokens"`
	PromptTokensDetails  struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func (u *usageWire) usage() llm.Usage {
	cached := u.PromptTokensDetails.CachedTokens
	if cached == 0 {
		cached = u.PromptCacheHitTokens
	}
	return llm.Usage{
		InputTokens:     u.PromptTokens,
		OutputTokens:    u.CompletionTokens,
		CacheReadTokens: cached,
		ReasoningTokens: u.CompletionTokensDetails.ReasoningTokens,
	}
}

// optInt is a JSON integer that may be absent or null.
type optInt struct {
	v  int
	ok bool
}

// UnmarshalJSON reads a small integer or null.
func (o *optInt) UnmarshalJSON(b []byte) error {
	*o = optInt{}
	if string(b) == "null" {
		return nil
	}
	s, neg := b, false
	if len(s) > 0 && s[0] == '-' {
		s, neg = s[1:], true
	}
	if len(s) == 0 || len(s) > 9 {
		return fmt.Errorf("tool call index %.20s out of range", b)
	}
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			return fmt.Errorf("tool call index %.20s is not an integer", b)
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		n = -n
	}
	*o = optInt{v: n, ok: true}
	return nil
}

// flexString is a JSON string that some servers send as a number.
type flexString string

// UnmarshalJSON reads a string, or keeps any other scalar's literal text.
func (f *flexString) UnmarshalJSON(b []byte) error {
	switch {
	case string(b) == "null":
		*f = ""
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*f = flexString(s)
	default:
		*f = flexString(b)
	}
	return nil
}

// rawString returns the string held by a raw JSON value, or "" if it holds
// none.
func rawString(b json.RawMessage) string {
	if len(b) < 2 || b[0] != '"' {
		return ""
	}
	if bytes.IndexByte(b, '\\') < 0 {
		return string(b[1 : len(b)-1])
	}
	var s string
	if json.Unmarshal(b, &s) != nil {
		return ""
	}
	return s
}

// doneData is the data of the event that ends an OpenAI stream.
var doneData = []byte("[DONE]")

// decoder turns an event stream, or a non-streamed JSON answer, into chunks.
type decoder struct {
	sse  sse.Reader
	body io.Reader
	// jsonBody is set when the server answered with one JSON completion.
	jsonBody  bool
	requestID string

	wire chunkWire
	acc  accumulator
	dec  sse.JSONDecoder // decodes the data of events
	scan scanner         // decodes the data of plain chunks (scan.go)
	// noScan turns the scanner off, for tests comparing the two paths.
	noScan bool
	// decDirty is set when dec holds something of an earlier event other
	// than white space, which changes how it decodes the next: every
	// event then goes to dec, as it would without the scanner.
	decDirty bool

	id, model    string
	text         strings.Builder
	reasoning    strings.Builder
	finishReason string
	sawFinish    bool
	usage        llm.Usage

	out  []llm.Chunk
	done bool
}

// init makes d read the body of a response.
func (d *decoder) init(body io.Reader, jsonBody bool) {
	*d = decoder{body: body, jsonBody: jsonBody, out: d.out[:0], sse: d.sse, wire: d.wire, scan: d.scan, noScan: d.noScan}
	if !jsonBody {
		d.sse.Init(body)
	}
}

// next returns the chunks of the next event that has any. The last batch
// ends with the ChunkDone chunk; after it next returns io.EOF. The slice is
// valid until the following call.
func (d *decoder) next() ([]llm.Chunk, error) {
	if d.done {
		return nil, io.EOF
	}
	d.out = d.out[:0]
	if d.jsonBody {
		return d.decodeJSONBody()
	}
	for len(d.out) == 0 {
		_, data, err := d.sse.Next()
		switch {
		case err == io.EOF:
			if !d.sawFinish {
				return nil, fmt.Errorf("openai: stream ended before the response was complete: %w", io.ErrUnexpectedEOF)
			}
			return d.finish(), nil
		case err != nil:
			return nil, fmt.Errorf("openai: reading stream: %w", err)
		}
		if bytes.Equal(bytes.TrimSpace(data), doneData) {
			return d.finish(), nil
		}
		if len(bytes.TrimSpace(data)) == 0 {
			continue
		}
		if err := d.handle(data); err != nil {
			return nil, err
		}
	}
	return d.out, nil
}

// decodeJSONBody reads a whole non-streamed answer.
func (d *decoder) decodeJSONBody() ([]llm.Chunk, error) {
	data, err := io.ReadAll(io.LimitReader(d.body, httpapi.MaxBody+1))
	if err != nil {
		return nil, fmt.Errorf("openai: reading response: %w", err)
	}
	if len(data) > httpapi.MaxBody {
		return nil, fmt.Errorf("openai: response larger than %d bytes", httpapi.MaxBody)
	}
	if err := d.handle(data); err != nil {
		return nil, err
	}
	return d.finish(), nil
}

// handle decodes the data of one event and appends its chunks to d.out.
func (d *decoder) handle(data []byte) error {
	w := &d.wire
	w.reset()
	if err := d.decodeEvent(data, w); err != nil {
		if d.sse.Unterminated() {
			return fmt.Errorf("openai: stream ended inside an event: %w", io.ErrUnexpectedEOF)
		}
		return fmt.Errorf("openai: decoding stream event %.200q: %w", data, err)
	}
	return d.apply(w)
}

// decodeEvent decodes data, which must hold exactly one JSON value, into w,
// which reset has cleared. The scanner decodes the plain chunks; what it
// gives up on, encoding/json decodes, with the same result.
func (d *decoder) decodeEvent(data []byte, w *chunkWire) error {
	if d.jsonBody {
		return json.Unmarshal(data, w)
	}
	if !d.noScan && !d.decDirty {
		if d.scan.chunk(data, w) {
			return nil
		}
		w.reset()
	}
	if err := d.dec.Decode(data, w); err != nil {
		return err
	}
	d.decDirty = !d.dec.Clean()
	return nil
}

// apply appends the chunks of a decoded event to d.out.
func (d *decoder) apply(w *chunkWire) error {
	if w.Error != nil {
		return d.streamError(w.Error)
	}
	if string(w.Object) == `"error"` {
		return d.streamError(&errorWire{Message: w.Message, Type: w.Type, Code: string(w.Code)})
	}
	if d.id == "" && len(w.ID) > 0 {
		d.id = rawString(w.ID)
	}
	if d.model == "" && len(w.Model) > 0 {
		d.model = rawString(w.Model)
	}
	if w.Usage != nil {
		d.usage = w.Usage.usage()
	}
	for i := range w.Choices {
		// Only one choice is ever asked for; ignore others defensively.
		if ch := &w.Choices[i]; ch.Index == 0 {
			d.applyChoice(ch)
		}
	}
	return nil
}

// applyChoice appends the chunks of one choice's delta.
func (d *decoder) applyChoice(ch *choiceWire) {
	delta := &ch.Delta
	if ch.Message != nil {
		delta = ch.Message
	}
	// Some servers send the same text in both fields; take one.
	r := delta.ReasoningContent
	if r == "" {
		r = delta.Reasoning
	}
	if r != "" {
		d.reasoning.WriteString(r)
		d.out = append(d.out, llm.Chunk{Kind: llm.ChunkReasoning, Text: r})
	}
	for _, t := range [...]string{delta.Content, delta.Refusal} {
		if t != "" {
			d.text.WriteString(t)
			d.out = append(d.out, llm.Chunk{Kind: llm.ChunkText, Text: t})
		}
	}
	for i := range delta.ToolCalls {
		d.out = d.acc.add(&delta.ToolCalls[i], d.out)
	}
	if ch.FinishReason != "" {
		d.finishReason = ch.FinishReason
		d.sawFinish = true
	}
}

// streamError converts an error object sent inside the stream.
func (d *decoder) streamError(e *errorWire) error {
	apiErr := e.apiError(0)
	apiErr.RequestID = d.requestID
	return apiErr
}

// finish appends the ChunkDone chunk with the assembled response to d.out
// and returns the final batch.
func (d *decoder) finish() []llm.Chunk {
	d.done = true
	calls := d.acc.calls()
	var parts []llm.Part
	if n := len(calls) + d.reasoning.Len() + d.text.Len(); n > 0 {
		parts = make([]llm.Part, 0, 2+len(calls))
	}
	if d.reasoning.Len() > 0 {
		parts = append(parts, llm.Part{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{Text: d.reasoning.String()}})
	}
	if d.text.Len() > 0 {
		parts = append(parts, llm.TextPart(d.text.String()))
	}
	for _, c := range calls {
		parts = append(parts, llm.Part{Kind: llm.PartToolCall, ToolCall: c})
	}
	resp := &llm.Response{
		ID:           d.id,
		Model:        d.model,
		Message:      llm.Message{Role: llm.RoleAssistant, Parts: parts},
		Usage:        d.usage,
		FinishReason: normalizeFinish(d.finishReason, len(calls) > 0),
	}
	d.out = append(d.out, llm.Chunk{Kind: llm.ChunkDone, Response: resp})
	return d.out
}

// normalizeFinish maps a finish_reason to an [llm.FinishReason]. A response
// with tool calls that the server says merely stopped (Gemini does this) is
// reported as tool_calls. A missing reason on a stream that completed with
// [DONE] is a normal stop.
func normalizeFinish(reason string, hasCalls bool) llm.FinishReason {
	var r llm.FinishReason
	switch reason {
	case "stop", "":
		r = llm.FinishStop
	case "tool_calls", "function_call":
		r = llm.FinishToolCalls
	case "length":
		r = llm.FinishLength
	case "content_filter":
		r = llm.FinishContentFilter
	default:
		r = llm.FinishOther
	}
	if hasCalls && r == llm.FinishStop {
		r = llm.FinishToolCalls
	}
	return r
}
