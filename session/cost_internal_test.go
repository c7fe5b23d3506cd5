package session

import (
	"encoding/json"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/pricing"
)

// TestMetricsCosts: each priced model has its costs, an unpriced one
// null costs, and the totals are null as soon as one model is unpriced.
func TestMetricsCosts(t *testing.T) {
	prices := pricing.Table{"a": {Input: 1, Output: 2}, "b": {Input: 10, CachedInput: 1, Output: 20}}
	for _, tc := range []struct {
		name   string
		prices pricing.Table
		usage  map[string]llm.Usage
		want   string // the metrics' JSON
	}{
		{"no usage", prices, nil,
			`{"steps":0,"cost_per_model":[],"input_cost":0,"output_cost":0,"reasoning_cost":0,"total_cost":0}`},
		{"priced", prices, map[string]llm.Usage{
			"a": {InputTokens: 1e6, OutputTokens: 5e5, ReasoningTokens: 1e5},
			"b": {InputTokens: 1e6, CacheReadTokens: 1e6},
		}, `{"steps":0,"cost_per_model":[` +
			`{"name":"a","input_tokens":1000000,"cached_tokens":0,"output_tokens":500000,"reasoning_tokens":100000,"input_cost":1,"output_cost":1,"reasoning_cost":0.2,"total_cost":2},` +
			`{"name":"b","input_tokens":1000000,"cached_tokens":1000000,"output_tokens":0,"reasoning_tokens":0,"input_cost":1,"output_cost":0,"reasoning_cost":0,"total_cost":1}],` +
			`"input_cost":2,"output_cost":1,"reasoning_cost":0.2,"total_cost":3}`},
		{"one unpriced", prices, map[string]llm.Usage{
			"a":     {InputTokens: 1e6},
			"llama": {InputTokens: 1e6},
		}, `{"steps":0,"cost_per_model":[` +
			`{"name":"a","input_tokens":1000000,"cached_tokens":0,"output_tokens":0,"reasoning_tokens":0,"input_cost":1,"output_cost":0,"reasoning_cost":0,"total_cost":1},` +
			`{"name":"llama","input_tokens":1000000,"cached_tokens":0,"output_tokens":0,"reasoning_tokens":0,"input_cost":null,"output_cost":null,"reasoning_cost":null,"total_cost":null}],` +
			`"input_cost":null,"output_cost":null,"reasoning_cost":null,"total_cost":null}`},
		{"default prices", nil, map[string]llm.Usage{"gpt-4.1-2025-04-14": {InputTokens: 1e6, OutputTokens: 1e6}},
			`{"steps":0,"cost_per_model":[` +
				`{"name":"gpt-4.1-2025-04-14","input_tokens":1000000,"cached_tokens":0,"output_tokens":1000000,"reasoning_tokens":0,"input_cost":2,"output_cost":8,"reasoning_cost":0,"total_cost":10}],` +
				`"input_cost":2,"output_cost":8,"reasoning_cost":0,"total_cost":10}`},
		{"an empty table prices nothing", pricing.Table{}, map[string]llm.Usage{"gpt-4.1": {InputTokens: 1}},
			`{"steps":0,"cost_per_model":[` +
				`{"name":"gpt-4.1","input_tokens":1,"cached_tokens":0,"output_tokens":0,"reasoning_tokens":0,"input_cost":null,"output_cost":null,"reasoning_cost":null,"total_cost":null}],` +
				`"input_cost":null,"output_cost":null,"reasoning_cost":null,"total_cost":null}`},
	} {
		m := &Manager{opts: Options{Prices: tc.prices}}
		got, err := json.Marshal(m.metrics(&state{Usage: tc.usage}))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}
