package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/platform/schedule"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// fakeClock is the schedules' time in these tests: it moves when the test
// says; the worker is driven with Poll, so nothing waits on it.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(time.Duration) <-chan time.Time { return make(chan time.Time) }

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// scheduleEnv is a server with schedules on loopback, its responses
// checked against the contract.
type scheduleEnv struct {
	*env
	clock *fakeClock
	sch   *schedule.Scheduler
}

func newScheduleEnv(t *testing.T, replies ...openaitest.Reply) *scheduleEnv {
	t.Helper()
	return newScheduleEnvWrapped(t, nil, replies...)
}

// newScheduleEnvWrapped is newScheduleEnv whose scheduler uses the store
// wrap returns (wrap nil: the store itself).
func newScheduleEnvWrapped(t *testing.T, wrap func(store.Store) store.Store, replies ...openaitest.Reply) *scheduleEnv {
	t.Helper()
	model := openaitest.NewServer(replies...)
	t.Cleanup(model.Close)
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, &session.Options{
		Agents: map[string]*session.AgentConfig{"reporter": {Description: "Writes the nightly report"}},
	})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: time.Date(2026, 3, 28, 6, 58, 0, 0, time.UTC)}
	var schSt store.Store = st
	if wrap != nil {
		schSt = wrap(st)
	}
	sch := schedule.New(m, schSt, &schedule.Options{Owner: "replica-1", Clock: clock})
	srv := httptest.NewServer(contractHandler(t, newServer(m, &server.Options{APIKeys: []string{keyAlice, keyBob}, Schedules: sch})))
	t.Cleanup(func() {
		srv.Close()
		m.Stop(context.Background())
	})
	return &scheduleEnv{env: &env{t: t, model: model, url: srv.URL, st: st}, clock: clock, sch: sch}
}

type scheduleRecord struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	Description *string `json:"description"`
	Timing      struct {
		Type, Expression, Timezone string
	} `json:"timing"`
	SessionRequest json.RawMessage `json:"session_request"`
	Paused         bool            `json:"paused"`
	PauseNote      *string         `json:"pause_note"`
	NextRunTimes   []string        `json:"next_run_times"`
	LastRunAt      *string         `json:"last_run_at"`
}

type runRecord struct {
	ID                string  `json:"id"`
	ScheduleID        string  `json:"schedule_id"`
	Status            string  `json:"status"`
	ScheduledFor      string  `json:"scheduled_for"`
	SessionID         *string `json:"session_id"`
	Error             *string `json:"error"`
	TriggeredManually bool    `json:"triggered_manually"`
	SkippedTicks      int     `json:"skipped_ticks"`
}

type page[T any] struct {
	Items []T `json:"items"`
	Total int `json:"total"`
	Page  int `json:"page"`
}

const nightly = `{"name":"nightly report","description":"Every morning in Paris","timing":{"type":"cron","expression":"0 9 * * *","timezone":"Europe/Paris"},
	"session_request":{"agent":"reporter","messages":"Write the nightly report."}}`

