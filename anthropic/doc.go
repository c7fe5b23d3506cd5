// Package anthropic is the provider for the Anthropic Messages API, and for
// servers and gateways that speak it.
//
// A [Client] implements [llm.Model] and [llm.ModelLister]. Its zero value
// talks to Anthropic; give it a key and a model:
//
//	c := &anthropic.Client{APIKey: os.Getenv("ANTHROPIC_API_KEY"), Model: "claude-sonnet-4-5"}
//	resp, err := llm.Collect(c.Stream(ctx, &llm.Request{
//		Messages: []llm.Message{llm.UserMessage("Say hi")},
//	}))
//
// [NewFromEnv] reads ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL and
// ANTHROPIC_MODEL instead.
//
// # Requests
//
// Every request streams (stream: true) to {BaseURL}/v1/messages with the
// x-api-key and anthropic-version headers. The API requires max_tokens:
// [llm.Request.MaxTokens] is sent, else [Client.MaxTokens], else
// [DefaultMaxTokens]. Messages are rendered as the API expects them:
//
//   - System messages, wherever they appear, are joined into the top-level
//     "system" array, one text block each.
//   - User messages become user turns of text, image and document blocks.
//     Images are sent inline as base64 (JPEG, PNG, GIF or WebP) or by URL;
//     PDFs inline or by URL; text documents inline as plain text. Any other
//     media type fails with an error wrapping [llm.ErrUnsupported], before
//     anything is sent: content is never silently dropped.
//   - Tool messages become user turns of tool_result blocks, which carry
//     text, images and documents, and is_error.
//   - Assistant messages carry thinking, text and tool_use blocks. Tool-call
//     arguments that are not a JSON object (a call the model cut short or
//     garbled) are sent as {}, so a transcript holding one can go back to
//     the API.
//   - Consecutive turns of the same role are merged, since the API wants
//     user and assistant turns to alternate; in a merged user turn tool
//     results come first, as the API requires.
//
// Tools are sent in order as {name, description, input_schema}.
// [llm.ToolChoice] maps to tool_choice auto, any (for required), tool and
// none; disable_parallel_tool_use is set only when
// [llm.Request.ParallelToolCalls] is explicitly false.
//
// # Prompt caching
//
// The API caches the prefix of a request up to each cache_control
// breakpoint. By default ([DefaultCache]) a client puts one on the last
// tool, one on the last system block, one on the last content block of the
// conversation, and one where the previous request of an agent loop ended
// (the user turn before the last assistant turn). Each turn then reads what
// the previous one wrote, even when the model's turn added more blocks than
// the API looks back over, and writes only what is new. [Client.Cache]
// selects the breakpoints and their TTL; &CachePolicy{} turns caching off.
//
// # Long conversations
//
// The Messages API is stateless: each request carries the whole
// conversation. A request whose [llm.Request.Conversation] is set (the
// agent loop sets one per run) reuses the JSON of the turns the
// conversation's earlier requests encoded, as the OpenAI client does, so a
// turn costs about the same at the 500th turn as at the 10th; the body sent
// is byte for byte the same as without it. Each turn encodes the messages
// new since the last, and the last turns again: the last user turn before
// the last turn and those after it, whose breakpoints move and which a
// later message of the same role may merge with. When the conversation has
// an owner that reports its rewrites ([llm.Conversation.Own], as the agent
// loop's runs do), what was encoded is reused without reading the messages
// again until the owner calls [llm.Conversation.Rewrote]; otherwise each
// message is compared with a copy of what was encoded. What a conversation
// keeps is bounded (32 MiB) and lives as long as its [llm.Conversation].
//
// # Thinking
//
// [Client.Thinking] sends a thinking configuration (adaptive, or enabled
// with a token budget) and [Client.Effort] the output effort. Thinking
// blocks stream as [llm.ChunkReasoning] chunks and are kept in the response
// as [llm.PartReasoning] parts with their signature; redacted_thinking
// blocks are kept as [llm.Reasoning.Redacted]. On later turns they are sent
// back first in their assistant turn, unchanged, as the API requires when
// thinking is used with tools. Reasoning without a signature (from another
// provider) is not sent: the API would reject it.
//
// # Responses
//
// The reply is read as server-sent events. Text arrives as [llm.ChunkText],
// thinking as [llm.ChunkReasoning], and each tool_use block as an
// [llm.ChunkToolCallStart] (Index numbers the calls in the order their
// blocks start) followed by [llm.ChunkToolCallDelta] chunks with the
// partial JSON of its input. The final [llm.ChunkDone] carries the
// assembled [llm.Response], its parts in the order of the blocks' indexes,
// which is the order of the chunks unless blocks start out of order. A tool
// call without input deltas has the arguments "{}". Events after
// message_stop are ignored; a block started twice, or a delta or stop for a
// block never started, is an error.
//
// stop_reason maps to [llm.FinishReason]: end_turn and stop_sequence to
// stop, tool_use to tool_calls, max_tokens and model_context_window_exceeded
// to length, refusal to content_filter, anything else to other.
//
// [llm.Usage.InputTokens] counts the whole prompt: the API's input_tokens
// plus cache_read_input_tokens plus cache_creation_input_tokens, which the
// API counts apart. CacheReadTokens and CacheWriteTokens hold the last two.
//
// A stream that ends without message_stop but after the stop reason is
// accepted; one that ends before is reported as an error wrapping
// [io.ErrUnexpectedEOF], which [llm.IsRetryable] treats as transient. A
// server that answers with one JSON message instead of a stream is
// understood too.
//
// # Errors
//
// HTTP failures and error events inside the stream (such as
// overloaded_error) are returned as *[llm.APIError] with Provider
// "anthropic", the error type, the message, the request-id header as
// RequestID and the retry-after header as RetryAfter. Callers test them with
// [errors.Is] against [llm.ErrRateLimited], [llm.ErrOverloaded] (HTTP 529
// and stream overloads included), [llm.ErrContextLength] ("prompt is too
// long") and the other sentinels, and retry with [llm.IsRetryable].
package anthropic
