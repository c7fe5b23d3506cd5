package pricing_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/pricing"
)

func TestLookup(t *testing.T) {
	table := pricing.Default()
	for _, tc := range []struct {
		model string
		input float64 // 0: not priced
	}{
		{"gpt-4.1", 2},
		{"gpt-4.1-mini", 0.40},                // not gpt-4.1's price
		{"gpt-4.1-mini-2025-04-14", 0.40},     // dated
		{"claude-sonnet-4-5-20250929", 3},     // dated
		{"claude-sonnet-4-5-latest", 3},       // latest
		{"claude-sonnet-4-5-experimental", 0}, // not a date
		{"claude-sonnet-4-20250514", 3},       // the longest name that fits
		{"llama3", 0},
		{"", 0},
		{"GPT-4.1", 0}, // names are exact
	} {
		p, ok := table.Lookup(tc.model)
		if ok != (tc.input != 0) || p.Input != tc.input {
			t.Errorf("Lookup(%q) = %+v, %v; want input %v", tc.model, p, ok, tc.input)
		}
	}
}

func TestCost(t *testing.T) {
	p := pricing.Price{Input: 2, CachedInput: 0.5, CacheWrite: 2.5, Output: 8}
	for _, tc := range []struct {
		name string
		p    pricing.Price
		u    pricing.Usage
		want pricing.Cost
	}{
		{"nothing", p, pricing.Usage{}, pricing.Cost{}},
		// 1M input of which 0.5M cached and 0.1M written; 1M output of
		// which 0.25M reasoning.
		{"cache and reasoning", p,
			pricing.Usage{InputTokens: 1e6, CacheReadTokens: 5e5, CacheWriteTokens: 1e5, OutputTokens: 1e6, ReasoningTokens: 25e4},
			pricing.Cost{Input: 0.4*2 + 0.5*0.5 + 0.1*2.5, Output: 8, Reasoning: 2, Total: 0.4*2 + 0.5*0.5 + 0.1*2.5 + 8}},
		{"cache prices default to input", pricing.Price{Input: 1, Output: 2},
			pricing.Usage{InputTokens: 1e6, CacheReadTokens: 5e5, CacheWriteTokens: 5e5},
			pricing.Cost{Input: 1, Total: 1}},
		{"negative counts are 0", p,
			pricing.Usage{InputTokens: -5, OutputTokens: -1, CacheReadTokens: -3, ReasoningTokens: -2},
			pricing.Cost{}},
		{"more cached than input", p,
			pricing.Usage{InputTokens: 10, CacheReadTokens: 1e6},
			pricing.Cost{Input: 0.5, Total: 0.5}},
		{"more reasoning than output", p,
			pricing.Usage{OutputTokens: 1e6, ReasoningTokens: 2e6},
			pricing.Cost{Output: 8, Reasoning: 8, Total: 8}},
		{"free", pricing.Price{}, pricing.Usage{InputTokens: 1e6, OutputTokens: 1e6}, pricing.Cost{}},
	} {
		got := tc.p.Cost(tc.u)
		if !near(got.Input, tc.want.Input) || !near(got.Output, tc.want.Output) || !near(got.Reasoning, tc.want.Reasoning) || !near(got.Total, tc.want.Total) {
			t.Errorf("%s: Cost = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		table pricing.Table
		err   string // "" means valid
	}{
		{pricing.Default(), ""},
		{pricing.Table{"free": {}}, ""},
		{pricing.Table{"m": {Input: -1}}, `price of "m": input = -1`},
		{pricing.Table{"m": {Output: math.NaN()}}, `output = NaN`},
		{pricing.Table{"m": {CachedInput: math.Inf(1)}}, `cached_input = +Inf`},
		{pricing.Table{"m": {CacheWrite: 2e6}}, `cache_write = 2e+06`},
		{pricing.Table{" ": {}}, `empty model name`},
	} {
		err := tc.table.Validate()
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("Validate(%v) = %v, want %q", tc.table, err, tc.err)
		}
	}
}

func TestWith(t *testing.T) {
	base := pricing.Table{"a": {Input: 1}, "b": {Input: 2}}
	got := base.With(pricing.Table{"b": {Input: 3}, "c": {Input: 4}})
	if len(got) != 3 || got["a"].Input != 1 || got["b"].Input != 3 || got["c"].Input != 4 {
		t.Errorf("With = %v", got)
	}
	if base["b"].Input != 2 || len(base) != 2 {
		t.Errorf("With changed its receiver: %v", base)
	}
	d := pricing.Default()
	delete(d, "gpt-4.1")
	if _, ok := pricing.Default()["gpt-4.1"]; !ok {
		t.Error("Default returns a shared table")
	}
}

func TestFormat(t *testing.T) {
	for c, want := range map[float64]string{0: "$0", 0.00001: "<$0.0001", 0.0001: "$0.0001", 0.00421: "$0.0042", 0.01: "$0.01", 1.254: "$1.25", 1234.5: "$1234.50"} {
		if got := pricing.Format(c); got != want {
			t.Errorf("Format(%v) = %q, want %q", c, got, want)
		}
	}
}

func Example() {
	prices := pricing.Default().With(pricing.Table{"qwen3:8b": {}})
	for _, model := range []string{"claude-sonnet-4-5-20250929", "qwen3:8b", "llama3"} {
		p, ok := prices.Lookup(model)
		if !ok {
			fmt.Println(model, "unknown price")
			continue
		}
		c := p.Cost(pricing.Usage{InputTokens: 120_000, CacheReadTokens: 100_000, OutputTokens: 4_000})
		fmt.Println(model, pricing.Format(c.Total))
	}
	// Output:
	// claude-sonnet-4-5-20250929 $0.15
	// qwen3:8b $0
	// llama3 unknown price
}