func TestSchedulesAPI(t *testing.T) {
	e := newScheduleEnv(t, openaitest.Reply{Text: "Report written."}, openaitest.Reply{Text: "Report written."}, openaitest.Reply{Text: "Report written."})
	r := e.expect(e.do("POST", "/api/v2/schedules", keyAlice, nightly), http.StatusCreated)
	var sc scheduleRecord
	r.json(&sc)
	if r.header.Get("Location") != "/api/v2/schedules/"+sc.ID {
		t.Errorf("Location = %q", r.header.Get("Location"))
	}
	// 09:00 in Paris: +01:00 on the 28th of March 2026, +02:00 from the
	// 29th, when the clocks go forward.
	if len(sc.NextRunTimes) != 5 || sc.NextRunTimes[0] != "2026-03-28T09:00:00+01:00" || sc.NextRunTimes[1] != "2026-03-29T09:00:00+02:00" {
		t.Errorf("next_run_times = %v", sc.NextRunTimes)
	}
	if sc.Timing.Type != "cron" || sc.LastRunAt != nil || sc.Paused || sc.PauseNote != nil || sc.Description == nil {
		t.Errorf("created = %+v", sc)
	}
	// The template is stored normalised, as a session's request is.
	if !strings.Contains(string(sc.SessionRequest), `"queue":true`) {
		t.Errorf("session_request = %s", sc.SessionRequest)
	}
	e.expect(e.do("GET", "/api/v2/schedules/"+sc.ID, keyAlice, nil), http.StatusOK)

	// A second schedule, then the list: newest first, paged, sorted.
	e.clock.set(time.Date(2026, 3, 28, 6, 59, 0, 0, time.UTC))
	r = e.expect(e.do("POST", "/api/v2/schedules", keyAlice, `{"name":"hourly","timing":{"expression":"0 * * * *","timezone":"UTC"},"session_request":{"agent":"reporter"}}`), http.StatusCreated)
	var hourly scheduleRecord
	r.json(&hourly)
	var list page[scheduleRecord]
	e.expect(e.do("GET", "/api/v2/schedules?size=1", keyAlice, nil), http.StatusOK).json(&list)
	if list.Total != 2 || list.Page != 1 || len(list.Items) != 1 || list.Items[0].ID != hourly.ID {
		t.Errorf("list size=1 = %+v", list)
	}
	e.expect(e.do("GET", "/api/v2/schedules?sort=created_at&page=1&size=10", keyAlice, nil), http.StatusOK).json(&list)
	if len(list.Items) != 2 || list.Items[0].ID != sc.ID {
		t.Errorf("list oldest first = %+v", list)
	}

	// A tick: the worker creates the session, which runs.
	e.clock.set(time.Date(2026, 3, 28, 8, 0, 0, 0, time.UTC))
	if n, err := e.sch.Poll(t.Context()); err != nil || n != 2 {
		t.Fatalf("Poll at 08:00 UTC = %d, %v; want both schedules fired", n, err)
	}
	var runs page[runRecord]
	e.expect(e.do("GET", "/api/v2/schedules/"+sc.ID+"/runs", keyAlice, nil), http.StatusOK).json(&runs)
	if runs.Total != 1 || runs.Items[0].Status != "created" || runs.Items[0].ScheduledFor != "2026-03-28T08:00:00Z" || runs.Items[0].SessionID == nil {
		t.Fatalf("runs = %+v", runs)
	}
	sessionID := *runs.Items[0].SessionID
	e.follow(keyAlice, sessionID).status(session.StatusCompleted)
	var sessions page[struct{ ID string }]
	e.expect(e.do("GET", "/api/v2/sessions?schedule_id="+sc.ID, keyAlice, nil), http.StatusOK).json(&sessions)
	if sessions.Total != 1 || sessions.Items[0].ID != sessionID {
		t.Errorf("sessions of the schedule = %+v, want %s", sessions, sessionID)
	}

	// Pause with a note, trigger while paused, resume.
	r = e.expect(e.do("POST", "/api/v2/schedules/"+sc.ID+"/pause", keyAlice, `{"note":"quarter close"}`), http.StatusOK)
	var paused scheduleRecord
	r.json(&paused)
	if !paused.Paused || paused.PauseNote == nil || *paused.PauseNote != "quarter close" || len(paused.NextRunTimes) != 0 {
		t.Errorf("paused = %+v", paused)
	}
	e.expect(e.do("POST", "/api/v2/schedules/"+hourly.ID+"/pause", keyAlice, nil), http.StatusOK) // no body
	e.clock.set(time.Date(2026, 3, 28, 12, 30, 0, 0, time.UTC))
	var run runRecord
	e.expect(e.do("POST", "/api/v2/schedules/"+sc.ID+"/trigger", keyAlice, nil), http.StatusOK).json(&run)
	if !run.TriggeredManually || run.Status != "created" || run.SessionID == nil || run.ScheduledFor != "2026-03-28T12:30:00Z" {
		t.Errorf("trigger = %+v", run)
	}
	var resumed scheduleRecord
	e.expect(e.do("POST", "/api/v2/schedules/"+sc.ID+"/resume", keyAlice, nil), http.StatusOK).json(&resumed)
	if resumed.Paused || resumed.PauseNote != nil || len(resumed.NextRunTimes) == 0 || resumed.NextRunTimes[0] != "2026-03-29T09:00:00+02:00" {
		t.Errorf("resumed = %+v", resumed)
	}

	// Patch: only the fields given change; a new timing starts from now.
	var patched scheduleRecord
	e.expect(e.do("PATCH", "/api/v2/schedules/"+sc.ID, keyAlice, `{"name":"morning report","timing":{"expression":"30 7 * * 1-5","timezone":"Asia/Tokyo"}}`), http.StatusOK).json(&patched)
	if patched.Name != "morning report" || patched.Description == nil || *patched.Description != "Every morning in Paris" ||
		patched.Timing.Timezone != "Asia/Tokyo" || patched.NextRunTimes[0] != "2026-03-30T07:30:00+09:00" {
		t.Errorf("patched = %+v", patched)
	}
	e.expect(e.do("GET", "/api/v2/schedules/"+sc.ID+"/runs?sort=scheduled_for&size=1&page=2", keyAlice, nil), http.StatusOK).json(&runs)
	if runs.Total != 2 || len(runs.Items) != 1 || !runs.Items[0].TriggeredManually {
		t.Errorf("runs page 2 oldest first = %+v", runs)
	}

	// Delete: gone, its sessions stay.
	r = e.expect(e.do("DELETE", "/api/v2/schedules/"+sc.ID, keyAlice, nil), http.StatusNoContent)
	if len(r.body) != 0 {
		t.Errorf("delete answered a body: %s", r.body)
	}
	e.expect(e.do("GET", "/api/v2/schedules/"+sc.ID, keyAlice, nil), http.StatusNotFound)
	e.expect(e.do("GET", "/api/v2/schedules/"+sc.ID+"/runs", keyAlice, nil), http.StatusNotFound)
	e.expect(e.do("GET", "/api/v2/sessions/"+sessionID, keyAlice, nil), http.StatusOK)
}

