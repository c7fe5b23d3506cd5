// Package responses is the provider for OpenAI's Responses API
// (POST /v1/responses), OpenAI's current API and the one that carries a
// reasoning model's reasoning from turn to turn.
//
// A [Client] implements [llm.Model] and [llm.ModelLister]. Its zero value
// talks to OpenAI:
//
//	c := &responses.Client{APIKey: os.Getenv("OPENAI_API_KEY"), Model: "gpt-5"}
//	resp, err := llm.Collect(c.Stream(ctx, &llm.Request{
//		Messages: []llm.Message{llm.UserMessage("Say hi")},
//	}))
//
// # Stateless conversations
//
// Every request carries the whole conversation as input items and is sent
// with "store": false; previous_response_id is never used. The API could
// keep the conversation instead, but then a run would depend on state that
// only OpenAI holds: organisations with zero data retention cannot use it,
// a transcript could not be resumed from storage, replayed, edited or moved
// to another provider, and the replicas of hrns serve would all have to
// reach the same stored responses. What a stateful conversation keeps that
// a plain transcript would lose is the model's reasoning; the client asks
// for it encrypted (include: ["reasoning.encrypted_content"]) and sends the
// reasoning items back on later turns, so reasoning models keep it without
// any state on the server. Models that do not reason refuse that request;
// see [Client.EncryptedReasoning].
//
// Sending the whole conversation need not mean encoding it every turn: a
// request whose [llm.Request.Conversation] is set (the agent loop sets one
// per run) reuses the JSON of the input items the conversation's earlier
// requests encoded and encodes only the new messages, after comparing each
// message with a copy of what was encoded (a message replaced, removed or
// rewritten in place is encoded again); the body is byte for byte the same.
// The conversation also keeps its last request's encoded tools, reused
// while the tools (compared with copies of their names, descriptions,
// schemas and screens), the model and [Client.NoStrict] are unchanged.
//
// # Requests
//
//   - System messages become input messages of role "system", in place.
//   - User text becomes a content string; a user message with images or
//     documents becomes input_text, input_image and input_file parts,
//     inline as base64 data URLs (or by URL).
//   - Assistant messages become the items the model produced, in order:
//     reasoning items (their summary and encrypted content; reasoning
//     without encrypted content, such as another provider's, is not sent),
//     a message per run of text, and function_call items. Items are sent
//     without their ids, which refer to stored items. A call's arguments
//     are sent as written when they are a JSON object, as {} otherwise.
//   - Each tool result becomes a function_call_output item: a string, or,
//     when the result holds images or documents, an array of input parts,
//     which the API takes there.
//   - Tools are function tools, sent with "strict": true when their schema
//     is in the subset Structured Outputs supports (every property
//     required, no open objects, no unsupported keywords; a missing
//     "additionalProperties": false is added), and "strict": false
//     otherwise; see [Client.NoStrict].
//   - Stop sequences do not exist in this API: a request with them fails
//     with [llm.ErrUnsupported] before anything is sent.
//
// # Responses
//
// The reply is read as server-sent events. Output text arrives as
// [llm.ChunkText] (a refusal too, so that it is never lost), reasoning
// summaries as [llm.ChunkReasoning] (parts joined by a blank line), and
// function calls as [llm.ChunkToolCallStart] (with the call_id, which
// results answer, not the item id) followed by [llm.ChunkToolCallDelta]
// chunks, accumulated per output item. The call_id is a call's identity:
// an item that closes a call under another item id but with the call's
// call_id is that call, not a second one. The final [llm.ChunkDone] carries
// the assembled [llm.Response], its parts in output order; a reasoning
// item becomes an [llm.PartReasoning] part whose Text is the summary and
// whose Redacted is the encrypted content.
//
// A completed response finishes with [llm.FinishStop], or
// [llm.FinishToolCalls] when it made calls, or [llm.FinishContentFilter]
// when the model refused; an incomplete one with [llm.FinishLength] when
// max_output_tokens was reached and [llm.FinishContentFilter] when content
// was filtered. Usage counts cached input tokens as CacheReadTokens and
// reasoning tokens as ReasoningTokens. A stream that ends before
// response.completed or response.incomplete is an error wrapping
// [io.ErrUnexpectedEOF], which [llm.IsRetryable] treats as transient. A
// server that answers with one JSON response instead of a stream is
// understood too.
//
// # Errors
//
// HTTP failures, error events and response.failed are returned as
// *[llm.APIError] with Provider "openai-responses", so callers can test
// them with [errors.Is] against [llm.ErrRateLimited], [llm.ErrContextLength]
// and the other sentinels, and retry with [llm.IsRetryable] and
// [llm.RetryAfter].
package responses
