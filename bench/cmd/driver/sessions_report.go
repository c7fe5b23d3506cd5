package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// storeFigures are one store's figures, aggregated over its repetitions.
type storeFigures struct {
	sr                *storeResult
	reps, fullReps    int
	roundTrip, wakeUp []time.Duration // pooled
	roundTripFull     []time.Duration
	wakeUpFull        []time.Duration
	// With --sqlite-sync normal (SQLite only).
	roundTripNormal, wakeUpNormal []time.Duration
	fills                         [][]*fill // by count, over the repetitions that reached it
	extras                        []*fill
	base                          []memReading
	counts                        []int
}

func (sr *storeResult) figures(counts []int) *storeFigures {
	f := &storeFigures{sr: sr, reps: len(sr.reps), counts: counts, fills: make([][]*fill, len(counts))}
	for _, r := range sr.reps {
		f.roundTrip = append(f.roundTrip, r.roundTrip...)
		f.wakeUp = append(f.wakeUp, r.wakeUp...)
		f.roundTripFull = append(f.roundTripFull, r.roundTripFull...)
		f.wakeUpFull = append(f.wakeUpFull, r.wakeUpFull...)
		f.roundTripNormal = append(f.roundTripNormal, r.roundTripNormal...)
		f.wakeUpNormal = append(f.wakeUpNormal, r.wakeUpNormal...)
		f.base = append(f.base, r.base)
		for i, fl := range r.fills {
			f.fills[i] = append(f.fills[i], fl)
		}
		if r.extra != nil {
			f.extras = append(f.extras, r.extra)
		}
		if len(r.fills) == len(counts) {
			f.fullReps++
		}
	}
	return f
}