func TestSchedulesValidation(t *testing.T) {
	e := newScheduleEnv(t)
	for _, tt := range []struct {
		name, method, path, body string
		loc                      string
	}{
		{"bad cron", "POST", "/api/v2/schedules", `{"name":"n","timing":{"expression":"0 9 * *","timezone":"UTC"},"session_request":{"agent":"reporter"}}`, `["body","timing","expression"]`},
		{"unknown zone", "POST", "/api/v2/schedules", `{"name":"n","timing":{"expression":"0 9 * * *","timezone":"Europe/Gondor"},"session_request":{"agent":"reporter"}}`, `["body","timing","timezone"]`},
		{"zone in the expression", "POST", "/api/v2/schedules", `{"name":"n","timing":{"expression":"CRON_TZ=UTC 0 9 * * *","timezone":"UTC"},"session_request":{"agent":"reporter"}}`, `["body","timing","expression"]`},
		{"not cron", "POST", "/api/v2/schedules", `{"name":"n","timing":{"type":"rate","expression":"0 9 * * *","timezone":"UTC"},"session_request":{"agent":"reporter"}}`, `["body","timing","type"]`},
		{"invalid template", "POST", "/api/v2/schedules", `{"name":"n","timing":{"expression":"0 9 * * *","timezone":"UTC"},"session_request":{"agent":"ghost"}}`, `["body","session_request","agent"]`},
		{"template with an empty image", "POST", "/api/v2/schedules", `{"name":"n","timing":{"expression":"0 9 * * *","timezone":"UTC"},"session_request":{"agent":"reporter","messages":{"message":"look","images":["data:image/png;base64,"]}}}`, `["body","session_request","messages",0,"images",0]`},
		{"template of the wrong type", "POST", "/api/v2/schedules", `{"name":"n","timing":{"expression":"0 9 * * *","timezone":"UTC"},"session_request":"run it"}`, `["body","session_request"]`},
		{"no name", "POST", "/api/v2/schedules", `{"timing":{"expression":"0 9 * * *","timezone":"UTC"},"session_request":{"agent":"reporter"}}`, `["body","name"]`},
		{"name of the wrong type", "POST", "/api/v2/schedules", `{"name":5,"timing":{"expression":"0 9 * * *","timezone":"UTC"},"session_request":{"agent":"reporter"}}`, `["body","name"]`},
		{"not JSON", "POST", "/api/v2/schedules", `{"name":`, `["body"]`},
		{"empty body", "POST", "/api/v2/schedules", ``, `["body"]`},
		{"size too big", "GET", "/api/v2/schedules?size=1001", ``, `["query","size"]`},
		{"page zero", "GET", "/api/v2/schedules?page=0", ``, `["query","page"]`},
		{"unknown sort", "GET", "/api/v2/schedules?sort=name", ``, `["query","sort"]`},
		{"id not a UUID", "GET", "/api/v2/schedules/nightly", ``, `["path","id"]`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var body any
			if tt.body != "" {
				body = tt.body
			}
			r := e.expect(e.do(tt.method, tt.path, keyAlice, body, "Content-Type", "application/json"), http.StatusUnprocessableEntity)
			var v struct {
				Detail []struct {
					Loc []any `json:"loc"`
				} `json:"detail"`
			}
			r.json(&v)
			if len(v.Detail) == 0 {
				t.Fatalf("422 without details: %s", r.body)
			}
			loc, _ := json.Marshal(v.Detail[0].Loc)
			if string(loc) != tt.loc {
				t.Errorf("loc = %s, want %s (%s)", loc, tt.loc, r.body)
			}
		})
	}
	// An existing schedule's invalid changes are refused the same way.
	var sc scheduleRecord
	e.expect(e.do("POST", "/api/v2/schedules", keyAlice, nightly), http.StatusCreated).json(&sc)
	e.expect(e.do("PATCH", "/api/v2/schedules/"+sc.ID, keyAlice, `{"timing":{"expression":"0 9 * * *","timezone":"Local"}}`), http.StatusUnprocessableEntity)
	e.expect(e.do("POST", "/api/v2/schedules/"+sc.ID+"/pause", keyAlice, fmt.Sprintf(`{"note":%q}`, strings.Repeat("x", 256))), http.StatusUnprocessableEntity)
	e.expect(e.do("POST", "/api/v2/schedules", keyAlice, nightly, "Content-Type", "text/plain"), http.StatusUnsupportedMediaType)
	e.expect(e.do("GET", "/api/v2/schedules", "", nil), http.StatusUnauthorized)
	var list page[scheduleRecord]
	e.expect(e.do("GET", "/api/v2/schedules", keyAlice, nil), http.StatusOK).json(&list)
	if list.Total != 1 {
		t.Errorf("refused requests stored schedules: %d", list.Total)
	}
}

