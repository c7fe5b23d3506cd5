package session

import (
	"github.com/hrns-dev/hrns/pricing"
	"github.com/hrns-dev/hrns/store"
)

// The costs of a session's metrics, at the prices of [Options.Prices].
// A model without a price has null costs, and so have the totals of a
// session that used one (as the reference API describes them). A
// MetricsUpdateEvent keeps the costs at the prices of when it was
// written; GET /changes prices the usage at the current ones.

// metrics returns st's metrics with their costs.
func (m *Manager) metrics(st *state) Metrics {
	met := st.metrics()
	prices := m.opts.Prices
	if prices == nil {
		prices = defaultPrices
	}
	var total pricing.Cost
	priced := true
	for i := range met.CostPerModel {
		mc := &met.CostPerModel[i]
		p, ok := prices.Lookup(mc.Name)
		if !ok {
			priced = false
			continue
		}
		c := p.Cost(pricing.Usage(st.Usage[mc.Name]))
		mc.InputCost, mc.OutputCost, mc.ReasoningCost, mc.TotalCost = &c.Input, &c.Output, &c.Reasoning, &c.Total
		total.Input += c.Input
		total.Output += c.Output
		total.Reasoning += c.Reasoning
		total.Total += c.Total
	}
	if priced {
		met.InputCost, met.OutputCost, met.ReasoningCost, met.TotalCost = &total.Input, &total.Output, &total.Reasoning, &total.Total
	}
	return met
}

// defaultPrices price the sessions of a Manager whose Options set no
// Prices; it is never changed.
var defaultPrices = pricing.Default()

// metricsEvent is the MetricsUpdateEvent of st.
func (g *segment) metricsEvent(st *state) store.Event {
	return event(EventMetricsUpdate, map[string]any{"metrics": g.m.metrics(st)})
}
