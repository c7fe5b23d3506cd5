package schedule_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/platform/registry"
	"github.com/hrns-dev/hrns/platform/schedule"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/postgres"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
	"github.com/hrns-dev/hrns/store/sqlite"
)

const (
	alice = "alice"
	bob   = "bob"
)

// clock is a fake [schedule.Clock]: time moves only when the test says,
// and each wait of the worker is announced on waits, so that a test knows
// the worker is idle before it moves time.
type clock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	waits   chan time.Duration
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

func newClock(now time.Time) *clock { return &clock{now: now, waits: make(chan time.Duration, 16)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	ch := make(chan time.Time, 1)
	c.waiters = append(c.waiters, waiter{c.now.Add(d), ch})
	c.mu.Unlock()
	select {
	case c.waits <- d:
	default:
	}
	return ch
}

// set moves the clock to t and wakes the waits that have ended.
func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(t) {
			w.ch <- t
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
}

func openSQLite(t *testing.T, path string) store.Store {
	t.Helper()
	st, err := sqlite.Open(path, &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// agents are the named agents templates use.
var agents = map[string]*session.AgentConfig{"reporter": {Description: "Writes the nightly report"}}

func newManager(st store.Store, opts *session.Options) *session.Manager {
	if opts == nil {
		opts = &session.Options{}
	}
	opts.Agents = agents
	return session.New(st, llmtest.NewModel(), opts)
}

func newScheduler(t *testing.T, st store.Store, c *clock, owner string) *schedule.Scheduler {
	t.Helper()
	return schedule.New(newManager(st, nil), st, &schedule.Options{Owner: owner, Clock: c})
}

const template = `{"agent":"reporter","messages":"Write the nightly report."}`

func mustCreate(t *testing.T, sch *schedule.Scheduler, owner, expr, tz string) *schedule.Schedule {
	t.Helper()
	sc, err := sch.Create(t.Context(), owner, &schedule.CreateRequest{
		Name: "nightly report", Timing: &schedule.Timing{Expression: expr, Timezone: tz}, SessionRequest: json.RawMessage(template),
	})
	if err != nil {
		t.Fatalf("Create(%q, %q) = %v", expr, tz, err)
	}
	return sc
}

func runs(t *testing.T, sch *schedule.Scheduler, owner, id string) []*schedule.Run {
	t.Helper()
	page, err := sch.Runs(t.Context(), owner, id, &schedule.ListParams{Size: 1000, Ascending: true})
	if err != nil {
		t.Fatal(err)
	}
	if page.Total != len(page.Items) {
		t.Fatalf("runs: total %d, %d items", page.Total, len(page.Items))
	}
	return page.Items
}

// sessionsOf returns the IDs of the sessions the schedule created, as the
// sessions list filter schedule_id sees them.
func sessionsOf(t *testing.T, st store.Store, owner, id string) []string {
	t.Helper()
	got, _, err := st.ListSessions(t.Context(), &store.ListParams{Owner: owner, ScheduleID: id, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range got {
		ids = append(ids, s.ID)
	}
	slices.Sort(ids)
	return ids
}

func runSessions(rs []*schedule.Run) []string {
	var ids []string
	for _, r := range rs {
		if r.SessionID != nil {
			ids = append(ids, *r.SessionID)
		}
	}
	slices.Sort(ids)
	return ids
}

var start = time.Date(2026, 6, 1, 9, 58, 0, 0, time.UTC)

func TestFireCreatesSessions(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	c := newClock(start)
	sch := newScheduler(t, st, c, "w1")
	sc := mustCreate(t, sch, alice, "*/5 * * * *", "UTC")
	if diff := cmp.Diff([]time.Time{utc("2026-06-01T10:00:00Z"), utc("2026-06-01T10:05:00Z")}, sc.NextRunTimes[:2], timeEq); diff != "" {
		t.Errorf("next run times (-want +got):\n%s", diff)
	}
	// Nothing is due before the first tick.
	if n, err := sch.Poll(t.Context()); err != nil || n != 0 {
		t.Fatalf("Poll before the tick = %d, %v", n, err)
	}
	for _, at := range []string{"2026-06-01T10:00:00Z", "2026-06-01T10:05:01Z", "2026-06-01T10:05:02Z", "2026-06-01T10:10:00Z"} {
		c.set(utc(at))
		if _, err := sch.Poll(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	rs := runs(t, sch, alice, sc.ID)
	var ticks []string
	for _, r := range rs {
		ticks = append(ticks, r.ScheduledFor.Format(time.RFC3339))
		if r.Status != store.RunCreated || r.SessionID == nil || r.TriggeredManually || r.SkippedTicks != 0 || r.Error != nil {
			t.Errorf("run = %+v", r)
		}
	}
	if diff := cmp.Diff([]string{"2026-06-01T10:00:00Z", "2026-06-01T10:05:00Z", "2026-06-01T10:10:00Z"}, ticks); diff != "" {
		t.Errorf("ticks fired (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sessionsOf(t, st, alice, sc.ID), runSessions(rs)); diff != "" {
		t.Errorf("sessions with schedule_id vs runs (-list +runs):\n%s", diff)
	}
	got, err := sch.Get(t.Context(), alice, sc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.LastRunAt == nil || !got.LastRunAt.Equal(utc("2026-06-01T10:10:00Z")) || !got.NextRunTimes[0].Equal(utc("2026-06-01T10:15:00Z")) {
		t.Errorf("after the fires: last %v, next %v", got.LastRunAt, got.NextRunTimes)
	}
	// The session is the template's, with the schedule's id.
	s, err := st.GetSession(t.Context(), *rs[0].SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if s.Owner != alice || s.ScheduleID != sc.ID || s.Agent != "reporter" || s.FirstMessage != "Write the nightly report." {
		t.Errorf("session = owner %q schedule %q agent %q first %q", s.Owner, s.ScheduleID, s.Agent, s.FirstMessage)
	}
}

var timeEq = cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// twoWorkers runs two schedulers (replicas) on stores a and b, which
// share their data, through a day of five-minute ticks with the clock
// moving in uneven steps, both polling at once at each step; each tick
// must be fired once, and make one session.
func twoWorkers(t *testing.T, a, b store.Store) {
	c := newClock(start)
	w1, w2 := newScheduler(t, a, c, "w1"), newScheduler(t, b, c, "w2")
	sc := mustCreate(t, w1, alice, "*/5 * * * *", "Europe/Paris")
	other := mustCreate(t, w2, bob, "*/10 * * * *", "America/New_York")
	end := start.Add(3 * time.Hour)
	for now, step := start, 0; now.Before(end); step++ {
		now = now.Add(time.Duration(37+step%5*61) * time.Second)
		c.set(now)
		var wg sync.WaitGroup
		for _, w := range []*schedule.Scheduler{w1, w2} {
			wg.Go(func() {
				if _, err := w.Poll(t.Context()); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	for _, tt := range []struct {
		owner, id string
		every     time.Duration
	}{{alice, sc.ID, 5 * time.Minute}, {bob, other.ID, 10 * time.Minute}} {
		rs := runs(t, w1, tt.owner, tt.id)
		seen := map[time.Time]bool{}
		for _, r := range rs {
			if seen[r.ScheduledFor] {
				t.Errorf("tick %v fired twice", r.ScheduledFor)
			}
			seen[r.ScheduledFor] = true
			if r.Status != store.RunCreated {
				t.Errorf("run %+v", r)
			}
		}
		// Polls come at most about 5 minutes apart, so a tick may be
		// passed over (counted) but none is fired twice; fired plus
		// skipped covers every tick.
		total := 0
		for _, r := range rs {
			total += 1 + r.SkippedTicks
		}
		first := start.Truncate(tt.every).Add(tt.every)
		want := int(c.Now().Sub(first)/tt.every) + 1
		if total != want {
			t.Errorf("schedule every %v: %d runs covering %d ticks, want %d", tt.every, len(rs), total, want)
		}
		if diff := cmp.Diff(sessionsOf(t, a, tt.owner, tt.id), runSessions(rs)); diff != "" {
			t.Errorf("sessions vs runs (-list +runs):\n%s", diff)
		}
	}
}

func TestTwoWorkersSQLite(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	twoWorkers(t, st, st)
}

func TestTwoWorkersPostgres(t *testing.T) {
	dsn := postgrestest.DSN(t)
	var sts []store.Store
	for range 2 {
		st, err := postgres.Open(t.Context(), dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		sts = append(sts, st)
	}
	twoWorkers(t, sts[0], sts[1])
}

// TestRestartMissedTicks: the server stops; when a new process opens the
// same file three hours later, the schedule fires once, for the latest
// tick, and records the ticks it passed over.
func TestRestartMissedTicks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hrns.db")
	st, err := sqlite.Open(path, &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	c := newClock(start)
	sch := newScheduler(t, st, c, "w1")
	sc := mustCreate(t, sch, alice, "*/15 * * * *", "UTC")
	c.set(utc("2026-06-01T10:00:00Z"))
	if n, err := sch.Poll(t.Context()); err != nil || n != 1 {
		t.Fatalf("Poll = %d, %v", n, err)
	}
	st.Close()

	// Down from 10:00:30 to 13:07.
	st2 := openSQLite(t, path)
	c.set(utc("2026-06-01T13:07:00Z"))
	sch = newScheduler(t, st2, c, "w2")
	if n, err := sch.Poll(t.Context()); err != nil || n != 1 {
		t.Fatalf("Poll after the restart = %d, %v; want one fire", n, err)
	}
	if n, err := sch.Poll(t.Context()); err != nil || n != 0 {
		t.Fatalf("second Poll = %d, %v; want nothing", n, err)
	}
	rs := runs(t, sch, alice, sc.ID)
	if len(rs) != 2 {
		t.Fatalf("%d runs, want 2", len(rs))
	}
	last := rs[1]
	// 10:15 ... 12:45 passed over (11 ticks), 13:00 fired.
	if !last.ScheduledFor.Equal(utc("2026-06-01T13:00:00Z")) || last.SkippedTicks != 11 || last.Status != store.RunCreated {
		t.Errorf("the run after the restart = %+v; want 13:00 with 11 skipped", last)
	}
	got, err := sch.Get(t.Context(), alice, sc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.NextRunTimes[0].Equal(utc("2026-06-01T13:15:00Z")) {
		t.Errorf("next run after the catch-up = %v", got.NextRunTimes[0])
	}
	if n := len(sessionsOf(t, st2, alice, sc.ID)); n != 2 {
		t.Errorf("%d sessions, want 2", n)
	}
}

// TestTakeOverRun: a worker took a tick and died before finishing the run,
// once before creating the session and once after; another worker
// completes each run when the lease ends, and no tick has two sessions.
func TestTakeOverRun(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	c := newClock(start)
	sch := newScheduler(t, st, c, "w2")
	sc := mustCreate(t, sch, alice, "*/5 * * * *", "UTC")
	stored, err := st.GetSchedule(t.Context(), alice, sc.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The dead worker's first tick: taken, no session.
	tick := utc("2026-06-01T10:00:00Z")
	if _, err := st.FireSchedule(t.Context(), &store.FireParams{Owner: alice, ID: sc.ID, Version: stored.Version, NextRunAt: tick.Add(5 * time.Minute),
		Run: &store.ScheduleRun{ID: "00000000-0000-4000-8000-00000000dead", ScheduledFor: tick, LeaseOwner: "w1", LeaseUntil: tick.Add(6 * time.Minute), CreatedAt: tick}}); err != nil {
		t.Fatal(err)
	}
	// Its second: taken, and the session created, but the run not finished.
	tick2 := tick.Add(5 * time.Minute)
	if _, err := st.FireSchedule(t.Context(), &store.FireParams{Owner: alice, ID: sc.ID, Version: stored.Version + 1, NextRunAt: tick2.Add(5 * time.Minute),
		Run: &store.ScheduleRun{ID: "00000000-0000-4000-8000-00000000beef", ScheduledFor: tick2, LeaseOwner: "w1", LeaseUntil: tick2.Add(time.Minute), CreatedAt: tick2}}); err != nil {
		t.Fatal(err)
	}
	var req session.Request
	json.Unmarshal([]byte(template), &req)
	key := "schedule-run:00000000-0000-4000-8000-00000000beef"
	made, _, err := newManager(st, nil).Create(t.Context(), &session.CreateParams{Owner: alice, Request: &req, Raw: json.RawMessage(key), IdempotencyKey: key, ScheduleID: sc.ID})
	if err != nil {
		t.Fatal(err)
	}
	// While the leases hold, the other worker leaves the runs alone.
	c.set(tick2.Add(30 * time.Second))
	if n, err := sch.Poll(t.Context()); err != nil || n != 0 {
		t.Fatalf("Poll under the leases = %d, %v", n, err)
	}
	c.set(tick2.Add(time.Minute))
	if n, err := sch.Poll(t.Context()); err != nil || n != 2 {
		t.Fatalf("Poll after the leases = %d, %v; want 2 runs completed", n, err)
	}
	rs := runs(t, sch, alice, sc.ID)
	if len(rs) != 2 || rs[0].Status != store.RunCreated || rs[1].Status != store.RunCreated {
		t.Fatalf("runs = %+v", rs)
	}
	if *rs[1].SessionID != made.ID {
		t.Errorf("the taken-over run has session %s, want the one its first worker created, %s", *rs[1].SessionID, made.ID)
	}
	if n := len(sessionsOf(t, st, alice, sc.ID)); n != 2 {
		t.Errorf("%d sessions for 2 ticks", n)
	}
}

func TestPauseResumeTrigger(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	c := newClock(start)
	sch := newScheduler(t, st, c, "w1")
	sc := mustCreate(t, sch, alice, "0 * * * *", "UTC")
	ctx := t.Context()
	note := "maintenance window"
	paused, err := sch.Pause(ctx, alice, sc.ID, &note)
	if err != nil {
		t.Fatal(err)
	}
	if !paused.Paused || paused.PauseNote == nil || *paused.PauseNote != note || len(paused.NextRunTimes) != 0 {
		t.Errorf("paused = %+v", paused)
	}
	// Three ticks pass while paused: nothing fires.
	c.set(utc("2026-06-01T12:30:00Z"))
	if n, err := sch.Poll(ctx); err != nil || n != 0 {
		t.Fatalf("Poll while paused = %d, %v", n, err)
	}
	// A trigger fires now, paused or not, and leaves the cadence alone.
	run, _, err := sch.Trigger(ctx, alice, sc.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if !run.TriggeredManually || run.Status != store.RunCreated || run.SessionID == nil || !run.ScheduledFor.Equal(c.Now()) {
		t.Errorf("trigger = %+v", run)
	}
	got, _ := sch.Get(ctx, alice, sc.ID)
	if !got.Paused || got.LastRunAt == nil || len(got.NextRunTimes) != 0 {
		t.Errorf("after the trigger = %+v", got)
	}
	// Resume: from the next tick after now; the paused ticks never fire.
	resumed, err := sch.Resume(ctx, alice, sc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if resumed.Paused || resumed.PauseNote != nil || !resumed.NextRunTimes[0].Equal(utc("2026-06-01T13:00:00Z")) {
		t.Errorf("resumed = %+v", resumed)
	}
	if again, err := sch.Resume(ctx, alice, sc.ID); err != nil || !again.UpdatedAt.Equal(resumed.UpdatedAt) {
		t.Errorf("resuming again = %+v, %v; want no change", again, err)
	}
	c.set(utc("2026-06-01T13:00:00Z"))
	if n, err := sch.Poll(ctx); err != nil || n != 1 {
		t.Fatalf("Poll after resume = %d, %v", n, err)
	}
	rs := runs(t, sch, alice, sc.ID)
	if len(rs) != 2 || !rs[0].TriggeredManually || rs[1].TriggeredManually || rs[1].SkippedTicks != 0 {
		t.Errorf("runs = %+v", rs)
	}
	// A trigger while not paused does not take the next tick.
	if _, _, err := sch.Trigger(ctx, alice, sc.ID, ""); err != nil {
		t.Fatal(err)
	}
	got, _ = sch.Get(ctx, alice, sc.ID)
	if !got.NextRunTimes[0].Equal(utc("2026-06-01T14:00:00Z")) {
		t.Errorf("next run after a trigger = %v", got.NextRunTimes[0])
	}
}

func TestUpdateRetimes(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	c := newClock(start)
	sch := newScheduler(t, st, c, "w1")
	sc := mustCreate(t, sch, alice, "0 * * * *", "UTC")
	name := "morning report"
	got, err := sch.Update(t.Context(), alice, sc.ID, &schedule.UpdateRequest{Name: &name, Timing: &schedule.Timing{Expression: "0 9 * * *", Timezone: "Europe/Paris"}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != name || got.Timing.Expression != "0 9 * * *" || got.Timing.Type != "cron" || string(got.SessionRequest) != string(sc.SessionRequest) {
		t.Errorf("updated = %+v", got)
	}
	// 09:00 in Paris on 2026-06-02 (CEST), seen from 09:58 UTC on the 1st.
	if !got.NextRunTimes[0].Equal(utc("2026-06-02T07:00:00Z")) {
		t.Errorf("next run = %v", got.NextRunTimes[0])
	}
	if _, off := got.NextRunTimes[0].Zone(); off != 2*3600 {
		t.Errorf("next run shown at offset %d s, want the zone's (+02:00)", off)
	}
	// Invalid changes change nothing.
	_, err = sch.Update(t.Context(), alice, sc.ID, &schedule.UpdateRequest{Timing: &schedule.Timing{Expression: "0 9 * * *", Timezone: "Nowhere/City"}})
	if ve, ok := errors.AsType[*session.ValidationError](err); !ok || fmt.Sprint(ve.Fields[0].Loc) != "[body timing timezone]" {
		t.Errorf("update to an unknown zone = %v", err)
	}
	if again, _ := sch.Get(t.Context(), alice, sc.ID); again.Timing.Timezone != "Europe/Paris" {
		t.Errorf("a refused update changed the schedule: %+v", again.Timing)
	}
}

func TestValidation(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	sch := newScheduler(t, st, newClock(start), "w1")
	ok := &schedule.Timing{Expression: "0 9 * * *", Timezone: "UTC"}
	long := string(make([]rune, 256))
	for _, tt := range []struct {
		name string
		req  schedule.CreateRequest
		loc  string
	}{
		{"bad cron", schedule.CreateRequest{Name: "n", Timing: &schedule.Timing{Expression: "0 25 * * *", Timezone: "UTC"}, SessionRequest: json.RawMessage(template)}, "[body timing expression]"},
		{"never fires", schedule.CreateRequest{Name: "n", Timing: &schedule.Timing{Expression: "0 0 30 2 *", Timezone: "UTC"}, SessionRequest: json.RawMessage(template)}, "[body timing expression]"},
		{"unknown zone", schedule.CreateRequest{Name: "n", Timing: &schedule.Timing{Expression: "0 9 * * *", Timezone: "Europe/Atlantis"}, SessionRequest: json.RawMessage(template)}, "[body timing timezone]"},
		{"no timing", schedule.CreateRequest{Name: "n", SessionRequest: json.RawMessage(template)}, "[body timing]"},
		{"no name", schedule.CreateRequest{Timing: ok, SessionRequest: json.RawMessage(template)}, "[body name]"},
		{"long name", schedule.CreateRequest{Name: long, Timing: ok, SessionRequest: json.RawMessage(template)}, "[body name]"},
		{"no template", schedule.CreateRequest{Name: "n", Timing: ok}, "[body session_request]"},
		{"template not an object", schedule.CreateRequest{Name: "n", Timing: ok, SessionRequest: json.RawMessage(`[1]`)}, "[body session_request]"},
		{"template too large", schedule.CreateRequest{Name: "n", Timing: ok, SessionRequest: json.RawMessage(`{"agent":"reporter","messages":"` + strings.Repeat("x", 300<<10) + `"}`)}, "[body session_request]"},
		{"unknown agent", schedule.CreateRequest{Name: "n", Timing: ok, SessionRequest: json.RawMessage(`{"agent":"nobody","messages":"hi"}`)}, "[body session_request agent]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sch.Create(t.Context(), alice, &tt.req)
			ve, isVE := errors.AsType[*session.ValidationError](err)
			if !isVE || len(ve.Fields) == 0 || fmt.Sprint(ve.Fields[0].Loc) != tt.loc {
				t.Fatalf("Create = %v; want a validation error at %s", err, tt.loc)
			}
		})
	}
	page, err := sch.List(t.Context(), alice, &schedule.ListParams{})
	if err != nil || page.Total != 0 {
		t.Errorf("refused creations stored something: %+v, %v", page, err)
	}
}

func TestMaxSchedules(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	sch := schedule.New(newManager(st, nil), st, &schedule.Options{Clock: newClock(start), MaxSchedules: 2})
	mustCreate(t, sch, alice, "0 9 * * *", "UTC")
	mustCreate(t, sch, alice, "0 9 * * *", "UTC")
	if _, err := sch.Create(t.Context(), alice, &schedule.CreateRequest{Name: "n", Timing: &schedule.Timing{Expression: "0 9 * * *", Timezone: "UTC"}, SessionRequest: json.RawMessage(template)}); !errors.Is(err, schedule.ErrTooMany) {
		t.Errorf("third schedule = %v, want ErrTooMany", err)
	}
	mustCreate(t, sch, bob, "0 9 * * *", "UTC") // the bound is per owner
}

func TestOwnerIsolation(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	sch := newScheduler(t, st, newClock(start), "w1")
	sc := mustCreate(t, sch, alice, "0 9 * * *", "UTC")
	ctx := t.Context()
	name := "mine now"
	for name, call := range map[string]func() error{
		"get":     func() error { _, err := sch.Get(ctx, bob, sc.ID); return err },
		"update":  func() error { _, err := sch.Update(ctx, bob, sc.ID, &schedule.UpdateRequest{Name: &name}); return err },
		"pause":   func() error { _, err := sch.Pause(ctx, bob, sc.ID, nil); return err },
		"resume":  func() error { _, err := sch.Resume(ctx, bob, sc.ID); return err },
		"trigger": func() error { _, _, err := sch.Trigger(ctx, bob, sc.ID, ""); return err },
		"runs":    func() error { _, err := sch.Runs(ctx, bob, sc.ID, &schedule.ListParams{}); return err },
		"delete":  func() error { return sch.Delete(ctx, bob, sc.ID) },
	} {
		if err := call(); !errors.Is(err, schedule.ErrNotFound) {
			t.Errorf("%s by another owner = %v, want ErrNotFound", name, err)
		}
	}
	if page, _ := sch.List(ctx, bob, &schedule.ListParams{}); page.Total != 0 {
		t.Errorf("another owner lists %d schedules", page.Total)
	}
	if got, err := sch.Get(ctx, alice, sc.ID); err != nil || got.Name != sc.Name || got.Paused {
		t.Errorf("the owner's schedule after the others' attempts = %+v, %v", got, err)
	}
	if n := len(runs(t, sch, alice, sc.ID)); n != 0 {
		t.Errorf("another owner's trigger made %d runs", n)
	}
}

// TestTemplateResolvedAtFire: the template names an agent the owner
// registered; once it is deleted, the next firing records an error run
// instead of a session.
func TestTemplateResolvedAtFire(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	m := newManager(st, nil)
	c := newClock(start)
	sch := schedule.New(m, st, &schedule.Options{Owner: "w1", Clock: c})
	ctx := t.Context()
	if _, err := registry.New(m).Create(ctx, registry.EntryAgent, alice, []byte(`{"name":"digest","description":"Sends the digest","environments":[]}`)); err != nil {
		t.Fatal(err)
	}
	sc, err := sch.Create(ctx, alice, &schedule.CreateRequest{Name: "digest", Timing: &schedule.Timing{Expression: "0 * * * *", Timezone: "UTC"},
		SessionRequest: json.RawMessage(`{"agent":"digest","messages":"Send it."}`)})
	if err != nil {
		t.Fatal(err)
	}
	// Bob has no agent "digest": the template is his to resolve.
	if _, err := sch.Create(ctx, bob, &schedule.CreateRequest{Name: "digest", Timing: &schedule.Timing{Expression: "0 * * * *", Timezone: "UTC"},
		SessionRequest: json.RawMessage(`{"agent":"digest","messages":"Send it."}`)}); err == nil {
		t.Error("another key's schedule resolved alice's agent")
	}
	if err := registry.New(m).Delete(ctx, registry.EntryAgent, alice, "digest"); err != nil {
		t.Fatal(err)
	}
	c.set(utc("2026-06-01T10:00:00Z"))
	if _, err := sch.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	rs := runs(t, sch, alice, sc.ID)
	if len(rs) != 1 || rs[0].Status != store.RunError || rs[0].Error == nil || rs[0].SessionID != nil {
		t.Fatalf("runs = %+v", rs)
	}
	t.Logf("error run: %s", *rs[0].Error)
}

// TestQuotaSkip: a template with queue: false at the owner's limit of
// active sessions is recorded as skipped_quota.
func TestQuotaSkip(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	m := newManager(st, &session.Options{MaxActiveSessions: 1})
	c := newClock(start)
	sch := schedule.New(m, st, &schedule.Options{Owner: "w1", Clock: c})
	sc, err := sch.Create(t.Context(), alice, &schedule.CreateRequest{Name: "n", Timing: &schedule.Timing{Expression: "*/5 * * * *", Timezone: "UTC"},
		SessionRequest: json.RawMessage(`{"agent":"reporter","messages":"go","queue":false}`)})
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []string{"2026-06-01T10:00:00Z", "2026-06-01T10:05:00Z"} {
		c.set(utc(at))
		if _, err := sch.Poll(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	rs := runs(t, sch, alice, sc.ID)
	if len(rs) != 2 || rs[0].Status != store.RunCreated || rs[1].Status != store.RunSkippedQuota || rs[1].SessionID != nil {
		t.Errorf("runs = %+v", rs)
	}
}

// TestRunLoop drives the worker's loop with the fake clock: it sleeps until
// the next tick, wakes when a schedule is created, and stops with its
// context.
func TestRunLoop(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	c := newClock(start)
	sch := schedule.New(newManager(st, nil), st, &schedule.Options{Owner: "w1", Clock: c, MaxWait: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- sch.Run(ctx) }()
	// Nothing to do: the worker sleeps its longest wait.
	if d := <-c.waits; d != time.Hour {
		t.Errorf("idle wait = %v, want MaxWait (1h)", d)
	}
	// A new schedule wakes it; it then sleeps until the first tick.
	sc := mustCreate(t, sch, alice, "0 10 * * *", "UTC")
	if d := <-c.waits; d != 2*time.Minute {
		t.Errorf("wait for the tick = %v, want 2m", d)
	}
	c.set(utc("2026-06-01T10:00:00Z"))
	// It fired, and sleeps again (MaxWait: the next tick is a day away).
	if d := <-c.waits; d != time.Hour {
		t.Errorf("wait after the fire = %v", d)
	}
	if rs := runs(t, sch, alice, sc.ID); len(rs) != 1 || rs[0].Status != store.RunCreated {
		t.Errorf("runs = %+v", rs)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}

// TestUnparsableTimingPaused: a stored schedule whose zone the system no
// longer knows (a tzdata upgrade) would be due for ever; the worker pauses
// it and says why, instead of retrying it at every poll.
func TestUnparsableTimingPaused(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	c := newClock(start)
	sch := newScheduler(t, st, c, "w1")
	id := "0dd00000-0000-4000-8000-000000000001"
	if _, err := st.CreateSchedule(t.Context(), &store.Schedule{ID: id, Owner: alice, NextRunAt: start.Add(-time.Minute),
		Spec: []byte(`{"name":"lost","timing":{"type":"cron","expression":"0 * * * *","timezone":"Atlantis/Capital"},"session_request":` + template + `}`)}); err != nil {
		t.Fatal(err)
	}
	if n, err := sch.Poll(t.Context()); err != nil || n != 0 {
		t.Fatalf("Poll = %d, %v", n, err)
	}
	got, err := sch.Get(t.Context(), alice, id)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Paused || got.PauseNote == nil || !strings.Contains(*got.PauseNote, "Atlantis/Capital") || len(got.NextRunTimes) != 0 {
		t.Errorf("schedule = %+v", got)
	}
	if due, _ := st.DueSchedules(t.Context(), start.Add(time.Hour), 10); len(due) != 0 {
		t.Errorf("still due: %v", due)
	}
	// Resuming it is refused while the zone is unknown.
	if _, err := sch.Resume(t.Context(), alice, id); err == nil {
		t.Error("resumed a schedule whose zone is unknown")
	}
}

// TestRestartTakesOverAtOnce: a process that died holding a run leaves it
// leased; a SQLite file belongs to one process, so the next one to open
// it takes the run over at once, without waiting for the lease to end.
func TestRestartTakesOverAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hrns.db")
	st, err := sqlite.Open(path, &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	c := newClock(start)
	sc := mustCreate(t, newScheduler(t, st, c, "w1"), alice, "*/5 * * * *", "UTC")
	stored, _ := st.GetSchedule(t.Context(), alice, sc.ID)
	tick := utc("2026-06-01T10:00:00Z")
	if _, err := st.FireSchedule(t.Context(), &store.FireParams{Owner: alice, ID: sc.ID, Version: stored.Version, NextRunAt: tick.Add(5 * time.Minute),
		Run: &store.ScheduleRun{ID: "00000000-0000-4000-8000-0000000000aa", ScheduledFor: tick, LeaseOwner: "w1", LeaseUntil: tick.Add(time.Minute), CreatedAt: tick}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st2 := openSQLite(t, path)
	c.set(tick.Add(time.Second)) // the dead process's lease has 59 s to go
	sch := newScheduler(t, st2, c, "w2")
	if n, err := sch.Poll(t.Context()); err != nil || n != 1 {
		t.Fatalf("Poll after the restart = %d, %v; want the run completed", n, err)
	}
	if rs := runs(t, sch, alice, sc.ID); len(rs) != 1 || rs[0].Status != store.RunCreated {
		t.Errorf("runs = %+v", rs)
	}
}

// TestWakeAcrossReplicas: a worker sleeping until its next look wakes at
// once when another replica creates a schedule (PostgreSQL notifications).
func TestWakeAcrossReplicas(t *testing.T) {
	dsn := postgrestest.DSN(t)
	var sts []store.Store
	for range 2 {
		st, err := postgres.Open(t.Context(), dsn, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		sts = append(sts, st)
	}
	c := newClock(start)
	sleeper := schedule.New(newManager(sts[1], nil), sts[1], &schedule.Options{Owner: "w2", Clock: c, MaxWait: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- sleeper.Run(ctx) }()
	if d := <-c.waits; d != time.Hour {
		t.Fatalf("idle wait = %v", d)
	}
	mustCreate(t, newScheduler(t, sts[0], c, "w1"), alice, "0 10 * * *", "UTC")
	if d := <-c.waits; d != 2*time.Minute {
		t.Errorf("wait after another replica's creation = %v, want 2m (until the tick)", d)
	}
	cancel()
	<-done
}

// stopInside is a store whose claims and fires commit, then cancel the
// poll's context, as a Stop arriving at that moment would.
type stopInside struct {
	store.Store
	stop context.CancelFunc
}

func (s *stopInside) ClaimScheduleRuns(ctx context.Context, p *store.ClaimParams) ([]*store.ScheduleRun, error) {
	runs, err := s.Store.ClaimScheduleRuns(ctx, p)
	if len(runs) > 0 {
		s.stop()
	}
	return runs, err
}

func (s *stopInside) FireSchedule(ctx context.Context, p *store.FireParams) (*store.ScheduleRun, error) {
	run, err := s.Store.FireSchedule(ctx, p)
	s.stop()
	return run, err
}

// TestStopInsideClaimCompletes stops a worker right after its claim or its
// fire committed: what it took is completed at once, not left leased to
// the stopped worker until the lease expires.
func TestStopInsideClaimCompletes(t *testing.T) {
	for _, orphan := range []bool{false, true} {
		t.Run(fmt.Sprintf("orphan=%v", orphan), func(t *testing.T) {
			st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
			c := newClock(start)
			sc := mustCreate(t, newScheduler(t, st, c, "w1"), alice, "*/5 * * * *", "UTC")
			tick := utc("2026-06-01T10:00:00Z")
			if orphan {
				// A dead worker's run, its lease expired.
				stored, err := st.GetSchedule(t.Context(), alice, sc.ID)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := st.FireSchedule(t.Context(), &store.FireParams{Owner: alice, ID: sc.ID, Version: stored.Version, NextRunAt: tick.Add(5 * time.Minute),
					Run: &store.ScheduleRun{ID: "00000000-0000-4000-8000-00000000dead", ScheduledFor: tick, LeaseOwner: "w0", LeaseUntil: tick.Add(time.Minute), CreatedAt: tick}}); err != nil {
					t.Fatal(err)
				}
				c.set(tick.Add(2 * time.Minute))
			} else {
				c.set(tick)
			}
			ctx, stop := context.WithCancel(t.Context())
			wrapped := &stopInside{Store: st, stop: stop}
			sch := schedule.New(newManager(st, nil), wrapped, &schedule.Options{Owner: "w1", Clock: c})
			sch.Poll(ctx)
			if ctx.Err() == nil {
				t.Fatal("the store did not stop the poll")
			}
			rs := runs(t, newScheduler(t, st, c, "w2"), alice, sc.ID)
			if len(rs) != 1 || rs[0].Status != store.RunCreated || rs[0].SessionID == nil {
				t.Fatalf("runs after a stop inside the claim = %+v; want one created run", rs)
			}
			if got := sessionsOf(t, st, alice, sc.ID); len(got) != 1 {
				t.Errorf("sessions = %v; want one", got)
			}
		})
	}
}
