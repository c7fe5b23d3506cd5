package anthropic

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/hrns-dev/hrns/internal/httpapi"
	"github.com/hrns-dev/hrns/internal/sse"
	"github.com/hrns-dev/hrns/llm"
)

// eventWire is one event of a Messages stream. It is reused from event to
// event: the type fields, which every event repeats, are raw so that
// decoding them reuses their buffers.
type eventWire struct {
	Type         json.RawMessage `json:"type"`
	Message      messageWire     `json:"message"`       // message_start
	Index        int             `json:"index"`         // content_block_*
	ContentBlock blockWire       `json:"content_block"` // content_block_start
	Delta        deltaWire       `json:"delta"`         // content_block_delta, message_delta
	Usage        usageWire       `json:"usage"`         // message_delta
	Error        *errorWire      `json:"error"`         // error
}

// reset clears w for the next event, keeping its buffers.
func (w *eventWire) reset() {
	*w = eventWire{
		Type:         w.Type[:0],
		ContentBlock: blockWire{Input: w.ContentBlock.Input[:0]},
		Delta:        deltaWire{Type: w.Delta.Type[:0]},
	}
}

// messageWire is a message object: the skeleton in message_start, or a
// whole answer when a server does not stream.
type messageWire struct {
	ID         string      `json:"id"`
	Type       string      `json:"type"`
	Model      string      `json:"model"`
	Content    []blockWire `json:"content"`
	StopReason string      `json:"stop_reason"`
	Usage      usageWire   `json:"usage"`
	Error      *errorWire  `json:"error"` // an error body answered with status 200
}

