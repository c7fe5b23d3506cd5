package loop

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/hrns-dev/hrns/llm"
)

// ChunkType names what a [Chunk] reports. The names are stable: they are
// the event types of CLI --json lines and of session events.
type ChunkType string

// The chunk types, in the order a run may produce them.
const (
	// ChunkTurnStart opens a turn: one request to the model.
	ChunkTurnStart ChunkType = "turn_start"
	// ChunkCompaction says the transcript was compacted before the
	// turn's request, or after the provider refused it as too long (the
	// request is then sent again); Compaction says what was done. See
	// [Options.Compaction].
	ChunkCompaction ChunkType = "compaction"
	// ChunkReasoning carries a delta of the model's reasoning in Content.
	ChunkReasoning ChunkType = "reasoning"
	// ChunkMessage carries a delta of the model's answer in Content.
	ChunkMessage ChunkType = "message"
	// ChunkToolCallDelta carries a fragment of a tool call's arguments in
	// Content while the model writes them; ToolCall has its ID and Name.
	ChunkToolCallDelta ChunkType = "tool_call_delta"
	// ChunkRetry says the model request failed with a transient error and
	// will be sent again after Retry.Delay. The message, reasoning and
	// tool_call_delta chunks streamed since the turn started (or since the
	// previous retry) belong to the failed attempt and are void: the next
	// attempt streams its answer from the start. A consumer that prints
	// deltas must discard or mark what it printed (see the example of
	// [Agent.RunLoop]); Result.Answer and the transcript hold only the
	// attempt that succeeded.
	ChunkRetry ChunkType = "retry"
	// ChunkTurnEnd closes the model's answer: Usage, FinishReason,
	// Model and Messages are set. The tool chunks of the turn follow.
	ChunkTurnEnd ChunkType = "turn_end"
	// ChunkApprovalRequest says a call waits for the Approver.
	ChunkApprovalRequest ChunkType = "approval_request"
	// ChunkToolCallStart says a call's arguments were parsed and
	// validated and its tool is about to run.
	ChunkToolCallStart ChunkType = "tool_call_start"
	// ChunkToolCallResult carries a call's result.
	ChunkToolCallResult ChunkType = "tool_call_result"
	// ChunkToolCallError carries a failed call: unknown tool, bad
	// arguments, an error, panic or timeout, or a refused approval. The
	// model sees Content as the call's result; Error says the same.
	ChunkToolCallError ChunkType = "tool_call_error"
	// ChunkToolCallPending says a call waits for a result from outside
	// (a client-side tool, or a deferred approval).
	ChunkToolCallPending ChunkType = "tool_call_pending"
	// ChunkHook reports what a hook did (see [Hook]): Hook names it and
	// its decision; Content says more (a refusal's reason, rewritten
	// arguments, added context); Err is set when the hook failed.
	ChunkHook ChunkType = "hook"
	// ChunkError reports the error that ends the run.
	ChunkError ChunkType = "error"
	// ChunkEnd is the last chunk of every run; Result is set.
	ChunkEnd ChunkType = "end"
)

// A Chunk is one step of a run, as [Agent.RunLoop] yields them.
type Chunk struct {
	Type ChunkType `json:"type"`
	// Turn is the number of the model request the chunk belongs to,
	// starting at 1.
	Turn int `json:"turn"`
	// Content is the text delta of message and reasoning chunks, the
	// argument fragment of tool_call_delta, and the text the model sees
	// for tool_call_result and tool_call_error.
	Content string `json:"content,omitempty"`
	// Media are the images and documents of a tool_call_result's output,
	// in order, beside its text in Content. They are left out of JSON:
	// consumers that keep or show them (the sessions' observation
	// events) read them here.
	Media []llm.Part `json:"-"`
	// ToolCall identifies the call of tool chunks. Arguments are set
	// from tool_call_start on.
	ToolCall *ToolCallInfo `json:"tool_call,omitempty"`
	// Usage is the turn's token usage, on turn_end.
	Usage *llm.Usage `json:"usage,omitempty"`
	// FinishReason is why the model stopped, on turn_end.
	FinishReason llm.FinishReason `json:"finish_reason,omitempty"`
	// Model is the model that answered, as the provider named it, on
	// turn_end (empty if it did not say).
	Model string `json:"-"`
	// Messages is the run's transcript as the turn left it, on
	// turn_end: the messages the request sent, then the assistant
	// message exactly as the run appended it (calls dropped on a final
	// turn, call IDs made unique; see [llm.ToolCall]). A consumer can
	// store it as the checkpoint the turn's calls continue from. It
	// shares the run's memory: read it, do not change it. Messages and
	// Model are left out of JSON: the deltas carried the answer.
	Messages []llm.Message `json:"-"`
	// Retry describes the wait before the next attempt, on retry.
	Retry *RetryInfo `json:"retry,omitempty"`
	// Compaction describes what a compaction did, on compaction.
	Compaction *CompactionInfo `json:"compaction,omitempty"`
	// Hook describes a hook's intervention, on hook chunks.
	Hook *HookReport `json:"hook,omitempty"`
	// Permission is the permission decision that sent a call to the
	// approver (approval_request) or refused it (tool_call_error), with
	// the step of the evaluation that made it (see [Permissions]).
	Permission *PermissionDecision `json:"permission,omitempty"`
	// Err is the error of error and tool_call_error chunks, and the
	// failure that caused a retry.
	Err error `json:"-"`
	// Result is the outcome of the run, on end.
	Result *Result `json:"result,omitempty"`
	// Agent and Depth tag the chunks of a sub-agent (see [AgentTool]):
	// the name of its tool and its depth, 1 for an agent run by the
	// top-level run. They are empty for the top-level run's own chunks.
	Agent string `json:"agent,omitempty"`
	Depth int    `json:"depth,omitempty"`
}

// ToolCallInfo identifies a tool call in a [Chunk].
type ToolCallInfo struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Arguments is always valid JSON: the validated arguments (with
	// defaults applied) once the call has been parsed; before that, or
	// when parsing failed, what the model wrote ([llm.Arguments.JSON]: a
	// JSON string when it was not JSON).
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Duration is how long the tool ran, on results and errors.
	Duration time.Duration `json:"duration_ns,omitempty"`
}

// RetryInfo describes a retry of a model request.
type RetryInfo struct {
	// Attempt is the number of the attempt that failed, from 1.
	Attempt int `json:"attempt"`
	// Delay is the wait before the next attempt.
	Delay time.Duration `json:"delay_ns"`
}

// MarshalJSON writes the chunk with its error as a string field "error".
func (c Chunk) MarshalJSON() ([]byte, error) {
	type plain Chunk
	var errText string
	if c.Err != nil {
		errText = c.Err.Error()
	}
	return marshalNoEscape(struct {
		plain
		Error string `json:"error,omitempty"`
	}{plain(c), errText})
}

// marshalNoEscape encodes v as JSON without escaping <, > and &: events
// carry code and shell commands, which must read as they are.
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
