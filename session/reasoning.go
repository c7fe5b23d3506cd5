package session

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hrns-dev/hrns/api"
	"github.com/hrns-dev/hrns/llm"
)

// reasoningBudgets are the thinking budgets, in tokens, of the API's
// efforts for a model that takes a budget (Anthropic, Gemini 2.5); a
// model's own bound (llm.ReasoningSupport.MaxBudget) caps them.
var reasoningBudgets = map[string]int{"low": 2048, "medium": 8192, "high": 16384, "xhigh": 32768}

// effortOrder ranks the effort levels providers name, least first, so that
// an effort a model lacks becomes the nearest it has at or above it.
var effortOrder = []string{"none", "minimal", "low", "medium", "high", "xhigh", "max"}

// checkReasoningEffort reports an effort that is not one of the API's.
func checkReasoningEffort(effort string) error {
	if !slices.Contains(api.ReasoningEfforts, effort) {
		//lint:ignore ST1005 the API's validation wording (pydantic's), as H's API answers
		return fmt.Errorf("Input should be %s", quotedList(api.ReasoningEfforts))
	}
	return nil
}

// reasoningConfig turns an agent's reasoning_effort into the model
// request's reasoning setting for model, as model's provider takes it
// (sup): an effort level (OpenAI's reasoning_effort, Gemini 3's
// thinkingLevel), or a thinking budget (Anthropic's extended thinking,
// Gemini 2.5's thinkingBudget). "disabled" turns reasoning off where the
// model can, and is nothing for a model that does not reason; any other
// effort for a model without a reasoning setting is refused, naming the
// model. A model the provider does not know (sup not Known) gets the
// effort as a level, "disabled" as "none" and "xhigh" as "high": the
// model's server decides.
func reasoningConfig(model, effort string, sup llm.ReasoningSupport) (*llm.ReasoningConfig, error) {
	if effort == "" {
		return nil, nil
	}
	if err := checkReasoningEffort(effort); err != nil {
		return nil, err
	}
	if !sup.Known {
		switch effort {
		case "disabled":
			return &llm.ReasoningConfig{Effort: "none"}, nil
		case "xhigh":
			return &llm.ReasoningConfig{Effort: "high"}, nil
		}
		return &llm.ReasoningConfig{Effort: effort}, nil
	}
	if !sup.Reasons() {
		if effort == "disabled" {
			return nil, nil
		}
		return nil, fmt.Errorf("model %q has no reasoning setting: reasoning_effort %q cannot be applied (only \"disabled\" or null)", model, effort)
	}
	if effort == "disabled" {
		if sup.Off == "" {
			return nil, fmt.Errorf("model %q cannot turn its reasoning off: reasoning_effort \"disabled\" cannot be applied (use \"low\" or null)", model)
		}
		return &llm.ReasoningConfig{Effort: sup.Off}, nil
	}
	if len(sup.Efforts) > 0 {
		return &llm.ReasoningConfig{Effort: nearestEffort(effort, sup.Efforts)}, nil
	}
	b := reasoningBudgets[effort]
	if sup.MaxBudget > 0 && b > sup.MaxBudget {
		b = sup.MaxBudget
	}
	return &llm.ReasoningConfig{BudgetTokens: b}, nil
}

// nearestEffort returns effort if the model has it, else the least of
// its levels above it, else its highest.
func nearestEffort(effort string, levels []string) string {
	if slices.Contains(levels, effort) {
		return effort
	}
	rank := slices.Index(effortOrder, effort)
	for _, l := range levels {
		if r := slices.Index(effortOrder, l); r > rank && l != "none" {
			return l
		}
	}
	return levels[len(levels)-1]
}

// reasoningSupport is what the manager's model says of name's reasoning,
// or nothing Known when it does not say.
func (m *Manager) reasoningSupport(name string) llm.ReasoningSupport {
	if r, ok := m.model.(llm.ReasoningReporter); ok {
		return r.ReasoningSupport(name)
	}
	return llm.ReasoningSupport{}
}

func quotedList(vals []string) string {
	q := make([]string, len(vals))
	for i, v := range vals {
		q[i] = "'" + v + "'"
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// ReasoningFor turns the API's reasoning effort ("disabled", "low",
// "medium", "high", "xhigh") into the reasoning setting of a request to
// model name served by m, as a session's agent gets it; the error says
// why a model cannot take it (it has no reasoning setting, or cannot turn
// reasoning off). "" gives nil. hrns run and hrns serve's own agents use
// it, so that every front door reads reasoning_effort alike.
func ReasoningFor(m llm.Model, name, effort string) (*llm.ReasoningConfig, error) {
	var sup llm.ReasoningSupport
	if r, ok := m.(llm.ReasoningReporter); ok {
		sup = r.ReasoningSupport(name)
	}
	return reasoningConfig(firstNonEmpty(name, "(the provider's default model)"), effort, sup)
}
