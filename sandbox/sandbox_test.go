//go:build linux

package sandbox_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hrns-dev/hrns/sandbox"
)

// TestMain lets the test binary serve as a network client inside the
// sandbox. (The sandbox helper needs nothing here: the package's init
// handles it.)
func TestMain(m *testing.M) {
	isolationHelper()
	descriptorsHelper()
	zygoteAttackHelper()
	if addr := os.Getenv("SANDBOX_TEST_DIAL"); addr != "" {
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			fmt.Println("dial:", err)
			os.Exit(3)
		}
		conn.Close()
		fmt.Println("connected")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// needLandlock skips a test of a rule that only Landlock enforces.
func needLandlock(t *testing.T, min int) {
	t.Helper()
	abi, err := sandbox.Supported()
	if err != nil {
		t.Skipf("the kernel cannot confine: %v", err)
	}
	if abi < min {
		t.Skipf("needs Landlock ABI %d, the kernel has %d", min, abi)
	}
}

func run(t *testing.T, spec *sandbox.Spec) *sandbox.Result {
	t.Helper()
	if spec.Dir == "" {
		spec.Dir = t.TempDir()
	}
	res, err := sandbox.Run(t.Context(), spec)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

// TestWrites: the command writes its Dir, Scratch and ReadWrite paths and
// nothing else.
func TestWrites(t *testing.T) {
	needLandlock(t, 1)
	dir, other, extra := t.TempDir(), t.TempDir(), t.TempDir()
	scratch := filepath.Join(t.TempDir(), "scratch")
	tests := []struct {
		path string
		ok   bool
	}{
		{filepath.Join(dir, "in-dir"), true},
		{filepath.Join(dir, "sub", "nested"), true},
		{filepath.Join(scratch, "in-scratch"), true},
		{filepath.Join(extra, "in-extra"), true},
		{filepath.Join(other, "outside"), false},
		{"/tmp/hrns-sandbox-test-" + strconv.Itoa(os.Getpid()), false},
		{"/etc/hrns-sandbox-test", false},
	}
	var sh strings.Builder
	sh.WriteString("mkdir -p sub\n")
	for _, tt := range tests {
		fmt.Fprintf(&sh, "echo data > %s && echo wrote %s\n", tt.path, tt.path)
	}
	res := run(t, &sandbox.Spec{Shell: sh.String(), Dir: dir, Scratch: scratch, ReadWrite: []string{extra}})
	for _, tt := range tests {
		_, err := os.Stat(tt.path)
		if exists := err == nil; exists != tt.ok {
			t.Errorf("%s: written = %v, want %v", tt.path, exists, tt.ok)
		}
		if wrote := strings.Contains(res.Output, "wrote "+tt.path+"\n"); wrote != tt.ok {
			t.Errorf("%s: command reported writing = %v, want %v", tt.path, wrote, tt.ok)
		}
		if !tt.ok {
			os.Remove(tt.path)
			// Landlock denies it; in the isolated root, the path is
			// not there or not writable.
			denied := false
			for _, why := range []string{"Permission denied", "Directory nonexistent", "Read-only file system"} {
				denied = denied || strings.Contains(res.Output, "cannot create "+tt.path+": "+why)
			}
			if !denied {
				t.Errorf("output lacks the denial of %s:\n%s", tt.path, res.Output)
			}
		}
	}
	if !res.Confinement.Confined {
		t.Errorf("not confined: %s", res.Confinement.Summary())
	}
}

// TestReads: a file in a directory that was not granted cannot be read,
// nor /etc/shadow, /dev or a disk; granted files and the usual system files
// can.
func TestReads(t *testing.T) {
	needLandlock(t, 1)
	secretDir, shared := t.TempDir(), t.TempDir()
	secret := filepath.Join(secretDir, "secret.txt")
	public := filepath.Join(shared, "public.txt")
	os.WriteFile(secret, []byte("TOP-SECRET"), 0o644)
	os.WriteFile(public, []byte("PUBLIC"), 0o644)
	// A block device, which root could read without a capability if
	// /dev were granted.
	disk := ""
	for _, d := range []string{"/dev/loop0", "/dev/sda", "/dev/vda", "/dev/nvme0n1"} {
		if _, err := os.Stat(d); err == nil {
			disk = d
			break
		}
	}
	sh := fmt.Sprintf("cat %s; cat %s; cat /etc/shadow; ls %s; echo; cat /etc/passwd | head -c 4; echo; "+
		"head -c 4 /dev/urandom | wc -c; ls /dev", secret, public, secretDir)
	if disk != "" {
		sh += "; head -c 1 " + disk
	}
	res := run(t, &sandbox.Spec{Shell: sh, ReadOnly: []string{public}})
	// Landlock denies; the isolated root does not hold what was not
	// granted, and Landlock still denies listing /dev there.
	want := fmt.Sprintf("cat: %s: Permission denied\nPUBLICcat: /etc/shadow: Permission denied\n"+
		"ls: cannot open directory '%s': Permission denied\n\nroot\n4\n"+
		"ls: cannot open directory '/dev': Permission denied\n",
		secret, secretDir)
	disk1 := "head: cannot open '" + disk + "' for reading: Permission denied\n"
	if res.Confinement.Isolated {
		want = fmt.Sprintf("cat: %s: No such file or directory\nPUBLICcat: /etc/shadow: No such file or directory\n"+
			"ls: cannot access '%s': No such file or directory\n\nroot\n4\n"+
			"ls: cannot open directory '/dev': Permission denied\n",
			secret, secretDir)
		disk1 = "head: cannot open '" + disk + "' for reading: No such file or directory\n"
	}
	if disk != "" {
		want += disk1
	}
	if diff := cmp.Diff(want, res.Output); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

// TestEnvironment: the command sees only the environment it was given:
// not this process's (where a secret is), not through /proc either.
func TestEnvironment(t *testing.T) {
	t.Setenv("HRNS_TEST_SECRET", "hunter2")
	scratch := filepath.Join(t.TempDir(), "tmp")
	res := run(t, &sandbox.Spec{
		Shell:   "env | sort; cat /proc/$PPID/environ",
		Env:     []string{"GREETING=hello"},
		Scratch: scratch,
	})
	if strings.Contains(res.Output, "hunter2") {
		t.Fatalf("the secret leaked:\n%s", res.Output)
	}
	lines := strings.Split(res.Output, "\n")
	var env []string
	for _, l := range lines {
		if strings.Contains(l, "=") && !strings.HasPrefix(l, "PWD=") {
			env = append(env, l)
		}
	}
	want := []string{"GREETING=hello", "PATH=" + sandbox.DefaultPath, "TMPDIR=" + scratch}
	if diff := cmp.Diff(want, env); diff != "" {
		t.Errorf("environment (-want +got):\n%s", diff)
	}
	if abi, err := sandbox.Supported(); err == nil && abi >= 1 && !strings.Contains(res.Output, "environ: Permission denied") {
		t.Errorf("the parent's /proc environ was readable:\n%s", res.Output)
	}
}

// TestNetwork: a connection to a loopback listener of this process fails
// when the network is denied, by the namespace and by Landlock's TCP rule
// each on its own, and succeeds when it is allowed.
func TestNetwork(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dial := func(t *testing.T, allow bool) *sandbox.Result {
		return run(t, &sandbox.Spec{
			Command:      []string{exe},
			Env:          []string{"SANDBOX_TEST_DIAL=" + ln.Addr().String()},
			ReadOnly:     []string{exe},
			AllowNetwork: allow,
		})
	}
	t.Run("allowed", func(t *testing.T) {
		res := dial(t, true)
		if res.ExitCode != 0 || res.Output != "connected\n" || res.Confinement.Network != "allowed" {
			t.Errorf("exit %d, network %q, output %q; want a connection", res.ExitCode, res.Confinement.Network, res.Output)
		}
	})
	t.Run("denied", func(t *testing.T) {
		res := dial(t, false)
		if res.ExitCode != 3 || !strings.HasPrefix(res.Output, "dial: ") {
			t.Errorf("exit %d, output %q; want a refused dial", res.ExitCode, res.Output)
		}
		if res.Confinement.Network == "none" || res.Confinement.Network == "allowed" {
			t.Errorf("network = %q", res.Confinement.Network)
		}
		t.Logf("denied by %s: %s", res.Confinement.Network, res.Output)
	})
	t.Run("landlock alone", func(t *testing.T) {
		needLandlock(t, 4)
		sandbox.SetNoNetns(true)
		defer sandbox.SetNoNetns(false)
		res := dial(t, false)
		if res.Confinement.Network != "landlock-tcp" {
			t.Fatalf("network = %q, want landlock-tcp", res.Confinement.Network)
		}
		if res.ExitCode != 3 || !strings.Contains(res.Output, "permission denied") {
			t.Errorf("exit %d, output %q; want a dial refused by Landlock", res.ExitCode, res.Output)
		}
	})
}

// TestIgnoredSIGTERM: at the timeout the process group gets SIGTERM, and a
// command that ignores it is killed after the grace period.
func TestIgnoredSIGTERM(t *testing.T) {
	res := run(t, &sandbox.Spec{
		Shell:   "trap '' TERM; echo ready; sleep 1000; echo survived",
		Timeout: 200 * time.Millisecond,
		Grace:   200 * time.Millisecond,
	})
	if !res.TimedOut || res.Signal != "killed" || res.ExitCode != -1 {
		t.Errorf("timed out %v, signal %q, exit %d; want killed at the timeout", res.TimedOut, res.Signal, res.ExitCode)
	}
	if res.Output != "ready\n" {
		t.Errorf("output = %q", res.Output)
	}
}

// TestRunawayLoop: a busy loop is stopped by the CPU limit, or by the
// timeout when there is none.
func TestRunawayLoop(t *testing.T) {
	t.Run("cpu limit", func(t *testing.T) {
		res := run(t, &sandbox.Spec{Shell: "while :; do :; done", Limits: sandbox.Limits{CPUTime: time.Second}})
		if res.TimedOut || res.Signal != "CPU time limit exceeded" {
			t.Errorf("timed out %v, signal %q; want SIGXCPU", res.TimedOut, res.Signal)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		res := run(t, &sandbox.Spec{Shell: "while :; do :; done", Timeout: 100 * time.Millisecond})
		if !res.TimedOut || res.Signal != "terminated" {
			t.Errorf("timed out %v, signal %q; want SIGTERM at the timeout", res.TimedOut, res.Signal)
		}
	})
}

// TestForkBomb: a fork bomb hits the process limit, and every process it
// made is gone when Run returns.
func TestForkBomb(t *testing.T) {
	dir := t.TempDir()
	res := run(t, &sandbox.Spec{
		Shell:   "bomb() { bomb & bomb & wait; }; bomb",
		Dir:     dir,
		Limits:  sandbox.Limits{Processes: 32},
		Timeout: 2 * time.Second,
	})
	if res.Confinement.Processes != "cgroup" {
		t.Skipf("no pids cgroup here (%s): the fork bomb would be stopped by the timeout alone", res.Confinement.Summary())
	}
	if !strings.Contains(res.Output, "Cannot fork") {
		t.Errorf("the bomb never hit the limit; output:\n%.500s", res.Output)
	}
	t.Logf("exit %d, signal %q, timed out %v, %d bytes of output", res.ExitCode, res.Signal, res.TimedOut, res.OutputBytes)
}

// TestBackgroundProcessesKilled: a process left in the background, one
// that even ignores SIGTERM, does not outlive the command.
func TestBackgroundProcessesKilled(t *testing.T) {
	for _, limits := range []sandbox.Limits{{}, {Processes: 16}} {
		t.Run(fmt.Sprintf("processes=%d", limits.Processes), func(t *testing.T) {
			dir := t.TempDir()
			// The process is found by its command line, while the
			// command runs: its pid inside the sandbox is not its
			// pid here.
			naps := fmt.Sprintf("%d.%d", 1000+os.Getpid(), time.Now().UnixNano()%1000000)
			var pid string
			out := writerFunc(func(p []byte) {
				if strings.Contains(string(p), "started") {
					pid = findProcess(t, "sleep\x00"+naps+"\x00")
				}
			})
			res := run(t, &sandbox.Spec{
				Shell:  "sh -c 'trap \"\" TERM; echo $$ > pid; exec sleep " + naps + "' & while [ ! -s pid ]; do :; done; sleep 0.2; echo started; sleep 0.2",
				Dir:    dir,
				Limits: limits,
				Output: out,
			})
			if res.ExitCode != 0 {
				t.Fatalf("exit %d", res.ExitCode)
			}
			if pid == "" {
				t.Fatal("the background process was not found while the command ran")
			}
			if !gone(pid) {
				t.Errorf("background process %s is still running", pid)
			}
		})
	}
}

// writerFunc is an io.Writer calling a function.
type writerFunc func(p []byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

// findProcess returns the pid of a process whose command line is cmdline
// (its arguments joined by NULs), or "" if there is none.
func findProcess(t *testing.T, cmdline string) string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && string(b) == cmdline {
			return e.Name()
		}
	}
	return ""
}

// gone reports whether a process has exited (or is a zombie), polling
// briefly: SIGKILL is delivered asynchronously.
func gone(pid string) bool {
	for range 500 {
		b, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			return true
		}
		if _, rest, ok := strings.Cut(string(b), ") "); ok && strings.HasPrefix(rest, "Z") {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// TestOutputCapped: long output keeps its head and tail, and says how much
// was elided.
func TestOutputCapped(t *testing.T) {
	res := run(t, &sandbox.Spec{Shell: "i=0; while [ $i -lt 2000 ]; do echo line $i; i=$((i+1)); done", MaxOutput: 100})
	if res.OutputBytes != 18890 {
		t.Errorf("OutputBytes = %d, want 18890", res.OutputBytes)
	}
	want := "line 0\nline 1\nline 2\nline 3\nline 4\nline 5\nline 6\nl\n[... 18790 bytes elided ...]\nline 1995\nline 1996\nline 1997\nline 1998\nline 1999\n"
	if diff := cmp.Diff(want, res.Output); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

// TestFileSizeLimit: writing past the file size limit is stopped.
func TestFileSizeLimit(t *testing.T) {
	dir := t.TempDir()
	res := run(t, &sandbox.Spec{
		Command: []string{"dd", "if=/dev/zero", "of=big", "bs=1024", "count=2048"},
		Dir:     dir,
		Limits:  sandbox.Limits{FileSize: 1 << 20},
	})
	if res.Signal != "file size limit exceeded" {
		t.Errorf("signal %q, exit %d; want SIGXFSZ", res.Signal, res.ExitCode)
	}
	if fi, err := os.Stat(filepath.Join(dir, "big")); err != nil || fi.Size() > 1<<20 {
		t.Errorf("big: %v, %v", fi, err)
	}
}

// TestAddressSpaceLimit: an allocation past the address-space limit fails.
func TestAddressSpaceLimit(t *testing.T) {
	res := run(t, &sandbox.Spec{
		Command: []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=400M", "count=1"},
		Limits:  sandbox.Limits{AddressSpace: 200 << 20},
	})
	if res.ExitCode == 0 || !strings.Contains(res.Output, "memory exhausted") {
		t.Errorf("exit %d, output %q; want dd out of memory", res.ExitCode, res.Output)
	}
}

// TestRootCapabilitiesDropped: a command run by root has no capabilities.
func TestRootCapabilitiesDropped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: there are no capabilities to drop")
	}
	res := run(t, &sandbox.Spec{Shell: "grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status; kill -0 $PPID && echo signalled the parent"})
	want := "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\n"
	if abi, _ := sandbox.Supported(); abi >= 6 {
		// Landlock's signal scoping: the parent is outside the sandbox.
		want += "/bin/sh: 1: kill: Operation not permitted\n\n" // dash prints the blank line
	}
	if diff := cmp.Diff(want, res.Output); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

// TestStdinAndExit: standard input reaches the command and its exit code
// comes back.
func TestStdinAndExit(t *testing.T) {
	res := run(t, &sandbox.Spec{Shell: "tr a-z A-Z; exit 7", Stdin: strings.NewReader("hello\n")})
	if res.ExitCode != 7 || res.Output != "HELLO\n" || res.Signal != "" || res.TimedOut {
		t.Errorf("got %+v", res)
	}
}

// TestUnconfined: turning confinement off is explicit and reported.
func TestUnconfined(t *testing.T) {
	other := t.TempDir()
	res := run(t, &sandbox.Spec{Shell: "echo x > " + filepath.Join(other, "f"), Unconfined: true})
	if res.ExitCode != 0 {
		t.Errorf("exit %d: %s", res.ExitCode, res.Output)
	}
	c := res.Confinement
	if c.Confined || c.Network != "allowed" && c.Network != "none" {
		t.Errorf("confinement = %+v", c)
	}
	if !strings.HasPrefix(c.Summary(), "NOT confined") || !strings.Contains(c.Summary(), "confinement was turned off") {
		t.Errorf("summary = %q", c.Summary())
	}
}

// TestErrors: specs that cannot run are errors, and nothing runs.
func TestErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		spec *sandbox.Spec
		want error
		msg  string
	}{
		{"nil", nil, sandbox.ErrInvalidSpec, "sandbox: invalid spec: nil spec"},
		{"no command", &sandbox.Spec{Dir: dir}, sandbox.ErrInvalidSpec, "sandbox: invalid spec: no Command or Shell"},
		{"both", &sandbox.Spec{Dir: dir, Shell: "true", Command: []string{"true"}}, sandbox.ErrInvalidSpec, "sandbox: invalid spec: both Command and Shell are set"},
		{"no dir", &sandbox.Spec{Shell: "true"}, sandbox.ErrInvalidSpec, "sandbox: invalid spec: no Dir"},
		{"missing dir", &sandbox.Spec{Shell: "true", Dir: filepath.Join(dir, "nope")}, sandbox.ErrInvalidSpec, "sandbox: invalid spec: Dir " + filepath.Join(dir, "nope") + " is not a directory"},
		{"not found", &sandbox.Spec{Command: []string{"no-such-command"}, Dir: dir}, sandbox.ErrStart,
			"sandbox: cannot start the command: no-such-command: command not found in PATH " + sandbox.DefaultPath},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := sandbox.Run(t.Context(), tt.spec)
			if !errors.Is(err, tt.want) || err.Error() != tt.msg {
				t.Errorf("Run = %v, %v; want %q", res, err, tt.msg)
			}
		})
	}
}

// TestSupported: the kernel's Landlock ABI is reported, and runs report
// it too.
func TestSupported(t *testing.T) {
	abi, err := sandbox.Supported()
	if err != nil {
		t.Skipf("no Landlock: %v", err)
	}
	res := run(t, &sandbox.Spec{Shell: "true"})
	if !res.Confinement.Confined || res.Confinement.ABI != abi {
		t.Errorf("confinement %+v, Supported() = %d", res.Confinement, abi)
	}
	t.Logf("Landlock ABI %d; %s", abi, res.Confinement.Summary())
}

// TestOutputWriter: with Output set, the output goes there as it comes,
// and is counted.
func TestOutputWriter(t *testing.T) {
	var b strings.Builder
	res := run(t, &sandbox.Spec{Shell: "echo one; echo two >&2", Output: &b, MaxOutput: 3})
	if b.String() != "one\ntwo\n" || res.Output != "" || res.OutputBytes != 8 {
		t.Errorf("written %q, Output %q, OutputBytes %d", b.String(), res.Output, res.OutputBytes)
	}
}

// TestWaitDelay: after the command exits, a background process holding the
// output may still write for WaitDelay; then it is killed, and the result
// says so. One that finishes in time is not reported.
func TestWaitDelay(t *testing.T) {
	res := run(t, &sandbox.Spec{Shell: "(sleep 0.1; echo late) & echo now", WaitDelay: 5 * time.Second})
	if res.Output != "now\nlate\n" || res.OutputHeld || res.ExitCode != 0 {
		t.Errorf("output %q, held %v, exit %d; want the late line", res.Output, res.OutputHeld, res.ExitCode)
	}
	start := time.Now()
	res = run(t, &sandbox.Spec{Shell: "sleep 1000 & echo now", WaitDelay: 200 * time.Millisecond})
	if res.Output != "now\n" || !res.OutputHeld || res.ExitCode != 0 {
		t.Errorf("output %q, held %v, exit %d; want the holder killed", res.Output, res.OutputHeld, res.ExitCode)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
	res = run(t, &sandbox.Spec{Shell: "sleep 1000 >/dev/null 2>&1 & echo now", WaitDelay: 5 * time.Second})
	if res.OutputHeld || res.Duration > 4*time.Second {
		t.Errorf("held %v after %v for a background process that does not hold the output", res.OutputHeld, res.Duration)
	}
}

// TestSignalNumber: a command killed by a signal reports its name and
// number.
func TestSignalNumber(t *testing.T) {
	res := run(t, &sandbox.Spec{Shell: "kill -TERM $$"})
	if res.ExitCode != -1 || res.Signal != "terminated" || res.SignalNumber != 15 {
		t.Errorf("exit %d, signal %q (%d); want SIGTERM", res.ExitCode, res.Signal, res.SignalNumber)
	}
}
