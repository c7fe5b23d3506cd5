package server_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/store"
)

// lostTriggerStore lets AddScheduleRun commit and then answers an error,
// as a call cut by its bound after the commit, or whose connection broke
// while the commit's answer was in flight, does: the run exists, leased
// to the replica, and the caller of the trigger is answered 500.
type lostTriggerStore struct {
	store.Store
	mu   sync.Mutex
	lose int // how many more answers to lose
}

func (s *lostTriggerStore) AddScheduleRun(ctx context.Context, r *store.ScheduleRun) (*store.ScheduleRun, error) {
	got, err := s.Store.AddScheduleRun(ctx, r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.lose > 0 {
		s.lose--
		return nil, errors.New("add run to schedule: connection reset by peer")
	}
	return got, err
}

func (s *lostTriggerStore) loseNext() {
	s.mu.Lock()
	s.lose = 1
	s.mu.Unlock()
}

// TestSchedulesTriggerIdempotencyKey: a trigger whose store call
// committed but answered an error, made again with the same
// Idempotency-Key (by the SDK's retry, or by any HTTP client), is given
// the run the first call made and its one session, not a second run.
func TestSchedulesTriggerIdempotencyKey(t *testing.T) {
	var lost *lostTriggerStore
	e := newScheduleEnvWrapped(t, func(st store.Store) store.Store {
		lost = &lostTriggerStore{Store: st}
		return lost
	}, openaitest.Reply{Text: "Report written."}, openaitest.Reply{Text: "Report written."}, openaitest.Reply{Text: "Report written."})
	var sc scheduleRecord
	e.expect(e.do("POST", "/api/v2/schedules", keyAlice, nightly), http.StatusCreated).json(&sc)
	e.clock.set(time.Date(2026, 3, 28, 12, 30, 0, 0, time.UTC))

	// The SDK: its first attempt is answered 500 after the run was
	// made; it retries with the same key and is given that run.
	lost.loseNext()
	c := client.New(e.url, keyAlice, &client.Options{RetryDelay: time.Millisecond})
	run, err := c.TriggerSchedule(t.Context(), sc.ID)
	if err != nil {
		t.Fatalf("TriggerSchedule with its first answer lost = %v", err)
	}
	if run.Status != "created" || run.SessionID == nil || !run.TriggeredManually {
		t.Errorf("TriggerSchedule = %+v, want a created run with its session", run)
	}
	var runs page[runRecord]
	e.expect(e.do("GET", "/api/v2/schedules/"+sc.ID+"/runs", keyAlice, nil), http.StatusOK).json(&runs)
	if runs.Total != 1 || runs.Items[0].ID != run.ID {
		t.Errorf("runs after the SDK's trigger = %+v, want the one run %s", runs, run.ID)
	}

	// Any HTTP client: 500, then the same key gets the run made, marked
	// replayed; and again, the same run and session.
	lost.loseNext()
	const key = "trigger-2026-03-28-a"
	e.expect(e.do("POST", "/api/v2/schedules/"+sc.ID+"/trigger", keyAlice, nil, "Idempotency-Key", key), http.StatusInternalServerError)
	var first, again runRecord
	r := e.expect(e.do("POST", "/api/v2/schedules/"+sc.ID+"/trigger", keyAlice, nil, "Idempotency-Key", key), http.StatusOK)
	r.json(&first)
	if r.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("Idempotent-Replayed = %q on the trigger made again", r.header.Get("Idempotent-Replayed"))
	}
	if first.Status != "created" || first.SessionID == nil || first.ID == run.ID {
		t.Fatalf("trigger made again = %+v, want the lost call's run, created", first)
	}
	e.expect(e.do("POST", "/api/v2/schedules/"+sc.ID+"/trigger", keyAlice, nil, "Idempotency-Key", key), http.StatusOK).json(&again)
	if again.ID != first.ID || again.SessionID == nil || *again.SessionID != *first.SessionID {
		t.Errorf("trigger with the key a third time = %+v, want %+v", again, first)
	}
	e.expect(e.do("GET", "/api/v2/schedules/"+sc.ID+"/runs", keyAlice, nil), http.StatusOK).json(&runs)
	if runs.Total != 2 {
		t.Errorf("runs after a key used three times = %d, want 2 (the SDK's and the key's)", runs.Total)
	}
	var sessions page[struct{ ID string }]
	e.expect(e.do("GET", "/api/v2/sessions?schedule_id="+sc.ID, keyAlice, nil), http.StatusOK).json(&sessions)
	if sessions.Total != 2 {
		t.Errorf("sessions of the schedule = %d, want 2", sessions.Total)
	}

	// The key is the API key's: another key's trigger is 404 as ever.
	e.expect(e.do("POST", "/api/v2/schedules/"+sc.ID+"/trigger", keyBob, nil, "Idempotency-Key", key), http.StatusNotFound)

	// Invalid keys are 422, and make no run.
	for _, bad := range []string{strings.Repeat("k", 256), "clé"} {
		r := e.expect(e.do("POST", "/api/v2/schedules/"+sc.ID+"/trigger", keyAlice, nil, "Idempotency-Key", bad), http.StatusUnprocessableEntity)
		if !strings.Contains(string(r.body), "Idempotency-Key") {
			t.Errorf("422 for key %.20q = %s", bad, r.body)
		}
	}
	e.expect(e.do("GET", "/api/v2/schedules/"+sc.ID+"/runs", keyAlice, nil), http.StatusOK).json(&runs)
	if runs.Total != 2 {
		t.Errorf("runs after invalid keys = %d, want 2", runs.Total)
	}
}
