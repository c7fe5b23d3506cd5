package main

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/hrns-dev/hrns/bench/internal/mock"
)

// The results go between these markers of the output file; the rest of the
// file is prose the driver does not touch.
const (
	startMarker = "<!-- bench:results:start -->"
	endMarker   = "<!-- bench:results:end -->"
	// A -scale run writes between these.
	scaleStartMarker = "<!-- bench:scale:start -->"
	scaleEndMarker   = "<!-- bench:scale:end -->"
)

// report is everything one run of the driver measured.
type report struct {
	date      time.Time
	elapsed   time.Duration
	machine   machine
	loadAfter string
	opts      options
	pin       pin
	task      mock.Stats
	clients   []*clientResult
	matrix    []*shapeResult
	sessions  *sessionsResult
	pgcost    *pgcostResult
	length    *lengthResult
	startup   *startupResult
	feel      *feelResult
	micro     []*microResult
	microErr  error
}

func (r *report) markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	m := r.machine
	p("### Run of %s\n\n", r.date.Format("2006-01-02 15:04 MST"))
	p("- Machine: %d × %s, %s, %s; %s; Node %s.\n", m.cpus, m.cpuModel, m.memory, m.kernel, m.goVersion, m.node)
	switch {
	case !m.working:
		p("- hrns: commit %s, exported with git archive and built from that (-tree=head).\n", m.hrns)
	case m.hrns == "":
		p("- hrns: the working tree, not a git checkout (-tree=working).\n")
	case len(m.dirty) == 0:
		p("- hrns: the working tree of commit %s, unmodified (-tree=working).\n", m.hrns)
	default:
		p("- hrns: the working tree of commit %s, with uncommitted changes to %s (-tree=working).\n", m.hrns, strings.Join(m.dirty, ", "))
	}
	p("- Load average (1, 5, 15 min) %s at the start, %s at the end; the driver took %s.\n",
		m.loadStart, r.loadAfter, r.elapsed.Round(time.Second))
	if r.pin.taskset != "" {
		p("- Pinning: the mock on CPU %d, each client (and the micro-benchmarks) on CPU %d, with taskset.\n", r.pin.mockCPU, r.pin.clientCPU)
	} else {
		p("- Pinning: none: %s.\n", r.pin.note)
	}
	t := r.task
	p("- Task: a run is %d tool calls (arguments in %d deltas), then a final answer in %d content chunks: %d turns and %d streamed chunks. "+
		"Each library client does %d runs in one process; `hrns run` does one run per process, %d processes. "+
		"Each figure is the median of %d repetitions.\n\n",
		t.ToolCallsPerRun, r.opts.argChunks, r.opts.textChunks, t.ToolCallsPerRun+1, t.EventsPerRun,
		r.opts.runs, r.opts.runs, r.opts.reps)

	p("| client | library | CPU / turn | × raw | CPU / chunk | spread | wall / run | peak RSS | startup CPU | connections |\n")
	p("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	var failed []*clientResult
	for _, c := range r.clients {
		if c.err != nil {
			failed = append(failed, c)
			continue
		}
		lib := "—"
		if c.c.dep != "" {
			lib = "`" + c.c.dep + "` " + c.version
		}
		startup := "—"
		if c.startup > 0 {
			startup = fmtDur(c.startup)
		}
		name := c.c.name
		if c.c.experiment {
			name = "*" + name + "* ²"
		}
		if c.c.perProcess {
			name += " ¹"
			startup = "included ¹"
		}
		p("| %s | %s | %s | %.2f | %s | ±%.0f%% | %s | %.1f MiB | %s | %d / %d |\n", name, lib, fmtDur(c.cpuPerTurn), c.ratio,
			fmtDur(c.cpuPerChunk), 50*c.spread, fmtDur(c.wallPerRun), float64(c.maxRSS)/(1<<20), startup, c.conns, c.turns)
	}
	p("\nCPU is user + system time from the rusage of the client process; CPU / turn and CPU / chunk are net of the startup CPU " +
		"(a process of the same client doing no run), so they are the steady cost. × raw is the median, over the repetitions, of the client's CPU / turn " +
		"divided by the baseline's in the same repetition (so it is not exactly the quotient of the two medians). Spread is half the range of CPU / turn over the repetitions, " +
		"relative to the median. Wall / run includes waiting for the mock. Peak RSS is the rusage maxrss. " +
		"Connections are those the mock accepted for the client's requests (connections / requests): 1 means the client kept one connection alive.\n\n")
	p("¹ `hrns run` is a whole process per run: its CPU / turn includes starting the process, reading the flags and the environment, " +
		"the built-in tool reading a real file, and writing every event as a JSON line to a pipe.\n\n")
	for _, c := range r.clients {
		if c.c.experiment {
			p("² An experiment, not hrns as it is: the measured effect of a proposed change.\n\n")
			break
		}
	}
	for _, c := range r.clients {
		p("%s: %s.", c.c.name, c.c.desc)
		p(" ")
	}
	p("\n\n")
	if len(failed) > 0 {
		p("Clients that did not run:\n\n")
		for _, c := range failed {
			kind := "failed"
			if errors.Is(c.err, errNotInstalled) {
				kind = "not installed"
			}
			p("- **%s** (%s):\n\n  ```\n  %s\n  ```\n", c.c.name, kind, strings.ReplaceAll(strings.TrimSpace(c.err.Error()), "\n", "\n  "))
		}
		p("\n")
	}

	p("#### Task matrix\n\n")
	b.WriteString(matrixMarkdown(r.matrix, r.opts.matrixReps))
	p("#### Targets\n\n")
	for _, line := range r.verdicts() {
		p("- %s\n", line)
	}
	p("\n#### Sessions server\n\n")
	b.WriteString(r.sessions.markdown(r.pin))
	p("#### PostgreSQL per session turn\n\n")
	b.WriteString(r.pgcost.markdown())
	p("#### Sessions in length\n\n")
	b.WriteString(r.length.markdown())
	p("#### Start-up\n\n")
	b.WriteString(r.startup.markdown())
	p("#### What people feel\n\n")
	b.WriteString(r.feel.markdown())

	p("#### Micro-benchmarks\n\n")
	if r.microErr != nil {
		p("The micro-benchmarks failed:\n\n```\n%s\n```\n", r.microErr)
	} else if len(r.micro) == 0 {
		p("Not run (-micro=false).\n")
	} else {
		p("`go test -bench . -benchmem -count %d -benchtime %s ./micro`, pinned to CPU %d; medians over the count. "+
			"CPU is the process's CPU time per unit, wall the elapsed time; × ref is the median over the rounds of the CPU ratio to the reference variant of the same group (marked ref), measured in the same round.\n\n",
			r.opts.microCount, r.opts.microTime, r.pin.clientCPU)
		p("| benchmark | variant | CPU / unit | wall / unit | B/op | allocs/op | × ref |\n|---|---|--:|--:|--:|--:|--:|\n")
		for _, mr := range r.micro {
			cpu, unit := cpuMetric(mr)
			ref := r.reference(mr)
			ratio := "ref"
			if ref != mr {
				ratio = fmt.Sprintf("%.2f", mr.ratioTo(ref))
			}
			p("| %s | %s | %s ns/%s | %s ns | %.0f | %.0f | %s |\n", mr.group(), mr.variant(), fmtNum(cpu), unit,
				fmtNum(mr.values["ns/"+unit]), mr.values["B/op"], mr.values["allocs/op"], ratio)
		}
	}
	return b.String()
}

