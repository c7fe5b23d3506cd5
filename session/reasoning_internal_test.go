package session

import (
	"testing"

	"github.com/hrns-dev/hrns/llm"
)

func TestReasoningConfig(t *testing.T) {
	effort := func(e string) *llm.ReasoningConfig { return &llm.ReasoningConfig{Effort: e} }
	budget := func(n int) *llm.ReasoningConfig { return &llm.ReasoningConfig{BudgetTokens: n} }
	gpt51 := llm.ReasoningSupport{Known: true, Efforts: []string{"none", "low", "medium", "high"}, Off: "none"}
	o3 := llm.ReasoningSupport{Known: true, Efforts: []string{"low", "medium", "high"}}
	gem3 := llm.ReasoningSupport{Known: true, Efforts: []string{"low", "high"}}
	claude := llm.ReasoningSupport{Known: true, Budget: true, Off: "none"}
	opus := llm.ReasoningSupport{Known: true, Budget: true, MaxBudget: 24000, Off: "none"}
	flat := llm.ReasoningSupport{Known: true}
	for _, tt := range []struct {
		name, effort string
		sup          llm.ReasoningSupport
		want         *llm.ReasoningConfig
		err          bool
	}{
		{"none given", "", o3, nil, false},
		{"a level it has", "medium", o3, effort("medium"), false},
		{"xhigh becomes the highest", "xhigh", o3, effort("high"), false},
		{"medium becomes the next above", "medium", gem3, effort("high"), false},
		{"low stays low", "low", gpt51, effort("low"), false},
		{"disabled turns off", "disabled", gpt51, effort("none"), false},
		{"disabled where it cannot", "disabled", o3, nil, true},
		{"budget", "medium", claude, budget(8192), false},
		{"budget capped", "xhigh", opus, budget(24000), false},
		{"budget off", "disabled", claude, effort("none"), false},
		{"no setting: disabled is nothing", "disabled", flat, nil, false},
		{"no setting: a level is refused", "low", flat, nil, true},
		{"unknown model: as a level", "medium", llm.ReasoningSupport{}, effort("medium"), false},
		{"unknown model: xhigh as high", "xhigh", llm.ReasoningSupport{}, effort("high"), false},
		{"unknown model: disabled as none", "disabled", llm.ReasoningSupport{}, effort("none"), false},
		{"not an effort", "max", o3, nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := reasoningConfig("m", tt.effort, tt.sup)
			if (err != nil) != tt.err {
				t.Fatalf("error %v, want error %v", err, tt.err)
			}
			if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
