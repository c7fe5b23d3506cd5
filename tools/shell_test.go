//go:build unix

package tools_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/tools"
)

func newShell(t *testing.T, opts *tools.ShellOptions) (*loop.Toolset, string) {
	t.Helper()
	dir := t.TempDir()
	ts, err := tools.Shell(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return ts, dir
}

// run runs command with run_command. Where commands cannot be sandboxed
// (not Linux, no Landlock), or not isolated (no PID and mount namespaces),
// the first result of a toolset ends with a note saying so; run drops it, so that what the tests compare is the same
// everywhere (TestUnconfinedNote checks the note).
func run(t *testing.T, ctx context.Context, ts *loop.Toolset, command string, timeout int) result {
	t.Helper()
	args := map[string]any{"command": command}
	if timeout > 0 {
		args["timeout_seconds"] = timeout
	}
	r := callTool(t, ctx, ts, "run_command", args)
	for _, note := range []string{"\nnote: commands are not sandboxed here: ", "\nnote: commands are sandboxed but not isolated here: "} {
		if i := strings.LastIndex(r.text, note); i >= 0 {
			r.text = r.text[:i]
		}
	}
	return r
}

func TestRunCommand(t *testing.T) {
	ts, dir := newShell(t, nil)
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		command string
		want    string
		isError bool
	}{
		{"success", "echo hello", "hello\n[exit code: 0]", false},
		{"stderr is combined", "echo out; echo err >&2; echo out2", "out\nerr\nout2\n[exit code: 0]", false},
		{"failure keeps its output", "echo 'it broke' >&2; exit 3", "it broke\n[exit code: 3]", true},
		{"no output", "true", "(no output)\n[exit code: 0]", false},
		{"no final newline", "printf abc", "abc\n[exit code: 0]", false},
		{"working directory", "pwd", real + "\n[exit code: 0]", false},
		{"no standard input", "cat; echo done", "done\n[exit code: 0]", false},
		{"killed by a signal", "kill -TERM $$", "(no output)\n[exit code: 143 (killed by signal 15: terminated)]", true},
		{"command not found", "no-such-command-hrns", "not found", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, t.Context(), ts, tt.command, 0)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if !strings.Contains(r.text, tt.want) || r.isError != tt.isError {
				t.Errorf("got %q (error %v), want %q (error %v)", r.text, r.isError, tt.want, tt.isError)
			}
		})
	}
	if r := run(t, t.Context(), ts, "  ", 0); r.err == nil {
		t.Errorf("an empty command ran: %v", r)
	}
}

func TestRunCommandEnv(t *testing.T) {
	t.Setenv("HRNS_TEST_SECRET", "s3cret")
	ts, _ := newShell(t, nil)
	r := run(t, t.Context(), ts, `echo "[$HRNS_TEST_SECRET]"; echo "$TERM"; command -v sh >/dev/null && echo has-path`, 0)
	if r.failed() || r.text != "[]\ndumb\nhas-path\n[exit code: 0]" {
		t.Errorf("default environment: %v", r)
	}
	ts, _ = newShell(t, &tools.ShellOptions{Env: []string{"FOO=bar", "PATH=" + os.Getenv("PATH")}})
	r = run(t, t.Context(), ts, `echo "$FOO [$HRNS_TEST_SECRET] [$HOME]"`, 0)
	if r.failed() || r.text != "bar [] []\n[exit code: 0]" {
		t.Errorf("explicit environment: %v", r)
	}
}

func TestRunCommandOutputCap(t *testing.T) {
	ts, _ := newShell(t, &tools.ShellOptions{MaxOutput: 100})
	// 1000 numbered lines; only the first and last few survive.
	r := run(t, t.Context(), ts, `i=1; while [ $i -le 1000 ]; do echo "line $i"; i=$((i+1)); done; exit 2`, 0)
	if r.err != nil || !r.isError {
		t.Fatalf("got %v", r)
	}
	for _, want := range []string{"line 1\nline 2\n", "line 1000\n", "bytes of output omitted", "[... 8793 bytes of output omitted ...]", "[exit code: 2]"} {
		if !strings.Contains(r.text, want) {
			t.Errorf("output lacks %q:\n%s", want, r.text)
		}
	}
	if strings.Contains(r.text, "line 500\n") {
		t.Errorf("the middle was kept:\n%s", r.text)
	}
}

// alive reports whether the process pid exists and is not a zombie.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !os.IsNotExist(err)
	}
	// The state follows the parenthesised command name.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// waitGone waits for pid to disappear. SIGKILL is sent before the tool
// returns; the process dies as soon as the kernel delivers it, so the wait
// is short, but not instantaneous. The bound only keeps a broken kill from
// hanging the test.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for range 1000 {
		if !alive(pid) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	t.Fatalf("process %d is still running", pid)
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// A sleeper is a background process a test's command starts, found from
// outside by its unique command line: the pid the command sees is not its
// pid here when the command runs in a PID namespace.
type sleeper struct {
	arg   string // the argument of sleep: unique
	found chan int
	stop  chan struct{}
}

