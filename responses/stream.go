package responses

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

// eventWire is one event of a Responses stream. Type says which fields are
// meaningful; the others are zero.
type eventWire struct {
	Type         json.RawMessage `json:"type"`
	Response     *responseWire   `json:"response"`      // response.created, .completed, .incomplete, .failed
	OutputIndex  int             `json:"output_index"`  // item events and deltas
	ItemID       string          `json:"item_id"`       // deltas
	Item         *itemWire       `json:"item"`          // response.output_item.added, .done
	Delta        string          `json:"delta"`         // *.delta
	Arguments    *string         `json:"arguments"`     // response.function_call_arguments.done
	SummaryIndex int             `json:"summary_index"` // response.reasoning_summary_text.delta
	ContentIndex int             `json:"content_index"` // response.reasoning_text.delta

	// An error event has its code and message at the top level; some
	// servers nest them in an error object.
	Code    flexString `json:"code"`
	Message flexString `json:"message"`
	Error   *errorWire `json:"error"`
}

// reset clears w for the next event, keeping the buffer of its type.
func (w *eventWire) reset() {
	*w = eventWire{Type: w.Type[:0]}
}

// responseWire is a response object: in the lifecycle events, or a whole
// answer when a server does not stream.
type responseWire struct {
	ID                string     `json:"id"`
	Model             string     `json:"model"`
	Status            string     `json:"status"`
	Output            []itemWire `json:"output"`
	Usage             *usageWire `json:"usage"`
	Error             *errorWire `json:"error"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
}

// itemWire is an output item: a message, a function call, a reasoning item,
// or one of the built-in tools' items, which this package does not keep.
type itemWire struct {
	Type             string        `json:"type"`
	ID               string        `json:"id"`
	CallID           string        `json:"call_id"`   // function_call
	Name             string        `json:"name"`      // function_call
	Arguments        string        `json:"arguments"` // function_call
	Content          []contentWire `json:"content"`   // message; reasoning (reasoning_text)
	Summary          []contentWire `json:"summary"`   // reasoning
	EncryptedContent string        `json:"encrypted_content"`
	// computer_call
	Action              json.RawMessage `json:"action"`
	Actions             json.RawMessage `json:"actions"`
	PendingSafetyChecks json.RawMessage `json:"pending_safety_checks"`
}

// contentWire is a part of a message's content (output_text, refusal) or of
// a reasoning item's summary (summary_text) or content (reasoning_text).
type contentWire struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	Refusal string `json:"refusal"`
}

// usageWire is the usage of a response. The details count parts of the
// totals: input_tokens includes the cached tokens, output_tokens the
// reasoning tokens.
type usageWire struct {
	InputTokens        int64 `json:"input_tokens"`
	OutputTokens       int64 `json:"output_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

func (u *usageWire) usage() llm.Usage {
	return llm.Usage{
		InputTokens:     u.InputTokens,
		OutputTokens:    u.OutputTokens,
		CacheReadTokens: u.InputTokensDetails.CachedTokens,
		ReasoningTokens: u.OutputTokensDetails.ReasoningTokens,
	}
}

// The output item types this package keeps.
const (
	typeMessage      = "message"
	typeFunctionCall = "function_call"
	typeReasoning    = "reasoning"
	typeComputerCall = "computer_call"
)

// computerToolName is the name a computer_call is a call of: the computer
// tool's (the desktop package names it so).
const computerToolName = "computer"

// reasoningSeparator joins the parts of a reasoning summary.
const reasoningSeparator = "\n\n"

// itemState accumulates one output item of the response.
type itemState struct {
	index int    // output_index
	id    string // the item's id, if it has one
	typ   string // typeMessage, typeFunctionCall, typeReasoning, or "" for another
	// text holds the text of a message, the reasoning text (summary parts
	// joined by reasoningSeparator) of a reasoning item, and the arguments
	// of a function call.
	text      strings.Builder
	sawDelta  bool
	refusal   bool   // message: some of the text is a refusal
	part      int    // reasoning: the summary or content index last seen
	encrypted string // reasoning
	callID    string // function_call: the ID results answer
	name      string // function_call
	signature string // computer_call: the item as it came
	call      int    // function_call: the position among the response's calls
	done      bool
}

// decoder turns a Responses event stream, or a non-streamed JSON response,
// into chunks.
type decoder struct {
	sse  sse.Reader
	body io.Reader
	// jsonBody is set when the server answered with one JSON response.
	jsonBody  bool
	requestID string

	wire eventWire
	dec  sse.JSONDecoder // decodes the data of events

	id, model string
	items     []*itemState // in the order they started
	// byID, byIndex, byCallID and callIDs find items and calls without a
	// scan per event: a stream may hold any number of them. The output
	// index is a map key only, never the size or index of a slice.
	byID     map[string]*itemState
	byIndex  map[int]*itemState
	byCallID map[string]*itemState // by the call_id the server gave
	callIDs  map[string]bool       // the IDs given to calls
	calls    int

	status     string // the terminal response's status
	incomplete string // incomplete_details.reason
	usage      llm.Usage

	out  []llm.Chunk
	done bool
}

// init makes d read the body of a response.
func (d *decoder) init(body io.Reader, jsonBody bool) {
	*d = decoder{body: body, jsonBody: jsonBody, out: d.out[:0], sse: d.sse, wire: d.wire}
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
			return nil, fmt.Errorf("%s: stream ended before the response was complete: %w", providerName, io.ErrUnexpectedEOF)
		case err != nil:
			return nil, fmt.Errorf("%s: reading stream: %w", providerName, err)
		}
		data = bytes.TrimSpace(data)
		if len(data) == 0 || bytes.Equal(data, []byte("[DONE]")) {
			continue
		}
		if err := d.handle(event, data); err != nil {
			return nil, err
		}
	}
	return d.out, nil
}

