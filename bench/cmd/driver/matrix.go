package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// The task matrix (issue 36, target 1): the loop against the raw baseline
// on several shapes of task, each with its own mock and the baseline in the
// same repetitions, and, on one shape, variants of the loop that turn on
// each feature (hooks, permission rules, an observer, compaction,
// BeforeTurn, structured output) beside the plain client.

// A shape is one task of the matrix.
type shape struct {
	name, what string
	// The mock's script and the clients' result size (see mock.Options
	// and task.Result).
	toolCalls, parallel, argChunks, textChunks, resultBytes int
	// runs per process: fewer for the long shapes, so that a process
	// takes about as long as the others.
	runs int
	// target is the ratio to the baseline the shape must stay at or
	// below.
	target float64
	// variants: also measure the feature variants on this shape.
	variants bool
}

// shapes are the matrix's tasks. The tiny shape carries the variants: with
// the least work per turn, a fixed cost shows most there.
var shapes = []shape{
	{name: "tiny", what: "5 calls, results of about 45 B, an answer in 20 chunks", toolCalls: 5, parallel: 1, argChunks: 8, textChunks: 20, resultBytes: 1, runs: 300, target: 1.0, variants: true},
	{name: "notes", what: "5 calls, results of about 500 B, an answer in 100 chunks (the main table's task)", toolCalls: 5, parallel: 1, argChunks: 8, textChunks: 100, resultBytes: 0, runs: 250, target: 1.0},
	{name: "4kib", what: "5 calls, results of 4 KiB, an answer in 20 chunks", toolCalls: 5, parallel: 1, argChunks: 8, textChunks: 20, resultBytes: 4 << 10, runs: 250, target: 1.0},
	{name: "50kib", what: "5 calls, results of 50 KiB, an answer in 20 chunks", toolCalls: 5, parallel: 1, argChunks: 8, textChunks: 20, resultBytes: 50 << 10, runs: 60, target: 0.8},
	{name: "parallel", what: "3 turns of 8 parallel calls, results of about 500 B, an answer in 20 chunks", toolCalls: 3, parallel: 8, argChunks: 8, textChunks: 20, resultBytes: 0, runs: 150, target: 1.0},
	{name: "chunks", what: "1 call, then an answer in 2,000 small chunks", toolCalls: 1, parallel: 1, argChunks: 8, textChunks: 2000, resultBytes: 0, runs: 60, target: 1.0},
	{name: "200turns", what: "199 calls, results of about 500 B, an answer in 20 chunks: a 200-turn conversation", toolCalls: 199, parallel: 1, argChunks: 8, textChunks: 20, resultBytes: 0, runs: 6, target: 0.8},
}

// variantNames are hrnsloop's feature variants (cmd/hrnsloop).
var variantNames = []string{"hooks", "permissions", "observer", "compaction", "beforeturn", "structured", "all"}

// shapeResult is what the matrix measured of one shape.
type shapeResult struct {
	s       shape
	err     error // the mock did not start
	turns   int   // turns of a run
	clients []*clientResult
}

// matrixClient is a client of the matrix: raw, hrns-loop or a variant of
// it, doing the shape's task.
func matrixClient(name, bin, variant string, s shape, baseline bool) *client {
	return &client{name: name, baseline: baseline, hrns: !baseline,
		argv: func(e *env, runs int) []string {
			argv := append(binArgv(bin)(e, runs), "--result-bytes", strconv.Itoa(s.resultBytes))
			if variant != "" {
				argv = append(argv, "--variant", variant)
			}
			return argv
		}}
}

// measureMatrix runs every shape: a mock of its own, then raw, hrns-loop
// (and the variants) in rotated order over the repetitions.
func measureMatrix(ctx context.Context, e *env, o *options) []*shapeResult {
	var out []*shapeResult
	for _, s := range shapes {
		if o.matrixShapes != "" && !strings.Contains(","+o.matrixShapes+",", ","+s.name+",") {
			continue
		}
		res := &shapeResult{s: s, turns: s.toolCalls + 1}
		out = append(out, res)
		logf(e.log, "matrix: %s", s.name)
		m, err := e.startMock(ctx, o.mockCPU, s.toolCalls, s.argChunks, s.textChunks, "--parallel", strconv.Itoa(s.parallel))
		if err != nil {
			res.err = err
			continue
		}
		cs := []*client{matrixClient("raw", "raw", "", s, true), matrixClient("hrns-loop", "hrnsloop", "", s, false)}
		if s.variants {
			for _, v := range variantNames {
				cs = append(cs, matrixClient("hrns-loop+"+v, "hrnsloop", v, s, false))
			}
		}
		so := *o
		so.runs = s.runs
		so.reps = o.matrixReps
		res.clients = measureClients(ctx, e, m, cs, &so)
		m.stop()
	}
	return out
}

