//go:build linux

package codemode_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/codemode"
)

// starlarkGoroutines returns the stacks of this process's goroutines that
// are running the interpreter.
func starlarkGoroutines() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var stuck []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "go.starlark.net/starlark.") {
			stuck = append(stuck, g)
		}
	}
	return stuck
}

// TestStuckBuiltinsDoNotOutliveTheCall (issue 32, finding 5): each program
// makes one built-in work far longer than the program's time limit
// (exponentially, through values that share their elements, or linearly
// over tens of megabytes of text, which the memory limit allows). Starlark checks its cancellation
// only between steps, so before programs had a process of their own the
// call reported "stopped: time limit" while the built-in went on using a
// core of the caller's process, for good. Now the call reports the time
// limit, and by the time it returns the program's interpreter process has
// been killed and reaped (it can use no more CPU, and used at most what
// its limits allow), and no goroutine of this process runs Starlark.
func TestStuckBuiltinsDoNotOutliveTheCall(t *testing.T) {
	// 100⁹ elements reachable through 900 list slots, and 2⁶⁴ leaves
	// through 64 tuples.
	const wide = "a = [0] * 100\nfor i in range(8):\n    a = [a] * 100\n"
	const deep = "t = (0,)\nfor i in range(64):\n    t = (t, t)\n"
	// Text of 70 MB from 15,000 list slots: under the memory limit,
	// seconds to write. (Before, the result's JSON was encoded after the
	// time limit was no longer watched: the call overran it and
	// succeeded.)
	const floats = "x = [0.5] * 1000\ny = [x] * 14000\n"
	tests := []struct{ name, code string }{
		{"equality", wide + "x = a == a[:]"},
		{"comparison", wide + "x = a < a[:]"},
		{"in a list", wide + "x = a in [a[:]]"},
		{"sorted", wide + "x = sorted([a, a[:]])"},
		{"max", wide + "x = max(a, a[:])"},
		{"list.index", wide + "x = [a[:]].index(a)"},
		{"list.remove", wide + "l = [a[:]]\nl.remove(a)"},
		{"dict equality", "d = {'k': 0}\nfor i in range(8):\n    d = {str(j): d for j in range(100)}\nx = d == dict(d)"},
		{"hash of a dict key", deep + "d = {t: 1}"},
		{"hash of a set element", deep + "s = set([t])"},
		{"hash by in", deep + "x = t in {}"},
		{"hash by dict.get", deep + "x = {}.get(t)"},
		{"str", floats + "s = str(y)"},
		{"repr", floats + "s = repr(y)"},
		{"print", floats + "print(y)"},
		{"percent formatting", floats + "s = '%s' % (y,)"},
		{"str.format", floats + "s = '{}'.format(y)"},
		{"the result's JSON", floats + "result = y"},
	}
	const timeout = 200 * time.Millisecond
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			interpreters := codemode.WatchInterpreters(t)
			r := newRunner(t, &codemode.Options{Timeout: timeout})
			_, err := r.Run(t.Context(), tt.code)
			e := asError(t, err)
			if e.Kind != codemode.KindTimeLimit || !strings.Contains(e.Msg, "it exceeded its time limit of 200ms") {
				t.Errorf("error = %q (%s), want the time limit", e, e.Kind)
			}
			if stuck := starlarkGoroutines(); len(stuck) > 0 {
				t.Fatalf("the call returned, and %d goroutines still run the program:\n%s", len(stuck), stuck[0])
			}
			checkInterpretersGone(t, interpreters(), timeout)
		})
	}
}

// checkInterpretersGone checks that each interpreter started ran once, was
// waited for, is gone, and used no more CPU than a program with the time
// limit timeout can: the limit and the grace, times the two threads an
// interpreter runs on, with room for starting on a loaded machine.
func checkInterpretersGone(t *testing.T, seen []codemode.Interpreter, timeout time.Duration) {
	t.Helper()
	if len(seen) != 1 {
		t.Fatalf("%d interpreters started, want 1", len(seen))
	}
	p := seen[0]
	if p.State == nil {
		t.Fatalf("interpreter %d was not waited for before the call returned", p.PID)
	}
	if err := syscall.Kill(p.PID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("interpreter %d: kill 0: %v, want ESRCH", p.PID, err)
	}
	cpu := p.State.UserTime() + p.State.SystemTime()
	if bound := 2 * (timeout + 2*time.Second + 10*time.Second); cpu > bound {
		t.Errorf("interpreter %d used %v of CPU, more than %v", p.PID, cpu, bound)
	}
	t.Logf("interpreter %d: %v, %v of CPU", p.PID, p.State, cpu)
}

