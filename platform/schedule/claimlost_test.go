package schedule_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/platform/schedule"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/postgres"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
)

// lostStore lets a fire of a schedule, or a claim of runs that took one,
// commit and then answers an error, as a call cut by its bound after the
// commit, or whose connection broke while the commit's answer was in
// flight, does: the run it leased is the worker's, which does not know
// it. The first loseFires fires and loseClaims claims are lost so.
type lostStore struct {
	store.Store
	mu                    sync.Mutex
	loseFires, loseClaims int
	loseAdds              int // AddScheduleRun (a manual trigger)
	fires, claims         int // calls
}

func (s *lostStore) AddScheduleRun(ctx context.Context, r *store.ScheduleRun) (*store.ScheduleRun, error) {
	got, err := s.Store.AddScheduleRun(ctx, r)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.loseAdds > 0 {
		s.loseAdds--
		return nil, fmt.Errorf("add run to schedule: %w", context.DeadlineExceeded)
	}
	return got, err
}

func (s *lostStore) FireSchedule(ctx context.Context, p *store.FireParams) (*store.ScheduleRun, error) {
	r, err := s.Store.FireSchedule(ctx, p)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fires++
	if err == nil && s.loseFires > 0 {
		s.loseFires--
		return nil, fmt.Errorf("fire schedule: %w", context.DeadlineExceeded)
	}
	return r, err
}

func (s *lostStore) ClaimScheduleRuns(ctx context.Context, p *store.ClaimParams) ([]*store.ScheduleRun, error) {
	rs, err := s.Store.ClaimScheduleRuns(ctx, p)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claims++
	if err == nil && len(rs) > 0 && s.loseClaims > 0 {
		s.loseClaims--
		return nil, fmt.Errorf("claim schedule runs: %w", context.DeadlineExceeded)
	}
	return rs, err
}

