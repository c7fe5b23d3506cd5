// Package task defines the job every benchmark client does, so that they all
// do the same work against the mock model.
//
// A run starts with [System] and [Prompt]. The model calls [ToolName] with
// {"path": "notes/turn-<k>.txt"} until it has called it the number of times
// the mock is configured for, then streams its final answer. The client runs
// the tool as a local function, [Read], appends the call and its result to
// the conversation and sends it back, as any agent loop does.
//
// The client program reads its settings with [ParseFlags] and, when done,
// prints one [Summary] line that the driver checks.
package task

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"time"
)

// The conversation every client sends.
const (
	System      = "You are a benchmark agent. Read the notes you are pointed to, then answer."
	Prompt      = "Read the notes of every turn, then summarise them."
	ToolName    = "read_file"
	Description = "Reads a file of the notes folder and returns its text."
)

// Marker is in every tool result. The mock counts the tool messages that
// carry it, which proves that the client ran the tool and sent its result.
const Marker = "bench-tool-result"

// Read is the tool every client runs: it returns the contents of a note. The
// whole-process hrns client reads the same text from real files that the
// driver writes (see [NoteFile]).
func Read(path string) string {
	return NoteText(path)
}

// NoteText is the text of the note at path: a few hundred bytes, about what
// a small file read returns.
func NoteText(path string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n", Marker, path)
	for i := range 6 {
		fmt.Fprintf(&b, "line %d of %s: the service listens on port 8080 and keeps its state in SQLite.\n", i+1, path)
	}
	return b.String()
}

// Result is the tool's result for path when the notes are size bytes long:
// [NoteText] for 0, otherwise a text of exactly size bytes (or the marker
// line alone, if size is shorter) beginning with the marker line, the rest
// lines of prose as a file read returns. The prose is made once per size
// and shared, so that the tool costs about what reading a cached file
// does (a copy), the same for every client, and a large result measures
// the harness rather than the making of the text.
func Result(path string, size int) string {
	if size == 0 {
		return NoteText(path)
	}
	head := Marker + ": " + path + "\n"
	if len(head) >= size {
		return head
	}
	return head + prose(size)[:size-len(head)]
}

// proses holds the prose of each size asked for.
var proses sync.Map

// prose returns at least size bytes of lines of prose.
func prose(size int) string {
	if v, ok := proses.Load(size); ok {
		return v.(string)
	}
	var b strings.Builder
	b.Grow(size + 80)
	for i := 1; b.Len() < size; i++ {
		fmt.Fprintf(&b, "line %d: the service listens on port 8080 and keeps its state in SQLite.\n", i)
	}
	v, _ := proses.LoadOrStore(size, b.String())
	return v.(string)
}

// NotePath is the path the model asks for on the k-th tool call of a run,
// counting from 1.
func NotePath(k int) string { return fmt.Sprintf("notes/turn-%d.txt", k) }

// Args are the tool's arguments.
type Args struct {
	Path string `json:"path" jsonschema:"the file to read, relative to the notes folder" description:"the file to read, relative to the notes folder"`
}

// ReadArgs runs the tool on its raw JSON arguments.
func ReadArgs(raw []byte) (string, error) { return ReadArgsSized(raw, 0) }

// ReadArgsSized runs the tool on its raw JSON arguments, with results of
// size bytes (see [Result]).
func ReadArgsSized(raw []byte, size int) (string, error) {
	var a Args
	if err := json.Unmarshal(raw, &a); err != nil {
		return "", fmt.Errorf("read_file: arguments: %w", err)
	}
	if a.Path == "" {
		return "", errors.New("read_file: no path")
	}
	return Result(a.Path, size), nil
}

// Flags are the settings of a client program.
type Flags struct {
	// BaseURL is the API root ending in /v1.
	BaseURL string
	// Model is the model name sent in requests.
	Model string
	// Runs is the number of runs (conversations) to do, one after the
	// other.
	Runs int
	// Timeout bounds the whole program.
	Timeout time.Duration
	// CPUProfile, when set, is a file to write a CPU profile of the runs
	// to (not of the setup).
	CPUProfile string
	// Variant names a variant of the client, for the clients that have
	// some; empty is the plain client.
	Variant string
	// ResultBytes is the size of each tool result (see [Result]); 0
	// means the notes of [NoteText], a few hundred bytes.
	ResultBytes int
}

// ParseFlags reads the flags of a client program: --base-url (default
// $OPENAI_BASE_URL), --model (default $OPENAI_MODEL or "bench-model"),
// --runs, --timeout, --cpuprofile, --variant and --result-bytes.
func ParseFlags(name string, args []string) (*Flags, error) {
	f := &Flags{}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&f.BaseURL, "base-url", os.Getenv("OPENAI_BASE_URL"), "API root of the mock, ending in /v1")
	fs.StringVar(&f.Model, "model", envOr("OPENAI_MODEL", "bench-model"), "model name")
	fs.IntVar(&f.Runs, "runs", 1, "runs to do, one after the other")
	fs.DurationVar(&f.Timeout, "timeout", 2*time.Minute, "bound on the whole program")
	fs.StringVar(&f.CPUProfile, "cpuprofile", "", "write a CPU profile of the runs to this file")
	fs.StringVar(&f.Variant, "variant", "", "a variant of the client, if it has some")
	fs.IntVar(&f.ResultBytes, "result-bytes", 0, "size of each tool result (0: the notes, a few hundred bytes)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if f.BaseURL == "" {
		return nil, errors.New("no --base-url and no OPENAI_BASE_URL")
	}
	if f.Runs < 0 {
		return nil, errors.New("--runs must not be negative")
	}
	if f.ResultBytes < 0 || f.ResultBytes > 16<<20 {
		return nil, errors.New("--result-bytes must be between 0 and 16 MiB")
	}
	f.BaseURL = strings.TrimRight(f.BaseURL, "/")
	return f, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// A Summary is the line a client prints when all its runs are done.
type Summary struct {
	// Runs is the number of runs completed.
	Runs int `json:"runs"`
	// AnswerBytes is the length of the final answers, summed over runs.
	AnswerBytes int `json:"answer_bytes"`
}

// RunFunc does one run and returns the final answer.
type RunFunc func(ctx context.Context) (string, error)

// Main is the body of a Go client program: it parses the flags, builds the
// client with setup, does the runs and prints the summary to stdout. It
// returns the process's exit code.
func Main(name string, args []string, stdout, stderr io.Writer, setup func(*Flags) (RunFunc, error)) int {
	f, err := ParseFlags(name, args)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.Timeout)
	defer cancel()
	run, err := setup(f)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	if f.CPUProfile != "" {
		pf, err := os.Create(f.CPUProfile)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 1
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	var s Summary
	for range f.Runs {
		answer, err := run(ctx)
		if err != nil {
			fmt.Fprintf(stderr, "%s: run %d: %v\n", name, s.Runs+1, err)
			return 1
		}
		s.Runs++
		s.AnswerBytes += len(answer)
	}
	b, _ := json.Marshal(s)
	fmt.Fprintf(stdout, "%s\n", b)
	return 0
}
