//go:build linux

package tools_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/sandbox"
	"github.com/hrns-dev/hrns/tools"
)

// TestMain lets the test binary serve as a network client inside the
// sandbox. (The sandbox's helper needs nothing here: the sandbox package's
// init handles it.)
func TestMain(m *testing.M) {
	ttyHelper()
	if addr := os.Getenv("TOOLS_TEST_DIAL"); addr != "" {
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			fmt.Println("dial:", err)
			os.Exit(3)
		}
		conn.Close()
		fmt.Println("connected")
		os.Exit(0)
	}
	// Sandboxed commands get a home under the user's cache directory:
	// the tests' go to a temporary one.
	cache, err := os.MkdirTemp("", "tools-test-cache-")
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	os.Setenv("XDG_CACHE_HOME", cache)
	code := m.Run()
	makeWritable(cache)
	os.RemoveAll(cache)
	os.Exit(code)
}

// makeWritable makes the tree at root writable by its owner, so that it can
// be removed: the Go module cache's files are read-only.
func makeWritable(root string) {
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
}

// needLandlock skips a test of a rule only Landlock enforces.
func needLandlock(t *testing.T) {
	t.Helper()
	if _, err := sandbox.Supported(); err != nil {
		t.Skipf("the kernel cannot confine: %v", err)
	}
}

// sandboxed returns a run_command toolset on a new root, failing if its
// commands are not sandboxed.
func sandboxed(t *testing.T, opts *tools.ShellOptions) (*loop.Toolset, string) {
	t.Helper()
	needLandlock(t)
	ts, dir := newShell(t, opts)
	r := callTool(t, t.Context(), ts, "run_command", map[string]any{"command": "true"})
	if r.failed() || strings.Contains(r.text, "not sandboxed") {
		t.Fatalf("commands are not sandboxed: %v", r)
	}
	return ts, dir
}

// TestSandboxWrites: a command writes its root (new directories too) and
// its TMPDIR, not this process's, and nothing outside them: not another
// temporary directory, not /tmp.
func TestSandboxWrites(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir()) // the default environment passes it on
	ts, dir := sandboxed(t, nil)
	other := t.TempDir()
	outside := filepath.Join(other, "outside")
	inTmp := "/tmp/hrns-tools-test-" + fmt.Sprint(os.Getpid())
	r := run(t, t.Context(), ts, "mkdir -p sub && echo in > sub/in.txt && echo ok-root; "+
		"echo tmp > \"$TMPDIR/t\" && echo ok-tmpdir; echo \"TMPDIR=$TMPDIR\"; "+
		"echo out > "+outside+" || echo refused-other; echo out > "+inTmp+" || echo refused-tmp", 0)
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, want := range []string{"ok-root\n", "ok-tmpdir\n", "refused-other\n", "refused-tmp\n"} {
		if !strings.Contains(r.text, want) {
			t.Errorf("output lacks %q:\n%s", want, r.text)
		}
	}
	// Landlock denies it; in the sandbox's own root, it is not there.
	if !denied(r.text, "cannot create "+outside) {
		t.Errorf("output lacks the denial of %s:\n%s", outside, r.text)
	}
	if got := readTestFile(t, filepath.Join(dir, "sub", "in.txt")); got != "in\n" {
		t.Errorf("sub/in.txt = %q", got)
	}
	for _, p := range []string{outside, inTmp} {
		if _, err := os.Stat(p); err == nil {
			os.Remove(p)
			t.Errorf("%s was written", p)
		}
	}
	// TMPDIR is a scratch directory of the command: empty after it (a
	// sandbox helper kept for the next command keeps it), or gone.
	_, tmpdir, _ := strings.Cut(r.text, "TMPDIR=")
	tmpdir, _, _ = strings.Cut(tmpdir, "\n")
	if tmpdir == "" || tmpdir == os.Getenv("TMPDIR") || strings.HasPrefix(tmpdir, dir) {
		t.Errorf("TMPDIR = %q", tmpdir)
	} else if entries, err := os.ReadDir(tmpdir); err == nil && len(entries) > 0 {
		t.Errorf("the scratch directory %s kept %v after the command", tmpdir, entries)
	}
}