// storeRuns returns the schedule's runs as stored.
func storeRuns(t *testing.T, st store.Store, id string) []*store.ScheduleRun {
	t.Helper()
	rs, _, err := st.ListScheduleRuns(t.Context(), &store.ScheduleRunListParams{Owner: alice, ScheduleID: id, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// lostFire: the worker's fire of a tick commits and answers an error.
// The worker fires again with the same run, which the store answers with
// the run the lost fire inserted: the session is created in the same
// poll, no takeover counted. Before, the run sat leased to the worker
// until its lease lapsed (a minute late) and was then taken over as if
// the worker had died, an attempt of MaxAttempts counted.
func lostFire(t *testing.T, st store.Store) {
	c := newClock(start)
	ls := &lostStore{Store: st, loseFires: 1}
	sch := schedule.New(newManager(st, nil), ls, &schedule.Options{Owner: "w1", Clock: c})
	sc := mustCreate(t, sch, alice, "0 10 * * *", "UTC")
	c.set(utc("2026-06-01T10:00:00Z"))
	if _, err := sch.Poll(t.Context()); err != nil {
		t.Error(err)
	}
	if rs := storeRuns(t, st, sc.ID); len(rs) != 1 || rs[0].Status != store.RunCreated || rs[0].SessionID == "" {
		t.Errorf("after a lost fire, runs %s; want one created in the poll", describeRuns(rs))
	}
	c.set(utc("2026-06-01T10:01:01Z")) // the lease has lapsed
	if _, err := sch.Poll(t.Context()); err != nil {
		t.Error(err)
	}
	if rs := storeRuns(t, st, sc.ID); len(rs) != 1 || rs[0].Status != store.RunCreated || rs[0].Attempts != 0 {
		t.Errorf("after the lease, runs %s; want one created, 0 takeovers", describeRuns(rs))
	}
	if got := sessionsOf(t, st, alice, sc.ID); len(got) != 1 {
		t.Errorf("sessions %v, want one", got)
	}
}

// lostClaim: a run whose worker died is taken over by a claim that
// commits and answers an error. The worker claims again with the claim's
// token and is given the run: its session is created in the same poll,
// one takeover counted. Before, the run sat leased to the worker until
// the lease lapsed and was taken over again, two takeovers counted.
func lostClaim(t *testing.T, st store.Store) {
	c := newClock(start)
	ls := &lostStore{Store: st, loseClaims: 1}
	sch := schedule.New(newManager(st, nil), ls, &schedule.Options{Owner: "w1", Clock: c})
	sc := mustCreate(t, sch, alice, "0 10 * * *", "UTC")
	// A worker that died fired the 10:00 tick.
	stored, err := st.GetSchedule(t.Context(), alice, sc.ID)
	if err != nil {
		t.Fatal(err)
	}
	tick := utc("2026-06-01T10:00:00Z")
	if _, err := st.FireSchedule(t.Context(), &store.FireParams{Owner: alice, ID: sc.ID, Version: stored.Version, NextRunAt: tick.Add(24 * time.Hour),
		Run: &store.ScheduleRun{ID: "00000000-0000-4000-8000-000000000001", ScheduledFor: tick, LeaseOwner: "dead", LeaseUntil: tick.Add(time.Minute), CreatedAt: tick}}); err != nil {
		t.Fatal(err)
	}
	c.set(tick.Add(2 * time.Minute))
	if _, err := sch.Poll(t.Context()); err != nil {
		t.Error(err)
	}
	if rs := storeRuns(t, st, sc.ID); len(rs) != 1 || rs[0].Status != store.RunCreated {
		t.Errorf("after a lost claim, runs %s; want one created in the poll", describeRuns(rs))
	}
	c.set(tick.Add(3*time.Minute + time.Second)) // the lost claim's lease has lapsed
	if _, err := sch.Poll(t.Context()); err != nil {
		t.Error(err)
	}
	if rs := storeRuns(t, st, sc.ID); len(rs) != 1 || rs[0].Status != store.RunCreated || rs[0].Attempts != 1 {
		t.Errorf("after the lease, runs %s; want one created, 1 takeover", describeRuns(rs))
	}
}

// lostTrigger: a trigger with an idempotency key whose run was added but
// whose answer was lost, on replica w1, is made again on replica w2 with
// the key: w2 is given the run w1 made, creates (or finds) its session,
// and answers it; the run, still leased to w1, is recorded with that
// session when its lease lapses and a worker takes it over. One run, one
// session. Without the key, the repeat is a second run.
func lostTrigger(t *testing.T, st store.Store) {
	ctx := t.Context()
	c := newClock(start)
	ls := &lostStore{Store: st, loseAdds: 1}
	w1 := schedule.New(newManager(st, nil), ls, &schedule.Options{Owner: "w1", Clock: c})
	w2 := schedule.New(newManager(st, nil), st, &schedule.Options{Owner: "w2", Clock: c})
	sc := mustCreate(t, w1, alice, "0 0 1 1 *", "UTC") // no tick in the test
	if _, _, err := w1.Trigger(ctx, alice, sc.ID, "retry-me"); err == nil {
		t.Fatal("Trigger whose answer was lost succeeded")
	}
	run, made, err := w2.Trigger(ctx, alice, sc.ID, "retry-me")
	if err != nil || made || run.Status != store.RunCreated || run.SessionID == nil {
		t.Fatalf("Trigger again with the key = %+v, made %v, %v; want the lost call's run, created", run, made, err)
	}
	if got := sessionsOf(t, st, alice, sc.ID); len(got) != 1 || got[0] != *run.SessionID {
		t.Errorf("sessions %v, want [%s]", got, *run.SessionID)
	}
	c.set(start.Add(2 * time.Minute)) // w1's lease of the run has lapsed
	if _, err := w2.Poll(ctx); err != nil {
		t.Error(err)
	}
	rs := storeRuns(t, st, sc.ID)
	if len(rs) != 1 || rs[0].ID != run.ID || rs[0].Status != store.RunCreated || rs[0].SessionID != *run.SessionID {
		t.Errorf("after the lease, runs %s; want %s, created with session %s", describeRuns(rs), run.ID, *run.SessionID)
	}
	if got := sessionsOf(t, st, alice, sc.ID); len(got) != 1 {
		t.Errorf("sessions after the lease %v, want one", got)
	}
	if again, made, err := w1.Trigger(ctx, alice, sc.ID, "retry-me"); err != nil || made || again.ID != run.ID || *again.SessionID != *run.SessionID {
		t.Errorf("Trigger a third time with the key = %+v, made %v, %v; want %s", again, made, err, run.ID)
	}
	// Without a key, each trigger is a run.
	if _, made, err := w1.Trigger(ctx, alice, sc.ID, ""); err != nil || !made {
		t.Errorf("Trigger without a key: made %v, %v", made, err)
	}
	if rs := storeRuns(t, st, sc.ID); len(rs) != 2 {
		t.Errorf("runs %s, want 2", describeRuns(rs))
	}
}

func TestLostTriggerSQLite(t *testing.T) {
	lostTrigger(t, openSQLite(t, filepath.Join(t.TempDir(), "hrns.db")))
}

func TestLostTriggerPostgres(t *testing.T) {
	lostTrigger(t, openPostgresStore(t))
}

func describeRuns(rs []*store.ScheduleRun) string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("{%s at %s, %d takeovers}", r.Status, r.UpdatedAt.Format(time.TimeOnly), r.Attempts))
	}
	return fmt.Sprint(out)
}

