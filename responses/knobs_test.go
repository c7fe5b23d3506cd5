package responses

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
)

// TestKnobsGolden pins a request that sets every neutral knob the
// Responses API has a field for: top_p, reasoning.effort (replacing the
// client's, keeping its summary), prompt_cache_key and
// prompt_cache_retention, text.format for a structured answer, and the
// extra fields after the rest. The API has no seed and no thinking budget:
// they are not sent. Run with -update to rewrite it.
func TestKnobsGolden(t *testing.T) {
	topP, seed, no := 0.9, int64(7), false
	req := &llm.Request{
		Model:             "gpt-5",
		Messages:          []llm.Message{llm.UserMessage("Plan the release.")},
		Tools:             []llm.ToolSpec{{Name: "search", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)}},
		ParallelToolCalls: &no,
		TopP:              &topP,
		Seed:              &seed,
		Reasoning:         &llm.ReasoningConfig{Effort: "high", BudgetTokens: 4096},
		Cache:             &llm.CacheHint{Key: "tenant-42", Long: true},
		ResponseFormat: &llm.ResponseFormat{Name: "plan", Schema: json.RawMessage(
			`{"type":"object","properties":{"steps":{"type":"array","items":{"type":"string"}}},"required":["steps"],"additionalProperties":false}`), Strict: true},
		Extra: map[string]json.RawMessage{"safety_identifier": json.RawMessage(`"user-1"`)},
	}
	c := &Client{Reasoning: &Reasoning{Effort: "low", Summary: "auto"}}
	body, err := c.marshalRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "knobs.request.json", body)

	// Extra never overrides what the provider sets.
	req.Extra = map[string]json.RawMessage{"model": json.RawMessage(`"other"`)}
	if _, err := c.marshalRequest(req); err == nil || !strings.Contains(err.Error(), "model") {
		t.Errorf("an extra field overrode the model: %v", err)
	}
}
