package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// The server's half of target 3 (issue 21): a turn costs about as much at
// 500 turns as at 10. BenchmarkSessionLength (session/length_bench_test.go,
// in the hrns module) runs sessions of 10, 100 and 500 model turns in
// process on a SQLite file, each turn a client-side call whose 8 KiB
// result it posts, and reports per turn the CPU, the bytes handed to the
// store, the bytes the process wrote and the growth of the files.

// lengthTurns are the session lengths the benchmark runs, shortest first.
var lengthTurns = []int{10, 100, 500}

// lengthMetrics are the benchmark's figures per turn, as it names them,
// with what the report calls them. The target holds for the first three;
// the files' growth falls with length (the WAL is reused) and is shown.
var lengthMetrics = []struct{ unit, what string }{
	{"cpu-µs/turn", "CPU"},
	{"stored-B/turn", "bytes handed to the store"},
	{"written-B/turn", "bytes written (database and WAL)"},
	{"file-B/turn", "growth of the files"},
}

// lengthResult is what the benchmark measured, or why not.
type lengthResult struct {
	err   error
	count int
	runs  map[int]*microResult // by turns
}

// runLength runs BenchmarkSessionLength -length-count times, pinned to the
// client CPU, and keeps the medians.
func runLength(ctx context.Context, e *env, o *options) *lengthResult {
	res := &lengthResult{count: o.lengthCount, runs: map[int]*microResult{}}
	results, err := e.goTestBench(ctx, e.rootDir, "-bench", "^BenchmarkSessionLength$", "-benchtime", "1x",
		"-count", strconv.Itoa(o.lengthCount), "./session/")
	if err != nil {
		res.err = err
		return res
	}
	for _, mr := range results {
		turns, ok := strings.CutPrefix(mr.name, "SessionLength/turns=")
		if n, err := strconv.Atoi(turns); ok && err == nil {
			res.runs[n] = mr
		}
	}
	for _, n := range lengthTurns {
		if res.runs[n] == nil {
			res.err = fmt.Errorf("BenchmarkSessionLength printed no figures for %d turns", n)
			return res
		}
	}
	return res
}

func (r *lengthResult) markdown() string {
	switch {
	case r == nil:
		return "Not run (-length=false).\n\n"
	case r.err != nil:
		return fmt.Sprintf("BenchmarkSessionLength failed:\n\n```\n%s\n```\n\n", strings.TrimSpace(r.err.Error()))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "`go test -run '^$' -bench SessionLength -benchtime 1x -count %d ./session/`, pinned like the clients: "+
		"sessions of 10, 100 and 500 model turns, in process on a SQLite file (`synchronous = FULL`), each turn a client-side call "+
		"whose 8 KiB result is posted; per turn, medians over the count.\n\n", r.count)
	b.WriteString("| per turn |")
	for _, n := range lengthTurns {
		fmt.Fprintf(&b, " %d turns |", n)
	}
	fmt.Fprintf(&b, " %d ÷ %d |\n|---|", lengthTurns[len(lengthTurns)-1], lengthTurns[0])
	for range len(lengthTurns) + 1 {
		b.WriteString("--:|")
	}
	b.WriteString("\n")
	for _, m := range lengthMetrics {
		fmt.Fprintf(&b, "| %s |", m.what)
		for _, n := range lengthTurns {
			v := r.runs[n].values[m.unit]
			if m.unit == "cpu-µs/turn" {
				fmt.Fprintf(&b, " %.2f ms |", v/1000)
			} else {
				fmt.Fprintf(&b, " %s |", fmtBytes(v))
			}
		}
		fmt.Fprintf(&b, " %.2f |\n", r.ratio(m.unit))
	}
	b.WriteString("\n")
	return b.String()
}

// ratio is the longest sessions' figure over the shortest's.
func (r *lengthResult) ratio(unit string) float64 {
	short, long := r.runs[lengthTurns[0]].values[unit], r.runs[lengthTurns[len(lengthTurns)-1]].values[unit]
	return long / max(short, 1e-9)
}

func (r *lengthResult) verdicts() []string {
	const what = "the sessions server's CPU, bytes to the store and bytes written per turn (BenchmarkSessionLength) at 500 turns within 1.5× of those at 10"
	if r == nil || r.err != nil {
		return []string{what + ": not measured in this run."}
	}
	worst := 0.0
	var parts []string
	for _, m := range lengthMetrics[:3] {
		q := r.ratio(m.unit)
		worst = max(worst, q)
		parts = append(parts, fmt.Sprintf("%s %.2f×", m.what, q))
	}
	return []string{fmt.Sprintf("%s: **%s** (%s).", what, metOrMissed(worst <= 1.5), strings.Join(parts, ", "))}
}
