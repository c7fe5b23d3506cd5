package session_test

import (
	"context"
	"testing"

	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// panickyEvents is a store whose reads of events panic.
type panickyEvents struct{ store.Store }

func (panickyEvents) EventsWithin(context.Context, string, int64, int, int64) ([]store.Event, error) {
	panic("the store's bug")
}

// TestChangesPanicGivesSlotBack: a read of events for /changes that
// panics (the HTTP server recovers a handler's panic and serves on)
// gives its read slot back; before, the slot was lost for good, and with
// MaxReadsPerOwner panics every later read of the owner waited for one.
func TestChangesPanicGivesSlotBack(t *testing.T) {
	st := openStore(t)
	m := startManager(t, st, llmtest.NewModel(llmtest.Text("done")), nil)
	v := create(t, m, `{"agent":{"name":"a"},"messages":"Hi."}`)
	f := &follower{t: t, m: m, id: v.ID}
	f.status(session.StatusCompleted)

	// Another replica on the same store: it made none of the commits, so
	// /changes reads the events from the store.
	m2 := startManager(t, panickyEvents{st}, llmtest.NewModel(), nil)
	for range session.MaxReadsPerOwner + 1 {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatal("Changes did not read the events")
				}
			}()
			m2.Changes(t.Context(), owner, v.ID, &session.ChangesParams{})
		}()
		if loading, waiting := m2.Reads(); loading != 0 || waiting != 0 {
			t.Fatalf("after a read that panicked: %d reads loading, %d waiting; want none", loading, waiting)
		}
	}
}
