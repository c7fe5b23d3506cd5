package retry

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

var errLost = errors.New("answer lost")

func TestDo(t *testing.T) {
	errFinal := errors.New("final")
	for _, tc := range []struct {
		name       string
		answers    []error // of the calls, in turn
		final      []error
		calls      int
		err        error // of the last call
		earlier    int   // errors before it
		bounded    bool
		pauseTaken time.Duration
	}{
		{name: "first call", answers: []error{nil}, calls: 1},
		{name: "third call", answers: []error{errLost, errLost, nil}, calls: 3, earlier: 2, pauseTaken: 2 * time.Second},
		{name: "all fail", answers: []error{errLost, errLost, errLost}, calls: 3, err: errLost, earlier: 2, pauseTaken: 2 * time.Second},
		{name: "final", answers: []error{errLost, errFinal, nil}, final: []error{errFinal}, calls: 2, err: errFinal, earlier: 1, pauseTaken: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				calls := 0
				began := time.Now()
				err, earlier := Do(t.Context(), Policy{Tries: 3, Bound: time.Minute, Pause: time.Second}, func(ctx context.Context) error {
					if d, ok := ctx.Deadline(); !ok || time.Until(d) != time.Minute {
						t.Errorf("call %d: deadline %v, %v; want a minute from now", calls, d, ok)
					}
					calls++
					return tc.answers[calls-1]
				}, tc.final...)
				if calls != tc.calls || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
					t.Errorf("%d calls, error %v; want %d, %v", calls, err, tc.calls, tc.err)
				}
				n := 0
				if earlier != nil {
					n = len(earlier.(interface{ Unwrap() []error }).Unwrap())
				}
				if n != tc.earlier {
					t.Errorf("%d earlier errors (%v), want %d", n, earlier, tc.earlier)
				}
				if took := time.Since(began); took != tc.pauseTaken {
					t.Errorf("took %v, want %v", took, tc.pauseTaken)
				}
			})
		})
	}
}

// TestDoCutByContext: once its context ends, Do makes no call again and
// its pause ends.
func TestDoCutByContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(t.Context())
		why := errors.New("stopped")
		time.AfterFunc(1500*time.Millisecond, func() { cancel(why) })
		calls := 0
		began := time.Now()
		err, earlier := Do(ctx, Policy{Tries: 5, Pause: time.Second}, func(context.Context) error {
			calls++
			return errLost
		})
		if calls != 2 || !errors.Is(err, errLost) || !errors.Is(err, why) || !errors.Is(earlier, errLost) {
			t.Errorf("%d calls, error %v, earlier %v; want 2, the last call's and the cause, and the first's", calls, err, earlier)
		}
		if took := time.Since(began); took != 1500*time.Millisecond {
			t.Errorf("took %v, want 1.5s (cut in the second pause)", took)
		}
		calls = 0
		if err, _ := Do(ctx, Policy{Tries: 5}, func(context.Context) error { calls++; return nil }); calls != 0 || !errors.Is(err, why) {
			t.Errorf("on a context ended: %d calls, error %v; want none and the cause", calls, err)
		}
	})
}

func TestGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type key struct{}
		ctx, cancel := context.WithCancel(context.WithValue(t.Context(), key{}, "v"))
		g, gcancel := Grace(ctx, time.Second)
		defer gcancel()
		if g.Value(key{}) != "v" {
			t.Error("Grace's context lost ctx's values")
		}
		time.Sleep(time.Hour)
		if g.Err() != nil {
			t.Fatal("Grace's context ended before ctx")
		}
		cancel()
		began := time.Now()
		<-g.Done()
		if took := time.Since(began); took != time.Second || !errors.Is(context.Cause(g), context.Canceled) {
			t.Errorf("ended %v after ctx, cause %v; want 1s and ctx's", took, context.Cause(g))
		}
		// Cancelled before ctx ends, it ends at once, its timer with it.
		g2, gcancel2 := Grace(t.Context(), time.Second)
		gcancel2()
		if g2.Err() == nil {
			t.Error("Grace's context did not end with its cancel")
		}
	})
}
