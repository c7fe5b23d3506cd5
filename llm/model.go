package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
)

// Model is a chat model behind some provider's API.
//
// Stream sends req and returns the model's answer as it arrives. The
// iterator yields chunks in order and ends after the single [ChunkDone] chunk,
// or after the first non-nil error, whichever comes first; nothing is yielded
// after an error. Breaking out of the loop early closes the underlying
// connection. Cancelling ctx stops the stream with ctx's error.
//
// Stream must not keep or modify req or anything it points to after the
// iterator returns, with one exception: in req.Conversation a provider may
// keep copies of what it needs and the strings of req (immutable in Go), so
// that the caller stays free to change req and its messages afterwards.
// Implementations are safe for concurrent use.
type Model interface {
	Stream(ctx context.Context, req *Request) iter.Seq2[Chunk, error]
}

// ModelLister is implemented by providers that can list the models their
// endpoint serves.
type ModelLister interface {
	ListModels(ctx context.Context) ([]ModelInfo, error)
}

// ModelInfo describes one model an endpoint serves.
type ModelInfo struct {
	ID      string `json:"id"`
	OwnedBy string `json:"owned_by,omitempty"`
	Created int64  `json:"created,omitempty"`
}

// A Request is one call to a model.
type Request struct {
	// Model names the model; empty means the provider's default.
	Model string
	// Messages is the conversation so far. System messages may appear
	// anywhere; providers that take one system prompt join them.
	Messages []Message
	// Tools are offered to the model, in this order.
	Tools []ToolSpec
	// ToolChoice constrains tool use; the zero value lets the model decide.
	ToolChoice ToolChoice
	// MaxTokens caps the output tokens of this response; 0 means the
	// provider's default.
	MaxTokens int
	// Temperature, when non-nil, sets the sampling temperature.
	Temperature *float64
	// StopSequences end generation when produced.
	StopSequences []string
	// ParallelToolCalls, when non-nil, tells providers that support it
	// whether the model may make several tool calls in one message.
	ParallelToolCalls *bool
	// ResponseFormat, when set, asks for an answer whose text is JSON
	// matching a schema. Tool calls stay allowed; the format applies to
	// the text of a message. Each provider renders it with its own
	// mechanism; none of them validates the answer (the loop does).
	ResponseFormat *ResponseFormat
	// TopP, when non-nil, sets nucleus sampling.
	TopP *float64
	// Seed, when non-nil, asks providers that support it for
	// reproducible sampling (OpenAI's seed); others ignore it.
	Seed *int64
	// Reasoning, when non-nil, sets how much the model thinks.
	Reasoning *ReasoningConfig
	// Cache, when non-nil, hints how to use the provider's prompt cache.
	Cache *CacheHint
	// Extra holds provider-specific fields of the request body, added to
	// its top level as they are (each value must be JSON). A provider
	// refuses a field it sets itself (an error, before anything is sent),
	// so Extra adds fields and never changes those of the request.
	Extra map[string]json.RawMessage
	// Conversation, when non-nil, is the conversation this request
	// continues: providers that can keep work from one request to the
	// next keep it there (the OpenAI provider: the encoded messages
	// already sent), which makes a turn of a long conversation cost about
	// what a turn of a short one does. The bytes sent are the same with
	// or without it. The agent loop sets it for each run. See
	// [Conversation].
	Conversation *Conversation `json:"-"`
}

// ReasoningConfig says how much a model thinks before it answers, in the
// terms of either provider family; each provider uses what it has.
type ReasoningConfig struct {
	// Effort is a level such as "low", "medium" or "high" ("minimal",
	// "none" or "max" where supported): OpenAI's reasoning_effort,
	// Anthropic's output_config.effort, Gemini's thinkingLevel. "none"
	// turns thinking off where the API can: Anthropic's thinking
	// {"type": "disabled"}, Gemini's thinkingBudget 0.
	Effort string
	// BudgetTokens is a thinking budget in tokens: Anthropic's extended
	// thinking (thinking.budget_tokens, at least 1024). Chat Completions
	// has no budget and ignores it; set Effort too for such providers.
	BudgetTokens int
}

