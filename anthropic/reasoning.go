package anthropic

import (
	"cmp"
	"strings"

	"github.com/hrns-dev/hrns/llm"
)

// ReasoningSupport reports the reasoning settings of model: Claude 3.7
// and the Claude models after it take an extended-thinking budget
// ([llm.ReasoningConfig.BudgetTokens]) and can think not at all (the
// effort "none" sends thinking {"type": "disabled"}); Claude 3.5 and
// older have no thinking. A name that is not a Claude model's is not
// Known. It makes the client an [llm.ReasoningReporter].
func (c *Client) ReasoningSupport(model string) llm.ReasoningSupport {
	m := strings.ToLower(cmp.Or(model, c.Model))
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	switch {
	case !strings.HasPrefix(m, "claude-"):
		return llm.ReasoningSupport{}
	case strings.HasPrefix(m, "claude-3-7"), strings.HasPrefix(m, "claude-3.7"):
		return llm.ReasoningSupport{Known: true, Budget: true, Off: "none"}
	case strings.HasPrefix(m, "claude-3"), strings.HasPrefix(m, "claude-2"), strings.HasPrefix(m, "claude-instant"):
		return llm.ReasoningSupport{Known: true}
	case strings.HasPrefix(m, "claude-opus-4-0"), strings.HasPrefix(m, "claude-opus-4-1"), m == "claude-opus-4" || strings.HasPrefix(m, "claude-opus-4-2025"):
		// 32k output tokens: the budget leaves room for the answer.
		return llm.ReasoningSupport{Known: true, Budget: true, MaxBudget: 24000, Off: "none"}
	}
	return llm.ReasoningSupport{Known: true, Budget: true, Off: "none"}
}
