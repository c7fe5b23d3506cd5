package anthropic

import "github.com/hrns-dev/hrns/llm"

// The helpers below build provider-neutral messages; they are the functions
// of package llm under the names the seed's openai package uses. They stay
// for existing callers: messages belong to llm, not to a provider.

// SystemMessage returns a system message holding text.
//
// Deprecated: use [llm.SystemMessage]; messages do not depend on the
// provider.
func SystemMessage(text string) llm.Message { return llm.SystemMessage(text) }

// UserMessage returns a user message holding text.
//
// Deprecated: use [llm.UserMessage].
func UserMessage(text string) llm.Message { return llm.UserMessage(text) }

// AssistantMessage returns an assistant message holding text.
//
// Deprecated: use [llm.AssistantMessage].
func AssistantMessage(text string) llm.Message { return llm.AssistantMessage(text) }

// ToolMessage returns a tool message answering the call with the given ID
// with content.
//
// Deprecated: use [llm.ToolResultMessage].
func ToolMessage(callID, content string) llm.Message {
	return llm.ToolResultMessage(callID, content)
}
