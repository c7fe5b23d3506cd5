package openai

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
)

// knobsRequest sets every request knob the loop passes through.
func knobsRequest() *llm.Request {
	topP, temp := 0.9, 0.3
	seed := int64(7)
	no := false
	return &llm.Request{
		Model:             "gpt-5",
		Messages:          []llm.Message{SystemMessage("Be brief."), UserMessage("Plan the release.")},
		Tools:             []llm.ToolSpec{{Name: "search", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)}},
		ToolChoice:        llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "search"},
		ParallelToolCalls: &no,
		MaxTokens:         2048,
		Temperature:       &temp,
		TopP:              &topP,
		Seed:              &seed,
		StopSequences:     []string{"END"},
		Reasoning:         &llm.ReasoningConfig{Effort: "high", BudgetTokens: 4096},
		Cache:             &llm.CacheHint{Key: "tenant-42", Long: true},
		Extra: map[string]json.RawMessage{
			"verbosity":         json.RawMessage(`"low"`),
			"safety_identifier": json.RawMessage(`"user-1"`),
			"metadata":          json.RawMessage(`{"run": "r1"}`),
		},
	}
}

// TestKnobsGolden pins the body of a request that sets every knob: stop,
// parallel_tool_calls, tool_choice, top_p, seed, reasoning_effort (the
// budget has no field in Chat Completions), prompt_cache_key and
// prompt_cache_retention, and the extra fields after the rest. Run with
// -update to rewrite it.
func TestKnobsGolden(t *testing.T) {
	c := Client{UseMaxCompletionTokens: true}
	body, err := c.marshalRequest(knobsRequest())
	if err != nil {
		t.Fatal(err)
	}
	checkBodyGolden(t, "knobs.request.json", body)
}

func TestRenderKnobs(t *testing.T) {
	t.Parallel()
	const head = `{"model":"m","messages":[{"role":"user","content":"hi"}],`
	const stream = `"stream":true,"stream_options":{"include_usage":true}`
	tests := []struct {
		name string
		set  func(r *llm.Request)
		want string // the body, or a substring of the error
		fail bool
	}{
		{"effort only", func(r *llm.Request) { r.Reasoning = &llm.ReasoningConfig{Effort: "minimal"} },
			head + `"reasoning_effort":"minimal",` + stream + `}`, false},
		{"a budget alone is not sent", func(r *llm.Request) { r.Reasoning = &llm.ReasoningConfig{BudgetTokens: 2048} },
			head + stream + `}`, false},
		{"cache key without long retention", func(r *llm.Request) { r.Cache = &llm.CacheHint{Key: "k", Off: true} },
			head + `"prompt_cache_key":"k",` + stream + `}`, false},
		{"extra adds fields in name order", func(r *llm.Request) {
			r.Extra = map[string]json.RawMessage{"z": json.RawMessage(`1`), "a": json.RawMessage(` [ 1, 2 ] `)}
		}, head + stream + `,"a":[1,2],"z":1}`, false},
		{"extra may not replace a field", func(r *llm.Request) {
			r.Extra = map[string]json.RawMessage{"model": json.RawMessage(`"other"`)}
		}, `extra field "model" is set by the provider`, true},
		{"extra may not replace stream", func(r *llm.Request) {
			r.Extra = map[string]json.RawMessage{"stream": json.RawMessage(`false`)}
		}, `extra field "stream" is set by the provider`, true},
		{"extra must be JSON", func(r *llm.Request) {
			r.Extra = map[string]json.RawMessage{"x": json.RawMessage(`{`)}
		}, `extra field "x" is not JSON`, true},
		{"extra may set a field the request left out", func(r *llm.Request) {
			r.Extra = map[string]json.RawMessage{"temperature": json.RawMessage(`0`)}
		}, head + stream + `,"temperature":0}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := Client{Model: "m"}
			req := userRequest("hi")
			tt.set(req)
			got, err := c.marshalRequest(req)
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
