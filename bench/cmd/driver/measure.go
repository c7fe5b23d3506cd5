package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hrns-dev/hrns/bench/internal/mock"
)

// clientResult is a client's row: its medians, or why it did not run.
type clientResult struct {
	c       *client
	version string
	err     error // why the client did not run, or failed

	runs, turns, chunks int // per measured process group
	// Medians over the repetitions.
	cpuPerTurn  time.Duration // net of startup, except for hrns run
	cpuPerChunk time.Duration
	wallPerRun  time.Duration
	maxRSS      int64
	conns       int64         // connections opened for the runs
	startup     time.Duration // CPU of a process doing no run; 0 if not measured
	// spread is (max-min)/median of the CPU per turn over repetitions.
	spread float64
	// ratio is the median over the repetitions of the CPU per turn
	// divided by the baseline's in the same repetition: pairs measured
	// seconds apart, so that a drifting load on the machine cancels out.
	ratio float64
}

// measureClients builds, warms up and measures every client, and computes
// the ratios to the baseline.
func measureClients(ctx context.Context, e *env, m *mockProc, cs []*client, o *options) []*clientResult {
	var live []*clientResult
	var all []*clientResult
	for _, c := range cs {
		r := &clientResult{c: c, version: c.version(e)}
		all = append(all, r)
		if err := prepare(ctx, e, m, c); err != nil {
			r.err = err
			logf(e.log, "%s: not measured: %v", c.name, err)
			continue
		}
		live = append(live, r)
	}
	samples := make(map[*clientResult][]usage)
	startups := make(map[*clientResult][]usage)
	for rep := range o.reps {
		logf(e.log, "repetition %d of %d", rep+1, o.reps)
		order := slices.Clone(live)
		if len(order) > 0 {
			k := rep % len(order)
			order = append(order[k:], order[:k]...)
		}
		for _, r := range order {
			if r.err != nil {
				continue
			}
			if !r.c.perProcess {
				u, err := measureOnce(ctx, e, m, r.c, 0)
				if err != nil {
					r.err = err
					continue
				}
				startups[r] = append(startups[r], u)
			}
			u, err := measureOnce(ctx, e, m, r.c, o.runs)
			if err != nil {
				r.err = err
				continue
			}
			samples[r] = append(samples[r], u)
		}
	}
	perRun := m.config.ToolCallsPerRun + 1
	for _, r := range live {
		if r.err != nil {
			logf(e.log, "%s: failed: %v", r.c.name, r.err)
			continue
		}
		r.runs = o.runs
		r.turns = o.runs * perRun
		r.chunks = o.runs * m.config.EventsPerRun
		var startup time.Duration
		if s := startups[r]; len(s) > 0 {
			startup = median(s, func(u usage) time.Duration { return u.cpu })
			r.startup = startup
		}
		us := samples[r]
		perTurn := func(u usage) time.Duration { return (u.cpu - startup) / time.Duration(r.turns) }
		r.cpuPerTurn = median(us, perTurn)
		r.cpuPerChunk = median(us, func(u usage) time.Duration { return (u.cpu - startup) / time.Duration(r.chunks) })
		r.wallPerRun = median(us, func(u usage) time.Duration { return u.wall / time.Duration(r.runs) })
		r.maxRSS = int64(median(us, func(u usage) time.Duration { return time.Duration(u.maxRSS) }))
		r.conns = int64(median(us, func(u usage) time.Duration { return time.Duration(u.conns) }))
		lo, hi := minMax(us, perTurn)
		if r.cpuPerTurn > 0 {
			r.spread = float64(hi-lo) / float64(r.cpuPerTurn)
		}
	}
	var base *clientResult
	for _, r := range all {
		if r.c.baseline && r.err == nil {
			base = r
		}
	}
	if base == nil {
		return all
	}
	baseStartup := median(startups[base], func(u usage) time.Duration { return u.cpu })
	for _, r := range all {
		if r.err != nil || len(samples[r]) != len(samples[base]) {
			continue
		}
		var startup time.Duration
		if !r.c.perProcess {
			startup = median(startups[r], func(u usage) time.Duration { return u.cpu })
		}
		ratios := make([]float64, len(samples[r]))
		for i, u := range samples[r] {
			b := samples[base][i]
			ratios[i] = float64(u.cpu-startup) / float64(r.turns) / (float64(b.cpu-baseStartup) / float64(base.turns))
		}
		slices.Sort(ratios)
		r.ratio = ratios[len(ratios)/2]
		if len(ratios)%2 == 0 {
			r.ratio = (ratios[len(ratios)/2-1] + ratios[len(ratios)/2]) / 2
		}
	}
	return all
}

// prepare builds c and runs it once, unmeasured, which checks that it does
// the task and warms the page cache.
func prepare(ctx context.Context, e *env, m *mockProc, c *client) error {
	if c.precheck != nil {
		if err := c.precheck(e); err != nil {
			return err
		}
	}
	if c.build != nil {
		if err := c.build(ctx, e); err != nil {
			return err
		}
	}
	_, err := measureOnce(ctx, e, m, c, 1)
	return err
}

// measureOnce runs c for runs runs (one process, or one per run for hrns
// run) and checks with the mock's counts that it did exactly the task.
func measureOnce(ctx context.Context, e *env, m *mockProc, c *client, runs int) (usage, error) {
	before, err := m.stats(ctx)
	if err != nil {
		return usage{}, err
	}
	var total usage
	procs := 1
	if c.perProcess {
		procs = runs
	}
	for range procs {
		u, out, err := e.runProcess(ctx, e.benchDir, c.argv(e, runs), e.clientEnv(m.baseURL))
		if err != nil {
			return usage{}, err
		}
		n := runs
		if c.perProcess {
			n = 1
		}
		if err := c.check(out, n, m.config.AnswerBytes); err != nil {
			return usage{}, err
		}
		total.add(u)
	}
	after, err := m.stats(ctx)
	if err != nil {
		return usage{}, err
	}
	if err := checkCounts(before, after, runs); err != nil {
		return usage{}, fmt.Errorf("%s: %w", c.name, err)
	}
	total.conns = after.Connections - before.Connections
	return total, nil
}

// checkCounts checks that the requests between two readings of the mock's
// counts are those of runs runs of the task.
func checkCounts(before, after mock.Stats, runs int) error {
	perRun := int64(after.ToolCallsPerRun + 1)
	got := struct{ req, res, ev, rej int64 }{
		after.Requests - before.Requests, after.ToolResults - before.ToolResults,
		after.Events - before.Events, after.Rejected - before.Rejected,
	}
	n := int64(runs)
	if got.rej != 0 {
		return fmt.Errorf("the mock refused %d requests (see its log)", got.rej)
	}
	if got.req != n*perRun || got.res != n*int64(after.ToolCallsPerRun) || got.ev != n*int64(after.EventsPerRun) {
		return fmt.Errorf("the mock saw %d requests, %d tool results and sent %d events; %d runs make %d, %d and %d",
			got.req, got.res, got.ev, runs, n*perRun, n*int64(after.ToolCallsPerRun), n*int64(after.EventsPerRun))
	}
	return nil
}

func median[T any](xs []T, f func(T) time.Duration) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	v := make([]time.Duration, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func minMax[T any](xs []T, f func(T) time.Duration) (lo, hi time.Duration) {
	for i, x := range xs {
		v := f(x)
		if i == 0 || v < lo {
			lo = v
		}
		if i == 0 || v > hi {
			hi = v
		}
	}
	return lo, hi
}
