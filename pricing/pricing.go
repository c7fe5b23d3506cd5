// Package pricing prices model usage in US dollars: a [Table] of list
// prices per million tokens, by model name, and the [Cost] of a [Usage]
// at a [Price]. Beside the prices it keeps each model's context window
// ([Windows], [DefaultWindows]), with the page and the month each figure
// was read, which automatic compaction keeps requests within.
//
// The chat (cmd/hrns/internal/tui), hrns run and hrns serve (package session, whose
// session metrics carry costs) share it, so a model costs the same
// wherever it is shown. A model that is not in the table has no price:
// callers show "unknown" (or null), never a guess. The operator adds or
// overrides prices with [prices."MODEL"] in the config file, and context
// windows with [context_windows].
//
// It imports no other hrns package.
package pricing

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// A Price is what a model costs, in US dollars per million tokens.
type Price struct {
	// Input is the price of input (prompt) tokens.
	Input float64 `json:"input" toml:"input" yaml:"input"`
	// CachedInput is the price of input tokens read from a prompt cache;
	// 0 means the Input price.
	CachedInput float64 `json:"cached_input,omitempty" toml:"cached_input" yaml:"cached_input"`
	// CacheWrite is the price of input tokens written to a prompt cache
	// (Anthropic charges more for them); 0 means the Input price.
	CacheWrite float64 `json:"cache_write,omitempty" toml:"cache_write" yaml:"cache_write"`
	// Output is the price of output tokens, reasoning tokens included.
	Output float64 `json:"output" toml:"output" yaml:"output"`
}

// maxPrice bounds a price: no model costs a million dollars per million
// tokens, and a bound keeps sums finite.
const maxPrice = 1e6

// Validate reports a price that is negative, not a finite number, or
// absurdly large (over a million dollars per million tokens).
func (p Price) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"input", p.Input}, {"cached_input", p.CachedInput}, {"cache_write", p.CacheWrite}, {"output", p.Output}} {
		if math.IsNaN(f.v) || f.v < 0 || f.v > maxPrice {
			return fmt.Errorf("%s = %v: want a number of dollars per million tokens from 0 to %g", f.name, f.v, float64(maxPrice))
		}
	}
	return nil
}

// Usage is the token usage to price. Its fields are those of
// llm.Usage, so that one converts to the other: pricing.Usage(u).
type Usage struct {
	// InputTokens counts all prompt tokens, cached ones included.
	InputTokens int64
	// OutputTokens counts generated tokens, reasoning included.
	OutputTokens int64
	// CacheReadTokens counts the input tokens served from a prompt cache.
	CacheReadTokens int64
	// CacheWriteTokens counts the input tokens written to a prompt cache.
	CacheWriteTokens int64
	// ReasoningTokens counts the output tokens spent on reasoning.
	ReasoningTokens int64
}

// A Cost is what a usage cost, in US dollars.
type Cost struct {
	// Input is the cost of the input tokens, cache reads and writes at
	// their prices.
	Input float64
	// Output is the cost of the output tokens, reasoning included.
	Output float64
	// Reasoning is the part of Output spent on reasoning tokens.
	Reasoning float64
	// Total is Input plus Output.
	Total float64
}

// Cost returns what u cost at price p. Negative counts count as 0; the
// cached and written tokens are those of InputTokens, so input tokens
// beyond them are charged the Input price.
func (p Price) Cost(u Usage) Cost {
	cached, write := p.CachedInput, p.CacheWrite
	if cached == 0 {
		cached = p.Input
	}
	if write == 0 {
		write = p.Input
	}
	in, out := max(0, u.InputTokens), max(0, u.OutputTokens)
	read, wrote := max(0, u.CacheReadTokens), max(0, u.CacheWriteTokens)
	plain := max(0, in-read-wrote)
	var c Cost
	c.Input = (float64(plain)*p.Input + float64(read)*cached + float64(wrote)*write) / 1e6
	c.Output = float64(out) * p.Output / 1e6
	c.Reasoning = float64(min(max(0, u.ReasoningTokens), out)) * p.Output / 1e6
	c.Total = c.Input + c.Output
	return c
}

