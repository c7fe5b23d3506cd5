package micro

import (
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
