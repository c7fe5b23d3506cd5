package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// microResult is the median of one benchmark's measures over -count runs.
type microResult struct {
	name    string               // without the Benchmark prefix and -N suffix
	values  map[string]float64   // unit -> median
	samples map[string][]float64 // unit -> the values, in the order of -count
}

// ratioTo returns the median over the -count rounds of mr's CPU per unit
// divided by ref's in the same round: the variants of a benchmark function
// run one after the other in each round, so pairs cancel a drifting load.
func (mr *microResult) ratioTo(ref *microResult) float64 {
	_, unit := cpuMetric(mr)
	a, b := mr.samples["cpu-ns/"+unit], ref.samples["cpu-ns/"+unit]
	if len(a) == 0 || len(a) != len(b) {
		x, _ := cpuMetric(ref)
		y, _ := cpuMetric(mr)
		return y / x
	}
	r := make([]float64, len(a))
	for i := range a {
		r[i] = a[i] / b[i]
	}
	return medianFloat(r)
}

func medianFloat(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// group is the benchmark's name without its last element: the variants
// of one comparison share it.
func (r *microResult) group() string {
	i := strings.LastIndexByte(r.name, '/')
	if i < 0 {
		return r.name
	}
	return r.name[:i]
}

func (r *microResult) variant() string { return r.name[strings.LastIndexByte(r.name, '/')+1:] }

// runMicro runs the micro-benchmarks pinned to the client CPU and returns
// the medians, in the order go test printed them.
func runMicro(ctx context.Context, e *env, o *options) ([]*microResult, error) {
	return e.goTestBench(ctx, e.benchDir, "-bench", ".", "-benchmem",
		"-count", strconv.Itoa(o.microCount), "-benchtime", o.microTime, "./micro")
}

// goTestBench runs go test -run '^$' with args in dir, pinned to the
// client CPU, and returns the medians of what it printed.
func (e *env) goTestBench(ctx context.Context, dir string, args ...string) ([]*microResult, error) {
	argv := e.pin.command(e.pin.clientCPU, append([]string{"go", "test", "-run", "^$"}, args...))
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = goEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w\n%s%s", strings.Join(argv, " "), err, out, stderr.Bytes())
	}
	return parseBench(out), nil
}

// parseBench reads go test -bench output and returns the median of each
// unit of each benchmark.
func parseBench(out []byte) []*microResult {
	samples := map[string]map[string][]float64{}
	var order []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := strings.TrimPrefix(f[0], "Benchmark")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		if samples[name] == nil {
			samples[name] = map[string][]float64{}
			order = append(order, name)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			samples[name][f[i+1]] = append(samples[name][f[i+1]], v)
		}
	}
	var res []*microResult
	for _, name := range order {
		r := &microResult{name: name, values: map[string]float64{}, samples: samples[name]}
		for unit, vs := range samples[name] {
			r.values[unit] = medianFloat(vs)
		}
		res = append(res, r)
	}
	return res
}
