// Package openaimodels knows what OpenAI's models take, for the two
// providers that speak to them (openai, Chat Completions, and responses,
// the Responses API): which reasoning efforts each model family accepts.
// It is a table of families by name, the same for both APIs.
package openaimodels

import (
	"strings"

	"github.com/hrns-dev/hrns/llm"
)

// ReasoningSupport returns the reasoning settings of the OpenAI model
// name, which may carry a router's "openai/" prefix. Models the table
// does not know (another vendor's model behind a compatible server, a
// family newer than the table) are not Known.
func ReasoningSupport(name string) llm.ReasoningSupport {
	m := strings.ToLower(name)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	family := func(prefixes ...string) bool {
		for _, p := range prefixes {
			if m == p || strings.HasPrefix(m, p+"-") || strings.HasPrefix(m, p+".") {
				return true
			}
		}
		return false
	}
	known := func(efforts []string, off string) llm.ReasoningSupport {
		return llm.ReasoningSupport{Known: true, Efforts: efforts, Off: off}
	}
	switch {
	case strings.HasPrefix(m, "gpt-5") && strings.Contains(m, "chat"):
		return known(nil, "") // gpt-5-chat-latest does not reason
	case strings.HasPrefix(m, "gpt-5.1") && strings.Contains(m, "codex-max"):
		return known([]string{"none", "low", "medium", "high", "xhigh"}, "none")
	case strings.HasPrefix(m, "gpt-5.1"):
		return known([]string{"none", "low", "medium", "high"}, "none")
	case strings.HasPrefix(m, "gpt-5."):
		// gpt-5.2 and later
		return known([]string{"none", "low", "medium", "high", "xhigh"}, "none")
	case family("gpt-5"):
		return known([]string{"minimal", "low", "medium", "high"}, "")
	case family("o1-mini", "o1-preview"):
		return known(nil, "") // they reason, with no setting
	case family("o1", "o3", "o4-mini", "o3-mini", "gpt-oss"):
		return known([]string{"low", "medium", "high"}, "")
	case family("gpt-4", "gpt-4o", "gpt-4.1", "gpt-3.5", "chatgpt-4o", "gpt-4-turbo"):
		return known(nil, "")
	}
	return llm.ReasoningSupport{}
}
