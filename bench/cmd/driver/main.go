// Command driver runs hrns's benchmarks and writes their results into
// docs/performance.md. From the bench folder, after ./setup.sh:
//
//	go run ./cmd/driver
//
// It builds every client, starts the mock model pinned to one CPU, then runs
// each client pinned to another CPU, in an order rotated from one repetition
// to the next, and takes the median of each measure over the repetitions:
// CPU time (user + system, from the child's rusage) per turn and per
// streamed chunk, wall time per run, peak RSS, and the ratio of CPU per turn
// to the raw baseline's in the same run. Then it runs the task matrix (the
// raw baseline and the loop on several shapes of task, and the loop with
// each feature turned on: matrix.go), the sessions server and the other
// jobs, and the micro-benchmarks of package micro, pinned the same way, and
// writes the tables, the machine and the date between the markers of
// docs/performance.md.
//
// Nothing is downloaded: the builds run with GOPROXY=off, and a client whose
// dependencies are missing is reported as not run, with the error, rather
// than left out. Flags choose the clients, repetitions, runs and the shape of
// the task; see -help.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "driver:", err)
		os.Exit(1)
	}
}

// options are the driver's flags.
type options struct {
	benchDir   string
	out        string
	write      bool
	clients    string
	reps       int
	runs       int
	toolCalls  int
	argChunks  int
	textChunks int
	micro      bool
	microCount int
	microTime  string
	mockCPU    int
	clientCPU  int
	tree       string
	sessions   sessionsOptions

	length       bool
	lengthCount  int
	startup      bool
	startupN     int
	startupExtra []startupExtra
	extraFlag    string
	pgcost       bool
	pgcostIdle   time.Duration

	matrix       bool
	matrixReps   int
	matrixShapes string

	// scale runs only the sessions server, at scale (issue 36, target 5),
	// and writes between the scale markers (see applyScale).
	scale bool
}

func (o *options) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.benchDir, "bench-dir", ".", "the bench folder (its module is github.com/hrns-dev/hrns/bench)")
	fs.StringVar(&o.out, "out", "", "the Markdown file to write the results into (default ../docs/performance.md)")
	fs.BoolVar(&o.write, "write", true, "write the results into -out; false only prints them")
	fs.StringVar(&o.clients, "clients", "", "comma-separated clients to run (default all: "+strings.Join(clientNames(), ",")+")")
	fs.IntVar(&o.reps, "reps", 7, "repetitions; each measure is the median over them")
	fs.IntVar(&o.runs, "runs", 50, "runs (conversations) per client process; hrns-run does one per process")
	fs.IntVar(&o.toolCalls, "tool-calls", 5, "tool calls per run, before the final answer")
	fs.IntVar(&o.argChunks, "arg-chunks", 8, "deltas each call's arguments are split over")
	fs.IntVar(&o.textChunks, "text-chunks", 100, "content chunks of the final answer")
	fs.BoolVar(&o.micro, "micro", true, "also run the micro-benchmarks")
	fs.IntVar(&o.microCount, "micro-count", 7, "go test -count for the micro-benchmarks")
	fs.StringVar(&o.microTime, "micro-benchtime", "100ms", "go test -benchtime for the micro-benchmarks")
	fs.IntVar(&o.mockCPU, "mock-cpu", 0, "CPU the mock is pinned to")
	fs.IntVar(&o.clientCPU, "client-cpu", 1, "CPU the clients and micro-benchmarks are pinned to")
	o.sessions.flags(fs)
	fs.BoolVar(&o.length, "length", true, "also run the hrns module's BenchmarkSessionLength (sessions of 10, 100 and 500 turns)")
	fs.IntVar(&o.lengthCount, "length-count", 5, "go test -count for BenchmarkSessionLength")
	fs.BoolVar(&o.startup, "startup", true, "also measure raw and hrns run as processes, up to their first request")
	fs.IntVar(&o.startupN, "startup-n", 40, "processes of each client in the start-up job")
	fs.StringVar(&o.extraFlag, "startup-extra", "", "other builds of hrns to measure in the start-up job beside hrns run, as NAME=PATH,…")
	fs.BoolVar(&o.pgcost, "pgcost", true, "also count what hrns serve asks of PostgreSQL per turn, through bench/cmd/pgcount, for each -sessions-replicas")
	fs.DurationVar(&o.pgcostIdle, "pgcost-idle", 30*time.Second, "how long the PostgreSQL cost job watches idle replicas")
	fs.BoolVar(&o.matrix, "matrix", true, "also run the task matrix: the loop against raw on several shapes of task, and the feature variants")
	fs.IntVar(&o.matrixReps, "matrix-reps", 7, "repetitions of the task matrix")
	fs.StringVar(&o.matrixShapes, "matrix-shapes", "", "comma-separated shapes of the matrix to run (default all: "+shapeNames()+")")
	fs.BoolVar(&o.scale, "scale", false, "run only the sessions server, at scale: 100,000 parked sessions, one repetition, the rates at 1, 16 and 256 sessions at once, one replica; written between the scale markers of -out (flags given explicitly win)")
	fs.StringVar(&o.tree, "tree", "head", "what to build: \"head\", the last commit (exported with git archive), or \"working\", the working tree as it is")
}

