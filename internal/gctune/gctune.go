// Package gctune keeps Go's garbage collector from running every few
// megabytes of allocation in a process whose live heap is small.
//
// The collector starts a cycle when the heap has grown by GOGC percent
// (100 by default) of what the last cycle found live. A sessions server
// holds little (a few MiB when idle) and allocates a few hundred KiB per
// model turn (requests, JSON, SQLite's rows), so with the default it
// collects every few turns, and each cycle costs its fixed work (stacks,
// globals, the sweep) whatever the heap. [Start] lets the heap grow by
// at least a fixed headroom between cycles: after each cycle it sets the
// percentage so that the next one starts at the larger of twice the live
// heap (GOGC=100, as before) and the live heap plus the headroom. A
// process with a large live heap is collected as before; a small one
// holds at most the headroom more between cycles.
package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// maxPercent bounds the percentage Start sets.
const maxPercent = 10000

// minHeap is the runtime's smallest heap goal at GOGC=100; it scales with
// the percentage like the goal does (a goal is never below
// minHeap*GOGC/100), so Percent counts a live heap below it as minHeap.
const minHeap = 4 << 20

// Percent returns the GOGC percentage that makes the next cycle start
// after the heap grew by the larger of live (GOGC=100) and headroom,
// a live heap under minHeap counted as minHeap (so that the runtime's
// minimum goal, scaled by the percentage, stays within live plus
// headroom): at least 100, at most maxPercent.
func Percent(live, headroom uint64) int {
	p := headroom * 100 / max(live, minHeap)
	return int(min(max(p, 100), maxPercent))
}

// Start tunes the collector after each of its cycles (see the package
// doc) until stop is called, unless GOGC or GOMEMLIMIT is set in the
// environment: the operator's choice is left alone, and stop does
// nothing. stop restores GOGC=100.
func Start(headroom uint64) (stop func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	t := &tuner{headroom: headroom, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	t.adjust()
	t.arm()
	return func() {
		if t.stopped.CompareAndSwap(false, true) {
			debug.SetGCPercent(100)
		}
	}
}

type tuner struct {
	headroom uint64
	stopped  atomic.Bool
	// sample is read by one goroutine at a time: Start's, then the
	// finalizers', which run one after another.
	sample []metrics.Sample
	// cycles counts the adjustments (for tests).
	cycles atomic.Int64
}

// sentinel is an object whose only reference is dropped at once: its
// finalizer runs after the next cycle, adjusts, and arms another.
type sentinel struct {
	t *tuner
	_ [16]byte // not a tiny allocation, which could share a block and outlive cycles
}

func (t *tuner) arm() {
	s := &sentinel{t: t}
	runtime.SetFinalizer(s, func(s *sentinel) {
		if s.t.stopped.Load() {
			return
		}
		s.t.adjust()
		s.t.arm()
	})
}

func (t *tuner) adjust() {
	metrics.Read(t.sample)
	if t.sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	if t.stopped.Load() {
		return
	}
	debug.SetGCPercent(Percent(t.sample[0].Value.Uint64(), t.headroom))
	t.cycles.Add(1)
}