// medianF returns the median of v(x) over xs.
func medianF[T any](xs []T, v func(T) float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := make([]float64, len(xs))
	for i, x := range xs {
		s[i] = v(x)
	}
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// perSession returns, for the fills at count index i, the median over the
// repetitions of what field grew by since the idle reading, per parked
// session.
func (f *storeFigures) perSession(i int, field func(memReading) float64) float64 {
	var v []float64
	for k, fl := range f.fills[i] {
		v = append(v, (field(fl.mem)-field(f.base[k]))/float64(fl.parked))
	}
	return medianF(v, func(x float64) float64 { return x })
}

// marginal returns the median growth of field per session between the
// fills at count indexes i-1 and i, over the repetitions that reached i.
func (f *storeFigures) marginal(i int, field func(memReading) float64) float64 {
	var v []float64
	for k, fl := range f.fills[i] {
		prev := f.fills[i-1][k]
		v = append(v, (field(fl.mem)-field(prev.mem))/float64(fl.parked-prev.parked))
	}
	return medianF(v, func(x float64) float64 { return x })
}

func rss(m memReading) float64        { return float64(m.rss) }
func heap(m memReading) float64       { return float64(m.heap) }
func goroutines(m memReading) float64 { return float64(m.goroutines) }

func connGoroutines(m memReading) float64 { return float64(m.connGoroutines) }

func rate(fl *fill, d func(*fill) time.Duration) float64 {
	return float64(fl.n) / d(fl).Seconds()
}

func createTime(fl *fill) time.Duration { return fl.create }
func parkTime(fl *fill) time.Duration   { return fl.park }

// fmtRate formats a median rate with its range over the repetitions.
func fmtRate(fills []*fill, d func(*fill) time.Duration) string {
	if len(fills) == 0 {
		return "—"
	}
	med := medianF(fills, func(fl *fill) float64 { return rate(fl, d) })
	if len(fills) == 1 {
		return fmt.Sprintf("%.0f /s", med)
	}
	lo, hi := rate(fills[0], d), rate(fills[0], d)
	for _, fl := range fills[1:] {
		lo, hi = min(lo, rate(fl, d)), max(hi, rate(fl, d))
	}
	return fmt.Sprintf("%.0f /s (%.0f–%.0f)", med, lo, hi)
}

func fmtPct(xs []time.Duration) string {
	if len(xs) == 0 {
		return "—"
	}
	return fmt.Sprintf("%s / %s (n = %d)", fmtDur(percentile(xs, 50)), fmtDur(percentile(xs, 99)), len(xs))
}

func latencies(fills []*fill) []time.Duration {
	var out []time.Duration
	for _, fl := range fills {
		out = append(out, fl.latency...)
	}
	return out
}

func fmtBytes(v float64) string {
	a := v
	if a < 0 {
		a = -a
	}
	switch {
	case a >= 10<<20:
		return fmt.Sprintf("%.0f MiB", v/(1<<20))
	case a >= 1<<20:
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case a >= 10<<10:
		return fmt.Sprintf("%.0f KiB", v/(1<<10))
	case a >= 1<<10:
		return fmt.Sprintf("%.1f KiB", v/(1<<10))
	}
	return fmt.Sprintf("%.0f B", v)
}

func count(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// markdown writes the sessions section of the results.
func (r *sessionsResult) markdown(p pin) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	switch {
	case r == nil:
		return "Not measured.\n\n"
	case r.err != nil:
		return fmt.Sprintf("Not measured: %v.\n\n", r.err)
	}
	var figs []*storeFigures
	for _, sr := range r.stores {
		if sr.err == nil {
			figs = append(figs, sr.figures(r.counts))
		}
	}
	o := r.opts
	first, last := r.counts[0], r.counts[len(r.counts)-1]
	pinning := "unpinned"
	if p.taskset != "" {
		pinning = fmt.Sprintf("`hrns serve` pinned to CPU %d, the mock and the load (`bench/cmd/sessload`, Go SDK) to CPU %d", p.clientCPU, p.mockCPU)
	}
	w("`hrns serve` as a process (%s), against a mock of its own, each repetition with a fresh store; %d repetitions, "+
		"%d of which fill the store up to %s parked sessions. Method and caveats: see *Method* and *What to conclude* above the results.\n\n",
		pinning, o.reps, min(o.fullReps, o.reps), count(last))
	if len(figs) > 0 {
		w("| measure |")
		for _, f := range figs {
			w(" %s |", f.sr.name)
		}
		w("\n|---|")
		for range figs {
			w("--:|")
		}
		w("\n")
		row := func(label string, cell func(f *storeFigures) string) {
			w("| %s |", label)
			for _, f := range figs {
				w(" %s |", cell(f))
			}
			w("\n")
		}
		row(fmt.Sprintf("sessions created / s, SDK (Idempotency-Key), %d at once, 0 → %s", o.concurrency, count(first)),
			func(f *storeFigures) string { return fmtRate(f.fills[0], createTime) })
		row("… create latency p50 / p99", func(f *storeFigures) string { return fmtPct(latencies(f.fills[0])) })
		row("… sessions parked / s (created, first model request answered, waiting in awaiting_tool_results)",
			func(f *storeFigures) string { return fmtRate(f.fills[0], parkTime) })
		row("… server CPU per session, created to parked", func(f *storeFigures) string {
			if len(f.fills[0]) == 0 {
				return "—"
			}
			return fmtDur(time.Duration(medianF(f.fills[0], func(fl *fill) float64 { return float64(fl.cpu) / float64(fl.n) })))
		})
		for i := 1; i < len(r.counts); i++ {
			from, to := count(r.counts[i-1]), count(r.counts[i])
			row(fmt.Sprintf("sessions created / s without a key, %s → %s parked", from, to),
				func(f *storeFigures) string { return fmtRate(f.fills[i], createTime) })
			row("… sessions parked / s", func(f *storeFigures) string { return fmtRate(f.fills[i], parkTime) })
			row("… server CPU per session, created to parked", func(f *storeFigures) string {
				if len(f.fills[i]) == 0 {
					return "—"
				}
				return fmtDur(time.Duration(medianF(f.fills[i], func(fl *fill) float64 { return float64(fl.cpu) / float64(fl.n) })))
			})
		}
		if len(r.counts) > 1 && o.extraSessions > 0 {
			row(fmt.Sprintf("sessions created / s, SDK (Idempotency-Key), %s more at %s parked", count(o.extraSessions), count(last)),
				func(f *storeFigures) string { return fmtRate(f.extras, createTime) })
			row("… create latency p50 / p99", func(f *storeFigures) string { return fmtPct(latencies(f.extras)) })
		}
		row("tool-result round trip p50 / p99: post → next model request at the mock", func(f *storeFigures) string { return fmtPct(f.roundTrip) })
		if len(r.counts) > 1 {
			row(fmt.Sprintf("… with %s parked", count(last)), func(f *storeFigures) string { return fmtPct(f.roundTripFull) })
		}
		row("long-poll wake-up p50 / p99: post → `changes` returns", func(f *storeFigures) string { return fmtPct(f.wakeUp) })
		if len(r.counts) > 1 {
			row(fmt.Sprintf("… with %s parked", count(last)), func(f *storeFigures) string { return fmtPct(f.wakeUpFull) })
		}
		row("tool-result round trip p50 / p99 with `--sqlite-sync normal` (no wait for the disk)", func(f *storeFigures) string { return fmtPct(f.roundTripNormal) })
		row("long-poll wake-up p50 / p99 with `--sqlite-sync normal` (no wait for the disk)", func(f *storeFigures) string { return fmtPct(f.wakeUpNormal) })
		row("idle server (after the warm-up): VmRSS / live heap / goroutines", func(f *storeFigures) string {
			return fmt.Sprintf("%s / %s / %.0f", fmtBytes(medianF(f.base, rss)), fmtBytes(medianF(f.base, heap)), medianF(f.base, goroutines))
		})
		for i, c := range r.counts {
			row(fmt.Sprintf("per parked session at %s, minus idle: VmRSS / live heap / goroutines", count(c)), func(f *storeFigures) string {
				if len(f.fills[i]) == 0 {
					return "—"
				}
				return fmt.Sprintf("%s / %s / %.4f", fmtBytes(f.perSession(i, rss)), fmtBytes(f.perSession(i, heap)), f.perSession(i, goroutines))
			})
		}
		conns := "goroutines of the HTTP client connections kept alive (to the model; not counted above): idle"
		for _, c := range r.counts {
			conns += " / at " + count(c)
		}
		row(conns, func(f *storeFigures) string {
			out := fmt.Sprintf("%.0f", medianF(f.base, connGoroutines))
			for i := range r.counts {
				if len(f.fills[i]) == 0 {
					out += " / —"
					continue
				}
				out += fmt.Sprintf(" / %.0f", medianF(f.fills[i], func(fl *fill) float64 { return connGoroutines(fl.mem) }))
			}
			return out
		})
		for i := 1; i < len(r.counts); i++ {
			row(fmt.Sprintf("per parked session from %s to %s: VmRSS / live heap", count(r.counts[i-1]), count(r.counts[i])), func(f *storeFigures) string {
				if len(f.fills[i]) == 0 {
					return "—"
				}
				return fmt.Sprintf("%s / %s", fmtBytes(f.marginal(i, rss)), fmtBytes(f.marginal(i, heap)))
			})
		}
		w("\nStores: ")
		for i, f := range figs {
			if i > 0 {
				w("; ")
			}
			w("%s, %s", f.sr.name, f.sr.where)
			if f.sr.note != "" {
				w(" (%s)", f.sr.note)
			}
		}
		w(". Rates are medians over the repetitions (range in brackets); percentiles are over the samples of every repetition, pooled. " +
			"Per parked session: what the server grew by since its idle reading, divided by the sessions parked; from one count to the next: the growth between the two readings, divided by the sessions added.\n\n")
	}
	for _, sr := range r.stores {
		if sr.err != nil {
			w("**%s: not measured**:\n\n```\n%s\n```\n\n", sr.name, strings.TrimSpace(sr.err.Error()))
		}
	}
	if len(r.throughput) > 0 {
		w("Throughput: sessions run to their end (%d tool round trips each, then the answer) through the Go SDK's `RunSession`, *at once* at a time, %d per figure (at least two rounds), "+
			"spread round-robin over the replicas and over API keys, at most %d of one key at once (one key follows them all, as one product's backend does); every replica pinned to CPU %d, so that they share the CPU one server has: this shows what running several costs, not how they scale out (see below). "+
			"*Per core* is sessions completed per second of the servers' CPU (user + system), the inverse of the CPU per session.\n\n",
			r.toolCalls, o.tpSessions, perKey, p.clientCPU)
		w("| store | replicas | at once | API keys | sessions completed / s | server CPU / session (all replicas) | sessions / s per core |\n|---|--:|--:|--:|--:|--:|--:|\n")
		var failed []*throughputResult
		for _, t := range r.throughput {
			if t.err != nil {
				failed = append(failed, t)
				continue
			}
			name := map[string]string{"sqlite": "SQLite", "postgres": "PostgreSQL"}[t.store]
			lo, hi := slices.Min(t.rates), slices.Max(t.rates)
			cpu := time.Duration(medianF(t.cpu, func(d time.Duration) float64 { return float64(d) }))
			w("| %s | %d | %d | %d | %.1f (%.1f–%.1f) | %s | %s |\n", name, t.replicas, t.concurrency, t.keys(), medianF(t.rates, func(x float64) float64 { return x }), lo, hi,
				fmtDur(cpu), perCore(cpu))
		}
		w("\n")
		for _, t := range failed {
			w("**%d × %s, %d at once: failed**:\n\n```\n%s\n```\n\n", t.replicas, t.store, t.concurrency, strings.TrimSpace(t.err.Error()))
		}
	}
	return b.String()
}

// verdicts checks the sessions server's targets: on SQLite, its CPU per
// model turn, the tool-result round trip and the long-poll wake-up
// (issue 21, target 2); on each store measured, the parked sessions.
func (r *sessionsResult) verdicts() []string {
	const target = "a parked session costs no goroutine and under 20 KiB of memory; 10,000 parked sessions on this machine"
	if r == nil || r.err != nil {
		return []string{"the sessions server's targets: not measured in this run.", target + ": not measured in this run."}
	}
	out := r.serverVerdicts()
	last := len(r.counts) - 1
	for _, sr := range r.stores {
		if sr.err != nil {
			out = append(out, fmt.Sprintf("%s (%s): not measured in this run.", target, sr.name))
			continue
		}
		f := sr.figures(r.counts)
		if len(f.fills[last]) == 0 {
			out = append(out, fmt.Sprintf("%s (%s): not measured in this run (no repetition filled the store).", target, sr.name))
			continue
		}
		n := r.counts[last]
		g := f.perSession(last, goroutines) * float64(n)
		rs, hp := f.perSession(last, rss), f.perSession(last, heap)
		ok := g < float64(n)/100 && rs < 20<<10 && hp < 20<<10 && n >= 10000
		out = append(out, fmt.Sprintf("%s (%s): **%s** (%s sessions parked; %.0f goroutines more than idle; per session %s of VmRSS, %s of live heap).",
			target, sr.name, metOrMissed(ok), count(n), g, fmtBytes(rs), fmtBytes(hp)))
	}
	return out
}

// serverVerdicts checks target 2 on SQLite: at most 1 ms of server CPU per
// model turn (the throughput job: create to completion, divided by its
// turns), a tool-result round trip p50 of at most 1 ms (issue 36; issue
// 21 asked for 2 ms) and a long-poll
// wake-up p50 of at most 1 ms.
func (r *sessionsResult) serverVerdicts() []string {
	var out []string
	cpu := "the sessions server's CPU per model turn on SQLite (throughput job, created to completed, divided by its turns) at most 1 ms"
	var tp *throughputResult
	for _, t := range r.throughput {
		if t.store == "sqlite" && t.replicas == 1 && t.concurrency == r.opts.tpConcurrency && t.err == nil && len(t.cpu) > 0 {
			tp = t
		}
	}
	if tp == nil {
		out = append(out, cpu+": not measured in this run.")
	} else {
		perSession := time.Duration(medianF(tp.cpu, func(d time.Duration) float64 { return float64(d) }))
		perTurn := perSession / time.Duration(r.toolCalls+1)
		out = append(out, fmt.Sprintf("%s: **%s** (%s a turn, %s a session of %d turns).", cpu, metOrMissed(perTurn <= time.Millisecond),
			fmtDur(perTurn), fmtDur(perSession), r.toolCalls+1))
	}
	var f *storeFigures
	for _, sr := range r.stores {
		if sr.name == "SQLite" && sr.err == nil {
			f = sr.figures(r.counts)
		}
	}
	for _, v := range []struct {
		what    string
		samples func(*storeFigures) []time.Duration
		normal  func(*storeFigures) []time.Duration
		limit   time.Duration
	}{
		{"the tool-result round trip p50 on SQLite (post → next model request) at most 1 ms (issue 36; 2 ms in issue 21)",
			func(f *storeFigures) []time.Duration { return f.roundTrip }, func(f *storeFigures) []time.Duration { return f.roundTripNormal }, time.Millisecond},
		{"the long-poll wake-up p50 on SQLite (post → `changes` returns) at most 1 ms",
			func(f *storeFigures) []time.Duration { return f.wakeUp }, func(f *storeFigures) []time.Duration { return f.wakeUpNormal }, time.Millisecond},
	} {
		if f == nil || len(v.samples(f)) == 0 {
			out = append(out, v.what+": not measured in this run.")
			continue
		}
		p50 := percentile(v.samples(f), 50)
		line := fmt.Sprintf("%s: **%s** (%s, n = %d).", v.what, metOrMissed(p50 <= v.limit), fmtDur(p50), len(v.samples(f)))
		if normal := v.normal(f); len(normal) > 0 {
			// What the disk's sync takes of it, on this machine.
			line += fmt.Sprintf(" With `--sqlite-sync normal` (a commit not waiting for the disk, still surviving kill -9): %s, n = %d.", fmtDur(percentile(normal, 50)), len(normal))
		}
		out = append(out, line)
	}
	return out
}

// perCore formats the sessions completed per second of CPU, given the CPU
// per session.
func perCore(cpu time.Duration) string {
	if cpu <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f", float64(time.Second)/float64(cpu))
}

// scaleVerdicts are issue 36's target 5: parked sessions at the largest
// count, their memory and the time to wake one, beside the same at the
// smallest count in the same run; and the rates per core at each count
// of sessions at once.
func (r *sessionsResult) scaleVerdicts() []string {
	if r == nil || r.err != nil {
		return []string{"scale (issue 36, target 5): not measured in this run."}
	}
	var out []string
	last := len(r.counts) - 1
	n := r.counts[last]
	for _, sr := range r.stores {
		if sr.err != nil {
			out = append(out, fmt.Sprintf("%s parked sessions on %s: not measured in this run.", count(n), sr.name))
			continue
		}
		f := sr.figures(r.counts)
		if len(f.fills[last]) == 0 {
			out = append(out, fmt.Sprintf("%s parked sessions on %s: not measured (no repetition filled the store).", count(n), sr.name))
			continue
		}
		g := f.perSession(last, goroutines) * float64(n)
		out = append(out, fmt.Sprintf("%s parked sessions on %s: **%s**: per parked session %s of VmRSS and %s of live heap (%s and %s at %s), %.0f goroutines more than idle; "+
			"to wake one (a tool result posted → its next model request) p50 %s against %s at %s (%s), the long-poll wake-up p50 %s against %s (%s).",
			count(n), sr.name, metOrMissed(g < float64(n)/100), fmtBytes(f.perSession(last, rss)), fmtBytes(f.perSession(last, heap)),
			fmtBytes(f.perSession(0, rss)), fmtBytes(f.perSession(0, heap)), count(r.counts[0]), g,
			fmtDur(percentile(f.roundTripFull, 50)), fmtDur(percentile(f.roundTrip, 50)), count(r.counts[0]), ratio(f.roundTripFull, f.roundTrip),
			fmtDur(percentile(f.wakeUpFull, 50)), fmtDur(percentile(f.wakeUp, 50)), ratio(f.wakeUpFull, f.wakeUp)))
	}
	for _, t := range r.throughput {
		if !t.scale {
			continue
		}
		name := map[string]string{"sqlite": "SQLite", "postgres": "PostgreSQL"}[t.store]
		if t.err != nil || len(t.cpu) == 0 {
			out = append(out, fmt.Sprintf("sessions completed per second per core, %d at once on %s: failed (see below).", t.concurrency, name))
			continue
		}
		cpu := time.Duration(medianF(t.cpu, func(d time.Duration) float64 { return float64(d) }))
		out = append(out, fmt.Sprintf("sessions completed per second per core, %d at once (%d API keys) on %s: %s (%.1f a second on the one CPU the server has; %s of server CPU a session).",
			t.concurrency, t.keys(), name, perCore(cpu), medianF(t.rates, func(x float64) float64 { return x }), fmtDur(cpu)))
	}
	return out
}

// ratio formats the quotient of the p50s of a and b.
func ratio(a, b []time.Duration) string {
	pa, pb := percentile(a, 50), percentile(b, 50)
	if len(a) == 0 || pb <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", float64(pa)/float64(pb))
}

// scaleMarkdown is the report of a -scale run.
func (r *report) scaleMarkdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	m := r.machine
	p("### Scale run of %s\n\n", r.date.Format("2006-01-02 15:04 MST"))
	p("- Machine: %d × %s, %s, %s; %s.\n", m.cpus, m.cpuModel, m.memory, m.kernel, m.goVersion)
	switch {
	case !m.working:
		p("- hrns: commit %s, exported with git archive and built from that (-tree=head).\n", m.hrns)
	case len(m.dirty) == 0:
		p("- hrns: the working tree of commit %s, unmodified (-tree=working).\n", m.hrns)
	default:
		p("- hrns: the working tree of commit %s, with uncommitted changes to %s (-tree=working).\n", m.hrns, strings.Join(m.dirty, ", "))
	}
	p("- Load average (1, 5, 15 min) %s at the start, %s at the end; the driver took %s.\n\n",
		m.loadStart, r.loadAfter, r.elapsed.Round(time.Second))
	p("#### Targets\n\n")
	for _, v := range append(r.sessions.serverVerdicts(), r.sessions.scaleVerdicts()...) {
		p("- %s\n", v)
	}
	p("\n#### Sessions server at scale\n\n")
	b.WriteString(r.sessions.markdown(r.pin))
	return b.String()
}
