package schedule_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hrns-dev/hrns/platform/schedule"
	"github.com/hrns-dev/hrns/store"
)

// hungSchedules is a store whose claims of runs (or, with fires, whose
// fires) do not answer: each waits for its context's end, as a call to a
// database that stopped answering does.
type hungSchedules struct {
	store.Store
	fires    bool
	entered  chan struct{} // receives when a call waits
	inFlight atomic.Int32
}

func (h *hungSchedules) hang(ctx context.Context) error {
	h.inFlight.Add(1)
	defer h.inFlight.Add(-1)
	select {
	case h.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return ctx.Err()
}

func (h *hungSchedules) ClaimScheduleRuns(ctx context.Context, p *store.ClaimParams) ([]*store.ScheduleRun, error) {
	if h.fires {
		return h.Store.ClaimScheduleRuns(ctx, p)
	}
	return nil, h.hang(ctx)
}

func (h *hungSchedules) FireSchedule(ctx context.Context, p *store.FireParams) (*store.ScheduleRun, error) {
	if !h.fires {
		return h.Store.FireSchedule(ctx, p)
	}
	return nil, h.hang(ctx)
}

// TestStopBoundedWhenStoreHangs: the schedules' worker's claim of runs
// whose worker died (claim), or its fire of a due schedule (fire), does
// not answer (the database stopped answering) and the worker's context
// ends, with the default lease (a minute), on fake time. Run returns
// within StopGrace of it and leaves no call in flight. Before, it waited
// for the call to the end of its three tries, each bounded by half a
// lease: 90 s.
func TestStopBoundedWhenStoreHangs(t *testing.T) {
	for _, fires := range []bool{false, true} {
		name := "claim"
		if fires {
			name = "fire"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
				c := newClock(start)
				mustCreate(t, newScheduler(t, base, c, "w1"), alice, "*/5 * * * *", "UTC")
				c.set(utc("2026-06-01T10:00:00Z")) // the schedule is due
				st := &hungSchedules{Store: base, fires: fires, entered: make(chan struct{}, 1)}
				sch := schedule.New(newManager(base, nil), st, &schedule.Options{Owner: "w1", Clock: c})
				ctx, stop := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() {
					defer close(done)
					sch.Run(ctx)
				}()
				<-st.entered
				synctest.Wait()
				began := time.Now()
				stop()
				<-done
				if took := time.Since(began); took > schedule.StopGrace {
					t.Errorf("Run returned %v of fake time after its context ended, want at most %v", took, schedule.StopGrace)
				}
				if n := st.inFlight.Load(); n != 0 {
					t.Errorf("%d calls in flight after Run returned", n)
				}
			})
		})
	}
}
