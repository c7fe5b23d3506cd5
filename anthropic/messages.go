package anthropic

import "github.com/hrns-dev/hrns/llm"

// SystemMessage returns a system message holding text. It is
// [llm.SystemMessage].
func SystemMessage(text string) llm.Message { return llm.SystemMessage(text) }

// UserMessage returns a user message holding text. It is [llm.UserMessage].
func UserMessage(text string) llm.Message { return llm.UserMessage(text) }

// AssistantMessage returns an assistant message holding text. It is
// [llm.AssistantMessage].
func AssistantMessage(text string) llm.Message { return llm.AssistantMessage(text) }

// ToolMessage returns a tool message answering the call with the given ID
// with content. It is [llm.ToolResultMessage].
func ToolMessage(callID, content string) llm.Message {
	return llm.ToolResultMessage(callID, content)
}
