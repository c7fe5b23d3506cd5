package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hrns-dev/hrns/bench/internal/mock"
)

// Target 4 (issue 21): `hrns run` as a process, up to its first request.
// Each client runs as a fresh process for one run of the task, -startup-n
// times in turn, pinned like the clients, against a mock of its own that
// notes when each request arrives (--record-arrivals). Per process: the
// time from just before it is started to the arrival of its first model
// request (both clocks CLOCK_REALTIME), the CPU of the whole one-run
// process, and the CPU and minor page faults of the same program doing no
// run (its start-up: flags, environment, package initialisation; hrns:
// `hrns run --help`, which parses the command line and returns). The
// baseline is the raw client.
//
// How a binary's pages sit in the page cache changes what starting it
// costs, the more so the larger the binary (docs/performance.md, target 4):
// every binary is first copied through write(2), as an install or a
// download writes it, so that all are in one state.

// startupClient is one program measured.
type startupClient struct {
	name       string
	run, idle  []string // argv of one run, and of doing no run
	first      []time.Duration
	cpu, idleC []time.Duration
	faults     []int64
}

// startupResult is what the start-up job measured, or why not.
type startupResult struct {
	err     error
	n       int
	clients []*startupClient
}

// measureStartup runs the start-up job.
func measureStartup(ctx context.Context, e *env, o *options) *startupResult {
	res := &startupResult{n: o.startupN}
	fail := func(err error) *startupResult { res.err = err; return res }
	hrns := filepath.Join(e.bin, "hrns")
	if _, err := os.Stat(hrns); err != nil {
		if err := e.goBuild(ctx, e.rootDir, "-o", hrns, "./cmd/hrns"); err != nil {
			return fail(err)
		}
	}
	dir := filepath.Join(e.tmp, "startup")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail(err)
	}
	place := func(src, name string) (string, error) {
		dst := filepath.Join(dir, name)
		return dst, copyWritten(src, dst)
	}
	raw, err := place(filepath.Join(e.bin, "raw"), "raw")
	if err != nil {
		return fail(err)
	}
	runArgv := func(bin string) []string {
		return []string{bin, "run", "--json", "--tools", "read_file", "--no-skills", "--workdir", e.work,
			"--system", "You are a careful assistant. Use the read_file tool to read the notes you are asked about.",
			"Read the notes and tell me what they say."}
	}
	add := func(name, bin string) {
		res.clients = append(res.clients, &startupClient{name: name, run: runArgv(bin), idle: []string{bin, "run", "--help"}})
	}
	res.clients = append(res.clients, &startupClient{name: "raw", run: []string{raw, "--runs", "1"}, idle: []string{raw, "--runs", "0"}})
	h, err := place(hrns, "hrns")
	if err != nil {
		return fail(err)
	}
	add("hrns-run", h)
	for _, x := range o.startupExtra {
		p, err := place(x.path, "x-"+x.name)
		if err != nil {
			return fail(err)
		}
		add(x.name, p)
	}

	m, err := e.startMock(ctx, o.mockCPU, o.toolCalls, o.argChunks, o.textChunks, "--record-arrivals")
	if err != nil {
		return fail(err)
	}
	defer m.stop()
	environ := e.clientEnv(m.baseURL)
	for _, c := range res.clients { // warm the page cache, and check it runs
		if _, _, err := e.runProcess(ctx, e.work, c.run, environ); err != nil {
			return fail(err)
		}
	}
	for range o.startupN {
		for _, c := range res.clients {
			before, err := arrivals(ctx, m, math.MaxInt32) // the count alone: the mock clamps from
			if err != nil {
				return fail(err)
			}
			t0 := time.Now()
			u, _, err := e.runProcess(ctx, e.work, c.run, environ)
			if err != nil {
				return fail(err)
			}
			after, err := arrivals(ctx, m, before.Total)
			if err != nil {
				return fail(err)
			}
			if len(after.UnixNano) == 0 {
				return fail(fmt.Errorf("%s: the mock saw no request", c.name))
			}
			c.first = append(c.first, time.Duration(after.UnixNano[0]-t0.UnixNano()))
			c.cpu = append(c.cpu, u.cpu)
			u, _, err = e.runProcess(ctx, e.work, c.idle, environ)
			if err != nil {
				return fail(err)
			}
			c.idleC = append(c.idleC, u.cpu)
			c.faults = append(c.faults, u.minFaults)
		}
	}
	return res
}

