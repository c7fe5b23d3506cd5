package session

import (
	"context"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/pricing"
	"github.com/hrns-dev/hrns/store"
)

// defaultWindows are the context windows of a Manager whose Options set
// none; it is never changed.
var defaultWindows = pricing.DefaultWindows()

// compaction returns the automatic compaction of a run of model's (see
// Options.Compaction): nil when it is off.
func (m *Manager) compaction(model string) *loop.Compaction {
	if m.opts.DisableCompaction {
		return nil
	}
	var c loop.Compaction
	if m.opts.Compaction != nil {
		c = *m.opts.Compaction
	}
	if c.ContextWindow <= 0 {
		windows := m.opts.ContextWindows
		if windows == nil {
			windows = defaultWindows
		}
		w, _ := windows.Lookup(model)
		c.ContextWindow = w.Tokens
	}
	return &c
}

// compacted reports a compaction of the run's transcript: a
// ContextCompactedEvent, and the tokens of the summary it asked the model
// for, if any. From here the run's transcript no longer continues the
// stored one (old results were replaced by stubs, old turns by a
// summary): the next checkpoint's commit writes it whole, in place of the
// stored one, so that a run resumed from it, here or after a restart,
// goes on compacted.
func (g *segment) compacted(ctx context.Context, info *loop.CompactionInfo) error {
	if info == nil {
		return nil
	}
	// The step held for a suspension continues the stored transcript:
	// it is committed first, as it would have been.
	if err := g.flush(ctx); err != nil {
		return err
	}
	g.stored, g.size = 0, 0
	g.countedLen = 0 // the count was of the transcript before
	ev := event(EventContextCompacted, ContextCompacted{
		Reason: info.Reason, Strategy: info.Strategy,
		TokensBefore: info.TokensBefore, TokensAfter: info.TokensAfter,
		MessagesBefore: info.MessagesBefore, MessagesAfter: info.MessagesAfter,
		Window: info.Window, Trimmed: info.Trimmed, Summarized: info.Summarized,
	})
	usage := info.Usage
	g.chargeTokens(usage)
	return g.commitWith(ctx, g.m.leased(), func(_ *store.Session, st *state) []store.Event {
		events := []store.Event{ev}
		if usage != nil && (usage.InputTokens > 0 || usage.OutputTokens > 0) {
			// The summary was written by the model of the session's
			// steps: the agent's, else the one its steps were counted
			// under (the provider's name for its default).
			model := firstNonEmpty(g.sp.Model, g.model)
			if model == "" && len(st.Usage) == 1 {
				for name := range st.Usage {
					model = name
				}
			}
			model = firstNonEmpty(model, "default")
			if st.Usage == nil {
				st.Usage = map[string]llm.Usage{}
			}
			u := st.Usage[model]
			u.Add(*usage)
			st.Usage[model] = u
			events = append(events, g.metricsEvent(st))
		}
		return events
	})
}