// CacheHint says how a request should use the provider's prompt cache.
// Providers cache by prefix; the hint only tunes how.
type CacheHint struct {
	// Key groups requests that share a long prefix, so that they are
	// served by the same cache: OpenAI's prompt_cache_key. Anthropic
	// has no such key and ignores it.
	Key string
	// Long asks for the longest retention the provider offers: OpenAI's
	// prompt_cache_retention "24h", Anthropic's one-hour TTL.
	Long bool
	// Off asks for no caching where it is explicit: Anthropic sends no
	// cache breakpoints. OpenAI caches automatically and ignores it.
	Off bool
}

// A ResponseFormat asks a model for an answer that is a JSON value
// matching Schema.
type ResponseFormat struct {
	// Name names the format: 1 to 64 letters, digits, '_' or '-'. OpenAI
	// requires one; empty means "final_answer".
	Name string
	// Description tells the model what the answer is for; optional.
	Description string
	// Schema is the JSON Schema of the answer.
	Schema json.RawMessage
	// Strict asks the provider to constrain decoding to Schema, so that
	// the answer always matches it. Providers require such schemas to be
	// closed: every object lists all its properties as required and sets
	// additionalProperties to false, and the root is an object. Set it
	// only for schemas that are (the loop does so by itself).
	Strict bool
}

// ToolChoiceMode is how a model may use the offered tools.
type ToolChoiceMode string

// Tool choice modes.
const (
	ToolChoiceAuto     ToolChoiceMode = ""         // the model decides
	ToolChoiceNone     ToolChoiceMode = "none"     // no tool calls
	ToolChoiceRequired ToolChoiceMode = "required" // at least one tool call
	ToolChoiceTool     ToolChoiceMode = "tool"     // call the tool named in ToolChoice.Name
)

// ToolChoice constrains tool use for one request.
type ToolChoice struct {
	Mode ToolChoiceMode
	// Name is the tool to call when Mode is ToolChoiceTool.
	Name string
}

// A ToolSpec is what a model is told about one tool. Each provider renders it
// into its own wire format.
type ToolSpec struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// InputSchema is the JSON Schema of the argument object. It is always
	// an object schema.
	InputSchema json.RawMessage `json:"input_schema"`
	// Computer, when set, marks the tool as a computer-use tool on a
	// screen of this size: providers with a native computer tool
	// (Anthropic's computer tool, OpenAI Responses' computer use) render
	// it as that, and translate its calls into this tool's arguments; the
	// others render the function tool above.
	Computer *ComputerSpec `json:"computer,omitempty"`
}

// A ComputerSpec is the screen of a computer-use tool, as the model sees it.
type ComputerSpec struct {
	Width  int `json:"width"`
	Height int `json:"height"`
}

// ChunkKind says what a [Chunk] carries.
type ChunkKind uint8

// The kinds of stream chunks.
const (
	// ChunkText carries a delta of the answer's text in Text.
	ChunkText ChunkKind = iota + 1
	// ChunkReasoning carries a delta of the model's reasoning in Text.
	ChunkReasoning
	// ChunkToolCallStart announces a tool call: Index, ID and Name are set.
	ChunkToolCallStart
	// ChunkToolCallDelta carries a fragment of the arguments of the call at
	// Index in Text.
	ChunkToolCallDelta
	// ChunkDone ends the stream; Response holds the assembled answer.
	ChunkDone
)

var chunkKindNames = [...]string{"", "text", "reasoning", "tool_call_start", "tool_call_delta", "done"}

func (k ChunkKind) String() string {
	if int(k) < len(chunkKindNames) {
		return chunkKindNames[k]
	}
	return "unknown"
}

// A Chunk is one step of a streamed response.
type Chunk struct {
	Kind ChunkKind
	// Text is the delta for text, reasoning and argument chunks.
	Text string
	// Index numbers the tool calls of this response, from 0, in the order
	// they were announced; it ties a ChunkToolCallDelta to its call. The
	// Response may list the calls in another order (the provider's, such
	// as the indexes of the wire format) when they were announced out of it.
	Index int
	// ID and Name identify a tool call on ChunkToolCallStart.
	ID, Name string
	// Response is the complete answer, on ChunkDone only.
	Response *Response
}