// matrixMarkdown is the matrix's section of the report.
func matrixMarkdown(rs []*shapeResult, reps int) string {
	if len(rs) == 0 {
		return "Not run (-matrix=false).\n\n"
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("Each shape has its own mock; raw and hrns-loop (and, on the tiny shape, the variants) run in rotated order, %d repetitions; "+
		"× raw is the median over the repetitions of the CPU per turn (net of startup) divided by the baseline's in the same repetition.\n\n", reps)
	p("| shape | task | turns / run | raw CPU / turn | hrns CPU / turn | × raw | spread | target |\n|---|---|--:|--:|--:|--:|--:|--:|\n")
	var variants *shapeResult
	for _, r := range rs {
		if r.err != nil {
			p("| %s | %s | — | — | — | not run: %v | | |\n", r.s.name, r.s.what, r.err)
			continue
		}
		raw, loop := findClient(r.clients, "raw"), findClient(r.clients, "hrns-loop")
		if raw == nil || loop == nil {
			p("| %s | %s | — | — | — | failed: %v | | |\n", r.s.name, r.s.what, firstErr(r.clients))
			continue
		}
		p("| %s | %s | %d | %s | %s | **%.2f** | ±%.0f%% | ≤ %.1f |\n", r.s.name, r.s.what, r.turns,
			fmtDur(raw.cpuPerTurn), fmtDur(loop.cpuPerTurn), loop.ratio, 50*loop.spread, r.s.target)
		if r.s.variants {
			variants = r
		}
	}
	p("\n")
	if variants != nil {
		plain := findClient(variants.clients, "hrns-loop")
		p("Features turned on, on the %s shape (each variant of `bench/cmd/hrnsloop` turns one on in a way that changes nothing of the task; "+
			"× plain is the variant's × raw over the plain client's):\n\n", variants.s.name)
		p("| variant | CPU / turn | × raw | × plain | spread |\n|---|--:|--:|--:|--:|\n")
		if plain != nil {
			p("| hrns-loop (every feature off) | %s | %.2f | 1.00 | ±%.0f%% |\n", fmtDur(plain.cpuPerTurn), plain.ratio, 50*plain.spread)
		}
		for _, v := range variantNames {
			c := findClient(variants.clients, "hrns-loop+"+v)
			if c == nil || plain == nil {
				p("| +%s | failed: %v | | | |\n", v, firstErr(variants.clients))
				continue
			}
			p("| +%s | %s | %.2f | %.2f | ±%.0f%% |\n", v, fmtDur(c.cpuPerTurn), c.ratio, c.ratio/plain.ratio, 50*c.spread)
		}
		p("\n")
	}
	return b.String()
}

// matrixVerdicts checks target 1 of issue 36 against the matrix.
func matrixVerdicts(rs []*shapeResult) []string {
	if len(rs) == 0 {
		return []string{"the task matrix: not run in this run."}
	}
	var met, missed []string
	for _, r := range rs {
		loop := findClient(r.clients, "hrns-loop")
		if r.err != nil || loop == nil {
			missed = append(missed, r.s.name+" (not measured)")
			continue
		}
		v := fmt.Sprintf("%s %.2f× (≤ %.1f)", r.s.name, loop.ratio, r.s.target)
		if loop.ratio <= r.s.target {
			met = append(met, v)
		} else {
			missed = append(missed, v)
		}
	}
	line := fmt.Sprintf("the loop on every shape of the task matrix at or below its target ratio to raw: **%s**", metOrMissed(len(missed) == 0))
	if len(met) > 0 {
		line += "; met: " + strings.Join(met, ", ")
	}
	if len(missed) > 0 {
		line += "; missed: " + strings.Join(missed, ", ")
	}
	return []string{line + "."}
}

func findClient(cs []*clientResult, name string) *clientResult {
	for _, c := range cs {
		if c.c.name == name && c.err == nil {
			return c
		}
	}
	return nil
}

func firstErr(cs []*clientResult) error {
	for _, c := range cs {
		if c.err != nil {
			return c.err
		}
	}
	return nil
}

func shapeNames() string {
	var names []string
	for _, s := range shapes {
		names = append(names, s.name)
	}
	return strings.Join(names, ",")
}
