// Package gemini is the provider for Google's Gemini API (the native API of
// generativelanguage.googleapis.com, not its OpenAI-compatible endpoint),
// streaming with POST /v1beta/models/{model}:streamGenerateContent?alt=sse.
//
// A [Client] implements [llm.Model] and [llm.ModelLister]. Its zero value
// talks to Google:
//
//	c := &gemini.Client{APIKey: os.Getenv("GEMINI_API_KEY"), Model: "gemini-2.5-flash"}
//	resp, err := llm.Collect(c.Stream(ctx, &llm.Request{
//		Messages: []llm.Message{llm.UserMessage("Say hi")},
//	}))
//
// # Requests
//
//   - System messages, wherever they are, are joined (by a blank line) into
//     the systemInstruction.
//   - User messages become "user" contents of text, inlineData (images and
//     documents given as bytes, base64) and fileData (given by URL) parts.
//   - Assistant messages become "model" contents holding the parts the
//     model produced, each thought signature on the part it came with:
//     thoughts as parts with "thought": true, text, and functionCall parts
//     whose args are the arguments as written when they are a JSON object,
//     {} otherwise. Reasoning holding only encrypted content (another
//     provider's) is not sent.
//   - Tool messages become "user" contents of functionResponse parts, one
//     per result, in order: {"output": text}, or {"error": text} for a
//     failed call. Function responses take no media on most models, so the
//     images and documents of the results follow the function responses in
//     the same content, each result's after a text part naming its call.
//   - Consecutive contents of the same role are merged into one, and empty
//     ones are left out: the API wants turns that alternate and hold parts.
//   - Tools are function declarations whose parameters are rendered into
//     the subset of the OpenAPI schema the API accepts (see the rules in
//     schema.go and docs/providers.md): upper-case types, nullable instead
//     of a null type, $ref inlined, const as an enum, property order kept.
//     A tool without parameters is declared without any.
//
// # Calls, their IDs and thought signatures
//
// Gemini 3 models give each function call an id, which the function
// response must repeat; earlier models give none and match responses to
// calls by name and order. A call without an id (or with one already used
// in the response) gets an ID made up by this package, starting with
// "gemini_call_" and the response's ID; such IDs are never sent back.
//
// Thinking models sign their turns with thought signatures, which must be
// sent back exactly on the part they came with (Gemini 3 refuses function
// calls of the current turn without them). A signature on a function call
// is kept in [llm.ToolCall.Signature]; one on a thought in its
// [llm.Reasoning.Signature]; one on text (or on an empty text part, as the
// last event of a stream may hold) as a reasoning part holding only the
// signature, right after the text. Requests put each back where it was.
//
// # Long conversations
//
// The API is stateless: each request carries the whole conversation. A
// request whose [llm.Request.Conversation] is set (the agent loop sets one
// per run) reuses the JSON of the contents the conversation's earlier
// requests encoded, as the OpenAI client does, so a turn costs about the
// same at the 500th turn as at the 10th; the body sent is byte for byte the
// same as without it. Each turn encodes the messages new since the last,
// and the last content again, which a later message of the same role may
// merge with. When the conversation has an owner that reports its rewrites
// ([llm.Conversation.Own], as the agent loop's runs do), what was encoded
// is reused without reading the messages again until the owner calls
// [llm.Conversation.Rewrote]; otherwise each message is compared with a
// copy of what was encoded. The conversation also keeps its last
// request's encoded tools, reused while the tools are unchanged (compared
// with copies of their names, descriptions and schemas), so that a turn
// does not translate every schema again. What a conversation keeps is
// bounded (32 MiB) and lives as long as its [llm.Conversation].
//
// # Responses
//
// The reply is read as server-sent events, each a GenerateContentResponse
// holding the new parts of the first candidate. Text arrives as
// [llm.ChunkText], thoughts as [llm.ChunkReasoning], and each function call,
// which arrives whole, as an [llm.ChunkToolCallStart] and one
// [llm.ChunkToolCallDelta] with its arguments. The stream has no end event:
// it is complete when the candidate has a finishReason and the body ends;
// a body that ends before is an error wrapping [io.ErrUnexpectedEOF], which
// [llm.IsRetryable] treats as transient. A server answering with JSON (a
// response, or the array streamGenerateContent gives without alt=sse) is
// understood too.
//
// STOP finishes with [llm.FinishStop], or [llm.FinishToolCalls] when the
// model made calls; MAX_TOKENS with [llm.FinishLength]; any other reason
// (MALFORMED_FUNCTION_CALL, OTHER...) with [llm.FinishOther]. Usage counts
// the prompt (cached tokens and tool use prompts included) as input, the
// answer and the thoughts as output, cachedContentTokenCount as
// CacheReadTokens and thoughtsTokenCount as ReasoningTokens.
//
// # Errors
//
// HTTP failures and errors inside the stream are google.rpc statuses,
// returned as *[llm.APIError] with Provider "gemini", Type the status
// (RESOURCE_EXHAUSTED, UNAVAILABLE, INVALID_ARGUMENT...) and Code the
// ErrorInfo reason or the numeric code, so [errors.Is] against
// [llm.ErrRateLimited], [llm.ErrOverloaded], [llm.ErrAuth] (an invalid key
// is a 400 with reason API_KEY_INVALID), [llm.ErrContextLength] (a 400 whose
// message says the input is over the token limit) and [llm.ErrBadRequest]
// works, and [llm.RetryAfter] has the RetryInfo delay. A blocked prompt
// (promptFeedback.blockReason) and an answer withheld for its content
// (finishReason SAFETY, RECITATION, BLOCKLIST, PROHIBITED_CONTENT, SPII and
// their image forms) are errors of class [llm.ErrContentFiltered], with
// Type "content_filter" and Code the reason; they are not retried.
package gemini
