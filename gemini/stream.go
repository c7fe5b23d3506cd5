package gemini

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/hrns-dev/hrns/internal/httpapi"
	"github.com/hrns-dev/hrns/internal/sse"
	"github.com/hrns-dev/hrns/llm"
)

// responseWire is a GenerateContentResponse: each event of the stream is
// one, holding what the model produced since the previous one.
type responseWire struct {
	Candidates     []candidateWire `json:"candidates"`
	PromptFeedback *struct {
		BlockReason        string `json:"blockReason"`
		BlockReasonMessage string `json:"blockReasonMessage"`
	} `json:"promptFeedback"`
	UsageMetadata *usageWire  `json:"usageMetadata"`
	ModelVersion  string      `json:"modelVersion"`
	ResponseID    string      `json:"responseId"`
	Error         *statusWire `json:"error"`
}

// candidateWire is one candidate answer; only the first (index 0) is read.
type candidateWire struct {
	Content *struct {
		Parts []part `json:"parts"`
	} `json:"content"`
	FinishReason  string `json:"finishReason"`
	FinishMessage string `json:"finishMessage"`
	Index         int64  `json:"index"`
}

// usageWire is the usageMetadata of a response, cumulative over the
// stream.
type usageWire struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
	ToolUsePromptTokenCount int64 `json:"toolUsePromptTokenCount"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
}

// usage converts the counts: the prompt (cached tokens included, and the
// tokens of tool use prompts) is the input; the answer and the thoughts
// are the output, the thoughts also counted as reasoning.
func (u *usageWire) usage() llm.Usage {
	return llm.Usage{
		InputTokens:     u.PromptTokenCount + u.ToolUsePromptTokenCount,
		OutputTokens:    u.CandidatesTokenCount + u.ThoughtsTokenCount,
		CacheReadTokens: u.CachedContentTokenCount,
		ReasoningTokens: u.ThoughtsTokenCount,
	}
}

// runKind says what the open run of text parts holds.
type runKind uint8

const (
	runNone runKind = iota
	runText
	runThought
)

// decoder turns a streamGenerateContent event stream, or a JSON answer
// (one response or an array of them), into chunks.
type decoder struct {
	sse       sse.Reader
	body      io.Reader
	jsonBody  bool
	requestID string

	wire responseWire
	dec  sse.JSONDecoder

	id, model string
	parts     []llm.Part
	run       runKind
	text      strings.Builder // the open run's text
	calls     int
	callIDs   map[string]bool
	finish    string // the candidate's finishReason, once given
	usage     llm.Usage

	out  []llm.Chunk
	done bool
}

// init makes d read the body of a response.
func (d *decoder) init(body io.Reader, jsonBody bool) {
	*d = decoder{body: body, jsonBody: jsonBody, out: d.out[:0], sse: d.sse}
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
		_, data, err := d.sse.Next()
		switch {
		case err == io.EOF:
			if err := d.end(); err != nil {
				return nil, err
			}
			return d.out, nil
		case err != nil:
			return nil, fmt.Errorf("%s: reading stream: %w", providerName, err)
		}
		data = bytes.TrimSpace(data)
		if len(data) == 0 || bytes.Equal(data, []byte("[DONE]")) {
			continue
		}
		w := &d.wire
		*w = responseWire{}
		if err := d.dec.Decode(data, w); err != nil {
			d.dec.Reset()
			if d.sse.Unterminated() {
				return nil, fmt.Errorf("%s: stream ended inside an event: %w", providerName, io.ErrUnexpectedEOF)
			}
			return nil, fmt.Errorf("%s: decoding stream event %.200q: %w", providerName, data, err)
		}
		if err := d.apply(w); err != nil {
			return nil, err
		}
	}
	return d.out, nil
}

// decodeJSONBody reads a whole answer: a response, or an array of the
// responses a stream would have held.
func (d *decoder) decodeJSONBody() ([]llm.Chunk, error) {
	data, err := io.ReadAll(io.LimitReader(d.body, httpapi.MaxBody+1))
	if err != nil {
		return nil, fmt.Errorf("%s: reading response: %w", providerName, err)
	}
	if len(data) > httpapi.MaxBody {
		return nil, fmt.Errorf("%s: response larger than %d bytes", providerName, httpapi.MaxBody)
	}
	var list []responseWire
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '[' {
		err = json.Unmarshal(t, &list)
	} else {
		list = make([]responseWire, 1)
		err = json.Unmarshal(t, &list[0])
	}
	if err != nil {
		return nil, fmt.Errorf("%s: decoding response %.200q: %w", providerName, data, err)
	}
	for i := range list {
		if err := d.apply(&list[i]); err != nil {
			return nil, err
		}
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	return d.out, nil
}

// apply appends the chunks of one response to d.out.
func (d *decoder) apply(w *responseWire) error {
	if w.Error != nil {
		return d.streamError(w.Error)
	}
	d.id = cmp.Or(d.id, w.ResponseID)
	d.model = cmp.Or(d.model, w.ModelVersion)
	if w.UsageMetadata != nil {
		d.usage = w.UsageMetadata.usage()
	}
	if f := w.PromptFeedback; f != nil && f.BlockReason != "" {
		msg := "the prompt was blocked (" + f.BlockReason + ")"
		if f.BlockReasonMessage != "" {
			msg += ": " + f.BlockReasonMessage
		}
		return d.blocked(f.BlockReason, msg)
	}
	for i := range w.Candidates {
		c := &w.Candidates[i]
		if c.Index != 0 {
			continue // only the first candidate is asked for
		}
		if d.finish != "" {
			if c.Content != nil && !emptyParts(c.Content.Parts) {
				return fmt.Errorf("%s: content after the candidate finished (%s)", providerName, d.finish)
			}
			continue
		}
		if c.Content != nil {
			for j := range c.Content.Parts {
				d.addPart(&c.Content.Parts[j])
			}
		}
		if c.FinishReason != "" {
			d.finish = c.FinishReason
			if filtered[c.FinishReason] {
				msg := "the answer was withheld (finishReason " + c.FinishReason + ")"
				if c.FinishMessage != "" {
					msg += ": " + c.FinishMessage
				}
				return d.blocked(c.FinishReason, msg)
			}
		}
	}
	return nil
}

// emptyParts reports whether parts hold nothing: no parts, or only empty
// text parts without a signature.
func emptyParts(parts []part) bool {
	for _, p := range parts {
		if p.Text == nil || *p.Text != "" || p.ThoughtSignature != "" || p.FunctionCall != nil || p.InlineData != nil {
			return false
		}
	}
	return true
}

// filtered holds the finish reasons that withhold the answer for its
// content: they end the stream with an error of class
// [llm.ErrContentFiltered].
var filtered = map[string]bool{
	"SAFETY": true, "RECITATION": true, "BLOCKLIST": true, "PROHIBITED_CONTENT": true, "SPII": true,
	"IMAGE_SAFETY": true, "IMAGE_PROHIBITED_CONTENT": true, "IMAGE_RECITATION": true,
}

// blocked returns the error of a safety block.
func (d *decoder) blocked(reason, msg string) error {
	return &llm.APIError{
		Provider:  providerName,
		Type:      "content_filter",
		Code:      httpapi.Truncate(reason, httpapi.MaxErrorText),
		Message:   msg,
		RequestID: d.requestID,
	}
}

// addPart adds one part of the candidate's content.
func (d *decoder) addPart(p *part) {
	switch {
	case p.FunctionCall != nil:
		d.closeRun()
		d.addCall(p.FunctionCall, p.ThoughtSignature)
	case p.Text != nil:
		kind := runText
		if p.Thought {
			kind = runThought
		}
		if d.run != kind {
			d.closeRun()
			d.run = kind
		}
		if t := *p.Text; t != "" {
			d.text.WriteString(t)
			ck := llm.ChunkText
			if kind == runThought {
				ck = llm.ChunkReasoning
			}
			d.out = append(d.out, llm.Chunk{Kind: ck, Text: t})
		}
		if p.ThoughtSignature != "" {
			d.closeRunSigned(p.ThoughtSignature)
		}
	default:
		// Inline media the model made, executable code and its results:
		// nothing of the neutral model holds them. A signature on such a
		// part is kept as a signature-only reasoning part.
		if p.ThoughtSignature != "" {
			d.closeRun()
			d.parts = append(d.parts, llm.Part{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{Signature: p.ThoughtSignature}})
		}
	}
}

// closeRun ends the open run of text or thought parts.
func (d *decoder) closeRun() { d.closeRunSigned("") }

// closeRunSigned ends the open run, which a part signed with sig ended.
// Thoughts become a reasoning part holding the signature; text becomes a
// text part followed, when signed, by a reasoning part holding only the
// signature (see [modelParts] for how it goes back).
func (d *decoder) closeRunSigned(sig string) {
	s := d.text.String()
	d.text.Reset()
	switch d.run {
	case runThought:
		if s != "" || sig != "" {
			d.parts = append(d.parts, llm.Part{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{Text: s, Signature: sig}})
		}
	default:
		if s != "" {
			d.parts = append(d.parts, llm.TextPart(s))
		}
		if sig != "" {
			d.parts = append(d.parts, llm.Part{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{Signature: sig}})
		}
	}
	d.run = runNone
}

// addCall announces a function call and its arguments, which arrive whole.
func (d *decoder) addCall(fc *functionCall, sig string) {
	if d.callIDs == nil {
		d.callIDs = make(map[string]bool)
	}
	id := fc.ID
	if id == "" || d.callIDs[id] || strings.HasPrefix(id, generatedIDPrefix) {
		// Results are matched to calls by this ID: make one, unique
		// within the response and, with the response's ID, across turns.
		id = generatedIDPrefix + idSafe(d.id) + strconv.Itoa(d.calls)
		for d.callIDs[id] {
			id += "_"
		}
	}
	d.callIDs[id] = true
	args := bytes.TrimSpace(fc.Args)
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}") // a call without arguments
	}
	index := d.calls
	d.calls++
	d.out = append(d.out,
		llm.Chunk{Kind: llm.ChunkToolCallStart, Index: index, ID: id, Name: fc.Name},
		llm.Chunk{Kind: llm.ChunkToolCallDelta, Index: index, Text: string(args)})
	d.parts = append(d.parts, llm.Part{Kind: llm.PartToolCall, ToolCall: &llm.ToolCall{
		ID: id, Name: fc.Name, Arguments: llm.Arguments(args), Signature: sig,
	}})
}

// idSafe returns the letters, digits, '-' and '_' of a response ID (at
// most 32 of them), followed by '_', or "" for an empty ID.
func idSafe(id string) string {
	var b strings.Builder
	for i := 0; i < len(id) && b.Len() < 32; i++ {
		c := id[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteByte(c)
		}
	}
	if b.Len() == 0 {
		return ""
	}
	b.WriteByte('_')
	return b.String()
}

// end handles the end of the input: a stream whose candidate finished is
// complete; one that stopped before is cut short.
func (d *decoder) end() error {
	if d.finish == "" {
		return fmt.Errorf("%s: stream ended before the response was complete: %w", providerName, io.ErrUnexpectedEOF)
	}
	d.closeRun()
	d.done = true
	resp := &llm.Response{
		ID:           d.id,
		Model:        d.model,
		Message:      llm.Message{Role: llm.RoleAssistant, Parts: d.parts},
		Usage:        d.usage,
		FinishReason: finishReason(d.finish, d.calls > 0),
	}
	d.out = append(d.out, llm.Chunk{Kind: llm.ChunkDone, Response: resp})
	return nil
}

// streamError converts an error sent inside the stream.
func (d *decoder) streamError(s *statusWire) error {
	if s.Message == "" {
		s.Message = "the stream failed without a message"
	}
	a := s.apiError(0)
	a.RequestID = d.requestID
	return a
}

// finishReason maps a candidate's finishReason to an [llm.FinishReason].
func finishReason(reason string, hasCalls bool) llm.FinishReason {
	switch reason {
	case "STOP":
		if hasCalls {
			return llm.FinishToolCalls
		}
		return llm.FinishStop
	case "MAX_TOKENS":
		return llm.FinishLength
	}
	if filtered[reason] {
		return llm.FinishContentFilter
	}
	return llm.FinishOther
}
