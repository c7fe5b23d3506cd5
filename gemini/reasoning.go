package gemini

import (
	"cmp"
	"strings"

	"github.com/hrns-dev/hrns/llm"
)

// ReasoningSupport reports the reasoning settings of model: Gemini 3
// models take thinking levels (thinkingConfig.thinkingLevel), Gemini 2.5
// models a thinking budget (thinkingConfig.thinkingBudget; Flash and
// Flash-Lite can think not at all, the effort "none", Pro cannot), and
// Gemini 2.0 and older do not think. A name the table does not know is
// not Known. It makes the client an [llm.ReasoningReporter].
func (c *Client) ReasoningSupport(model string) llm.ReasoningSupport {
	m := strings.ToLower(cmp.Or(model, c.Model))
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:] // "models/gemini-2.5-pro"
	}
	switch {
	case strings.HasPrefix(m, "gemini-3") && strings.Contains(m, "flash"):
		return llm.ReasoningSupport{Known: true, Efforts: []string{"minimal", "low", "medium", "high"}}
	case strings.HasPrefix(m, "gemini-3"):
		return llm.ReasoningSupport{Known: true, Efforts: []string{"low", "high"}}
	case strings.HasPrefix(m, "gemini-2.5-pro"):
		return llm.ReasoningSupport{Known: true, Budget: true, MaxBudget: 32768}
	case strings.HasPrefix(m, "gemini-2.5"):
		return llm.ReasoningSupport{Known: true, Budget: true, MaxBudget: 24576, Off: "none"}
	case strings.HasPrefix(m, "gemini-2.0"), strings.HasPrefix(m, "gemini-1"), strings.HasPrefix(m, "gemma"):
		return llm.ReasoningSupport{Known: true}
	}
	return llm.ReasoningSupport{}
}