func TestLostFireSQLite(t *testing.T) {
	lostFire(t, openSQLite(t, filepath.Join(t.TempDir(), "hrns.db")))
}

func TestLostFirePostgres(t *testing.T) {
	lostFire(t, openPostgresStore(t))
}

func TestLostRunClaimSQLite(t *testing.T) {
	lostClaim(t, openSQLite(t, filepath.Join(t.TempDir(), "hrns.db")))
}

func TestLostRunClaimPostgres(t *testing.T) {
	lostClaim(t, openPostgresStore(t))
}

func openPostgresStore(t *testing.T) store.Store {
	t.Helper()
	st, err := postgres.Open(t.Context(), postgrestest.DSN(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestLostFireEveryCall: when every call of a fire answers an error, the
// worker makes three (the fire and two calls again with its run), takes
// no other tick for it, and the run is taken over once its lease lapses,
// one takeover counted: one session for the tick.
func TestLostFireEveryCall(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	c := newClock(start)
	ls := &lostStore{Store: st, loseFires: 3}
	sch := schedule.New(newManager(st, nil), ls, &schedule.Options{Owner: "w1", Clock: c})
	sc := mustCreate(t, sch, alice, "0 10 * * *", "UTC")
	c.set(utc("2026-06-01T10:00:00Z"))
	if _, err := sch.Poll(t.Context()); err != nil {
		t.Error(err)
	}
	if rs := storeRuns(t, st, sc.ID); ls.fires != 3 || len(rs) != 1 || rs[0].Status != store.RunPending {
		t.Fatalf("every fire lost: %d calls, runs %s; want 3 calls, one run pending", ls.fires, describeRuns(rs))
	}
	c.set(utc("2026-06-01T10:01:01Z"))
	if _, err := sch.Poll(t.Context()); err != nil {
		t.Error(err)
	}
	if rs := storeRuns(t, st, sc.ID); len(rs) != 1 || rs[0].Status != store.RunCreated || rs[0].Attempts != 1 {
		t.Errorf("after the lease, runs %s; want one created, 1 takeover", describeRuns(rs))
	}
	if got := sessionsOf(t, st, alice, sc.ID); len(got) != 1 {
		t.Errorf("sessions %v, want one", got)
	}
}