// TestSandboxReads: a command cannot read a file in another temporary
// directory, nor list it; with ReadOnly it can read it but not write it.
func TestSandboxReads(t *testing.T) {
	other := t.TempDir()
	secret := filepath.Join(other, "secret.txt")
	if err := os.WriteFile(secret, []byte("TOP-SECRET\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ts, _ := sandboxed(t, nil)
	r := run(t, t.Context(), ts, "cat "+secret+"; ls "+other, 0)
	if r.err != nil || !r.isError || strings.Contains(r.text, "TOP-SECRET") || strings.Contains(r.text, "secret.txt\n") {
		t.Errorf("the other directory was readable: %v", r)
	}
	if !denied(r.text, "cat: "+secret) {
		t.Errorf("output lacks the denial of %s:\n%s", secret, r.text)
	}

	ts, _ = sandboxed(t, &tools.ShellOptions{ReadOnly: []string{other}})
	r = run(t, t.Context(), ts, "cat "+secret+"; echo x >> "+secret+" || echo refused", 0)
	if r.err != nil || !strings.HasPrefix(r.text, "TOP-SECRET\n") || !denied(r.text, "cannot create "+secret) || !strings.HasSuffix(r.text, "refused\n[exit code: 0]") {
		t.Errorf("with ReadOnly: %v", r)
	}
}

// denied reports whether out says that what was refused: Landlock says
// "Permission denied"; the sandbox's own root, where a path not granted
// is not there, or is read-only, says so.
func denied(out, what string) bool {
	for _, why := range []string{"Permission denied", "No such file or directory", "Directory nonexistent", "Read-only file system"} {
		if strings.Contains(out, what+": "+why) {
			return true
		}
	}
	return false
}

// TestSandboxEnvironment: a secret in this process's environment reaches a
// command neither through its environment nor through the /proc files of
// this process, its parent.
func TestSandboxEnvironment(t *testing.T) {
	t.Setenv("HRNS_TEST_SECRET", "s3cret-value")
	for _, opts := range []*tools.ShellOptions{nil, {Env: []string{"PATH=" + os.Getenv("PATH")}}} {
		ts, _ := sandboxed(t, opts)
		r := run(t, t.Context(), ts, `echo "[$HRNS_TEST_SECRET]"; env; tr '\0' '\n' < /proc/$PPID/environ; cat /proc/$PPID/cmdline >/dev/null && echo cmdline-readable`, 0)
		if r.err != nil || strings.Contains(r.text, "s3cret-value") {
			t.Fatalf("the secret leaked: %v", r)
		}
		if !strings.Contains(r.text, "[]\n") || !strings.Contains(r.text, "environ: Permission denied") {
			t.Errorf("output:\n%s", r.text)
		}
	}
}

// TestSandboxNetwork: the network is allowed by default, and denied with
// DenyNetwork: a connection to a listener of this process fails.
func TestSandboxNetwork(t *testing.T) {
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
	dial := "TOOLS_TEST_DIAL=" + ln.Addr().String() + " " + exe
	t.Run("allowed", func(t *testing.T) {
		ts, _ := sandboxed(t, &tools.ShellOptions{ReadOnly: []string{exe}})
		if r := run(t, t.Context(), ts, dial, 0); r.failed() || r.text != "connected\n[exit code: 0]" {
			t.Errorf("got %v", r)
		}
	})
	t.Run("denied", func(t *testing.T) {
		ts, _ := sandboxed(t, &tools.ShellOptions{ReadOnly: []string{exe}, DenyNetwork: true})
		if r := run(t, t.Context(), ts, dial, 0); r.err != nil || !r.isError || !strings.HasPrefix(r.text, "dial: ") || !strings.HasSuffix(r.text, "[exit code: 3]") {
			t.Errorf("got %v", r)
		}
		def, _ := ts.Lookup("run_command")
		if !strings.Contains(def.Description, "no network access") {
			t.Errorf("the description does not say the network is denied: %s", def.Description)
		}
	})
}

// TestSandboxLimits: Limits replace the default ones; a command killed by
// one reports the signal as a shell would.
func TestSandboxLimits(t *testing.T) {
	ts, dir := sandboxed(t, &tools.ShellOptions{Limits: &sandbox.Limits{FileSize: 1 << 20}})
	r := run(t, t.Context(), ts, "exec dd if=/dev/zero of=big bs=1024 count=2048 2>/dev/null", 0)
	if want := "(no output)\n[exit code: 153 (killed by signal 25: file size limit exceeded)]"; r.err != nil || !r.isError || r.text != want {
		t.Errorf("got %v, want %q", r, want)
	}
	if fi, err := os.Stat(filepath.Join(dir, "big")); err != nil || fi.Size() > 1<<20 {
		t.Errorf("big: %v, %v", fi, err)
	}
}

// TestSandboxHelperKept: where the sandbox keeps its helper between
// commands (isolated: as root, or as another user where the kernel gives
// it user namespaces), consecutive commands run in one PID namespace, and
// nothing the first left running is there for the second.
func TestSandboxHelperKept(t *testing.T) {
	ts, _ := sandboxed(t, &tools.ShellOptions{DenyNetwork: true})
	if res, err := sandbox.Run(t.Context(), &sandbox.Spec{Shell: "true", Dir: t.TempDir()}); err != nil || !res.Confinement.Isolated {
		t.Skipf("commands are not isolated here: %v", err)
	}
	r1 := run(t, t.Context(), ts, `sleep 300 >/dev/null 2>&1 & readlink /proc/self/ns/pid`, 0)
	r2 := run(t, t.Context(), ts, `readlink /proc/self/ns/pid; pgrep -c -x sleep; true`, 0)
	ns1, _, _ := strings.Cut(r1.text, "\n")
	if r1.err != nil || r2.err != nil || !strings.HasPrefix(ns1, "pid:[") {
		t.Fatalf("first %v, then %v", r1, r2)
	}
	if !strings.HasPrefix(r2.text, ns1+"\n0\n") {
		t.Fatalf("first in %s, then:\n%s", ns1, r2.text)
	}
}

// TestSandboxSweepsStaleScratch: the scratch directories a process left
// when it exited are removed by the next shell's first command; those of
// a live process are kept.
func TestSandboxSweepsStaleScratch(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(os.TempDir(), "hrns-commands-"+strconv.Itoa(dead.Process.Pid)+"-x")
	live := filepath.Join(os.TempDir(), "hrns-commands-1-x") // init's
	for _, d := range []string{filepath.Join(stale, "zygote-1"), live} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	defer os.RemoveAll(stale)
	defer os.RemoveAll(live)
	ts, _ := sandboxed(t, &tools.ShellOptions{DenyNetwork: true})
	if r := run(t, t.Context(), ts, "true", 0); r.err != nil {
		t.Fatal(r.err)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("the stale scratch directory is still there")
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a live process's scratch directory was removed: %v", err)
	}
}

// TestSandboxNotIsolatedNotRun: on a machine that isolates commands, a
// command whose root cannot be built (its working directory's path is
// 4094 bytes long: its mount point under the root's staging /tmp would be
// longer than a path may be) is not run: its result says so, and why.
// Before, it ran with Landlock alone (its marker written), with at most a
// note at the end of the first such result.
func TestSandboxNotIsolatedNotRun(t *testing.T) {
	needLandlock(t)
	if err := sandbox.Isolation(); err != nil {
		t.Skipf("commands are not isolated here: %v", err)
	}
	dir := t.TempDir()
	for len(dir) < 4094-250 {
		dir = filepath.Join(dir, strings.Repeat("d", 200))
	}
	dir = filepath.Join(dir, strings.Repeat("e", 4094-len(dir)-1))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Skipf("a path of 4094 bytes: %v", err)
	}
	mark := t.TempDir()
	for _, o := range []*tools.ShellOptions{{ReadWrite: []string{mark}}, {ReadWrite: []string{mark}, PublicNetwork: true}} {
		ts, err := tools.Shell(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			r := callTool(t, t.Context(), ts, "run_command", map[string]any{"command": "echo ran > " + mark + "/ran"})
			if r.err != nil || !r.isError || !strings.HasPrefix(r.text, "The command was NOT run: ") ||
				!strings.Contains(r.text, "the command's root could not be built") {
				t.Fatalf("public network %v: %v", o.PublicNetwork, r)
			}
			if _, err := os.Stat(filepath.Join(mark, "ran")); err == nil {
				t.Fatal("the command ran")
			}
		}
	}
	// Another command of the machine runs, isolated.
	ts, _ := sandboxed(t, nil)
	if r := run(t, t.Context(), ts, "echo ok", 0); r.failed() || r.text != "ok\n[exit code: 0]" {
		t.Fatalf("another command: %v", r)
	}
}
