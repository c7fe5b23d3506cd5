// Package llm is the provider-neutral contract between the agent loop and the
// model providers.
//
// It defines one message model ([Message] made of [Part]s: text, images,
// documents, tool calls, tool results and reasoning), tool specs ([ToolSpec]),
// the streaming request and response ([Request], [Chunk], [Response]), token
// usage ([Usage]), finish reasons and typed errors ([APIError] and the
// sentinels [ErrRateLimited], [ErrAuth], [ErrContextLength], ...).
//
// Providers (packages openai, anthropic, responses and gemini) implement
// [Model] and translate at their edge: nothing above them sees wire JSON.
// This package does no HTTP.
//
//	model := openai.New(&openai.Options{APIKey: key, Model: "gpt-4.1"})
//	resp, err := llm.Collect(model.Stream(ctx, &llm.Request{
//		Messages: []llm.Message{llm.UserMessage("Say hi")},
//	}))
//
// # Streams
//
// [Model.Stream] returns an iterator of [Chunk]s: text and reasoning deltas,
// tool-call starts and argument deltas, and exactly one final chunk of kind
// [ChunkDone] carrying the assembled [Response]. An error ends the stream; no
// chunk follows it.
package llm
