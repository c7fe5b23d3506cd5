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
	name   string             // without the Benchmark prefix and -N suffix
	values map[string]float64 // unit -> median
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
	argv := e.pin.command(e.pin.clientCPU, []string{"go", "test", "-run", "^$", "-bench", ".", "-benchmem",
		"-count", strconv.Itoa(o.microCount), "-benchtime", o.microTime, "./micro"})
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = e.benchDir
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
		r := &microResult{name: name, values: map[string]float64{}}
		for unit, vs := range samples[name] {
			slices.Sort(vs)
			m := vs[len(vs)/2]
			if len(vs)%2 == 0 {
				m = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
			}
			r.values[unit] = m
		}
		res = append(res, r)
	}
	return res
}