// verdicts checks the targets against this run.
func (r *report) verdicts() []string {
	var out []string
	find := func(name string) *clientResult {
		for _, c := range r.clients {
			if c.c.name == name && c.err == nil {
				return c
			}
		}
		return nil
	}
	loop, raw := find("hrns-loop"), find("raw")
	if loop == nil || raw == nil {
		out = append(out, "hrns loop against the baseline: not measured in this run.")
	} else {
		out = append(out, fmt.Sprintf("hrns loop CPU per turn at or below 1.0× of the raw baseline: **%s** (%.2f×; medians %s against %s).",
			metOrMissed(loop.ratio <= 1.0), loop.ratio, fmtDur(loop.cpuPerTurn), fmtDur(raw.cpuPerTurn)))
		rss := float64(loop.maxRSS) / float64(max(raw.maxRSS, 1))
		out = append(out, fmt.Sprintf("hrns loop peak RSS within 5%% of the raw baseline's: **%s** (%.3f×; medians %.1f MiB against %.1f MiB).",
			metOrMissed(rss <= 1.05), rss, float64(loop.maxRSS)/(1<<20), float64(raw.maxRSS)/(1<<20)))
		var above []string
		peers := 0
		for _, c := range r.clients {
			if c.c.baseline || c.c.hrns || c.c.experiment || c.err != nil {
				continue
			}
			peers++
			if c.ratio <= loop.ratio {
				above = append(above, fmt.Sprintf("%s (%.2f×)", c.c.name, c.ratio))
			}
		}
		switch {
		case peers == 0:
			out = append(out, "hrns loop below every peer: no peer ran.")
		case len(above) == 0:
			out = append(out, fmt.Sprintf("hrns loop CPU per turn below every peer that ran (%d), by their ratios to the baseline: **met**.", peers))
		default:
			out = append(out, fmt.Sprintf("hrns loop CPU per turn below every peer: **missed**, at or below it: %s.", strings.Join(above, ", ")))
		}
	}
	for _, kind := range []string{"content", "args"} {
		h, base := r.microFind("DecodeChunk/"+kind+"/hrns"), r.microFind("DecodeChunk/"+kind+"/raw-stream")
		if h == nil || base == nil {
			out = append(out, fmt.Sprintf("chunk decoding (%s chunks): not measured in this run.", kind))
			continue
		}
		hc, bc, ratio := h.values["cpu-ns/chunk"], base.values["cpu-ns/chunk"], h.ratioTo(base)
		out = append(out, fmt.Sprintf("chunk decoding at or below the baseline's CPU per chunk, %s chunks (line reading, decoding and accumulation on both sides): **%s** (%.2f×; medians hrns %s ns, baseline %s ns).",
			kind, metOrMissed(ratio <= 1), ratio, fmtNum(hc), fmtNum(bc)))
	}
	out = append(out, matrixVerdicts(r.matrix)...)
	out = append(out, r.longRunVerdicts()...)
	out = append(out, r.sessions.verdicts()...)
	out = append(out, r.length.verdicts()...)
	out = append(out, r.pgcost.verdicts()...)
	out = append(out, r.startup.verdicts()...)
	return append(out, r.feel.verdicts()...)
}

