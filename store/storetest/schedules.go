package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/store"
)

// scheduleTests are the subtests of [store.Schedules].
var scheduleTests = []struct {
	name string
	fn   func(t *testing.T, st store.Store)
}{
	{"ScheduleCRUD", testScheduleCRUD},
	{"ScheduleList", testScheduleList},
	{"ScheduleFire", testScheduleFire},
	{"ScheduleFireConcurrent", testScheduleFireConcurrent},
	{"ScheduleRuns", testScheduleRuns},
	{"ScheduleRunClaims", testScheduleRunClaims},
	{"ScheduleFireAgain", testScheduleFireAgain},
	{"ScheduleRunClaimAgain", testScheduleRunClaimAgain},
	{"ScheduleRunIdempotencyKey", testScheduleRunIdempotencyKey},
	{"ScheduleWake", testScheduleWake},
	{"ScheduleSubscribe", testScheduleSubscribe},
}

func newSchedule(id, owner string) *store.Schedule {
	return &store.Schedule{
		ID:        id,
		Owner:     owner,
		Spec:      []byte(`{"name":"nightly report","timing":{"expression":"0 3 * * *","timezone":"Europe/Paris"}}`),
		NextRunAt: base.Add(time.Hour),
		CreatedAt: base,
	}
}

func mustCreateSchedule(t *testing.T, st store.Store, sc *store.Schedule) *store.Schedule {
	t.Helper()
	got, err := st.CreateSchedule(t.Context(), sc)
	if err != nil {
		t.Fatalf("CreateSchedule(%s) = %v", sc.ID, err)
	}
	return got
}

func scheduleID(i int) string { return fmt.Sprintf("5c4e0000-0000-4000-8000-%012d", i) }
func runID(i int) string      { return fmt.Sprintf("7a110000-0000-4000-8000-%012d", i) }

func testScheduleCRUD(t *testing.T, st store.Store) {
	ctx := t.Context()
	in := newSchedule(scheduleID(1), "alice")
	got := mustCreateSchedule(t, st, in)
	want := *in
	want.Version, want.UpdatedAt = 1, base
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("CreateSchedule returned (-want +got):\n%s", diff)
	}
	read, err := st.GetSchedule(ctx, "alice", in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&want, read); diff != "" {
		t.Errorf("GetSchedule (-want +got):\n%s", diff)
	}
	// Another owner sees nothing and changes nothing.
	if _, err := st.GetSchedule(ctx, "bob", in.ID); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Errorf("GetSchedule by another owner = %v, want ErrScheduleNotFound", err)
	}
	other := *read
	other.Owner = "bob"
	if _, err := st.UpdateSchedule(ctx, &other); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Errorf("UpdateSchedule by another owner = %v, want ErrScheduleNotFound", err)
	}
	if err := st.DeleteSchedule(ctx, "bob", in.ID); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Errorf("DeleteSchedule by another owner = %v, want ErrScheduleNotFound", err)
	}
	if _, err := st.AddScheduleRun(ctx, &store.ScheduleRun{ID: runID(1), ScheduleID: in.ID, Owner: "bob", Manual: true, ScheduledFor: base}); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Errorf("AddScheduleRun by another owner = %v, want ErrScheduleNotFound", err)
	}
	if _, _, err := st.ListScheduleRuns(ctx, &store.ScheduleRunListParams{Owner: "bob", ScheduleID: in.ID}); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Errorf("ListScheduleRuns by another owner = %v, want ErrScheduleNotFound", err)
	}

	// Update: optimistic concurrency on Version.
	up := *read
	up.Spec = []byte(`{"name":"weekly report"}`)
	up.Paused = true
	up.NextRunAt = time.Time{}
	updated, err := st.UpdateSchedule(ctx, &up)
	if err != nil {
		t.Fatal(err)
	}
	if updated.Version != 2 || !updated.Paused || !updated.NextRunAt.IsZero() || string(updated.Spec) != `{"name":"weekly report"}` || !updated.CreatedAt.Equal(base) {
		t.Errorf("UpdateSchedule = %+v", updated)
	}
	if !updated.UpdatedAt.After(base) {
		t.Errorf("UpdatedAt = %v, want after %v", updated.UpdatedAt, base)
	}
	if _, err := st.UpdateSchedule(ctx, &up); !errors.Is(err, store.ErrConflict) {
		t.Errorf("UpdateSchedule with a stale version = %v, want ErrConflict", err)
	}
	missing := *newSchedule(scheduleID(9), "alice")
	missing.Version = 1
	if _, err := st.UpdateSchedule(ctx, &missing); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Errorf("UpdateSchedule of a missing schedule = %v, want ErrScheduleNotFound", err)
	}

	// Delete takes the runs along.
	if _, err := st.AddScheduleRun(ctx, &store.ScheduleRun{ID: runID(2), ScheduleID: in.ID, Owner: "alice", Manual: true, ScheduledFor: base, LeaseOwner: "w1", LeaseUntil: base.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteSchedule(ctx, "alice", in.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetSchedule(ctx, "alice", in.ID); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Errorf("GetSchedule after delete = %v", err)
	}
	if err := st.DeleteSchedule(ctx, "alice", in.ID); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Errorf("second DeleteSchedule = %v", err)
	}
	claimed, err := st.ClaimScheduleRuns(ctx, &store.ClaimParams{Owner: "w2", Now: base.Add(time.Hour), TTL: time.Minute, Limit: 10})
	if err != nil || len(claimed) != 0 {
		t.Errorf("ClaimScheduleRuns after delete = %v, %v; want none", claimed, err)
	}
}