// TestStuckProgramCancelled: a caller that gives up on a program stuck in
// a built-in (here at its own deadline, far shorter than the program's
// time limit) gets its answer, and the interpreter is gone by then.
func TestStuckProgramCancelled(t *testing.T) {
	interpreters := codemode.WatchInterpreters(t)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	r := newRunner(t, &codemode.Options{Timeout: time.Hour})
	_, err := r.Run(ctx, "a = [0] * 100\nfor i in range(8):\n    a = [a] * 100\nx = a == a[:]")
	e := asError(t, err)
	if e.Kind != codemode.KindCancelled || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error = %q (%s), want cancelled", e, e.Kind)
	}
	if stuck := starlarkGoroutines(); len(stuck) > 0 {
		t.Fatalf("the call returned, and %d goroutines still run the program:\n%s", len(stuck), stuck[0])
	}
	checkInterpretersGone(t, interpreters(), 300*time.Millisecond)
}

// TestStuckProgramKeepsItsOutput: a program stopped in a stuck built-in is
// reported with what it printed before.
func TestStuckProgramKeepsItsOutput(t *testing.T) {
	interpreters := codemode.WatchInterpreters(t)
	r := newRunner(t, &codemode.Options{Timeout: 200 * time.Millisecond})
	_, err := r.Run(t.Context(), "print('comparing')\na = [0] * 100\nfor i in range(8):\n    a = [a] * 100\nx = a == a[:]")
	e := asError(t, err)
	// Stuck in ==, it has no position; on a loaded machine the limit can
	// also come before, at a step of line 5.
	want := ": it exceeded its time limit of 200ms\nOutput before it stopped:\ncomparing"
	if e.Kind != codemode.KindTimeLimit || !strings.HasPrefix(e.Msg, "the program was stopped") || !strings.HasSuffix(e.Msg, want) || e.Output != "comparing\n" {
		t.Errorf("error = %q (%s, output %q), want it to end with %q", e, e.Kind, e.Output, want)
	}
	checkInterpretersGone(t, interpreters(), 200*time.Millisecond)
}

// TestInterpreterDiesWithItsParent: when the process that runs a program
// dies (hrns serve killed or crashed while a program is stuck in a
// built-in), the interpreter dies too instead of running on as an orphan.
// The test binary is run again as that parent; it reports its
// interpreter's PID and is killed.
func TestInterpreterDiesWithItsParent(t *testing.T) {
	if os.Getenv("CODEMODE_TEST_PARENT") == "1" {
		runStuckParent(t)
		return
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestInterpreterDiesWithItsParent$")
	cmd.Env = append(os.Environ(), "CODEMODE_TEST_PARENT=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	var pid int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "interpreter %d", &pid); err == nil {
			break
		}
	}
	if pid == 0 {
		t.Fatal("the parent reported no interpreter")
	}
	if !alive(pid) {
		t.Fatalf("interpreter %d is not running before its parent is killed", pid)
	}
	cmd.Process.Kill()
	cmd.Wait()
	// The kernel's parent-death signal, or the end of its input, ends
	// it; whoever adopts it reaps it.
	deadline := time.Now().Add(30 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("interpreter %d still runs 30 s after its parent was killed", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || !strings.HasPrefix(s[i+1:], " Z")
}

// runStuckParent runs a stuck program and prints its interpreter's PID;
// it is killed before the program's limit.
func runStuckParent(t *testing.T) {
	codemode.WatchInterpreters(t)
	codemode.OnInterpreterStart(func(pid int) { fmt.Printf("interpreter %d\n", pid) })
	r := newRunner(t, &codemode.Options{Timeout: time.Hour})
	r.Run(t.Context(), "a = [0] * 100\nfor i in range(8):\n    a = [a] * 100\nx = a == a[:]")
	t.Error("the program ended")
}