// blockWire is a content block of a response.
type blockWire struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`      // text
	ID        string          `json:"id"`        // tool_use
	Name      string          `json:"name"`      // tool_use
	Input     json.RawMessage `json:"input"`     // tool_use
	Thinking  string          `json:"thinking"`  // thinking
	Signature string          `json:"signature"` // thinking
	Data      string          `json:"data"`      // redacted_thinking
}

// deltaWire is the delta of a content_block_delta or message_delta event.
type deltaWire struct {
	Type        json.RawMessage `json:"type"`
	Text        string          `json:"text"`         // text_delta
	PartialJSON string          `json:"partial_json"` // input_json_delta
	Thinking    string          `json:"thinking"`     // thinking_delta
	Signature   string          `json:"signature"`    // signature_delta
	StopReason  string          `json:"stop_reason"`  // message_delta
}

// usageWire is a usage object. input_tokens counts only the input after the
// last cache breakpoint; the cached input is counted apart.
type usageWire struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// merge takes the counts of o over u's. Counts in a stream are cumulative,
// and message_delta may repeat the input counts of message_start or leave
// them out, so the larger value wins.
func (u *usageWire) merge(o *usageWire) {
	u.InputTokens = max(u.InputTokens, o.InputTokens)
	u.OutputTokens = max(u.OutputTokens, o.OutputTokens)
	u.CacheCreationInputTokens = max(u.CacheCreationInputTokens, o.CacheCreationInputTokens)
	u.CacheReadInputTokens = max(u.CacheReadInputTokens, o.CacheReadInputTokens)
}

// usage converts u. InputTokens is the whole prompt: the uncached input
// plus the input read from and written to the cache.
func (u *usageWire) usage() llm.Usage {
	return llm.Usage{
		InputTokens:      u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
		OutputTokens:     u.OutputTokens,
		CacheReadTokens:  u.CacheReadInputTokens,
		CacheWriteTokens: u.CacheCreationInputTokens,
	}
}

// blockState accumulates one content block of the response.
type blockState struct {
	index int    // the block's index in the API's numbering
	typ   string // the block type; "" for one this package does not keep
	// text holds the text of a text block, the thinking of a thinking
	// block, and the argument fragments of a tool_use block.
	text      strings.Builder
	signature string // thinking
	data      string // redacted_thinking
	id, name  string // tool_use
	call      int    // tool_use: the position among the response's calls
	// input is the input object given in content_block_start, used when
	// no input_json_delta follows.
	input    json.RawMessage
	sawDelta bool
	stopped  bool
}

// decoder turns a Messages event stream, or a non-streamed JSON message,
// into chunks.
type decoder struct {
	sse  sse.Reader
	body io.Reader
	// jsonBody is set when the server answered with one JSON message.
	jsonBody  bool
	requestID string

	wire eventWire
	dec  sse.JSONDecoder // decodes the data of events

	id, model string
	blocks    []*blockState // in the order they started
	// byIndex and callIDs find blocks by the API's index and tool calls by
	// id without a scan per event: a stream may hold any number of blocks.
	byIndex    map[int]*blockState
	callIDs    map[string]bool
	calls      int
	stopReason string
	sawStop    bool // a message_delta gave the stop reason
	usage      usageWire

	out  []llm.Chunk
	done bool
}

// init makes d read the body of a response.
func (d *decoder) init(body io.Reader, jsonBody bool) {
	clear(d.byIndex)
	clear(d.callIDs)
	*d = decoder{
		body: body, jsonBody: jsonBody, out: d.out[:0], sse: d.sse, wire: d.wire,
		byIndex: d.byIndex, callIDs: d.callIDs,
	}
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
	for len(d.out) == 0 && !d.done {
		event, data, err := d.sse.Next()
		switch {
		case err == io.EOF:
			if !d.sawStop {
				return nil, fmt.Errorf("anthropic: stream ended before the response was complete: %w", io.ErrUnexpectedEOF)
			}
			d.finish()
		case err != nil:
			return nil, fmt.Errorf("anthropic: reading stream: %w", err)
		case len(bytes.TrimSpace(data)) == 0:
		default:
			if err := d.handle(event, data); err != nil {
				return nil, err
			}
		}
	}
	return d.out, nil
}

// decodeJSONBody reads a whole non-streamed message.
func (d *decoder) decodeJSONBody() ([]llm.Chunk, error) {
	data, err := io.ReadAll(io.LimitReader(d.body, httpapi.MaxBody+1))
	if err != nil {
		return nil, fmt.Errorf("anthropic: reading response: %w", err)
	}
	if len(data) > httpapi.MaxBody {
		return nil, fmt.Errorf("anthropic: response larger than %d bytes", httpapi.MaxBody)
	}
	var m messageWire
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("anthropic: decoding response %.200q: %w", data, err)
	}
	if m.Error != nil {
		return nil, d.streamError(m.Error)
	}
	d.id, d.model = m.ID, m.Model
	d.usage.merge(&m.Usage)
	for i := range m.Content {
		if err := d.startBlock(i, &m.Content[i]); err != nil {
			return nil, err
		}
		if err := d.stopBlock(i); err != nil {
			return nil, err
		}
	}
	d.stopReason = m.StopReason
	d.finish()
	return d.out, nil
}

// handle decodes the data of one event and appends its chunks to d.out.
func (d *decoder) handle(event, data []byte) error {
	w := &d.wire
	w.reset()
	if err := d.decodeEvent(data, w); err != nil {
		if d.sse.Unterminated() {
			return fmt.Errorf("anthropic: stream ended inside an event: %w", io.ErrUnexpectedEOF)
		}
		return fmt.Errorf("anthropic: decoding stream event %.200q: %w", data, err)
	}
	typ := bareString(w.Type)
	if len(typ) == 0 {
		typ = event // the data of an event names its type; the event line does too
	}
	return d.apply(typ, w)
}

// decodeEvent decodes data, which must hold exactly one JSON value, into w.
func (d *decoder) decodeEvent(data []byte, w *eventWire) error {
	if err := d.dec.Decode(data, w); err != nil {
		// The decoder may hold part of this event: start afresh.
		d.dec.Reset()
		return err
	}
	return nil
}

// bareString returns the contents of a raw JSON string without escapes,
// or nil if raw holds anything else. Event and delta types never need
// unescaping, so this avoids allocating a string per event.
func bareString(raw json.RawMessage) []byte {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' || bytes.IndexByte(raw, '\\') >= 0 {
		return nil
	}
	return raw[1 : len(raw)-1]
}

// apply appends the chunks of a decoded event of type typ to d.out.
// Unknown events are ignored, as the API's versioning policy asks.
func (d *decoder) apply(typ []byte, w *eventWire) error {
	switch string(typ) {
	case "message_start":
		if d.id == "" {
			d.id = w.Message.ID
		}
		if d.model == "" {
			d.model = w.Message.Model
		}
		d.usage.merge(&w.Message.Usage)
	case "content_block_start":
		return d.startBlock(w.Index, &w.ContentBlock)
	case "content_block_delta":
		return d.applyDelta(w.Index, &w.Delta)
	case "content_block_stop":
		return d.stopBlock(w.Index)
	case "message_delta":
		if w.Delta.StopReason != "" {
			d.stopReason = w.Delta.StopReason
			d.sawStop = true
		}
		d.usage.merge(&w.Usage)
	case "message_stop":
		d.finish()
	case "error":
		e := w.Error
		if e == nil {
			e = &errorWire{Message: "error event without an error object"}
		}
		return d.streamError(e)
	}
	return nil
}

// block returns the block with the API index i, or nil. The index is the
// API's (or the model's) number: a map key only, never the size or index of
// a slice, so a negative or huge one costs nothing.
func (d *decoder) block(i int) *blockState {
	return d.byIndex[i]
}

// startBlock opens the block with index i.
func (d *decoder) startBlock(i int, cb *blockWire) error {
	if d.block(i) != nil {
		return fmt.Errorf("anthropic: content block %d started twice", i)
	}
	b := &blockState{index: i}
	d.blocks = append(d.blocks, b)
	if d.byIndex == nil {
		d.byIndex = make(map[int]*blockState)
		d.callIDs = make(map[string]bool)
	}
	d.byIndex[i] = b
	switch cb.Type {
	case typeText:
		b.typ = typeText
		d.appendText(b, cb.Text)
	case typeThinking:
		b.typ = typeThinking
		d.appendThinking(b, cb.Thinking)
		b.signature = cb.Signature
	case typeRedactedThinking:
		b.typ = typeRedactedThinking
		b.data = cb.Data
	case typeToolUse:
		b.typ = typeToolUse
		b.id, b.name, b.call = cb.ID, cb.Name, d.calls
		if b.id == "" || d.callIDs[b.id] {
			// The API always gives distinct ids; the results of the calls
			// are matched by them, so make sure.
			b.id = "call_" + strconv.Itoa(b.call)
			for d.callIDs[b.id] {
				b.id += "_"
			}
		}
		d.callIDs[b.id] = true
		d.calls++
		if in := bytes.TrimSpace(cb.Input); len(in) > 0 && !isEmptyObject(in) {
			b.input = append(json.RawMessage(nil), in...)
		}
		d.out = append(d.out, llm.Chunk{Kind: llm.ChunkToolCallStart, Index: b.call, ID: b.id, Name: b.name})
	default:
		// Server tool blocks and others this package does not keep.
	}
	return nil
}

// applyDelta applies a content_block_delta to the block with index i.
func (d *decoder) applyDelta(i int, delta *deltaWire) error {
	b := d.block(i)
	if b == nil {
		return fmt.Errorf("anthropic: delta for content block %d, which was not started", i)
	}
	if b.typ == "" {
		return nil
	}
	want := ""
	switch dt := string(bareString(delta.Type)); dt {
	case "text_delta":
		want = typeText
		if b.typ == want {
			d.appendText(b, delta.Text)
		}
	case "thinking_delta":
		want = typeThinking
		if b.typ == want {
			d.appendThinking(b, delta.Thinking)
		}
	case "signature_delta":
		want = typeThinking
		if b.typ == want {
			b.signature += delta.Signature
		}
	case "input_json_delta":
		want = typeToolUse
		if b.typ == want && delta.PartialJSON != "" {
			b.sawDelta = true
			b.text.WriteString(delta.PartialJSON)
			d.out = append(d.out, llm.Chunk{Kind: llm.ChunkToolCallDelta, Index: b.call, Text: delta.PartialJSON})
		}
	default:
		return nil // citations and other deltas this package does not keep
	}
	if b.typ != want {
		return fmt.Errorf("anthropic: %s for content block %d of type %s", bareString(delta.Type), i, b.typ)
	}
	return nil
}

// stopBlock closes the block with index i. A tool call whose input came
// whole in content_block_start, without deltas, gets it as one delta now,
// so that the deltas of every call add up to its arguments.
func (d *decoder) stopBlock(i int) error {
	b := d.block(i)
	if b == nil {
		return fmt.Errorf("anthropic: content block %d stopped, but was not started", i)
	}
	d.flushInput(b)
	b.stopped = true
	return nil
}

// flushInput emits the start input of a tool call that had no deltas.
func (d *decoder) flushInput(b *blockState) {
	if b.stopped || b.typ != typeToolUse || b.sawDelta || len(b.input) == 0 {
		return
	}
	b.sawDelta = true
	b.text.Write(b.input)
	d.out = append(d.out, llm.Chunk{Kind: llm.ChunkToolCallDelta, Index: b.call, Text: string(b.input)})
}

func (d *decoder) appendText(b *blockState, s string) {
	if s != "" {
		b.text.WriteString(s)
		d.out = append(d.out, llm.Chunk{Kind: llm.ChunkText, Text: s})
	}
}

func (d *decoder) appendThinking(b *blockState, s string) {
	if s != "" {
		b.text.WriteString(s)
		d.out = append(d.out, llm.Chunk{Kind: llm.ChunkReasoning, Text: s})
	}
}

// isEmptyObject reports whether raw is a JSON object without members.
func isEmptyObject(raw []byte) bool {
	if len(raw) < 2 || raw[0] != '{' || raw[len(raw)-1] != '}' {
		return false
	}
	return len(bytes.TrimSpace(raw[1:len(raw)-1])) == 0
}

// streamError converts an error sent inside the stream.
func (d *decoder) streamError(e *errorWire) error {
	apiErr := e.apiError(0)
	apiErr.RequestID = d.requestID
	return apiErr
}

// finish appends the ChunkDone chunk with the assembled response to d.out.
func (d *decoder) finish() {
	d.done = true
	blocks := slices.Clone(d.blocks)
	// Compare, not subtract: the indexes are the stream's, and may be far
	// apart enough to overflow.
	slices.SortStableFunc(blocks, func(a, b *blockState) int { return cmp.Compare(a.index, b.index) })
	var parts []llm.Part
	for _, b := range blocks {
		d.flushInput(b)
		switch b.typ {
		case typeText:
			if b.text.Len() > 0 {
				parts = append(parts, llm.TextPart(b.text.String()))
			}
		case typeThinking:
			if b.text.Len() > 0 || b.signature != "" {
				parts = append(parts, llm.Part{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{Text: b.text.String(), Signature: b.signature}})
			}
		case typeRedactedThinking:
			if b.data != "" {
				parts = append(parts, llm.Part{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{Redacted: b.data}})
			}
		case typeToolUse:
			args := []byte(b.text.String())
			if len(args) == 0 {
				args = []byte("{}")
			}
			parts = append(parts, llm.Part{Kind: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: b.id, Name: b.name, Arguments: args}})
		}
	}
	resp := &llm.Response{
		ID:           d.id,
		Model:        d.model,
		Message:      llm.Message{Role: llm.RoleAssistant, Parts: parts},
		Usage:        d.usage.usage(),
		FinishReason: normalizeFinish(d.stopReason, d.calls > 0),
	}
	d.out = append(d.out, llm.Chunk{Kind: llm.ChunkDone, Response: resp})
}

// normalizeFinish maps a stop_reason to an [llm.FinishReason]. A stream that
// ended without one is a normal stop, or a tool-call stop if it made calls.
func normalizeFinish(reason string, hasCalls bool) llm.FinishReason {
	switch reason {
	case "end_turn", "stop_sequence":
		return llm.FinishStop
	case "tool_use":
		return llm.FinishToolCalls
	case "max_tokens", "model_context_window_exceeded":
		return llm.FinishLength
	case "refusal":
		return llm.FinishContentFilter
	case "":
		if hasCalls {
			return llm.FinishToolCalls
		}
		return llm.FinishStop
	}
	return llm.FinishOther
}