// TestSchedulesPerKey: another key's schedule is 404 for every operation,
// and is left as it was.
func TestSchedulesPerKey(t *testing.T) {
	e := newScheduleEnv(t)
	var sc scheduleRecord
	e.expect(e.do("POST", "/api/v2/schedules", keyAlice, nightly), http.StatusCreated).json(&sc)
	for _, op := range []struct{ method, path, body string }{
		{"GET", "", ""},
		{"PATCH", "", `{"name":"mine"}`},
		{"DELETE", "", ""},
		{"POST", "/pause", ""},
		{"POST", "/resume", ""},
		{"POST", "/trigger", ""},
		{"GET", "/runs", ""},
	} {
		var body any
		if op.body != "" {
			body = op.body
		}
		r := e.expect(e.do(op.method, "/api/v2/schedules/"+sc.ID+op.path, keyBob, body), http.StatusNotFound)
		if !strings.Contains(string(r.body), "Schedule not found") {
			t.Errorf("%s %s: %s", op.method, op.path, r.body)
		}
	}
	var list page[scheduleRecord]
	e.expect(e.do("GET", "/api/v2/schedules", keyBob, nil), http.StatusOK).json(&list)
	if list.Total != 0 || len(list.Items) != 0 {
		t.Errorf("bob lists %+v", list)
	}
	var got scheduleRecord
	e.expect(e.do("GET", "/api/v2/schedules/"+sc.ID, keyAlice, nil), http.StatusOK).json(&got)
	if got.Name != "nightly report" || got.Paused || got.LastRunAt != nil {
		t.Errorf("alice's schedule after bob's attempts = %+v", got)
	}
}