// decodeJSONBody reads a whole non-streamed response.
func (d *decoder) decodeJSONBody() ([]llm.Chunk, error) {
	data, err := io.ReadAll(io.LimitReader(d.body, httpapi.MaxBody+1))
	if err != nil {
		return nil, fmt.Errorf("%s: reading response: %w", providerName, err)
	}
	if len(data) > httpapi.MaxBody {
		return nil, fmt.Errorf("%s: response larger than %d bytes", providerName, httpapi.MaxBody)
	}
	var r responseWire
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: decoding response %.200q: %w", providerName, data, err)
	}
	if r.Status == "failed" || (r.Error != nil && r.Status != "completed" && r.Status != "incomplete") {
		return nil, d.streamError(r.Error)
	}
	if err := d.terminal(&r); err != nil {
		return nil, err
	}
	return d.out, nil
}

// handle decodes the data of one event and appends its chunks to d.out.
func (d *decoder) handle(event, data []byte) error {
	w := &d.wire
	w.reset()
	if err := d.dec.Decode(data, w); err != nil {
		// The decoder may hold part of this event: start afresh.
		d.dec.Reset()
		if d.sse.Unterminated() {
			return fmt.Errorf("%s: stream ended inside an event: %w", providerName, io.ErrUnexpectedEOF)
		}
		return fmt.Errorf("%s: decoding stream event %.200q: %w", providerName, data, err)
	}
	typ := bareString(w.Type)
	if len(typ) == 0 {
		typ = event // the data names its type; the event line does too
	}
	return d.apply(string(typ), w)
}

// bareString returns the contents of a raw JSON string without escapes,
// or nil if raw holds anything else. Event types never need unescaping.
func bareString(raw json.RawMessage) []byte {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' || bytes.IndexByte(raw, '\\') >= 0 {
		return nil
	}
	return raw[1 : len(raw)-1]
}

