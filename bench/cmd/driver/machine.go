package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

// machine describes where the benchmarks ran.
type machine struct {
	cpus      int
	cpuModel  string
	memory    string
	kernel    string
	goVersion string
	node      string
	loadStart string
	// hrns is the commit of the hrns tree measured; with working set,
	// the working tree was measured, and dirty lists the files of it
	// that differ from the commit.
	hrns    string
	working bool
	dirty   []string
}

func describeMachine(ctx context.Context, rootDir string, working bool) machine {
	m := machine{cpus: onlineCPUs(), loadStart: loadAverage(), working: working}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpuModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				var kb int64
				fmt.Sscan(f[1], &kb)
				m.memory = fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = "Linux " + strings.TrimSpace(string(b))
	}
	m.goVersion = commandOutput(ctx, "go", "env", "GOVERSION")
	if m.goVersion == "" {
		m.goVersion = runtime.Version()
	}
	m.node = commandOutput(ctx, "node", "--version")
	if m.node == "" {
		m.node = "not installed"
	}
	m.hrns, m.dirty = gitState(ctx, rootDir, working)
	return m
}

// gitState returns the commit of the repository at rootDir and, if the
// working tree is measured, the files that differ from it (docs aside).
func gitState(ctx context.Context, rootDir string, working bool) (commit string, dirty []string) {
	commit = commandOutput(ctx, "git", "-C", rootDir, "rev-parse", "--short", "HEAD")
	if !working {
		return commit, nil
	}
	status := commandOutput(ctx, "git", "-C", rootDir, "status", "--porcelain", "--untracked-files=no", "--", ".", ":!docs")
	for _, line := range strings.Split(status, "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			dirty = append(dirty, f[len(f)-1])
		}
	}
	return commit, dirty
}

func commandOutput(ctx context.Context, name string, args ...string) string {
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// onlineCPUs counts the processors of /proc/cpuinfo: the machine's, not
// the ones this process may run on.
func onlineCPUs() int {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.NumCPU()
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if k, _, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "processor" {
			n++
		}
	}
	return max(n, 1)
}

// loadAverage returns the 1, 5 and 15 minute load averages.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