func testScheduleList(t *testing.T, st store.Store) {
	ctx := t.Context()
	for i := range 5 {
		sc := newSchedule(scheduleID(i), "alice")
		sc.CreatedAt = base.Add(time.Duration(i) * time.Second)
		mustCreateSchedule(t, st, sc)
	}
	mustCreateSchedule(t, st, newSchedule(scheduleID(10), "bob"))
	ids := func(page []*store.Schedule) []string {
		var out []string
		for _, s := range page {
			out = append(out, s.ID)
		}
		return out
	}
	page, total, err := st.ListSchedules(ctx, &store.ScheduleListParams{Owner: "alice", Offset: 1, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{scheduleID(3), scheduleID(2)}, ids(page)); diff != "" || total != 5 {
		t.Errorf("newest first, page 2 of 2: total %d, (-want +got):\n%s", total, diff)
	}
	page, _, err = st.ListSchedules(ctx, &store.ScheduleListParams{Owner: "alice", Limit: 2, Ascending: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{scheduleID(0), scheduleID(1)}, ids(page)); diff != "" {
		t.Errorf("oldest first (-want +got):\n%s", diff)
	}
	page, total, err = st.ListSchedules(ctx, &store.ScheduleListParams{Owner: "carol"})
	if err != nil || len(page) != 0 || total != 0 {
		t.Errorf("another owner's list = %v, %d, %v", page, total, err)
	}
}

func testScheduleFire(t *testing.T, st store.Store) {
	ctx := t.Context()
	sc := mustCreateSchedule(t, st, newSchedule(scheduleID(1), "alice"))
	paused := newSchedule(scheduleID(2), "alice")
	paused.Paused = true
	mustCreateSchedule(t, st, paused)
	later := newSchedule(scheduleID(3), "bob")
	later.NextRunAt = base.Add(3 * time.Hour)
	mustCreateSchedule(t, st, later)
	none := newSchedule(scheduleID(4), "bob")
	none.NextRunAt = time.Time{}
	mustCreateSchedule(t, st, none)

	tick := base.Add(time.Hour)
	due, err := st.DueSchedules(ctx, tick, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || due[0].ID != sc.ID {
		t.Fatalf("DueSchedules at the tick = %v, want only %s", due, sc.ID)
	}
	if due, _ := st.DueSchedules(ctx, tick.Add(-time.Microsecond), 10); len(due) != 0 {
		t.Errorf("DueSchedules before the tick = %v", due)
	}
	now := tick.Add(2 * time.Second)
	run := &store.ScheduleRun{ID: runID(1), ScheduledFor: tick, Skipped: 2, LeaseOwner: "w1", LeaseUntil: now.Add(time.Minute), CreatedAt: now}
	got, err := st.FireSchedule(ctx, &store.FireParams{Owner: "alice", ID: sc.ID, Version: sc.Version, NextRunAt: tick.Add(24 * time.Hour), Run: run})
	if err != nil {
		t.Fatal(err)
	}
	want := &store.ScheduleRun{ID: runID(1), ScheduleID: sc.ID, Owner: "alice", Status: store.RunPending, ScheduledFor: tick, Skipped: 2,
		LeaseOwner: "w1", LeaseUntil: now.Add(time.Minute), CreatedAt: now, UpdatedAt: now}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("FireSchedule returned (-want +got):\n%s", diff)
	}
	read, err := st.GetSchedule(ctx, "alice", sc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if read.Version != 2 || !read.NextRunAt.Equal(tick.Add(24*time.Hour)) || !read.LastRunAt.Equal(now) || !read.UpdatedAt.Equal(base) {
		t.Errorf("schedule after the fire = %+v", read)
	}
	// The same tick again: stale version, then the unique tick.
	again := &store.FireParams{Owner: "alice", ID: sc.ID, Version: sc.Version, NextRunAt: tick.Add(24 * time.Hour), Run: &store.ScheduleRun{ID: runID(2), ScheduledFor: tick}}
	if _, err := st.FireSchedule(ctx, again); !errors.Is(err, store.ErrConflict) {
		t.Errorf("FireSchedule with a stale version = %v, want ErrConflict", err)
	}
	again.Version = read.Version
	if _, err := st.FireSchedule(ctx, again); !errors.Is(err, store.ErrConflict) {
		t.Errorf("FireSchedule of a tick taken = %v, want ErrConflict", err)
	}
	if read2, _ := st.GetSchedule(ctx, "alice", sc.ID); read2.Version != read.Version || !read2.NextRunAt.Equal(read.NextRunAt) {
		t.Errorf("a refused fire changed the schedule: %+v", read2)
	}
	// Paused, missing, other owner.
	if _, err := st.FireSchedule(ctx, &store.FireParams{Owner: "alice", ID: paused.ID, Version: 1, Run: &store.ScheduleRun{ID: runID(3), ScheduledFor: tick}}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("FireSchedule of a paused schedule = %v, want ErrConflict", err)
	}
	if _, err := st.FireSchedule(ctx, &store.FireParams{Owner: "alice", ID: scheduleID(9), Version: 1, Run: &store.ScheduleRun{ID: runID(4), ScheduledFor: tick}}); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Errorf("FireSchedule of a missing schedule = %v, want ErrScheduleNotFound", err)
	}
	if _, err := st.FireSchedule(ctx, &store.FireParams{Owner: "alice", ID: later.ID, Version: 1, Run: &store.ScheduleRun{ID: runID(5), ScheduledFor: tick}}); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Errorf("FireSchedule of another owner's schedule = %v, want ErrScheduleNotFound", err)
	}
	// A fire to no next tick leaves the schedule never due again.
	if _, err := st.FireSchedule(ctx, &store.FireParams{Owner: "bob", ID: later.ID, Version: 1, Run: &store.ScheduleRun{ID: runID(6), ScheduledFor: later.NextRunAt}}); err != nil {
		t.Fatal(err)
	}
	if due, _ := st.DueSchedules(ctx, base.Add(1000*time.Hour), 10); len(due) != 1 || due[0].ID != sc.ID {
		t.Errorf("DueSchedules much later = %v, want only %s", due, sc.ID)
	}
}

func testScheduleFireConcurrent(t *testing.T, st store.Store) {
	ctx := t.Context()
	sc := mustCreateSchedule(t, st, newSchedule(scheduleID(1), "alice"))
	const workers = 8
	var (
		wg              sync.WaitGroup
		mu              sync.Mutex
		fired, conflict int
		errs            []error
	)
	for i := range workers {
		wg.Go(func() {
			_, err := st.FireSchedule(ctx, &store.FireParams{Owner: "alice", ID: sc.ID, Version: sc.Version, NextRunAt: sc.NextRunAt.Add(time.Hour),
				Run: &store.ScheduleRun{ID: runID(i), ScheduledFor: sc.NextRunAt, LeaseOwner: fmt.Sprintf("w%d", i), LeaseUntil: base.Add(2 * time.Hour)}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				fired++
			case errors.Is(err, store.ErrConflict):
				conflict++
			default:
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if fired != 1 || conflict != workers-1 || len(errs) > 0 {
		t.Errorf("%d concurrent fires of one tick: %d fired, %d conflicts, errors %v; want 1 and %d", workers, fired, conflict, errs, workers-1)
	}
	_, total, err := st.ListScheduleRuns(ctx, &store.ScheduleRunListParams{Owner: "alice", ScheduleID: sc.ID})
	if err != nil || total != 1 {
		t.Errorf("runs after concurrent fires: %d, %v; want 1", total, err)
	}
}

func testScheduleRuns(t *testing.T, st store.Store) {
	ctx := t.Context()
	sc := newSchedule(scheduleID(1), "alice")
	sc.Paused = true
	mustCreateSchedule(t, st, sc)
	// Manual runs work while paused and leave the version alone.
	for i := range 4 {
		at := base.Add(time.Duration(i) * time.Minute)
		r, err := st.AddScheduleRun(ctx, &store.ScheduleRun{ID: runID(i), ScheduleID: sc.ID, Owner: "alice", Manual: true, ScheduledFor: at,
			LeaseOwner: "w1", LeaseUntil: at.Add(time.Minute), CreatedAt: at})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != store.RunPending || !r.Manual || r.ScheduleID != sc.ID {
			t.Errorf("AddScheduleRun = %+v", r)
		}
	}
	if _, err := st.AddScheduleRun(ctx, &store.ScheduleRun{ID: runID(8), ScheduleID: sc.ID, Owner: "alice", ScheduledFor: base}); err == nil {
		t.Error("AddScheduleRun of a run not manual succeeded")
	}
	read, err := st.GetSchedule(ctx, "alice", sc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if read.Version != 1 || !read.LastRunAt.Equal(base.Add(3*time.Minute)) {
		t.Errorf("schedule after triggers: version %d, last run %v", read.Version, read.LastRunAt)
	}
	// Finishing: the lease holder only, once, to an outcome.
	r0 := &store.ScheduleRun{ID: runID(0), Status: store.RunCreated, SessionID: "5e550000-0000-4000-8000-000000000001"}
	if err := st.FinishScheduleRun(ctx, r0, "w2", 0); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("FinishScheduleRun by another worker = %v, want ErrLeaseLost", err)
	}
	if err := st.FinishScheduleRun(ctx, &store.ScheduleRun{ID: runID(0), Status: store.RunPending}, "w1", 0); err == nil {
		t.Error("FinishScheduleRun to pending succeeded")
	}
	if err := st.FinishScheduleRun(ctx, r0, "w1", 0); err != nil {
		t.Fatal(err)
	}
	if err := st.FinishScheduleRun(ctx, r0, "w1", 0); !errors.Is(err, store.ErrScheduleRunNotFound) {
		t.Errorf("second FinishScheduleRun = %v, want ErrScheduleRunNotFound", err)
	}
	if err := st.FinishScheduleRun(ctx, &store.ScheduleRun{ID: runID(1), Status: store.RunError, Error: "agent \"gone\" is not registered"}, "w1", 0); err != nil {
		t.Fatal(err)
	}
	page, total, err := st.ListScheduleRuns(ctx, &store.ScheduleRunListParams{Owner: "alice", ScheduleID: sc.ID, Finished: true})
	if err != nil {
		t.Fatal(err)
	}
	if total != 2 || len(page) != 2 || page[0].ID != runID(1) || page[1].ID != runID(0) {
		t.Fatalf("finished runs, newest first: total %d, %+v", total, page)
	}
	if page[1].Status != store.RunCreated || page[1].SessionID != r0.SessionID || page[1].LeaseOwner != "" || !page[1].LeaseUntil.IsZero() {
		t.Errorf("finished run = %+v", page[1])
	}
	if page[0].Status != store.RunError || page[0].Error == "" {
		t.Errorf("failed run = %+v", page[0])
	}
	_, total, err = st.ListScheduleRuns(ctx, &store.ScheduleRunListParams{Owner: "alice", ScheduleID: sc.ID})
	if err != nil || total != 4 {
		t.Errorf("all runs: %d, %v; want 4", total, err)
	}
	page, _, err = st.ListScheduleRuns(ctx, &store.ScheduleRunListParams{Owner: "alice", ScheduleID: sc.ID, Ascending: true, Offset: 1, Limit: 2})
	if err != nil || len(page) != 2 || page[0].ID != runID(1) || page[1].ID != runID(2) {
		t.Errorf("oldest first, from the second: %+v, %v", page, err)
	}
	// keep bounds the finished history, newest kept; pending runs stay.
	if err := st.FinishScheduleRun(ctx, &store.ScheduleRun{ID: runID(2), Status: store.RunSkippedQuota}, "w1", 2); err != nil {
		t.Fatal(err)
	}
	page, total, err = st.ListScheduleRuns(ctx, &store.ScheduleRunListParams{Owner: "alice", ScheduleID: sc.ID})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range page {
		got = append(got, r.ID+" "+r.Status)
	}
	if diff := cmp.Diff([]string{runID(3) + " pending", runID(2) + " skipped_quota", runID(1) + " error"}, got); diff != "" || total != 3 {
		t.Errorf("runs after pruning to 2 finished: total %d (-want +got):\n%s", total, diff)
	}
}

func testScheduleRunClaims(t *testing.T, st store.Store) {
	ctx := t.Context()
	sc := mustCreateSchedule(t, st, newSchedule(scheduleID(1), "alice"))
	tick := sc.NextRunAt
	if _, err := st.FireSchedule(ctx, &store.FireParams{Owner: "alice", ID: sc.ID, Version: 1, NextRunAt: tick.Add(time.Hour),
		Run: &store.ScheduleRun{ID: runID(1), ScheduledFor: tick, LeaseOwner: "w1", LeaseUntil: tick.Add(time.Minute), CreatedAt: tick}}); err != nil {
		t.Fatal(err)
	}
	// The lease holds: nothing to claim.
	if got, err := st.ClaimScheduleRuns(ctx, &store.ClaimParams{Owner: "w2", Now: tick.Add(30 * time.Second), TTL: time.Minute, Limit: 5}); err != nil || len(got) != 0 {
		t.Errorf("claim under a live lease = %v, %v", got, err)
	}
	// Its worker died: the lease expired, and one of two claims gets it.
	at := tick.Add(time.Minute)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		claims []*store.ScheduleRun
	)
	for _, w := range []string{"w2", "w3"} {
		wg.Go(func() {
			got, err := st.ClaimScheduleRuns(ctx, &store.ClaimParams{Owner: w, Now: at, TTL: time.Minute, Limit: 5})
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			claims = append(claims, got...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(claims) != 1 {
		t.Fatalf("two concurrent claims took %d runs, want 1", len(claims))
	}
	c := claims[0]
	if c.ID != runID(1) || c.Attempts != 1 || !c.LeaseUntil.Equal(at.Add(time.Minute)) || c.Status != store.RunPending {
		t.Errorf("claimed run = %+v", c)
	}
	if err := st.FinishScheduleRun(ctx, &store.ScheduleRun{ID: runID(1), Status: store.RunCreated, SessionID: "s"}, "w1", 0); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("the dead worker's finish = %v, want ErrLeaseLost", err)
	}
	if err := st.FinishScheduleRun(ctx, &store.ScheduleRun{ID: runID(1), Status: store.RunCreated, SessionID: "s"}, c.LeaseOwner, 0); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.ClaimScheduleRuns(ctx, &store.ClaimParams{Owner: "w2", Now: at.Add(time.Hour), TTL: time.Minute}); len(got) != 0 {
		t.Errorf("a finished run was claimed: %+v", got)
	}
}

// testScheduleFireAgain: a fire called again with the same parameters
// (its first answer was lost) returns the run the first inserted, its
// lease extended, without firing again; once the run is taken over or
// finished, the call again is a conflict.
func testScheduleFireAgain(t *testing.T, st store.Store) {
	ctx := t.Context()
	sc := mustCreateSchedule(t, st, newSchedule(scheduleID(1), "alice"))
	tick := sc.NextRunAt
	p := &store.FireParams{Owner: "alice", ID: sc.ID, Version: sc.Version, NextRunAt: tick.Add(time.Hour),
		Run: &store.ScheduleRun{ID: runID(1), ScheduledFor: tick, LeaseOwner: "w1", LeaseUntil: tick.Add(time.Minute), CreatedAt: tick}}
	first, err := st.FireSchedule(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	read, _ := st.GetSchedule(ctx, "alice", sc.ID)
	p.Run.LeaseUntil = tick.Add(2 * time.Minute)
	again, err := st.FireSchedule(ctx, p)
	if err != nil {
		t.Fatalf("fire again = %v, want the run", err)
	}
	want := *first
	want.LeaseUntil = tick.Add(2 * time.Minute)
	if diff := cmp.Diff(&want, again); diff != "" {
		t.Errorf("fire again returned (-want +got):\n%s", diff)
	}
	if read2, _ := st.GetSchedule(ctx, "alice", sc.ID); read2.Version != read.Version || !read2.NextRunAt.Equal(read.NextRunAt) {
		t.Errorf("fire again changed the schedule: version %d, next %v; want %d, %v", read2.Version, read2.NextRunAt, read.Version, read.NextRunAt)
	}
	if rs, total, _ := st.ListScheduleRuns(ctx, &store.ScheduleRunListParams{Owner: "alice", ScheduleID: sc.ID}); total != 1 || len(rs) != 1 {
		t.Errorf("runs after a fire again: %d, want 1", total)
	}
	// The extended lease holds.
	if got, _ := st.ClaimScheduleRuns(ctx, &store.ClaimParams{Owner: "w2", Now: tick.Add(90 * time.Second), TTL: time.Minute}); len(got) != 0 {
		t.Errorf("claim under the extended lease = %+v", got)
	}
	// Another worker's run with the id, or a run taken over, is no
	// answer to the fire.
	other := *p
	other.Run = &store.ScheduleRun{ID: runID(1), ScheduledFor: tick, LeaseOwner: "w9", LeaseUntil: tick.Add(time.Minute), CreatedAt: tick}
	if _, err := st.FireSchedule(ctx, &other); !errors.Is(err, store.ErrConflict) {
		t.Errorf("fire of another worker with the run's id = %v, want ErrConflict", err)
	}
	if got, _ := st.ClaimScheduleRuns(ctx, &store.ClaimParams{Owner: "w2", Now: tick.Add(3 * time.Minute), TTL: time.Minute}); len(got) != 1 {
		t.Fatalf("claim after the lease = %+v, want the run", got)
	}
	if _, err := st.FireSchedule(ctx, p); !errors.Is(err, store.ErrConflict) {
		t.Errorf("fire again after a takeover = %v, want ErrConflict", err)
	}
}

// testScheduleRunClaimAgain: a claim called again with its owner and
// token (its first answer was lost) returns the runs the first took and
// still holds, leases extended and attempts as counted, and takes
// nothing more; after they are finished or taken, it claims as any
// claim.
func testScheduleRunClaimAgain(t *testing.T, st store.Store) {
	ctx := t.Context()
	var tick time.Time
	for i := range 3 {
		sc := mustCreateSchedule(t, st, newSchedule(scheduleID(i), "alice"))
		tick = sc.NextRunAt
		at := tick.Add(time.Duration(i) * time.Second)
		if _, err := st.FireSchedule(ctx, &store.FireParams{Owner: "alice", ID: sc.ID, Version: 1, NextRunAt: tick.Add(time.Hour),
			Run: &store.ScheduleRun{ID: runID(i), ScheduledFor: tick, LeaseOwner: "dead", LeaseUntil: at, CreatedAt: at}}); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(owner, token string, at time.Time, limit int) []string {
		t.Helper()
		got, err := st.ClaimScheduleRuns(ctx, &store.ClaimParams{Owner: owner, Token: token, Now: at, TTL: time.Minute, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range got {
			if r.Attempts != 1 || r.LeaseOwner != owner || !r.LeaseUntil.Equal(at.Add(time.Minute)) {
				t.Errorf("claimed %+v: want attempts 1, leased to %s until %v", r, owner, at.Add(time.Minute))
			}
			ids = append(ids, r.ID)
		}
		slices.Sort(ids)
		return ids
	}
	now := tick.Add(time.Minute)
	if got := claim("w1", "t1", now, 2); !slices.Equal(got, []string{runID(0), runID(1)}) {
		t.Fatalf("first claim = %v, want the two oldest", got)
	}
	later := now.Add(30 * time.Second)
	if got := claim("w1", "t1", later, 2); !slices.Equal(got, []string{runID(0), runID(1)}) {
		t.Errorf("claim again = %v, want what the first took", got)
	}
	if got := claim("w2", "t2", now.Add(time.Minute+time.Second), 5); !slices.Equal(got, []string{runID(2)}) {
		t.Errorf("claim after the first lease's end = %v, want the third only (the leases were extended)", got)
	}
	if err := st.FinishScheduleRun(ctx, &store.ScheduleRun{ID: runID(0), Status: store.RunCreated, SessionID: "s"}, "w1", 0); err != nil {
		t.Fatal(err)
	}
	if got := claim("w1", "t1", later, 2); !slices.Equal(got, []string{runID(1)}) {
		t.Errorf("claim again after a finish = %v, want [%s]", got, runID(1))
	}
	taken := later.Add(10 * time.Minute)
	if got, err := st.ClaimScheduleRuns(ctx, &store.ClaimParams{Owner: "w3", Token: "t3", Now: taken, TTL: time.Minute, Limit: 5}); err != nil || len(got) != 2 {
		t.Fatalf("claim after the leases lapsed = %v, %v; want 2", got, err)
	}
	if got := claim("w1", "t1", taken, 2); len(got) != 0 {
		t.Errorf("claim again after another took the runs = %v, want none", got)
	}
}

func testScheduleWake(t *testing.T, st store.Store) {
	ctx := t.Context()
	if next, err := st.NextScheduleWake(ctx, base); err != nil || !next.IsZero() {
		t.Errorf("NextScheduleWake of an empty store = %v, %v", next, err)
	}
	paused := newSchedule(scheduleID(1), "alice")
	paused.Paused, paused.NextRunAt = true, base.Add(time.Minute)
	mustCreateSchedule(t, st, paused)
	sc := newSchedule(scheduleID(2), "bob")
	sc.NextRunAt = base.Add(time.Hour)
	mustCreateSchedule(t, st, sc)
	if next, err := st.NextScheduleWake(ctx, base); err != nil || !next.Equal(base.Add(time.Hour)) {
		t.Errorf("NextScheduleWake = %v, %v; want the schedule's next run %v", next, err, base.Add(time.Hour))
	}
	if _, err := st.AddScheduleRun(ctx, &store.ScheduleRun{ID: runID(1), ScheduleID: paused.ID, Owner: "alice", Manual: true, ScheduledFor: base,
		LeaseOwner: "w1", LeaseUntil: base.Add(10 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if next, err := st.NextScheduleWake(ctx, base); err != nil || !next.Equal(base.Add(10*time.Second)) {
		t.Errorf("NextScheduleWake with a pending run = %v, %v; want its lease's end", next, err)
	}
}

// testScheduleSubscribe: each change that may give schedule workers work
// sooner is announced on ScheduleTopic.
func testScheduleSubscribe(t *testing.T, st store.Store) {
	ctx := t.Context()
	ch, cancel := st.Subscribe(store.ScheduleTopic)
	defer cancel()
	received := func(what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("no notification on %s after %s", store.ScheduleTopic, what)
		}
	}
	sc := mustCreateSchedule(t, st, newSchedule(scheduleID(1), "alice"))
	received("CreateSchedule")
	up := *sc
	up.NextRunAt = base.Add(time.Minute)
	sc, err := st.UpdateSchedule(ctx, &up)
	if err != nil {
		t.Fatal(err)
	}
	received("UpdateSchedule")
	if _, err := st.FireSchedule(ctx, &store.FireParams{Owner: "alice", ID: sc.ID, Version: sc.Version, NextRunAt: base.Add(time.Hour),
		Run: &store.ScheduleRun{ID: runID(1), ScheduledFor: sc.NextRunAt, LeaseOwner: "w1", LeaseUntil: base.Add(2 * time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	received("FireSchedule")
	if _, err := st.AddScheduleRun(ctx, &store.ScheduleRun{ID: runID(2), ScheduleID: sc.ID, Owner: "alice", Manual: true, ScheduledFor: base,
		LeaseOwner: "w1", LeaseUntil: base.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	received("AddScheduleRun")
}

// testScheduleRunIdempotencyKey: a manual run added again with the key of
// one the schedule has is that run, as it is now, and nothing is written;
// keys are the schedule's; runs without a key are each added.
func testScheduleRunIdempotencyKey(t *testing.T, st store.Store) {
	ctx := t.Context()
	sc := mustCreateSchedule(t, st, newSchedule(scheduleID(1), "alice"))
	other := mustCreateSchedule(t, st, newSchedule(scheduleID(2), "alice"))
	add := func(id int, scheduleID, owner, key string, at time.Time) (*store.ScheduleRun, error) {
		return st.AddScheduleRun(ctx, &store.ScheduleRun{ID: runID(id), ScheduleID: scheduleID, Owner: owner, Manual: true, ScheduledFor: at,
			LeaseOwner: "w1", LeaseUntil: at.Add(time.Minute), CreatedAt: at, IdempotencyKey: key})
	}
	runs := func(id string) int {
		t.Helper()
		_, total, err := st.ListScheduleRuns(ctx, &store.ScheduleRunListParams{Owner: "alice", ScheduleID: id})
		if err != nil {
			t.Fatal(err)
		}
		return total
	}
	first, err := add(1, sc.ID, "alice", "k1", base)
	if err != nil || first.ID != runID(1) || first.IdempotencyKey != "k1" {
		t.Fatalf("AddScheduleRun with a new key = %+v, %v", first, err)
	}
	again, err := add(2, sc.ID, "alice", "k1", base.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("AddScheduleRun again with the key (-first +again):\n%s", diff)
	}
	if n := runs(sc.ID); n != 1 {
		t.Errorf("runs after the key was used twice: %d, want 1", n)
	}
	if read, err := st.GetSchedule(ctx, "alice", sc.ID); err != nil || !read.LastRunAt.Equal(base) {
		t.Errorf("LastRunAt after the key was used again = %v, %v; want the first run's %v", read.LastRunAt, err, base)
	}
	// Finished, it is returned finished.
	done := *first
	done.Status, done.SessionID = store.RunCreated, "s1"
	if err := st.FinishScheduleRun(ctx, &done, "w1", 0); err != nil {
		t.Fatal(err)
	}
	again, err = add(3, sc.ID, "alice", "k1", base.Add(2*time.Minute))
	if err != nil || again.ID != first.ID || again.Status != store.RunCreated || again.SessionID != "s1" {
		t.Errorf("AddScheduleRun with the key of a finished run = %+v, %v; want run %s, created, session s1", again, err, first.ID)
	}
	// The key is the schedule's: another schedule makes its own run, and
	// another owner has no such schedule.
	if r, err := add(4, other.ID, "alice", "k1", base); err != nil || r.ID != runID(4) {
		t.Errorf("AddScheduleRun with the key on another schedule = %+v, %v; want a new run", r, err)
	}
	if _, err := add(5, sc.ID, "bob", "k1", base); !errors.Is(err, store.ErrScheduleNotFound) {
		t.Errorf("AddScheduleRun with the key by another owner = %v, want ErrScheduleNotFound", err)
	}
	// Without a key, each is a run.
	for i := range 2 {
		if r, err := add(6+i, sc.ID, "alice", "", base); err != nil || r.ID != runID(6+i) {
			t.Errorf("AddScheduleRun without a key = %+v, %v; want a new run", r, err)
		}
	}
	if n := runs(sc.ID); n != 3 {
		t.Errorf("runs: %d, want 3 (one keyed, two not)", n)
	}
	// Concurrent triggers with one key make one run, which all are given.
	const callers = 8
	ids := make([]string, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			r, err := add(10+i, sc.ID, "alice", "k2", base)
			errs[i] = err
			if err == nil {
				ids[i] = r.ID
			}
		})
	}
	wg.Wait()
	for i := range callers {
		if errs[i] != nil || ids[i] != ids[0] {
			t.Errorf("concurrent AddScheduleRun %d with one key = %s, %v; want %s as the others", i, ids[i], errs[i], ids[0])
		}
	}
	if n := runs(sc.ID); n != 4 {
		t.Errorf("runs after %d concurrent triggers with one key: %d, want 4", callers, n)
	}
}