// apply appends the chunks of a decoded event of type typ to d.out.
// Unknown events (built-in tools, annotations, keep-alives) are ignored.
func (d *decoder) apply(typ string, w *eventWire) error {
	switch typ {
	case "response.created", "response.in_progress", "response.queued":
		if r := w.Response; r != nil {
			d.id = cmp.Or(d.id, r.ID)
			d.model = cmp.Or(d.model, r.Model)
		}
	case "response.output_item.added":
		if w.Item != nil {
			return d.addItem(w.OutputIndex, w.Item)
		}
	case "response.output_item.done":
		if w.Item != nil {
			return d.itemDone(w.OutputIndex, w.Item)
		}
	case "response.output_text.delta":
		d.appendText(d.itemFor(w.ItemID, w.OutputIndex, typeMessage), w.Delta, false)
	case "response.refusal.delta":
		d.appendText(d.itemFor(w.ItemID, w.OutputIndex, typeMessage), w.Delta, true)
	case "response.reasoning_summary_text.delta":
		d.appendReasoning(d.itemFor(w.ItemID, w.OutputIndex, typeReasoning), w.SummaryIndex, w.Delta)
	case "response.reasoning_text.delta":
		d.appendReasoning(d.itemFor(w.ItemID, w.OutputIndex, typeReasoning), w.ContentIndex, w.Delta)
	case "response.function_call_arguments.delta":
		it := d.find(w.ItemID, w.OutputIndex)
		if it == nil || it.typ != typeFunctionCall {
			return fmt.Errorf("%s: function call arguments for item %q (output %d), which is not a function call that started", providerName, w.ItemID, w.OutputIndex)
		}
		d.appendArguments(it, w.Delta)
	case "response.function_call_arguments.done":
		if it := d.find(w.ItemID, w.OutputIndex); it != nil && it.typ == typeFunctionCall && w.Arguments != nil {
			d.settleArguments(it, *w.Arguments)
		}
	case "response.completed", "response.incomplete":
		if w.Response == nil {
			return fmt.Errorf("%s: %s event without a response", providerName, typ)
		}
		return d.terminal(w.Response)
	case "response.failed":
		var e *errorWire
		if w.Response != nil {
			e = w.Response.Error
		}
		return d.streamError(e)
	case "error":
		e := w.Error
		if e == nil {
			e = &errorWire{Code: w.Code, Message: w.Message}
		}
		return d.streamError(e)
	}
	return nil
}

// find returns the item with the given id, or at the given output index
// when the id is empty or unknown, or nil.
func (d *decoder) find(id string, index int) *itemState {
	if it := d.byID[id]; id != "" && it != nil {
		return it
	}
	return d.byIndex[index]
}

// match returns the item find returns, unless it has another id than id:
// then the event is about a new item at the same output index.
func (d *decoder) match(id string, index int) *itemState {
	it := d.find(id, index)
	if it != nil && id != "" && it.id != "" && it.id != id {
		return nil
	}
	return it
}

// itemFor returns the item a delta belongs to, starting one of type typ
// when none was announced (a server that sends deltas only).
func (d *decoder) itemFor(id string, index int, typ string) *itemState {
	if it := d.find(id, index); it != nil {
		return it
	}
	return d.start(index, id, typ)
}

// start records a new item.
func (d *decoder) start(index int, id, typ string) *itemState {
	if d.byIndex == nil {
		d.byIndex = make(map[int]*itemState)
		d.byID = make(map[string]*itemState)
		d.byCallID = make(map[string]*itemState)
		d.callIDs = make(map[string]bool)
	}
	it := &itemState{index: index, id: id, typ: typ, part: -1}
	d.items = append(d.items, it)
	if _, taken := d.byIndex[index]; !taken {
		d.byIndex[index] = it
	}
	if id != "" {
		if _, taken := d.byID[id]; !taken {
			d.byID[id] = it
		}
	}
	return it
}

// addItem opens an output item.
func (d *decoder) addItem(index int, w *itemWire) error {
	if d.match(w.ID, index) != nil {
		return fmt.Errorf("%s: output item %q (output %d) added twice", providerName, w.ID, index)
	}
	typ := w.Type
	switch typ {
	case typeMessage, typeFunctionCall, typeReasoning, typeComputerCall:
	default:
		typ = "" // web search, file search and other items this package does not keep
	}
	it := d.start(index, w.ID, typ)
	switch typ {
	case typeFunctionCall:
		d.startCall(it, w)
	case typeComputerCall:
		// A call of the computer tool; its arguments come with the
		// complete item (itemDone).
		c := *w
		c.Name, c.Arguments = computerToolName, ""
		var checks []safetyCheck
		_ = json.Unmarshal(w.PendingSafetyChecks, &checks)
		c.CallID = computerCallID(cmp.Or(w.CallID, w.ID, "call_"+strconv.Itoa(d.calls)), checks)
		d.startCall(it, &c)
	}
	return nil
}

