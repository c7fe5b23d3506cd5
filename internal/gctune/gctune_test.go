package gctune

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, headroom uint64
		want           int
	}{
		{8 * mib, 32 * mib, 400},  // small heap: the headroom decides
		{64 * mib, 32 * mib, 100}, // large heap: GOGC=100, as before
		{32 * mib, 32 * mib, 100}, // the same
		{2 * mib, 32 * mib, 800},  // below the runtime's minimum goal: counted as 4 MiB, so the goal is 32 MiB, not 64
		{0, 32 * mib, 800},        // nothing live yet: the same
		{1024, 1 << 40, 10000},    // bounded
		{16 * mib, 40 * mib, 250}, // between
		{100 * mib, 0, 100},       // no headroom: the default
	} {
		if got := Percent(c.live, c.headroom); got != c.want {
			t.Errorf("Percent(%d, %d) = %d, want %d", c.live, c.headroom, got, c.want)
		}
	}
}

// TestStartTunesEachCycle checks that Start sets the percentage at once
// and again after collections, and that stop restores the default.
func TestStartTunesEachCycle(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	stop := Start(1 << 40) // a headroom far above any live heap: maxPercent
	if got := debug.SetGCPercent(50); got != maxPercent {
		t.Fatalf("after Start, GOGC = %d, want %d", got, maxPercent)
	}
	// After cycles, the finalizer has set it again.
	for i := 0; i < 100; i++ {
		runtime.GC()
		runtime.Gosched()
		if got := debug.SetGCPercent(50); got == maxPercent {
			break
		} else if i == 99 {
			t.Fatalf("after 100 collections, GOGC = %d, want %d set again", got, maxPercent)
		}
	}
	stop()
	runtime.GC()
	runtime.GC()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("after stop and collections, GOGC = %d, want 100", got)
	}
}

// TestStartLeavesTheOperatorsChoice checks that GOGC or GOMEMLIMIT in the
// environment turns Start off.
func TestStartLeavesTheOperatorsChoice(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv("GOGC", "")
			t.Setenv("GOMEMLIMIT", "")
			t.Setenv(env, "200")
			debug.SetGCPercent(123)
			stop := Start(1 << 40)
			defer stop()
			runtime.GC()
			if got := debug.SetGCPercent(123); got != 123 {
				t.Errorf("with %s set, GOGC = %d, want it left at 123", env, got)
			}
		})
	}
}