// arrivals reads the mock's arrival times from the from-th request on.
func arrivals(ctx context.Context, m *mockProc, from int) (mock.Arrivals, error) {
	var a mock.Arrivals
	url := strings.TrimSuffix(m.baseURL, "/v1") + fmt.Sprintf("/arrivals?from=%d", from)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return a, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return a, fmt.Errorf("mock arrivals: %w", err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		return a, fmt.Errorf("mock arrivals: %w", err)
	}
	return a, nil
}

// copyWritten copies src to dst through write(2) and fsync, executable.
func copyWritten(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(struct{ io.Writer }{out}, in); err != nil { // no copy_file_range: the pages are written
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// startupExtra is one -startup-extra NAME=PATH: another build of hrns,
// measured as hrns run is.
type startupExtra struct{ name, path string }

func parseStartupExtra(s string) ([]startupExtra, error) {
	var out []startupExtra
	for _, f := range strings.Split(s, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		name, path, ok := strings.Cut(f, "=")
		if !ok || name == "" || path == "" || name == "raw" || name == "hrns-run" {
			return nil, fmt.Errorf("-startup-extra %q: want NAME=PATH,… (names other than raw and hrns-run)", s)
		}
		out = append(out, startupExtra{name, path})
	}
	return out, nil
}

func (r *startupResult) medians(c *startupClient) (first, cpu, idle time.Duration, faults float64) {
	d := func(xs []time.Duration) time.Duration {
		return time.Duration(medianF(xs, func(x time.Duration) float64 { return float64(x) }))
	}
	return d(c.first), d(c.cpu), d(c.idleC), medianF(c.faults, func(x int64) float64 { return float64(x) })
}

func (r *startupResult) markdown() string {
	switch {
	case r == nil:
		return "Not run (-startup=false).\n\n"
	case r.err != nil:
		return fmt.Sprintf("The start-up job failed:\n\n```\n%s\n```\n\n", strings.TrimSpace(r.err.Error()))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Each client as a fresh process for one run of the task, %d processes each, in turn, pinned like the clients; every binary first copied through write(2), "+
		"so that all sit in the page cache alike. *To the first request*: from just before the process starts to the arrival of its first request at the mock. "+
		"*Start-up*: the same program doing no run (raw: `--runs 0`; hrns: `hrns run --help`). Medians.\n\n", r.n)
	b.WriteString("| client | to the first request | × raw | start-up CPU | × raw | one run, CPU | × raw | start-up page faults |\n|---|--:|--:|--:|--:|--:|--:|--:|\n")
	bf, bc, bi, _ := r.medians(r.clients[0])
	for _, c := range r.clients {
		f, cpu, idle, faults := r.medians(c)
		fmt.Fprintf(&b, "| %s | %s | %.2f | %s | %.2f | %s | %.2f | %.0f |\n", c.name, fmtDur(f), ratioD(f, bf), fmtDur(idle), ratioD(idle, bi),
			fmtDur(cpu), ratioD(cpu, bc), faults)
	}
	b.WriteString("\n")
	return b.String()
}

func ratioD(a, b time.Duration) float64 { return float64(a) / float64(max(b, 1)) }

func (r *startupResult) verdicts() []string {
	const what = "`hrns run` as a process: start-up CPU and time to the first request within 2× of the raw baseline's process"
	if r == nil || r.err != nil || len(r.clients) < 2 {
		return []string{what + ": not measured in this run."}
	}
	bf, _, bi, _ := r.medians(r.clients[0])
	f, _, idle, _ := r.medians(r.clients[1])
	qf, qi := ratioD(f, bf), ratioD(idle, bi)
	return []string{fmt.Sprintf("%s: **%s** (to the first request %.2f×, %s against %s; start-up CPU %.2f×, %s against %s).",
		what, metOrMissed(qf <= 2 && qi <= 2), qf, fmtDur(f), fmtDur(bf), qi, fmtDur(idle), fmtDur(bi))}
}
