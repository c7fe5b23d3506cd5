package session

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/store"
)

// TestUsageStateAsViewState: the long-poll's narrow decoding of a state
// gives the metrics the whole decoding gives, for states with and without
// usage, and for one that does not decode.
func TestUsageStateAsViewState(t *testing.T) {
	full := &state{
		Spec:  agentSpec{spec: &spec{Agent: "a", Model: "m", System: "be brief"}},
		Phase: phaseWait,
		Steps: 7,
		Usage: map[string]llm.Usage{
			"gpt-b": {InputTokens: 120, OutputTokens: 30, ReasoningTokens: 4},
			"gpt-a": {InputTokens: 5, OutputTokens: 1},
		},
		Inbox:    []inboxMessage{{ID: 1, Message: llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("hi")}}}},
		Children: []string{"c1"},
	}
	b, err := json.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	empty, _ := json.Marshal(&state{Spec: agentSpec{spec: &spec{Agent: "a"}}})
	m := &Manager{}
	for name, raw := range map[string][]byte{"with usage": b, "without": empty, "corrupt": []byte(`{"steps":"x"`), "no state": nil} {
		s := &store.Session{ID: "s", State: raw}
		want := m.metrics(viewState(s))
		if got := m.metrics(usageState(s)); !cmp.Equal(want, got) {
			t.Errorf("%s: metrics (-view +usage):\n%s", name, cmp.Diff(want, got))
		}
	}
}
