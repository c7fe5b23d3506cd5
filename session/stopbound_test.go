package session_test

import (
	"context"
	"iter"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// frozenReplicas is a frozenStore that keeps replicas (its heartbeat and
// its record's removal, at Stop, freeze with the rest), in the store it
// wraps when that keeps them, nowhere otherwise (SQLite).
type frozenReplicas struct {
	*frozenStore
}

// noReplicas keeps no replicas.
type noReplicas struct{}

func (noReplicas) Beat(context.Context, *store.Replica) error                    { return nil }
func (noReplicas) Replicas(context.Context, time.Time) ([]*store.Replica, error) { return nil, nil }
func (noReplicas) Leave(context.Context, string) error                           { return nil }

func (f frozenReplicas) replicas() store.Replicas {
	if rs, ok := f.Store.(store.Replicas); ok {
		return rs
	}
	return noReplicas{}
}

func (f frozenReplicas) Beat(ctx context.Context, r *store.Replica) error {
	if err := f.wait(ctx); err != nil {
		return err
	}
	return f.replicas().Beat(ctx, r)
}

func (f frozenReplicas) Replicas(ctx context.Context, now time.Time) ([]*store.Replica, error) {
	if err := f.wait(ctx); err != nil {
		return nil, err
	}
	return f.replicas().Replicas(ctx, now)
}

func (f frozenReplicas) Leave(ctx context.Context, id string) error {
	if err := f.wait(ctx); err != nil {
		return err
	}
	return f.replicas().Leave(ctx, id)
}

// TestStopBoundedWhenStoreDoesNotAnswer: the database stops answering
// (every call waits for its context's end: hang), or answers every call
// with an error at once (fail), and the manager is stopped, with the
// default lease TTL (15 s), on fake time. Stop returns within StopGrace
// of it, and leaves no call of the store in flight; a session running
// then is not lost: its lease lapses and another manager completes it.
// Before, Stop waited for the dispatcher's claim (bounded by half a
// lease TTL, 7.5 s) and the three calls that ask what it took (a quarter
// of a TTL each, a tenth between them): 21.65 s of fake time (hang),
// 2.9 s (fail: the pauses between the calls), and 5 s for the replica's
// record and a worker's release (running).
func TestStopBoundedWhenStoreDoesNotAnswer(t *testing.T) {
	for _, tc := range []struct {
		name          string
		fail, running bool
	}{{"hang", false, false}, {"fail", true, false}, {"hang/running", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := openStore(t)
				st := frozenReplicas{&frozenStore{Store: base, thaw: make(chan struct{}), fail: tc.fail}}
				defer close(st.thaw)
				running := make(chan struct{})
				var calls atomic.Int32
				inner := llmtest.NewModel(llmtest.Text("done"))
				model := modelFunc(func(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
					if calls.Add(1) == 1 && tc.running {
						close(running) // the run goes on until the manager stops
						<-ctx.Done()
						return func(yield func(llm.Chunk, error) bool) { yield(llm.Chunk{}, ctx.Err()) }
					}
					return inner.Stream(ctx, req)
				})
				m, log := newLogged(t, st, model, nil)
				var id string
				if tc.running {
					id = create(t, m, transcriptAgent).ID
					start(t, m)
					<-running
					synctest.Wait()
				} else {
					start(t, m)
				}
				st.frozen.Store(true)
				time.Sleep(100 * time.Millisecond) // the dispatcher's claim is in flight, or between its calls
				began := time.Now()
				if err := m.Stop(context.Background()); err != nil {
					t.Fatal(err)
				}
				if took := time.Since(began); took > session.StopGrace {
					t.Errorf("Stop took %v of fake time, want at most %v; log:\n%s", took, session.StopGrace, log)
				}
				if n := st.inFlight.Load(); n != 0 {
					t.Errorf("%d calls of the store in flight after Stop", n)
				}
				if !tc.running {
					return
				}
				// The run's lease lapses; another manager takes it over.
				other := startManager(t, base, model, nil)
				f := &follower{t: t, m: other, id: id}
				c := f.until(func(c *session.Changes) bool { return c.Status.Terminal() })
				if c.Status != session.StatusCompleted || string(c.Answer) != `"done"` {
					t.Fatalf("ended %s with %s, want completed by the other manager; events:\n%s", c.Status, c.Answer, f.dump())
				}
			})
		})
	}
}
