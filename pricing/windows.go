package pricing

import (
	"errors"
	"fmt"
	"strings"
)

// A Window is a model's context window: how many tokens one request's
// input may hold (the transcript, the tool specs and the system prompt),
// where the figure comes from, and when it was checked. Compaction keeps
// each request within it (see loop.Compaction).
type Window struct {
	// Tokens is the input budget of a request, in tokens. For models
	// whose context holds the input and the output together, it is the
	// context less the output the provider reserves (gpt-5: 400,000 in
	// all, 128,000 of them output: 272,000).
	Tokens int `json:"tokens"`
	// Source names where the figure comes from: a provider's page, or
	// "config" for the operator's.
	Source string `json:"source,omitempty"`
	// Checked is when the figure was read there (YYYY-MM), empty for the
	// operator's.
	Checked string `json:"checked,omitempty"`
}

// maxWindow bounds a context window: no model reads a billion tokens, and
// a bound keeps thresholds finite.
const maxWindow = 1 << 30

// minWindow is the smallest window accepted: a request below it would not
// hold a system prompt and one turn.
const minWindow = 1024

// Windows maps model names to context windows. Names match as a [Table]'s
// do: exactly, or the longest name the model extends with a dated suffix
// or "-latest" ("claude-sonnet-4-5" matches "claude-sonnet-4-5-20250929").
type Windows map[string]Window

// Lookup returns the window of model, matched as [Table.Lookup] matches
// a price.
func (w Windows) Lookup(model string) (Window, bool) {
	if v, ok := w[model]; ok {
		return v, true
	}
	best, found := "", false
	for name := range w {
		rest, ok := strings.CutPrefix(model, name+"-")
		if !ok || !(rest == "latest" || dated(rest)) {
			continue
		}
		if len(name) > len(best) {
			best, found = name, true
		}
	}
	return w[best], found
}

// With returns a new table: w's windows, then over's, which add models or
// replace w's window of a model.
func (w Windows) With(over Windows) Windows {
	out := make(Windows, len(w)+len(over))
	for k, v := range w {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// Tokens is the operator's form of a table of windows, as the config file
// gives it ([context_windows] "my-model" = 32768): the windows it
// returns have the source "config".
func Tokens(m map[string]int) Windows {
	out := make(Windows, len(m))
	for k, v := range m {
		out[k] = Window{Tokens: v, Source: "config"}
	}
	return out
}

// Validate reports an empty model name and a window out of range (below
// 1,024 tokens or above 2^30).
func (w Windows) Validate() error {
	var errs []error
	for name, v := range w {
		if strings.TrimSpace(name) == "" {
			errs = append(errs, errors.New("a context window has an empty model name"))
			continue
		}
		if v.Tokens < minWindow || v.Tokens > maxWindow {
			errs = append(errs, fmt.Errorf("context window of %q: %d: want a number of tokens from %d to %d", name, v.Tokens, minWindow, maxWindow))
		}
	}
	return errors.Join(errs...)
}

// The sources of the built-in windows.
const (
	srcOpenAI    = "platform.openai.com/docs/models"
	srcAnthropic = "docs.claude.com/en/docs/about-claude/models/overview"
	srcGemini    = "ai.google.dev/gemini-api/docs/models"
)

// DefaultWindows returns a new copy of the built-in context windows: the
// models of [Default] and Google's Gemini models, with the page each
// figure was read on and when. Windows change with new models and
// versions: the operator overrides them, or adds models, with
// [context_windows] in the config file, and a model in neither table is
// compacted only when its provider refuses a request as too long.
func DefaultWindows() Windows {
	oa := func(n int) Window { return Window{Tokens: n, Source: srcOpenAI, Checked: "2025-09"} }
	an := func(n int) Window { return Window{Tokens: n, Source: srcAnthropic, Checked: "2025-11"} }
	ge := func(n int) Window { return Window{Tokens: n, Source: srcGemini, Checked: "2025-09"} }
	return Windows{
		// OpenAI: "context window" on each model's page; the gpt-5
		// family's 400,000 hold 128,000 of output, o3 and o4-mini's
		// 200,000 hold 100,000 of output.
		"gpt-4.1":      oa(1047576),
		"gpt-4.1-mini": oa(1047576),
		"gpt-4.1-nano": oa(1047576),
		"gpt-4o":       oa(128000),
		"gpt-4o-mini":  oa(128000),
		"gpt-5":        oa(272000),
		"gpt-5-mini":   oa(272000),
		"gpt-5-nano":   oa(272000),
		"o3":           oa(100000),
		"o4-mini":      oa(100000),
		// Anthropic: 200,000 for every model of the table (Sonnet's
		// 1M is a beta behind a header hrns does not send).
		"claude-opus-4-1":   an(200000),
		"claude-opus-4-5":   an(200000),
		"claude-sonnet-4":   an(200000),
		"claude-sonnet-4-5": an(200000),
		"claude-haiku-4-5":  an(200000),
		"claude-3-5-haiku":  an(200000),
		// Google: the "input token limit" of each model's page.
		"gemini-2.5-pro":        ge(1048576),
		"gemini-2.5-flash":      ge(1048576),
		"gemini-2.5-flash-lite": ge(1048576),
		"gemini-2.0-flash":      ge(1048576),
	}
}
