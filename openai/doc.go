// Package openai is the provider for OpenAI-compatible Chat Completions
// endpoints: OpenAI itself and the many servers that speak its wire format,
// such as Ollama, vLLM, the llama.cpp server, OpenRouter and DeepSeek.
//
// A [Client] implements [llm.Model] and [llm.ModelLister]. Its zero value
// talks to OpenAI; set BaseURL to use another server:
//
//	c := &openai.Client{BaseURL: "http://localhost:11434/v1", Model: "qwen3"}
//	resp, err := llm.Collect(c.Stream(ctx, &llm.Request{
//		Messages: []llm.Message{llm.UserMessage("Say hi")},
//	}))
//
// # Requests
//
// Every request streams (stream: true) and asks for a final usage chunk
// (stream_options.include_usage). Messages are rendered as Chat Completions
// expects them:
//
//   - System messages become role "system" messages.
//   - User text becomes a content string; a user message with images or
//     documents becomes an array of content parts. Images are sent inline as
//     data URLs (or by URL); documents as "file" parts with inline file_data.
//   - Assistant messages carry their text and tool_calls. Reasoning parts are
//     not sent back: Chat Completions has no field for them.
//   - Each tool result becomes one role "tool" message. Chat Completions
//     takes only text there, so the images and documents of tool results
//     follow the turn's tool messages in one role "user" message, each
//     after a line "Attached by tool call <id> (<tool>):"; the tool message
//     says that its attachments follow.
//
// The output cap is sent as max_tokens, which every compatible server
// understands. OpenAI's reasoning models accept only max_completion_tokens;
// set [Client.UseMaxCompletionTokens] for them.
//
// # Long conversations
//
// Chat Completions is stateless: each request carries the whole
// conversation. A request whose [llm.Request.Conversation] is set (the
// agent loop sets one per run) reuses the JSON of the messages the
// conversation's earlier requests encoded and encodes only the new ones,
// so a turn costs about the same at the 500th turn as at the 10th; the body
// sent is byte for byte the same as without it. When the conversation has
// an owner that reports its rewrites ([llm.Conversation.Own], as the agent
// loop's runs do), the client reuses what it encoded without reading the
// messages again until the owner calls [llm.Conversation.Rewrote]. Otherwise,
// before reusing anything, the client compares each message with a copy of
// what it encoded (the same strings, the same slices holding the same
// bytes), so a message the caller replaced, removed or rewrote in place,
// down to one byte of tool call arguments or of an image, is encoded again,
// and so is everything after it. What a conversation keeps is bounded (32 MiB; messages past it are
// encoded at every turn) and lives as long as its [llm.Conversation].
//
// # Responses
//
// The reply is read as server-sent events. Text arrives as [llm.ChunkText]
// (a refusal is reported as text too, so it is never lost), reasoning as
// [llm.ChunkReasoning] (from delta.reasoning_content, as DeepSeek and vLLM
// send it, or delta.reasoning, as OpenRouter and Ollama do), and tool calls
// as [llm.ChunkToolCallStart] followed by [llm.ChunkToolCallDelta] chunks.
// The final [llm.ChunkDone] carries the assembled [llm.Response]: reasoning,
// then text, then tool calls.
//
// Tool-call deltas are accumulated robustly against the quirks of compatible
// servers: a missing index, an index reused for several calls with distinct
// ids (even when their deltas interleave), ids and names only on a call's
// first delta, an id that comes after it, complete arguments in one delta,
// and empty ids. A delta with an id belongs to the call with that id. Calls
// without an id get a generated one ("call_0", "call_1", ...), and ids are
// unique within a response. The response lists the calls in the order of
// their indexes; the Index of the chunks numbers them in the order they were
// announced, which differs only when a server sends a lower index after a
// higher one. An id that comes after a call was announced is the call's id
// in the response, not in its chunks.
//
// A stream that ends after a finish_reason but without "data: [DONE]" is
// accepted; one that ends before either is reported as an error wrapping
// [io.ErrUnexpectedEOF], which [llm.IsRetryable] treats as transient. A
// server that ignores stream: true and answers with a single JSON completion
// is understood too.
//
// # Errors
//
// HTTP failures and error objects inside the stream are returned as
// *[llm.APIError] with Provider "openai", so callers can test them with
// [errors.Is] against [llm.ErrRateLimited], [llm.ErrContextLength] and the
// other sentinels, and retry with [llm.IsRetryable] and [llm.RetryAfter].
package openai
