package cli

import (
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/anthropic"
	"github.com/hrns-dev/hrns/gemini"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai"
)

// TestDefaultModelPerProvider: with only a provider's key set, hrns uses
// that provider and its default model instead of exiting; without a key
// it says exactly what to set; a server of one's own needs its model.
func TestDefaultModelPerProvider(t *testing.T) {
	kindOf := func(m llm.Model) string {
		switch m.(type) {
		case *openai.Client:
			return "openai"
		case *anthropic.Client:
			return "anthropic"
		case *gemini.Client:
			return "gemini"
		}
		return "?"
	}
	tests := []struct {
		name      string
		env       map[string]string
		model     string
		kind      string
		wantModel string
		wantErr   []string
	}{
		{"only OPENAI_API_KEY", map[string]string{"OPENAI_API_KEY": "k"}, "", "openai", "gpt-4.1", nil},
		{"only ANTHROPIC_API_KEY", map[string]string{"ANTHROPIC_API_KEY": "k"}, "", "anthropic", "claude-sonnet-4-5", nil},
		{"only GEMINI_API_KEY", map[string]string{"GEMINI_API_KEY": "k"}, "", "gemini", "gemini-2.5-flash", nil},
		{"only GOOGLE_API_KEY", map[string]string{"GOOGLE_API_KEY": "k"}, "", "gemini", "gemini-2.5-flash", nil},
		{"two keys: openai first", map[string]string{"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"}, "", "openai", "gpt-4.1", nil},
		{"the model named wins", map[string]string{"ANTHROPIC_API_KEY": "k"}, "claude-haiku-4-5", "anthropic", "claude-haiku-4-5", nil},
		{"OPENAI_MODEL wins", map[string]string{"OPENAI_API_KEY": "k", "OPENAI_MODEL": "gpt-5"}, "", "openai", "gpt-5", nil},
		{"no key", nil, "", "", "", []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "--model", "hrns demo"}},
		{"a server of one's own", map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}, "", "", "", []string{"--model", "OPENAI_MODEL"}},
		{"a key and a server of one's own", map[string]string{"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}, "", "", "", []string{"--model"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string { return tt.env[k] }
			m, name, err := buildModel(&runOptions{model: tt.model}, &Config{}, &agentFile{}, getenv)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("no error: %T %q", m, name)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("the error lacks %q: %v", w, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if kindOf(m) != tt.kind || name != tt.wantModel {
				t.Errorf("got %s %q, want %s %q", kindOf(m), name, tt.kind, tt.wantModel)
			}
		})
	}
}
