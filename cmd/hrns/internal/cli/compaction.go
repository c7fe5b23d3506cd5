package cli

import (
	"fmt"
	"math"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/pricing"
)

// CompactionConfig tunes the automatic compaction of hrns run, the chat
// and hrns serve (on unless enabled = false):
//
//	[compaction]
//	enabled = true      # false: only the chat's /compact compacts
//	threshold = 0.8     # compact when a request would pass this fraction of the window
//	target = 0.5        # down to about this fraction
//	keep_turns = 2      # the latest turns kept whole
//
// The window of each model comes from [context_windows] or the built-in
// table (pricing.DefaultWindows). A model in neither is compacted when
// its provider refuses a request as too long, and the request is sent
// again.
type CompactionConfig struct {
	Enabled   *bool   `toml:"enabled" yaml:"enabled"`
	Threshold float64 `toml:"threshold" yaml:"threshold"`
	Target    float64 `toml:"target" yaml:"target"`
	KeepTurns int     `toml:"keep_turns" yaml:"keep_turns"`
}

// validate reports fractions out of (0, 1), a target not below the
// threshold, and a number of turns out of 0 to 100.
func (c CompactionConfig) validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"threshold", c.Threshold}, {"target", c.Target}} {
		if math.IsNaN(f.v) || f.v < 0 || f.v >= 1 {
			return fmt.Errorf("%s = %v: want a fraction of the context window, above 0 and below 1", f.name, f.v)
		}
	}
	threshold := c.Threshold
	if threshold == 0 {
		threshold = 0.8
	}
	if c.Target >= threshold {
		return fmt.Errorf("target = %v: want less than the threshold (%v)", c.Target, threshold)
	}
	if c.KeepTurns < 0 || c.KeepTurns > 100 {
		return fmt.Errorf("keep_turns = %d: want 0 (the default, 2) to 100", c.KeepTurns)
	}
	return nil
}

// merge takes the fields p sets (a project's file).
func (c *CompactionConfig) merge(p CompactionConfig) {
	if p.Enabled != nil {
		c.Enabled = p.Enabled
	}
	if p.Threshold != 0 {
		c.Threshold = p.Threshold
	}
	if p.Target != 0 {
		c.Target = p.Target
	}
	if p.KeepTurns != 0 {
		c.KeepTurns = p.KeepTurns
	}
}

// windows is the table of context windows: the built-in one, with the
// config's [context_windows] over it.
func (c *Config) windows() pricing.Windows {
	return pricing.DefaultWindows().With(pricing.Tokens(c.ContextWindows))
}

// compactionOff reports whether the config turns automatic compaction
// off.
func (c *Config) compactionOff() bool {
	return c.Compaction.Enabled != nil && !*c.Compaction.Enabled
}

// compaction returns the loop's compaction for model: nil when the config
// turns it off, else the config's fractions with model's window (0 when
// unknown: compaction only after a context length error).
func (c *Config) compaction(model string) *loop.Compaction {
	if c.compactionOff() {
		return nil
	}
	w, _ := c.windows().Lookup(model)
	return &loop.Compaction{
		ContextWindow: w.Tokens,
		Threshold:     c.Compaction.Threshold,
		Target:        c.Compaction.Target,
		KeepTurns:     c.Compaction.KeepTurns,
	}
}

// compactionLine is what hrns run says of a compaction, on stderr.
func compactionLine(i *loop.CompactionInfo) string {
	why := "the next request would have neared the context window"
	if i.Reason == "context_length" {
		why = "the provider refused the request as too long; it is sent again"
	}
	window := ""
	if i.Window > 0 {
		window = " of a " + tokenCount(i.Window) + " window"
	}
	what := ""
	switch {
	case i.Trimmed > 0 && i.Summarized > 0:
		what = fmt.Sprintf("; %d old tool results dropped, %d messages summarised", i.Trimmed, i.Summarized)
	case i.Trimmed > 0:
		what = fmt.Sprintf("; %d old tool results dropped", i.Trimmed)
	case i.Summarized > 0:
		what = fmt.Sprintf("; %d messages summarised", i.Summarized)
	}
	return fmt.Sprintf("(context compacted: %d → %d messages, about %s → %s tokens%s%s: %s)",
		i.MessagesBefore, i.MessagesAfter, tokenCount(i.TokensBefore), tokenCount(i.TokensAfter), window, what, why)
}

// tokenCount writes a number of tokens for people: 812, 25.6k, 1.0M.
func tokenCount(n int) string {
	switch {
	case n < 1000:
		return fmt.Sprint(n)
	case n < 1_000_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	default:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	}
}
