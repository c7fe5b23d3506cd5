package micro

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the CPU time, user and system, that the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A meter reports per-unit costs of a benchmark: wall time as ns/<unit> and
// process CPU time as cpu-ns/<unit>. CPU time is what the comparisons use:
// the machine is shared, and time spent descheduled is not charged to it.
type meter struct {
	b    *testing.B
	cpu0 time.Duration
}

// startMeter starts measuring; call it just before the b.Loop loop.
func startMeter(b *testing.B) *meter {
	b.ReportAllocs()
	return &meter{b: b, cpu0: cpuTime()}
}

// report reports the costs per unit, with perOp units in each op.
func (m *meter) report(perOp int, unit string) {
	n := float64(m.b.N * perOp)
	m.b.ReportMetric(float64(m.b.Elapsed().Nanoseconds())/n, "ns/"+unit)
	m.b.ReportMetric(float64((cpuTime()-m.cpu0).Nanoseconds())/n, "cpu-ns/"+unit)
}

// A heapMeter reports what the collector adds to a benchmark whose runs
// keep a heap live: the collections per thousand units (gc/kturn for
// turns), and the live heap kept-KB, from startHeap to the end of the
// runs (the benchmark keeping what its runs keep alive), which each
// collection marks. Neither is a time: they explain one. A collection's
// cost grows with the live heap it marks, and there is one every so many
// bytes allocated, about the live heap (GOGC=100) but 4 MB at least: so a
// unit allocating the same bytes costs more beside a larger live heap.
type heapMeter struct {
	base uint64 // the live heap at startHeap
	gc0  uint32 // collections at settle
}

// startHeap collects and notes the live heap; call it before the
// benchmark's setup.
func startHeap() *heapMeter {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return &heapMeter{base: ms.HeapAlloc}
}

// settle collects the setup's garbage, so that the runs do not pay for its
// collection; call it just before startMeter.
func (g *heapMeter) settle() {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	g.gc0 = ms.NumGC
}

// report reports the collections per thousand units, with perOp units in
// each op, and the live heap kept; call it after meter.report, with what
// the runs keep still alive.
func (g *heapMeter) report(b *testing.B, perOp int, unit string) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.NumGC-g.gc0)*1000/float64(b.N*perOp), "gc/k"+unit)
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(int64(ms.HeapAlloc)-int64(g.base))/1024, "kept-KB")
}