// watchSleeper starts looking for the process of the command "sleep
// s.arg", which the command under test starts. Where there is no /proc to
// search, pidFile (in the workdir) is read instead.
func watchSleeper(t *testing.T) *sleeper {
	t.Helper()
	s := &sleeper{
		arg:   fmt.Sprintf("%d.%06d", 100+os.Getpid()%100, time.Now().UnixNano()%1000000),
		found: make(chan int, 1),
		stop:  make(chan struct{}),
	}
	want := "sleep\x00" + s.arg + "\x00"
	go func() {
		for {
			entries, _ := os.ReadDir("/proc")
			for _, e := range entries {
				if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && string(b) == want {
					if pid, err := strconv.Atoi(e.Name()); err == nil {
						s.found <- pid
						return
					}
				}
			}
			select {
			case <-s.stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { close(s.stop) })
	return s
}

// pid returns the process found while the command ran; the pid file,
// where there is no /proc.
func (s *sleeper) pid(t *testing.T, pidFile string) int {
	t.Helper()
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		return readPID(t, pidFile)
	}
	select {
	case pid := <-s.found:
		return pid
	case <-time.After(time.Second):
		t.Fatalf("the process of sleep %s was not seen while the command ran", s.arg)
		return 0
	}
}

func TestRunCommandTimeoutKillsProcessGroup(t *testing.T) {
	ts, dir := newShell(t, nil)
	bg := watchSleeper(t)
	r := run(t, t.Context(), ts, `echo started; sleep `+bg.arg+` & echo $! > bg.pid; sleep 100`, 1)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !r.isError || !strings.Contains(r.text, "started\n") || !strings.Contains(r.text, "timed out after 1s and was killed with its process group") {
		t.Errorf("got %q", r.text)
	}
	waitGone(t, bg.pid(t, filepath.Join(dir, "bg.pid")))
}

func TestRunCommandKillsLeftoverProcesses(t *testing.T) {
	ts, dir := newShell(t, nil)
	quiet, loud := watchSleeper(t), watchSleeper(t)
	// The shell exits (soon), leaving a child that does not hold the
	// output open, and one that does.
	r := run(t, t.Context(), ts, `sleep `+quiet.arg+` >/dev/null 2>&1 & echo $! > quiet.pid; sleep `+loud.arg+` & echo $! > loud.pid; sleep 0.3; echo done`, 0)
	if r.failed() || !strings.Contains(r.text, "done\n") || !strings.Contains(r.text, "[exit code: 0; background processes that kept the output open were killed]") {
		t.Errorf("got %v", r)
	}
	waitGone(t, quiet.pid(t, filepath.Join(dir, "quiet.pid")))
	waitGone(t, loud.pid(t, filepath.Join(dir, "loud.pid")))
}

func TestRunCommandTimeoutCap(t *testing.T) {
	ts, _ := newShell(t, &tools.ShellOptions{MaxTimeout: time.Second})
	r := run(t, t.Context(), ts, `sleep 100`, 3600)
	if r.err != nil || !strings.Contains(r.text, "timed out after 1s") {
		t.Errorf("got %v", r)
	}
}

func TestRunCommandCancelled(t *testing.T) {
	ts, dir := newShell(t, nil)
	bg := watchSleeper(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan result, 1)
	go func() { done <- run(t, ctx, ts, `sleep `+bg.arg+` & echo $! > bg.pid; wait`, 0) }()
	pidFile := filepath.Join(dir, "bg.pid")
	for { // wait until the command has started its child
		if b, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(b), "\n") {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	pid := bg.pid(t, pidFile)
	cancel()
	r := <-done
	if r.err != nil || !strings.Contains(r.text, "interrupted") {
		t.Errorf("got %v", r)
	}
	waitGone(t, pid)
}

func TestShellFlags(t *testing.T) {
	ts, _ := newShell(t, nil)
	def, _ := ts.Lookup("run_command")
	if !def.RequiresApproval || def.Concurrent {
		t.Errorf("RequiresApproval %v Concurrent %v", def.RequiresApproval, def.Concurrent)
	}
	if def.Timeout <= 10*time.Minute {
		t.Errorf("tool timeout %v does not leave room for the command's own", def.Timeout)
	}
	ts, _ = newShell(t, &tools.ShellOptions{SkipApproval: true})
	if def, _ := ts.Lookup("run_command"); def.RequiresApproval {
		t.Error("RequiresApproval with SkipApproval")
	}
	if _, err := tools.Shell(filepath.Join(t.TempDir(), "missing"), nil); err == nil {
		t.Error("Shell on a missing directory succeeded")
	}
}

// TestUnconfinedNote: with Unconfined, commands run as plain processes,
// and the first result of the toolset, only the first, says so; the
// description does not promise a sandbox.
func TestUnconfinedNote(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	ts, err := tools.Shell(dir, &tools.ShellOptions{Unconfined: true})
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(other, "written")
	first := callTool(t, t.Context(), ts, "run_command", map[string]any{"command": "echo hi > " + outside + "; echo done"})
	want := "done\n[exit code: 0]\nnote: commands are not sandboxed here: confinement was turned off (ShellOptions.Unconfined)"
	if first.failed() || first.text != want {
		t.Errorf("first result %q, want %q", first, want)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("an unconfined command could not write outside the root: %v", err)
	}
	second := callTool(t, t.Context(), ts, "run_command", map[string]any{"command": "echo again"})
	if second.failed() || second.text != "again\n[exit code: 0]" {
		t.Errorf("second result %q: the note is given once", second)
	}
	def, _ := ts.Lookup("run_command")
	if strings.Contains(def.Description, "sandbox") {
		t.Errorf("the description of an unconfined run_command mentions a sandbox: %s", def.Description)
	}
}

// TestSandboxDescription: unless Unconfined, the description says what a
// command may reach where it is sandboxed (whether this machine can
// sandbox or not: descriptions do not depend on the machine).
func TestSandboxDescription(t *testing.T) {
	ts, _ := newShell(t, nil)
	def, _ := ts.Lookup("run_command")
	if !strings.Contains(def.Description, "it can write only in the working directory, in $HOME (a home of this working directory's own, where toolchain caches live) and in $TMPDIR") {
		t.Errorf("description: %s", def.Description)
	}
}