// A Table maps model names to prices. A name matches a model of the same
// name, or of that name followed by a dated suffix ("claude-sonnet-4-5"
// matches "claude-sonnet-4-5-20250929"; "gpt-4.1" does not match
// "gpt-4.1-mini").
type Table map[string]Price

// Lookup returns the price of model: an exact entry, else the longest
// entry that model extends with a dated suffix ("-20250929",
// "-2025-04-14", "-0613") or "-latest".
func (t Table) Lookup(model string) (Price, bool) {
	if p, ok := t[model]; ok {
		return p, true
	}
	best, found := "", false
	for name := range t {
		rest, ok := strings.CutPrefix(model, name+"-")
		if !ok || !(rest == "latest" || dated(rest)) {
			continue
		}
		if len(name) > len(best) {
			best, found = name, true
		}
	}
	return t[best], found
}

// dated reports whether s is a date or version stamp: four digits or
// more, then digits and dashes.
func dated(s string) bool {
	if len(s) < 4 {
		return false
	}
	for i, c := range []byte(s) {
		if !(c >= '0' && c <= '9' || i >= 4 && c == '-') {
			return false
		}
	}
	return true
}

// With returns a new table: t's prices, then over's, which add models
// or replace t's price of a model.
func (t Table) With(over Table) Table {
	out := make(Table, len(t)+len(over))
	for k, v := range t {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// Validate reports the first invalid price of t (see [Price.Validate]),
// and an empty model name.
func (t Table) Validate() error {
	var errs []error
	for name, p := range t {
		if strings.TrimSpace(name) == "" {
			errs = append(errs, errors.New("a price has an empty model name"))
			continue
		}
		if err := p.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("price of %q: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Default returns a new copy of the built-in list prices, standard tier,
// in USD per million tokens. Source: the providers' public pricing pages
// (openai.com/api/pricing, anthropic.com/pricing) as published in the
// second half of 2025; the gpt-4.1 family re-checked against a snapshot
// of OpenAI's page dated June 2026. Prices change: the operator overrides
// them, or adds models, with [prices."MODEL"] in the config file.
func Default() Table {
	return Table{
		"gpt-4.1":           {Input: 2.00, CachedInput: 0.50, Output: 8.00},
		"gpt-4.1-mini":      {Input: 0.40, CachedInput: 0.10, Output: 1.60},
		"gpt-4.1-nano":      {Input: 0.10, CachedInput: 0.025, Output: 0.40},
		"gpt-4o":            {Input: 2.50, CachedInput: 1.25, Output: 10.00},
		"gpt-4o-mini":       {Input: 0.15, CachedInput: 0.075, Output: 0.60},
		"gpt-5":             {Input: 1.25, CachedInput: 0.125, Output: 10.00},
		"gpt-5-mini":        {Input: 0.25, CachedInput: 0.025, Output: 2.00},
		"gpt-5-nano":        {Input: 0.05, CachedInput: 0.005, Output: 0.40},
		"o3":                {Input: 2.00, CachedInput: 0.50, Output: 8.00},
		"o4-mini":           {Input: 1.10, CachedInput: 0.275, Output: 4.40},
		"claude-opus-4-1":   {Input: 15.00, CachedInput: 1.50, CacheWrite: 18.75, Output: 75.00},
		"claude-opus-4-5":   {Input: 5.00, CachedInput: 0.50, CacheWrite: 6.25, Output: 25.00},
		"claude-sonnet-4":   {Input: 3.00, CachedInput: 0.30, CacheWrite: 3.75, Output: 15.00},
		"claude-sonnet-4-5": {Input: 3.00, CachedInput: 0.30, CacheWrite: 3.75, Output: 15.00},
		"claude-haiku-4-5":  {Input: 1.00, CachedInput: 0.10, CacheWrite: 1.25, Output: 5.00},
		"claude-3-5-haiku":  {Input: 0.80, CachedInput: 0.08, CacheWrite: 1.00, Output: 4.00},
	}
}

// Format shows a cost in dollars with enough digits for small ones:
// "$0", "<$0.0001", "$0.0042", "$1.25".
func Format(c float64) string {
	switch {
	case c <= 0:
		return "$0"
	case c < 0.0001:
		return "<$0.0001"
	case c < 0.01:
		return fmt.Sprintf("$%.4f", c)
	default:
		return fmt.Sprintf("$%.2f", c)
	}
}
