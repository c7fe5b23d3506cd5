package openaimodels

import (
	"slices"
	"testing"
)

func TestReasoningSupport(t *testing.T) {
	for _, tt := range []struct {
		model   string
		known   bool
		efforts []string
		off     string
	}{
		{"o3", true, []string{"low", "medium", "high"}, ""},
		{"o3-mini-2025-01-31", true, []string{"low", "medium", "high"}, ""},
		{"openai/o4-mini", true, []string{"low", "medium", "high"}, ""},
		{"gpt-5", true, []string{"minimal", "low", "medium", "high"}, ""},
		{"gpt-5-mini-2025-08-07", true, []string{"minimal", "low", "medium", "high"}, ""},
		{"gpt-5-chat-latest", true, nil, ""},
		{"gpt-5.1", true, []string{"none", "low", "medium", "high"}, "none"},
		{"gpt-5.1-codex-max", true, []string{"none", "low", "medium", "high", "xhigh"}, "none"},
		{"gpt-5.2", true, []string{"none", "low", "medium", "high", "xhigh"}, "none"},
		{"o1-mini", true, nil, ""},
		{"gpt-4o", true, nil, ""},
		{"gpt-4.1-mini", true, nil, ""},
		{"gpt-oss-120b", true, []string{"low", "medium", "high"}, ""},
		{"qwen3:8b", false, nil, ""},
		{"o30-preview", false, nil, ""},
	} {
		got := ReasoningSupport(tt.model)
		if got.Known != tt.known || !slices.Equal(got.Efforts, tt.efforts) || got.Off != tt.off {
			t.Errorf("%s: %+v, want known %v efforts %v off %q", tt.model, got, tt.known, tt.efforts, tt.off)
		}
	}
}
