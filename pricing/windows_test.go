package pricing_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/pricing"
)

func TestWindowLookup(t *testing.T) {
	w := pricing.DefaultWindows()
	for _, tc := range []struct {
		model  string
		tokens int // 0: unknown
	}{
		{"gpt-4.1", 1047576},
		{"gpt-4o-mini", 128000},           // not gpt-4o's by prefix: its own entry
		{"gpt-4o-2024-08-06", 128000},     // dated
		{"gpt-5-mini-2025-08-07", 272000}, // dated
		{"claude-sonnet-4-5-20250929", 200000},
		{"claude-haiku-4-5-latest", 200000},
		{"claude-sonnet-4-5-experimental", 0}, // not a date
		{"gemini-2.5-flash", 1048576},
		{"gemini-2.5-flash-preview", 0},
		{"qwen3:8b", 0},
		{"", 0},
	} {
		got, ok := w.Lookup(tc.model)
		if ok != (tc.tokens != 0) || got.Tokens != tc.tokens {
			t.Errorf("Lookup(%q) = %+v, %v; want %d tokens", tc.model, got, ok, tc.tokens)
		}
	}
}

// Every built-in figure says where it comes from and when, and every
// priced model has a window.
func TestDefaultWindowsSourced(t *testing.T) {
	w := pricing.DefaultWindows()
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	month := regexp.MustCompile(`^20\d\d-(0[1-9]|1[0-2])$`)
	for name, v := range w {
		if v.Source == "" || !strings.Contains(v.Source, ".") || !month.MatchString(v.Checked) {
			t.Errorf("window of %s: %+v: want a source page and a month checked", name, v)
		}
	}
	for name := range pricing.Default() {
		if _, ok := w[name]; !ok {
			t.Errorf("%s has a price but no context window", name)
		}
	}
}

func TestWindowsOverride(t *testing.T) {
	base := pricing.DefaultWindows()
	over := pricing.Tokens(map[string]int{"gpt-4o": 64000, "my-model": 32768})
	w := base.With(over)
	if got, _ := w.Lookup("gpt-4o-2024-08-06"); got.Tokens != 64000 || got.Source != "config" {
		t.Errorf("overridden gpt-4o = %+v", got)
	}
	if got, ok := w.Lookup("my-model"); !ok || got.Tokens != 32768 {
		t.Errorf("added my-model = %+v, %v", got, ok)
	}
	if base["gpt-4o"].Tokens != 128000 {
		t.Error("With changed its receiver")
	}
}

func TestWindowsValidate(t *testing.T) {
	for _, tc := range []struct {
		in   map[string]int
		want string // "" for valid
	}{
		{map[string]int{"m": 32768}, ""},
		{map[string]int{"m": 1024}, ""},
		{map[string]int{"m": 1023}, "from 1024"},
		{map[string]int{"m": 0}, "from 1024"},
		{map[string]int{"m": -5}, "from 1024"},
		{map[string]int{"m": 1<<30 + 1}, "from 1024"},
		{map[string]int{" ": 32768}, "empty model name"},
	} {
		err := pricing.Tokens(tc.in).Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Validate(%v) = %v, want %q", tc.in, err, tc.want)
		}
	}
}

func ExampleWindows_Lookup() {
	w := pricing.DefaultWindows().With(pricing.Tokens(map[string]int{"qwen3:8b": 40960}))
	for _, model := range []string{"claude-sonnet-4-5-20250929", "qwen3:8b", "unknown"} {
		if v, ok := w.Lookup(model); ok {
			fmt.Printf("%s: %d tokens (%s)\n", model, v.Tokens, v.Source)
		} else {
			fmt.Printf("%s: unknown\n", model)
		}
	}
	// Output:
	// claude-sonnet-4-5-20250929: 200000 tokens (docs.claude.com/en/docs/about-claude/models/overview)
	// qwen3:8b: 40960 tokens (config)
	// unknown: unknown
}