// A Response is a model's complete answer to one [Request].
type Response struct {
	// ID is the provider's response ID, if it gave one.
	ID string `json:"id,omitempty"`
	// Model is the model that answered, as the provider named it.
	Model string `json:"model,omitempty"`
	// Message is the assistant message: reasoning, text and tool calls, in
	// the order the model produced them.
	Message Message `json:"message"`
	// Usage counts the tokens of this request and response.
	Usage Usage `json:"usage"`
	// FinishReason says why the model stopped.
	FinishReason FinishReason `json:"finish_reason"`
}

// ResponseChunks streams a complete response as a provider would: a
// reasoning chunk, a text chunk, a start and an arguments chunk per tool
// call, then the done chunk. Recorded and scripted models use it.
func ResponseChunks(resp *Response) iter.Seq[Chunk] {
	return func(yield func(Chunk) bool) {
		index := 0
		for _, p := range resp.Message.Parts {
			var ok bool
			switch p.Kind {
			case PartReasoning:
				ok = p.Reasoning == nil || p.Reasoning.Text == "" || yield(Chunk{Kind: ChunkReasoning, Text: p.Reasoning.Text})
			case PartText:
				ok = p.Text == "" || yield(Chunk{Kind: ChunkText, Text: p.Text})
			case PartToolCall:
				c := p.ToolCall
				ok = yield(Chunk{Kind: ChunkToolCallStart, Index: index, ID: c.ID, Name: c.Name}) &&
					(len(c.Arguments) == 0 || yield(Chunk{Kind: ChunkToolCallDelta, Index: index, Text: string(c.Arguments)}))
				index++
			default:
				ok = true
			}
			if !ok {
				return
			}
		}
		yield(Chunk{Kind: ChunkDone, Response: resp})
	}
}

// FinishReason says why a model stopped producing output.
type FinishReason string

// Finish reasons, normalized across providers.
const (
	FinishStop          FinishReason = "stop"           // a natural end or a stop sequence
	FinishToolCalls     FinishReason = "tool_calls"     // the model called tools
	FinishLength        FinishReason = "length"         // the output token limit was hit
	FinishContentFilter FinishReason = "content_filter" // the provider withheld content
	FinishOther         FinishReason = "other"          // anything else the provider said
)

// Usage counts tokens.
type Usage struct {
	// InputTokens counts all prompt tokens, cached ones included.
	InputTokens int64 `json:"input_tokens"`
	// OutputTokens counts generated tokens, reasoning included.
	OutputTokens int64 `json:"output_tokens"`
	// CacheReadTokens counts the input tokens served from a prompt cache.
	CacheReadTokens int64 `json:"cache_read_tokens,omitempty"`
	// CacheWriteTokens counts the input tokens written to a prompt cache.
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	// ReasoningTokens counts the output tokens spent on reasoning.
	ReasoningTokens int64 `json:"reasoning_tokens,omitempty"`
}

// Add adds o to u.
func (u *Usage) Add(o Usage) {
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.CacheReadTokens += o.CacheReadTokens
	u.CacheWriteTokens += o.CacheWriteTokens
	u.ReasoningTokens += o.ReasoningTokens
}

// TotalTokens returns input plus output tokens.
func (u Usage) TotalTokens() int64 { return u.InputTokens + u.OutputTokens }

// String describes u for a person: "1200 input (800 cached) + 56 output
// tokens", so that printing a usage does not print a bare struct.
func (u Usage) String() string {
	s := fmt.Sprintf("%d input", u.InputTokens)
	if u.CacheReadTokens > 0 {
		s += fmt.Sprintf(" (%d cached)", u.CacheReadTokens)
	}
	if u.CacheWriteTokens > 0 {
		s += fmt.Sprintf(" (%d written to the cache)", u.CacheWriteTokens)
	}
	s += fmt.Sprintf(" + %d output", u.OutputTokens)
	if u.ReasoningTokens > 0 {
		s += fmt.Sprintf(" (%d reasoning)", u.ReasoningTokens)
	}
	return s + " tokens"
}

// ErrNoResponse is returned by [Collect] when a stream ended without a
// [ChunkDone] chunk and without an error.
var ErrNoResponse = errors.New("llm: stream ended without a response")

// Collect drains a stream and returns its final response.
func Collect(stream iter.Seq2[Chunk, error]) (*Response, error) {
	for c, err := range stream {
		if err != nil {
			return nil, err
		}
		if c.Kind == ChunkDone {
			return c.Response, nil
		}
	}
	return nil, ErrNoResponse
}
