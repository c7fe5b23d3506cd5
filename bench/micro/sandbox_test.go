//go:build linux

package micro

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/sandbox"
)

// childCPU returns the CPU time, user and system, of the process and of
// its children that have ended.
func childCPU() time.Duration {
	var self, kids syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &self) != nil || syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids) != nil {
		return 0
	}
	return time.Duration(self.Utime.Nano() + self.Stime.Nano() + kids.Utime.Nano() + kids.Stime.Nano())
}

// BenchmarkRunCommand is what a shell call of run_command costs: "raw"
// starts `/bin/sh -c true` with os/exec, "sandboxed" runs the same line
// with [sandbox.Run] as run_command does (its helper re-executing the
// binary in new PID, mount and IPC namespaces, a root of the granted paths,
// Landlock, rlimits, a pids cgroup). Both report the wall time per command
// (ns/command, what a person waits) and the CPU time of the process and its
// children (cpu-ns/command). The binary is the test binary, far smaller
// than hrns: hrns's helper also pays for its larger image.
func BenchmarkRunCommand(b *testing.B) {
	b.Run("raw", func(b *testing.B) {
		cpu0 := childCPU()
		for b.Loop() {
			if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
		}
		reportCommand(b, cpu0)
	})
	b.Run("sandboxed", func(b *testing.B) {
		dir := b.TempDir()
		ctx := context.Background()
		cpu0 := childCPU()
		for b.Loop() {
			res, err := sandbox.Run(ctx, &sandbox.Spec{Shell: "true", Dir: dir, Limits: sandbox.DefaultLimits})
			if err != nil {
				b.Fatal(err)
			}
			if res.ExitCode != 0 {
				b.Fatalf("exit code %d: %s", res.ExitCode, res.Output)
			}
		}
		reportCommand(b, cpu0)
	})
}

func reportCommand(b *testing.B, cpu0 time.Duration) {
	n := float64(b.N)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/command")
	b.ReportMetric(float64((childCPU()-cpu0).Nanoseconds())/n, "cpu-ns/command")
}