// longRunVerdicts checks that a turn costs about as much at 500 turns as
// at 10 (BenchmarkLongRun): the loop alone, the target, and the OpenAI,
// Responses, Anthropic and Gemini providers' request encoding, reported
// beside it.
func (r *report) longRunVerdicts() []string {
	var out []string
	for _, v := range []struct{ variant, what string }{
		{"loop", "the loop's own CPU per turn (BenchmarkLongRun, loop)"},
		{"openai-encode", "the OpenAI request encoding's CPU per turn (BenchmarkLongRun, openai-encode)"},
		{"responses-encode", "the Responses API request encoding's CPU per turn (BenchmarkLongRun, responses-encode)"},
		{"anthropic-encode", "the Anthropic request encoding's CPU per turn (BenchmarkLongRun, anthropic-encode)"},
		{"gemini-encode", "the Gemini request encoding's CPU per turn (BenchmarkLongRun, gemini-encode)"},
	} {
		short, long := r.microFind("LongRun/turns=10/"+v.variant), r.microFind("LongRun/turns=500/"+v.variant)
		if short == nil || long == nil {
			out = append(out, v.what+" at 500 turns: not measured in this run.")
			continue
		}
		a, b := short.values["cpu-ns/turn"], long.values["cpu-ns/turn"]
		ratio := b / max(a, 1)
		out = append(out, fmt.Sprintf("%s at 500 turns within 1.5× of that at 10: **%s** (%.2f×; medians %s ns against %s ns).",
			v.what, metOrMissed(ratio <= 1.5), ratio, fmtNum(b), fmtNum(a)))
	}
	return out
}

func metOrMissed(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

func (r *report) microFind(name string) *microResult {
	for _, m := range r.micro {
		if m.name == name {
			return m
		}
	}
	return nil
}

// referenceVariants name the variant each group is compared with, by
// priority.
var referenceVariants = []string{"raw", "raw-stream", "raw-unmarshal", "untyped", "no-wrapper"}

// reference returns the variant of mr's group that mr is compared with.
func (r *report) reference(mr *microResult) *microResult {
	for _, v := range referenceVariants {
		if ref := r.microFind(mr.group() + "/" + v); ref != nil {
			return ref
		}
	}
	return mr
}

// cpuMetric returns mr's CPU time per unit and the unit.
func cpuMetric(mr *microResult) (float64, string) {
	for unit, v := range mr.values {
		if u, ok := strings.CutPrefix(unit, "cpu-ns/"); ok {
			return v, u
		}
	}
	return mr.values["ns/op"], "op"
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	case d >= 10*time.Microsecond:
		return fmt.Sprintf("%.0f µs", float64(d)/1e3)
	default:
		return fmt.Sprintf("%.1f µs", float64(d)/1e3)
	}
}

func fmtNum(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "?"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.1f", v)
	}
}

// writeBetweenMarkers replaces what lies between the markers of path with
// text.
func writeBetweenMarkers(path, text string) error {
	return writeBetween(path, startMarker, endMarker, text)
}

// writeBetween replaces what lies between the markers start and end of
// path with text.
func writeBetween(path, startMarker, endMarker, text string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i := bytes.Index(b, []byte(startMarker))
	j := bytes.Index(b, []byte(endMarker))
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %s … %s markers to write between", path, startMarker, endMarker)
	}
	var out bytes.Buffer
	out.Write(b[:i+len(startMarker)])
	cmd := "go run ./cmd/driver"
	if startMarker == scaleStartMarker {
		cmd += " -scale"
	}
	out.WriteString("\n<!-- Written by `" + cmd + "` in bench/. Edit outside the markers: the next run replaces this. -->\n\n")
	out.WriteString(strings.TrimSpace(text))
	out.WriteString("\n\n")
	out.Write(b[j:])
	return os.WriteFile(path, out.Bytes(), 0o644)
}