// Validate checks the flags.
func (o *options) Validate() error {
	if o.reps < 1 || o.runs < 1 {
		return fmt.Errorf("-reps and -runs must be at least 1")
	}
	if o.toolCalls < 1 || o.argChunks < 1 || o.textChunks < 1 {
		return fmt.Errorf("-tool-calls, -arg-chunks and -text-chunks must be at least 1")
	}
	if o.tree != "head" && o.tree != "working" {
		return fmt.Errorf("-tree must be head or working")
	}
	if o.mockCPU == o.clientCPU {
		return fmt.Errorf("-mock-cpu and -client-cpu must differ")
	}
	if _, err := selectClients(o.clients); err != nil {
		return err
	}
	if o.matrixReps < 1 {
		return fmt.Errorf("-matrix-reps must be at least 1")
	}
	if o.lengthCount < 1 || o.startupN < 1 || o.pgcostIdle <= 0 {
		return fmt.Errorf("-length-count, -startup-n and -pgcost-idle must be positive")
	}
	var err error
	if o.startupExtra, err = parseStartupExtra(o.extraFlag); err != nil {
		return err
	}
	return o.sessions.Validate()
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := flag.NewFlagSet("driver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o.flags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.scale {
		applyScale(fs, &o)
	}
	if err := o.Validate(); err != nil {
		return err
	}
	benchDir, err := findBenchDir(o.benchDir)
	if err != nil {
		return err
	}
	if o.out == "" {
		o.out = filepath.Join(benchDir, "..", "docs", "performance.md")
	}
	clients, _ := selectClients(o.clients)

	tmp, err := os.MkdirTemp("", "hrns-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	e := &env{
		benchDir: benchDir,
		rootDir:  filepath.Dir(benchDir),
		bin:      filepath.Join(tmp, "bin"),
		work:     filepath.Join(tmp, "work"),
		home:     filepath.Join(tmp, "home"),
		tmp:      tmp,
		log:      stderr,
	}
	e.pin = pinning(o.mockCPU, o.clientCPU)
	started := time.Now()
	rep := &report{
		date:    started.UTC(),
		machine: describeMachine(ctx, e.rootDir, o.tree == "working"),
		opts:    o,
		pin:     e.pin,
	}
	if o.tree == "head" {
		// Build from the last commit, so that the numbers belong to a
		// commit and edits in progress neither change nor break them.
		src := filepath.Join(tmp, "src")
		if err := exportHead(ctx, e.rootDir, e.benchDir, src); err != nil {
			return err
		}
		e.rootDir, e.benchDir = src, filepath.Join(src, "bench")
	}

	if o.scale {
		return runScale(ctx, e, rep, &o, stdout, stderr, started)
	}
	logf(stderr, "building the clients")
	if err := e.buildCommon(ctx); err != nil {
		return err
	}
	if err := e.writeNotes(o.toolCalls); err != nil {
		return err
	}
	m, err := e.startMock(ctx, o.mockCPU, o.toolCalls, o.argChunks, o.textChunks)
	if err != nil {
		return err
	}
	defer m.stop()
	rep.task = m.config

	results := measureClients(ctx, e, m, clients, &o)
	rep.clients = results
	if o.matrix {
		rep.matrix = measureMatrix(ctx, e, &o)
	}
	rep.sessions = measureSessions(ctx, e, &o)
	rep.pgcost = measurePGCost(ctx, e, &o)
	if o.length {
		logf(stderr, "running BenchmarkSessionLength")
		rep.length = runLength(ctx, e, &o)
	}
	if o.startup {
		logf(stderr, "start-up: %d processes of each client", o.startupN)
		rep.startup = measureStartup(ctx, e, &o)
	}

	if o.micro {
		logf(stderr, "running the micro-benchmarks")
		rep.micro, rep.microErr = runMicro(ctx, e, &o)
		logf(stderr, "running what people feel: a sandboxed shell call, the chat's first token")
		rep.feel = measureFeel(ctx, e, &o)
	}
	rep.elapsed = time.Since(started)
	rep.loadAfter = loadAverage()

	text := rep.markdown()
	fmt.Fprintln(stdout, text)
	if o.write {
		if err := writeBetweenMarkers(o.out, text); err != nil {
			return err
		}
		logf(stderr, "wrote %s", o.out)
	}
	return nil
}

// scaleDefaults are what -scale sets, for the flags not given.
var scaleDefaults = map[string]string{
	"sessions-parked":            "1000,100000",
	"sessions-reps":              "1",
	"sessions-full-reps":         "1",
	"sessions-replicas":          "1",
	"sessions-scale-concurrency": "1,16,256",
	"sessions-throughput":        "240",
	"sessions-extra":             "100",
}

// applyScale sets scaleDefaults on the flags not given on the command line.
func applyScale(fs *flag.FlagSet, o *options) {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for name, v := range scaleDefaults {
		if !given[name] {
			fs.Set(name, v)
		}
	}
	o.sessions.run = true
}

// runScale is the -scale run: the sessions server only, its report
// written between the scale markers.
func runScale(ctx context.Context, e *env, rep *report, o *options, stdout, stderr io.Writer, started time.Time) error {
	for _, d := range []string{e.bin, e.work, e.home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := e.goBuild(ctx, e.benchDir, "-o", e.bin+"/", "./cmd/mock"); err != nil {
		return err
	}
	rep.sessions = measureSessions(ctx, e, o)
	rep.elapsed = time.Since(started)
	rep.loadAfter = loadAverage()
	text := rep.scaleMarkdown()
	fmt.Fprintln(stdout, text)
	if o.write {
		if err := writeBetween(o.out, scaleStartMarker, scaleEndMarker, text); err != nil {
			return err
		}
		logf(stderr, "wrote %s", o.out)
	}
	return nil
}

func logf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "[%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
