package llm

// ReasoningSupport says how a model's reasoning is set, as its provider
// knows it: by an effort level ([ReasoningConfig.Effort]), by a thinking
// budget in tokens ([ReasoningConfig.BudgetTokens]), or not at all.
type ReasoningSupport struct {
	// Known says that the provider knows the model; when false the
	// other fields say nothing (a local model behind an
	// OpenAI-compatible server, a model newer than the provider's
	// table).
	Known bool
	// Efforts are the effort levels the model takes, lowest first
	// (OpenAI's "low", "medium", "high"; Gemini 3's thinking levels);
	// empty when it takes none.
	Efforts []string
	// Budget says that the model takes a thinking budget in tokens
	// (Anthropic's extended thinking, Gemini 2.5's thinkingBudget);
	// MaxBudget, when not 0, is the largest it takes.
	Budget    bool
	MaxBudget int
	// Off is the effort that turns the model's reasoning off ("none",
	// or "minimal" where that is the least), empty when it cannot be
	// turned off.
	Off string
}

// Reasons reports whether the model has a reasoning setting: effort
// levels or a thinking budget.
func (s ReasoningSupport) Reasons() bool { return len(s.Efforts) > 0 || s.Budget }

// A ReasoningReporter is a [Model] that knows the reasoning settings of
// the models it serves: the providers of this module implement it from a
// table of their models (see each provider's ReasoningSupport).
type ReasoningReporter interface {
	ReasoningSupport(model string) ReasoningSupport
}
