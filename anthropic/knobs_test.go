package anthropic

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
)

// knobsRequest sets every request knob the loop passes through.
func knobsRequest() *llm.Request {
	topP := 0.9
	seed := int64(7)
	no := false
	return &llm.Request{
		Model:             "claude-sonnet-4-5",
		Messages:          []llm.Message{SystemMessage("Be brief."), UserMessage("Plan the release.")},
		Tools:             []llm.ToolSpec{{Name: "search", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)}},
		ToolChoice:        llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "search"},
		ParallelToolCalls: &no,
		TopP:              &topP,
		Seed:              &seed, // no such field: not sent
		StopSequences:     []string{"END"},
		Reasoning:         &llm.ReasoningConfig{Effort: "high", BudgetTokens: 16000},
		Cache:             &llm.CacheHint{Key: "tenant-42", Long: true},
		Extra: map[string]json.RawMessage{
			"top_k":    json.RawMessage(`40`),
			"metadata": json.RawMessage(`{"user_id": "u-1"}`),
		},
	}
}

// TestKnobsGolden pins the body of a request that sets every knob:
// stop_sequences, tool_choice with disable_parallel_tool_use, top_p, a
// thinking budget (which raises the default max_tokens), the effort, the
// one-hour cache TTL, and the extra fields after the rest. Run with -update
// to rewrite it.
func TestKnobsGolden(t *testing.T) {
	c := Client{}
	body, err := c.marshalRequest(knobsRequest())
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "knobs.request.json", body)
}

func TestRenderKnobs(t *testing.T) {
	t.Parallel()
	const hi = `"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]`
	const hiNoCache = `"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]`
	tests := []struct {
		name   string
		client Client
		set    func(r *llm.Request)
		want   string // the body, or a substring of the error
		fail   bool
	}{
		{"effort only", Client{Model: "m"}, func(r *llm.Request) { r.Reasoning = &llm.ReasoningConfig{Effort: "low"} },
			`{"model":"m","max_tokens":8192,` + hi + `,"output_config":{"effort":"low"},"stream":true}`, false},
		{"the request's budget wins over the client's thinking, keeping its display",
			Client{Model: "m", Thinking: &Thinking{Type: ThinkingAdaptive, Display: "omitted"}, Effort: "max"},
			func(r *llm.Request) { r.Reasoning = &llm.ReasoningConfig{BudgetTokens: 2048} },
			`{"model":"m","max_tokens":8192,` + hi + `,"thinking":{"type":"enabled","budget_tokens":2048,"display":"omitted"},"output_config":{"effort":"max"},"stream":true}`, false},
		{"cache off", Client{Model: "m"}, func(r *llm.Request) { r.Cache = &llm.CacheHint{Off: true, Long: true} },
			`{"model":"m","max_tokens":8192,` + hiNoCache + `,"stream":true}`, false},
		{"cache long", Client{Model: "m"}, func(r *llm.Request) { r.Cache = &llm.CacheHint{Long: true} },
			`{"model":"m","max_tokens":8192,` + strings.ReplaceAll(hi, `"ephemeral"}`, `"ephemeral","ttl":"1h"}`) + `,"stream":true}`, false},
		{"seed is not sent", Client{Model: "m", Cache: &CachePolicy{}}, func(r *llm.Request) { s := int64(1); r.Seed = &s },
			`{"model":"m","max_tokens":8192,` + hiNoCache + `,"stream":true}`, false},
		{"extra adds fields", Client{Model: "m", Cache: &CachePolicy{}}, func(r *llm.Request) {
			r.Extra = map[string]json.RawMessage{"top_k": json.RawMessage(`5`)}
		}, `{"model":"m","max_tokens":8192,` + hiNoCache + `,"stream":true,"top_k":5}`, false},
		{"extra may not replace a field", Client{Model: "m"}, func(r *llm.Request) {
			r.Extra = map[string]json.RawMessage{"max_tokens": json.RawMessage(`1`)}
		}, `extra field "max_tokens" is set by the provider`, true},
		{"extra must be JSON", Client{Model: "m"}, func(r *llm.Request) {
			r.Extra = map[string]json.RawMessage{"x": nil}
		}, `extra field "x" is not JSON`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := userRequest("hi")
			tt.set(req)
			got, err := tt.client.marshalRequest(req)
			if tt.fail {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err %v, want %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("body\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}
