package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writes counts the writes made to it.
type writes struct {
	bytes.Buffer
	n int
}

func (w *writes) Write(p []byte) (int, error) { w.n++; return w.Buffer.Write(p) }

// installed reports whether c's signal handler is installed (or stopped).
func (c *signalContext) installed() bool { return c.ctx != nil }

// TestRunHelpStartsNoSignalHandler: `hrns run --help` (the bench's
// start-up) and a mistyped flag return without installing the interrupt
// handler; once run's flags are parsed it is installed, before anything
// else of the run.
func TestRunHelpStartsNoSignalHandler(t *testing.T) {
	ctx, stop := SignalContext(syscall.SIGUSR1)
	defer stop()
	c := ctx.(*signalContext)
	for _, args := range [][]string{{"run", "--help"}, {"run", "--no-such-flag"}, {"chat", "-h"}} {
		var out, errw writes
		Run(ctx, args, &IO{In: strings.NewReader(""), Out: &out, Err: &errw, Getenv: func(string) string { return "" }})
		if c.installed() {
			t.Fatalf("hrns %s installed the signal handler", strings.Join(args, " "))
		}
	}
	// A run that gets past its flags (and fails: no provider) installs it.
	var out, errw writes
	Run(ctx, []string{"run", "--config", "/nonexistent/hrns.toml", "hi"}, &IO{In: strings.NewReader(""), Out: &out, Err: &errw, Getenv: func(string) string { return "" }})
	if !c.installed() {
		t.Fatalf("hrns run past its flags did not install the signal handler (stderr %q)", errw.String())
	}
}

// TestSignalContextAsNotifyContext: once installed, SignalContext's
// context is signal.NotifyContext's: a signal cancels it and what was
// derived from it, and deriving starts no goroutine (context.WithCancel
// finds the cancelCtx through Value).
func TestSignalContextAsNotifyContext(t *testing.T) {
	ctx, stop := SignalContext(syscall.SIGUSR1)
	defer stop()
	if ctx.Err() != nil {
		t.Fatalf("Err = %v before any signal", ctx.Err())
	}
	runtime.GC()
	before := runtime.NumGoroutine()
	derived, cancel := context.WithCancel(ctx)
	defer cancel()
	if n := runtime.NumGoroutine(); n != before {
		t.Errorf("context.WithCancel of it started %d goroutines", n-before)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	for _, c := range []context.Context{ctx, derived} {
		select {
		case <-c.Done():
		case <-time.After(30 * time.Second):
			t.Fatal("SIGUSR1 did not cancel the context")
		}
		if !errors.Is(c.Err(), context.Canceled) {
			t.Errorf("Err = %v, want context.Canceled", c.Err())
		}
	}

	// Stopped before it was needed: done, and never installed.
	ctx2, stop2 := SignalContext(syscall.SIGUSR2)
	stop2()
	if !errors.Is(ctx2.Err(), context.Canceled) {
		t.Errorf("stopped: Err = %v, want context.Canceled", ctx2.Err())
	}
}

// TestPrintUsageOneWrite: a command's help is what the flag package's
// PrintDefaults wrote, after the usage line, in one write.
func TestPrintUsageOneWrite(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("model", "gpt", "the `name` of the model")
	fs.Bool("json", false, "JSON lines")
	fs.Int("n", 3, "how many\nat most")
	fs.Duration("timeout", 0, "a timeout")
	var list stringList
	fs.Var(&list, "allow", "a rule (repeatable)")
	var old writes
	fs.SetOutput(&old)
	fmt.Fprintln(&old, "Usage: x [flags]\n\nFlags:")
	fs.PrintDefaults()
	var w writes
	fs.SetOutput(&w)
	printUsage(fs, &w, "Usage: x [flags]")
	if w.String() != old.String() || w.n != 1 {
		t.Errorf("printUsage wrote %q in %d writes; want %q in one", w.String(), w.n, old.String())
	}
	if fs.Output() != &w {
		t.Error("printUsage left the flag set writing elsewhere")
	}

	var out, errw writes
	if code := Run(context.Background(), []string{"run", "--help"}, &IO{Out: &out, Err: &errw}); code != ExitOK {
		t.Fatalf("hrns run --help: exit %d", code)
	}
	if errw.n != 1 || !strings.HasPrefix(errw.String(), "Usage: hrns run [flags] \"PROMPT\"\n\nFlags:\n  -agent string\n") {
		t.Errorf("hrns run --help: %d writes of %.80q…", errw.n, errw.String())
	}
}
