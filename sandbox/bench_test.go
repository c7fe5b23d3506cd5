//go:build linux

package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/sandbox"
)

// cpuSelfAndChildren returns the CPU time, user and system, of this process
// and of its children that have ended.
func cpuSelfAndChildren() time.Duration {
	var self, kids syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &self) != nil || syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids) != nil {
		return 0
	}
	return time.Duration(self.Utime.Nano() + self.Stime.Nano() + kids.Utime.Nano() + kids.Stime.Nano())
}

// BenchmarkRun times a shell call as run_command makes it, sandboxed with
// the default limits (through Run, and through a Box, whose zygote is
// started by the first call), against the same command line started by
// os/exec,
// the two interleaved in the same loop so that a drifting load weighs on
// both alike. It reports, per command, the wall time and CPU (of this
// process and its children) of each, and their ratios.
//
// BenchmarkRun/box-user is box run by a user other than root, whose zygote
// is root in a user namespace of its own and puts each command in one
// nested in it: run by root, it runs itself again as user 65534 (a copy
// of this test binary, -test.benchtime N x for its N) and reports that
// run's figures, measured there.
//
// The helper is this test binary, whose start differs from the product's:
// HRNS_SANDBOX_BENCH_HELPER names another binary built from the same tree
// (go build -o /tmp/hrns ./cmd/hrns) to re-execute as the helper instead,
// which times the hrns command's helper start.
func BenchmarkRun(b *testing.B) {
	if p := os.Getenv("HRNS_SANDBOX_BENCH_HELPER"); p != "" {
		sandbox.SetHelperPath(p)
		defer sandbox.SetHelperPath("")
	}
	for _, bc := range []struct {
		name string
		spec sandbox.Spec
		box  bool // through a Box, as run_command runs its commands
	}{
		{"default", sandbox.Spec{Shell: "true", Limits: sandbox.DefaultLimits}, false},
		{"network", sandbox.Spec{Shell: "true", Limits: sandbox.DefaultLimits, AllowNetwork: true}, false},
		{"box", sandbox.Spec{Shell: "true", Limits: sandbox.DefaultLimits}, true},
		{"box-user", sandbox.Spec{Shell: "true", Limits: sandbox.DefaultLimits}, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if bc.name == "box-user" && os.Geteuid() == 0 {
				benchAsUser(b)
				return
			}
			dir := b.TempDir()
			ctx := context.Background()
			run := sandbox.Run
			var box *sandbox.Box
			if bc.box {
				spec := bc.spec
				spec.Dir = dir
				var err error
				if box, err = sandbox.NewBox(&spec); err != nil {
					b.Fatal(err)
				}
				defer box.Close()
				run = box.Run
			}
			var rawWall, rawCPU, boxWall, boxCPU time.Duration
			for b.Loop() {
				t0, c0 := time.Now(), cpuSelfAndChildren()
				if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
					b.Fatal(err)
				}
				t1, c1 := time.Now(), cpuSelfAndChildren()
				spec := bc.spec
				spec.Dir = dir
				res, err := run(ctx, &spec)
				if err != nil {
					b.Fatal(err)
				}
				if bc.name == "box-user" && (!res.Confinement.Isolated || sandbox.BoxPerCall(box) != "") {
					// Not this code's doing: the kernel's.
					b.Skipf("another user's commands run as Run runs them here (isolated %v): %s", res.Confinement.Isolated, sandbox.BoxPerCall(box))
				}
				if res.ExitCode != 0 || !res.Confinement.Isolated {
					b.Fatalf("exit code %d, isolated %v: %s", res.ExitCode, res.Confinement.Isolated, res.Output)
				}
				t2, c2 := time.Now(), cpuSelfAndChildren()
				rawWall += t1.Sub(t0)
				rawCPU += c1 - c0
				boxWall += t2.Sub(t1)
				boxCPU += c2 - c1
			}
			if box != nil {
				if why := sandbox.BoxPerCall(box); why != "" {
					b.Fatalf("the Box ran its commands as Run does: %s", why)
				}
				// The commands are the zygote's children, and the
				// zygote the Box's: their CPU is this process's
				// children's once the zygote has exited and been
				// reaped, which Close waits for.
				c0 := cpuSelfAndChildren()
				box.Close()
				boxCPU += cpuSelfAndChildren() - c0
			}
			n := float64(b.N)
			b.ReportMetric(float64(boxWall.Nanoseconds())/n, "sandboxed-ns/op")
			b.ReportMetric(float64(boxCPU.Nanoseconds())/n, "sandboxed-cpu-ns/op")
			b.ReportMetric(float64(rawWall.Nanoseconds())/n, "raw-ns/op")
			b.ReportMetric(float64(rawCPU.Nanoseconds())/n, "raw-cpu-ns/op")
			b.ReportMetric(float64(boxWall)/float64(rawWall), "x-raw-wall")
			b.ReportMetric(float64(boxCPU)/float64(rawCPU), "x-raw-cpu")
		})
	}
}

// benchAsUser runs BenchmarkRun/box-user as testUser, b.N times, in a
// copy of this test binary, and reports the metrics that run reported.
func benchAsUser(b *testing.B) {
	exe, home := asUser(b)
	const name = "box-user"
	cmd := userCommand(exe, home, "-test.run", "^$", "-test.bench", "^BenchmarkRun$/^"+name+"$",
		"-test.benchtime", fmt.Sprintf("%dx", b.N), "-test.count", "1")
	if p := os.Getenv("HRNS_SANDBOX_BENCH_HELPER"); p != "" {
		cmd.Env = append(cmd.Env, "HRNS_SANDBOX_BENCH_HELPER="+p)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("as user %d: %v\n%s", testUser, err, out)
	}
	if _, why, ok := strings.Cut(string(out), "--- SKIP: BenchmarkRun/"+name); ok {
		b.Skipf("as user %d:%s", testUser, why)
	}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "BenchmarkRun/"+name) {
			continue
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				b.Fatalf("as user %d: %q", testUser, line)
			}
			b.ReportMetric(v, f[i+1])
		}
		return
	}
	b.Fatalf("as user %d, no result:\n%s", testUser, out)
}