// startCall announces a function call.
func (d *decoder) startCall(it *itemState, w *itemWire) {
	it.name, it.call = w.Name, d.calls
	it.callID = w.CallID
	if _, taken := d.byCallID[w.CallID]; w.CallID != "" && !taken {
		d.byCallID[w.CallID] = it
	}
	if it.callID == "" || d.callIDs[it.callID] {
		// Results are matched to calls by this ID: make it unique.
		it.callID = "call_" + strconv.Itoa(it.call)
		for d.callIDs[it.callID] {
			it.callID += "_"
		}
	}
	d.callIDs[it.callID] = true
	d.calls++
	d.out = append(d.out, llm.Chunk{Kind: llm.ChunkToolCallStart, Index: it.call, ID: it.callID, Name: it.name})
	if w.Arguments != "" {
		d.appendArguments(it, w.Arguments)
	}
}

// closing returns the item that w, a complete item (of
// response.output_item.done or of the final response), closes, or nil if
// it is a new one: the item with w's id; else, for a function call, the
// call with w's call_id, which is a call's identity (a server may close a
// call, or list it in the final response, under another item id than the
// one it started with, and it is still one call, run once); else the item
// at w's output index, unless that has another id.
func (d *decoder) closing(index int, w *itemWire) *itemState {
	if it := d.byID[w.ID]; w.ID != "" && it != nil {
		return it
	}
	if it := d.byCallID[w.CallID]; w.Type == typeFunctionCall && w.CallID != "" && it != nil {
		return it
	}
	if w.Type == typeComputerCall && w.CallID != "" {
		var checks []safetyCheck
		_ = json.Unmarshal(w.PendingSafetyChecks, &checks)
		if it := d.byCallID[computerCallID(w.CallID, checks)]; it != nil {
			return it
		}
	}
	return d.match(w.ID, index)
}

// itemDone closes an output item, taking from the complete item what the
// deltas did not give: the encrypted reasoning, and text, summaries or
// arguments a server sent whole.
func (d *decoder) itemDone(index int, w *itemWire) error {
	it := d.closing(index, w)
	if it == nil {
		if err := d.addItem(index, w); err != nil {
			return err
		}
		it = d.items[len(d.items)-1]
	}
	if it.done {
		return nil
	}
	it.done = true
	switch it.typ {
	case typeMessage:
		if !it.sawDelta {
			for _, c := range w.Content {
				switch c.Type {
				case "output_text":
					d.appendText(it, c.Text, false)
				case "refusal":
					d.appendText(it, c.Refusal, true)
				}
			}
		}
	case typeReasoning:
		it.encrypted = w.EncryptedContent
		if !it.sawDelta {
			parts := w.Summary
			if len(parts) == 0 {
				parts = w.Content // reasoning_text, as open-weight models give it
			}
			for i, c := range parts {
				d.appendReasoning(it, i, c.Text)
			}
		}
	case typeFunctionCall:
		d.settleArguments(it, w.Arguments)
	case typeComputerCall:
		if it.text.Len() == 0 {
			d.appendArguments(it, computerArguments(w.Action, w.Actions, w.PendingSafetyChecks))
		}
		sig, _ := json.Marshal(computerSignature{Type: typeComputerCall, ID: w.ID, Action: nonNull(w.Action), Actions: nonNull(w.Actions), PendingSafetyChecks: w.PendingSafetyChecks})
		it.signature = string(sig)
	}
	return nil
}

// appendText adds a delta of a message's text (or refusal).
func (d *decoder) appendText(it *itemState, s string, refusal bool) {
	if it.typ != typeMessage || s == "" {
		return
	}
	it.sawDelta = true
	it.refusal = it.refusal || refusal
	it.text.WriteString(s)
	d.out = append(d.out, llm.Chunk{Kind: llm.ChunkText, Text: s})
}

// appendReasoning adds a delta of the part-th summary (or content) part of
// a reasoning item; parts are joined by reasoningSeparator.
func (d *decoder) appendReasoning(it *itemState, part int, s string) {
	if it.typ != typeReasoning || s == "" {
		return
	}
	it.sawDelta = true
	if part != it.part && it.text.Len() > 0 {
		s = reasoningSeparator + s
	}
	it.part = part
	it.text.WriteString(s)
	d.out = append(d.out, llm.Chunk{Kind: llm.ChunkReasoning, Text: s})
}

