package session_test

import (
	"encoding/json"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/pricing"
	"github.com/hrns-dev/hrns/session"
)

// TestCostInMetrics: the metrics of GET /changes and of the
// MetricsUpdateEvent price the session's usage at Options.Prices.
func TestCostInMetrics(t *testing.T) {
	reply := llmtest.Text("done")
	reply.Usage = llm.Usage{InputTokens: 2e6, CacheReadTokens: 1e6, OutputTokens: 1e6, ReasoningTokens: 5e5}
	m := startManager(t, openStore(t), llmtest.NewModel(reply), &session.Options{
		Prices: pricing.Table{"house-model": {Input: 1, CachedInput: 0.5, Output: 4}},
	})
	v := create(t, m, `{"agent":{"name":"a","model":"house-model"},"messages":"go"}`)
	f := &follower{t: t, m: m, id: v.ID}
	c := f.status(session.StatusCompleted)
	var event struct{ Metrics session.Metrics }
	for _, e := range f.events {
		if e.Type == session.EventMetricsUpdate {
			if err := json.Unmarshal(e.Data, &event); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, met := range map[string]session.Metrics{"changes": c.Metrics, "event": event.Metrics} {
		if met.TotalCost == nil || *met.TotalCost != 5.5 || *met.InputCost != 1.5 || *met.OutputCost != 4 || *met.ReasoningCost != 2 {
			t.Errorf("%s: metrics = %+v", name, met)
		}
		if len(met.CostPerModel) != 1 || met.CostPerModel[0].Name != "house-model" || met.CostPerModel[0].TotalCost == nil || *met.CostPerModel[0].TotalCost != 5.5 {
			t.Errorf("%s: cost per model = %+v", name, met.CostPerModel)
		}
	}
}
