package gemini

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
)

// TestKnobsGolden pins a request that sets every neutral knob the Gemini
// API has a field for: stop sequences, max output tokens, temperature,
// top-p, seed, the thinking budget (with thought summaries), a structured
// answer (responseMimeType and responseSchema), and the extra fields after
// the rest. The cache hint and parallel tool calls have no field: they are
// not sent. Run with -update to rewrite it.
func TestKnobsGolden(t *testing.T) {
	req := knobsRequest()
	body, err := (&Client{}).marshalRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "knobs.request.json", body)

	// Extra never overrides what the provider sets.
	req.Extra = map[string]json.RawMessage{"generationConfig": json.RawMessage(`{}`)}
	if _, err := (&Client{}).marshalRequest(req); err == nil || !strings.Contains(err.Error(), "generationConfig") {
		t.Errorf("an extra field overrode the generation config: %v", err)
	}
}

// knobsRequest is the request TestKnobsGolden pins.
func knobsRequest() *llm.Request {
	temp, topP, seed, no := 0.3, 0.9, int64(7), false
	return &llm.Request{
		Model:             "gemini-2.5-pro",
		Messages:          []llm.Message{llm.SystemMessage("Plan carefully."), llm.UserMessage("Plan the release.")},
		Tools:             []llm.ToolSpec{{Name: "search", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)}},
		ToolChoice:        llm.ToolChoice{Mode: llm.ToolChoiceRequired},
		ParallelToolCalls: &no,
		MaxTokens:         2048,
		Temperature:       &temp,
		StopSequences:     []string{"END"},
		TopP:              &topP,
		Seed:              &seed,
		Reasoning:         &llm.ReasoningConfig{Effort: "high", BudgetTokens: 4096},
		Cache:             &llm.CacheHint{Key: "tenant-42", Long: true},
		ResponseFormat: &llm.ResponseFormat{Name: "plan", Description: "The release plan.", Schema: json.RawMessage(
			`{"type":"object","properties":{"steps":{"type":"array","items":{"type":"string"}},"risk":{"type":["string","null"]}},"required":["steps","risk"],"additionalProperties":false}`), Strict: true},
		Extra: map[string]json.RawMessage{"safetySettings": json.RawMessage(`[{"category":"HARM_CATEGORY_DANGEROUS_CONTENT","threshold":"BLOCK_ONLY_HIGH"}]`)},
	}
}

// TestThinkingConfig pins how the reasoning knobs become thinkingConfig.
func TestThinkingConfig(t *testing.T) {
	for _, tt := range []struct {
		client    Client
		reasoning *llm.ReasoningConfig
		want      string
	}{
		{Client{}, nil, ""},
		{Client{IncludeThoughts: true}, nil, `{"includeThoughts":true}`},
		{Client{}, &llm.ReasoningConfig{Effort: "low"}, `{"includeThoughts":true,"thinkingLevel":"low"}`},
		{Client{}, &llm.ReasoningConfig{BudgetTokens: 1024}, `{"includeThoughts":true,"thinkingBudget":1024}`},
		{Client{}, &llm.ReasoningConfig{Effort: "none"}, `{"thinkingBudget":0}`},
	} {
		body, err := tt.client.marshalRequest(&llm.Request{Messages: []llm.Message{llm.UserMessage("x")}, Reasoning: tt.reasoning})
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			GenerationConfig struct{ ThinkingConfig json.RawMessage }
		}
		json.Unmarshal(body, &got)
		if string(got.GenerationConfig.ThinkingConfig) != tt.want {
			t.Errorf("%+v %+v: %s, want %s", tt.client, tt.reasoning, got.GenerationConfig.ThinkingConfig, tt.want)
		}
	}
}
