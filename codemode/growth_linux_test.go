package codemode_test

import (
	"syscall"
	"testing"

	"github.com/hrns-dev/hrns/codemode"
)

// interpreterGrowth runs f, which runs one program, and returns by how
// much the program's interpreter process grew at most: the peak resident
// size the kernel recorded for it, less that of an interpreter that ran
// an empty program.
func interpreterGrowth(t *testing.T, f func()) int64 {
	t.Helper()
	peak := func(f func()) int64 {
		interpreters := codemode.WatchInterpreters(t)
		f()
		seen := interpreters()
		if len(seen) != 1 || seen[0].State == nil {
			t.Fatalf("interpreters: %+v, want one, waited for", seen)
		}
		return seen[0].State.SysUsage().(*syscall.Rusage).Maxrss << 10 // KiB on Linux
	}
	idle := peak(func() {
		r := newRunner(t, nil)
		if _, err := r.Run(t.Context(), "x = 1"); err != nil {
			t.Fatal(err)
		}
	})
	return max(0, peak(f)-idle)
}