// appendArguments adds a delta of a function call's arguments.
func (d *decoder) appendArguments(it *itemState, s string) {
	if s == "" {
		return
	}
	it.sawDelta = true
	it.text.WriteString(s)
	d.out = append(d.out, llm.Chunk{Kind: llm.ChunkToolCallDelta, Index: it.call, Text: s})
}

// settleArguments takes the complete arguments of a call. What the deltas
// lacked is sent as one more delta, so that the deltas of a call add up to
// its arguments. Complete arguments that contradict the deltas (which
// OpenAI never sends) are ignored: the deltas are what the model was seen
// writing.
func (d *decoder) settleArguments(it *itemState, args string) {
	if have := it.text.Len(); len(args) > have && args[:have] == it.text.String() {
		d.appendArguments(it, args[have:])
	}
}

// terminal ends the response with its final state: status, usage, and any
// item the stream did not close.
func (d *decoder) terminal(r *responseWire) error {
	d.id = cmp.Or(r.ID, d.id)
	d.model = cmp.Or(r.Model, d.model)
	d.status = r.Status
	if r.IncompleteDetails != nil {
		d.incomplete = r.IncompleteDetails.Reason
	}
	if r.Usage != nil {
		d.usage = r.Usage.usage()
	}
	for i := range r.Output {
		w := &r.Output[i]
		if it := d.closing(i, w); it != nil && it.done {
			continue
		}
		if err := d.itemDone(i, w); err != nil {
			return err
		}
	}
	d.finish()
	return nil
}

// streamError converts an error sent inside the stream.
func (d *decoder) streamError(e *errorWire) error {
	if e == nil {
		e = &errorWire{Message: "the response failed without an error"}
	}
	apiErr := e.apiError(0)
	apiErr.RequestID = d.requestID
	return apiErr
}

// finish appends the ChunkDone chunk with the assembled response to d.out.
func (d *decoder) finish() {
	d.done = true
	items := slices.Clone(d.items)
	slices.SortStableFunc(items, func(a, b *itemState) int { return cmp.Compare(a.index, b.index) })
	var parts []llm.Part
	refusal := false
	for _, it := range items {
		switch it.typ {
		case typeMessage:
			if it.text.Len() > 0 {
				parts = append(parts, llm.TextPart(it.text.String()))
			}
			refusal = refusal || it.refusal
		case typeReasoning:
			if it.text.Len() > 0 || it.encrypted != "" {
				parts = append(parts, llm.Part{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{Text: it.text.String(), Redacted: it.encrypted}})
			}
		case typeFunctionCall, typeComputerCall:
			parts = append(parts, llm.Part{Kind: llm.PartToolCall, ToolCall: &llm.ToolCall{
				ID: it.callID, Name: it.name, Arguments: llm.Arguments(it.text.String()), Signature: it.signature,
			}})
		}
	}
	resp := &llm.Response{
		ID:           d.id,
		Model:        d.model,
		Message:      llm.Message{Role: llm.RoleAssistant, Parts: parts},
		Usage:        d.usage,
		FinishReason: finishReason(d.status, d.incomplete, d.calls > 0, refusal),
	}
	d.out = append(d.out, llm.Chunk{Kind: llm.ChunkDone, Response: resp})
}

// finishReason maps a response's status (and the reason it is incomplete)
// to an [llm.FinishReason]. The API has no finish reason of its own: a
// completed response stopped naturally, or to call tools when it made
// calls; a refusal is reported as a content filter, as Anthropic's is.
func finishReason(status, incomplete string, hasCalls, refusal bool) llm.FinishReason {
	switch status {
	case "completed", "":
		switch {
		case hasCalls:
			return llm.FinishToolCalls
		case refusal:
			return llm.FinishContentFilter
		}
		return llm.FinishStop
	case "incomplete":
		switch incomplete {
		case "max_output_tokens":
			return llm.FinishLength
		case "content_filter":
			return llm.FinishContentFilter
		}
	}
	return llm.FinishOther
}

// nonNull returns raw, or nil when it is JSON null.
func nonNull(raw json.RawMessage) json.RawMessage {
	if string(raw) == "null" {
		return nil
	}
	return raw
}
