package tui

import (
	"fmt"
	"strings"

	"github.com/hrns-dev/hrns/llm"
)

// A Price is what a model costs, in US dollars per million tokens.
type Price struct {
	Input float64 `toml:"input" yaml:"input"`
	// CachedInput is the price of input tokens read from a prompt cache;
	// 0 means the Input price.
	CachedInput float64 `toml:"cached_input" yaml:"cached_input"`
	// CacheWrite is the price of input tokens written to a prompt cache
	// (Anthropic charges more for them); 0 means the Input price.
	CacheWrite float64 `toml:"cache_write" yaml:"cache_write"`
	Output     float64 `toml:"output" yaml:"output"`
}

// Prices maps model names to prices. A name matches a model of the same
// name, or of that name followed by a dated suffix ("claude-sonnet-4-5"
// matches "claude-sonnet-4-5-20250929"; "gpt-4.1" does not match
// "gpt-4.1-mini").
type Prices map[string]Price

// DefaultPrices are the built-in list prices, standard tier, in USD per
// million tokens. Source: the providers' public pricing pages
// (openai.com/api/pricing, anthropic.com/pricing) as published in the second
// half of 2025; the gpt-4.1 family re-checked against a snapshot of OpenAI's
// page dated June 2026. Prices change: override them, or add models, with
// [prices."MODEL"] in the config file. A model that is not listed has an
// unknown price: the chat says so rather than guess.
var DefaultPrices = Prices{
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

// Lookup returns the price of model: an exact entry, else the longest
// entry that model extends with a dated suffix ("-2025…" or "-latest").
func (p Prices) Lookup(model string) (Price, bool) {
	if pr, ok := p[model]; ok {
		return pr, true
	}
	best, found := "", false
	for name := range p {
		rest, ok := strings.CutPrefix(model, name+"-")
		if !ok || !(rest == "latest" || rest != "" && rest[0] >= '0' && rest[0] <= '9') {
			continue
		}
		if len(name) > len(best) {
			best, found = name, true
		}
	}
	return p[best], found
}

// Cost returns what usage cost at price p, in US dollars.
func (p Price) Cost(u llm.Usage) float64 {
	cached, write := p.CachedInput, p.CacheWrite
	if cached == 0 {
		cached = p.Input
	}
	if write == 0 {
		write = p.Input
	}
	plain := max(0, u.InputTokens-u.CacheReadTokens-u.CacheWriteTokens)
	return (float64(plain)*p.Input + float64(u.CacheReadTokens)*cached +
		float64(u.CacheWriteTokens)*write + float64(u.OutputTokens)*p.Output) / 1e6
}

// FormatCost shows a cost in dollars with enough digits for small ones.
func FormatCost(c float64) string {
	switch {
	case c == 0:
		return "$0"
	case c < 0.01:
		return fmt.Sprintf("$%.4f", c)
	default:
		return fmt.Sprintf("$%.2f", c)
	}
}

// formatTokens shows a token count briefly: 950, 12.3k, 1.2M.
func formatTokens(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprint(n)
	case n < 1_000_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	default:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	}
}
