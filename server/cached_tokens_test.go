package server_test

import (
	"encoding/json"
	"math"
	"net/http"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/pricing"
	"github.com/hrns-dev/hrns/session"
)

// TestCachedTokens: the input tokens the provider served from its prompt
// cache are reported as cached_tokens in the metrics (per model, with
// their cost at the cached price), in MetricsUpdateEvent and in the
// status's usage_per_model.
func TestCachedTokens(t *testing.T) {
	e := newEnv(t, &envOptions{session: &session.Options{
		Prices: pricing.Table{"test-model": {Input: 10, CachedInput: 1, Output: 20}},
	}}, openaitest.Reply{Text: "cached", Usage: &llm.Usage{InputTokens: 1000, CacheReadTokens: 800, OutputTokens: 50}})
	id := e.create(keyAlice, `{"agent":{"name":"a","environments":[]},"messages":"hi"}`)
	f := e.follow(keyAlice, id)
	c := f.status(session.StatusCompleted)
	if len(c.Metrics.CostPerModel) != 1 {
		t.Fatalf("metrics %+v", c.Metrics)
	}
	mc := c.Metrics.CostPerModel[0]
	// 200 plain input tokens at 10 a million, 800 cached at 1.
	if mc.CachedTokens != 800 || mc.InputTokens != 1000 || mc.InputCost == nil || math.Abs(*mc.InputCost-0.0028) > 1e-12 {
		t.Errorf("cost_per_model %+v (input_cost %v), want 800 cached tokens of 1000, input cost 0.0028", mc, deref(mc.InputCost))
	}
	var sawEvent bool
	for _, ev := range f.events {
		if ev.Type != session.EventMetricsUpdate {
			continue
		}
		var d struct {
			Metrics session.Metrics `json:"metrics"`
		}
		json.Unmarshal(ev.Data, &d)
		sawEvent = len(d.Metrics.CostPerModel) == 1 && d.Metrics.CostPerModel[0].CachedTokens == 800
	}
	if !sawEvent {
		t.Error("no MetricsUpdateEvent with cached_tokens 800")
	}
	var st session.StatusView
	e.expect(e.do("GET", "/api/v2/sessions/"+id+"/status", keyAlice, nil), http.StatusOK).json(&st)
	if len(st.UsagePerModel) != 1 || st.UsagePerModel[0].CachedTokens != 800 {
		t.Errorf("usage_per_model %+v", st.UsagePerModel)
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
