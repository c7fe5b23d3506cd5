//go:build linux

package sandbox_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/sandbox"
)

// needZygote skips a test of a Box's zygote where commands cannot run in
// one (the kernel refuses the namespaces). A user other than root gets
// one as root does: TestBoxAsUser runs these tests as one.
func needZygote(t *testing.T) {
	t.Helper()
	needIsolation(t)
}

// needRoot skips a test of what a Box does for root alone.
func needRoot(t *testing.T, what string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("for root alone: " + what)
	}
}

// newBox makes a Box for dir, closed with the test.
func newBox(t *testing.T, spec sandbox.Spec) *sandbox.Box {
	t.Helper()
	b, err := sandbox.NewBox(&spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// boxRun runs shell in b with the box's spec and fails the test on an
// error.
func boxRun(t *testing.T, b *sandbox.Box, spec sandbox.Spec, shell string) *sandbox.Result {
	t.Helper()
	spec.Shell = shell
	if spec.Timeout == 0 {
		spec.Timeout = time.Minute
	}
	res, err := b.Run(context.Background(), &spec)
	if err != nil {
		t.Fatalf("%s: %v", shell, err)
	}
	return res
}

// oneZygote returns the pid of the Box's one idle zygote.
func oneZygote(t *testing.T, b *sandbox.Box) int {
	t.Helper()
	pids := sandbox.BoxZygotes(b)
	if len(pids) != 1 {
		t.Fatalf("zygotes %v, want one", pids)
	}
	return pids[0]
}

// TestBoxRunsLikeRun: a command run by a Box has its own environment,
// output and exit code, and the confinement Run gives; the next command
// runs in the same zygote.
func TestBoxRunsLikeRun(t *testing.T) {
	needZygote(t)
	dir := t.TempDir()
	spec := sandbox.Spec{Dir: dir, Limits: sandbox.DefaultLimits}
	b := newBox(t, spec)
	want := run(t, &sandbox.Spec{Shell: "true", Dir: dir, Limits: sandbox.DefaultLimits}).Confinement.Summary()
	s := spec
	s.Env = []string{"GREETING=one"}
	res := boxRun(t, b, s, `echo "$GREETING $(pwd)"; echo err >&2; exit 3`)
	if res.ExitCode != 3 || res.Output != "one "+dir+"\nerr\n" {
		t.Fatalf("exit %d, output %q", res.ExitCode, res.Output)
	}
	if got := res.Confinement.Summary(); got != want {
		t.Fatalf("confinement %q, Run's %q", got, want)
	}
	z := oneZygote(t, b)
	s.Env = []string{"GREETING=two"}
	res = boxRun(t, b, s, `echo "$GREETING"; kill -9 $$`)
	if res.Output != "two\n" || res.SignalNumber != int(syscall.SIGKILL) || res.ExitCode != -1 {
		t.Fatalf("output %q, exit %d, signal %d", res.Output, res.ExitCode, res.SignalNumber)
	}
	if again := oneZygote(t, b); again != z {
		t.Fatalf("zygote %d, then %d", z, again)
	}
	// Another sandbox is refused.
	other := spec
	other.Dir = t.TempDir()
	other.Shell = "true"
	if _, err := b.Run(context.Background(), &other); !errors.Is(err, sandbox.ErrInvalidSpec) {
		t.Fatalf("another Dir: %v", err)
	}
}

// TestBoxBackgroundKilled: what a command leaves running, in its group or
// in a session of its own, is dead before the next command of the same
// zygote runs.
func TestBoxBackgroundKilled(t *testing.T) {
	needZygote(t)
	spec := sandbox.Spec{Dir: t.TempDir(), Limits: sandbox.DefaultLimits}
	b := newBox(t, spec)
	res := boxRun(t, b, spec, `sleep 300 >/dev/null 2>&1 & echo $!; setsid sleep 300 >/dev/null 2>&1 & sleep 0.2; pgrep -n -x sleep`)
	pids := strings.Fields(res.Output)
	if len(pids) != 2 {
		t.Fatalf("output %q", res.Output)
	}
	z := oneZygote(t, b)
	res = boxRun(t, b, spec, `for p in `+strings.Join(pids, " ")+`; do test -e /proc/$p && echo "$p alive"; done; pgrep -c -x sleep; true`)
	if res.Output != "0\n" {
		t.Fatalf("after the command: %q", res.Output)
	}
	if oneZygote(t, b) != z {
		t.Fatal("not the same zygote")
	}
}

// TestBoxMountsUnchanged: a command cannot change the mounts the next one
// sees.
func TestBoxMountsUnchanged(t *testing.T) {
	needZygote(t)
	spec := sandbox.Spec{Dir: t.TempDir(), Limits: sandbox.DefaultLimits}
	b := newBox(t, spec)
	before := boxRun(t, b, spec, `cat /proc/self/mountinfo`).Output
	res := boxRun(t, b, spec, `mount -t tmpfs none /usr 2>&1; umount -l /usr 2>&1; mount -o remount,rw / 2>&1; umount -l /proc 2>&1; mount --bind /usr `+spec.Dir+` 2>&1; true`)
	after := boxRun(t, b, spec, `cat /proc/self/mountinfo`).Output
	if before == "" || after != before {
		t.Fatalf("mounts changed by %q:\nbefore:\n%s\nafter:\n%s", res.Output, before, after)
	}
}

// TestBoxIPCPerCommand: System V IPC objects a command makes are gone for
// the next.
func TestBoxIPCPerCommand(t *testing.T) {
	needZygote(t)
	if _, err := exec.LookPath("ipcmk"); err != nil {
		t.Skip("no ipcmk")
	}
	spec := sandbox.Spec{Dir: t.TempDir(), Limits: sandbox.DefaultLimits}
	b := newBox(t, spec)
	if res := boxRun(t, b, spec, `ipcmk -M 4096 >/dev/null && ipcs -m | grep -c '^0x'`); res.Output != "1\n" {
		t.Fatalf("made: %q", res.Output)
	}
	if res := boxRun(t, b, spec, `ipcs -m | grep -c '^0x'`); res.Output != "0\n" {
		t.Fatalf("the next command sees: %q", res.Output)
	}
}

// TestBoxZygoteReplaced: a zygote killed between commands is replaced,
// and the next command still runs sandboxed.
func TestBoxZygoteReplaced(t *testing.T) {
	needZygote(t)
	dir := t.TempDir()
	spec := sandbox.Spec{Dir: dir, Limits: sandbox.DefaultLimits}
	b := newBox(t, spec)
	boxRun(t, b, spec, "true")
	z := oneZygote(t, b)
	if err := syscall.Kill(z, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, z)
	res := boxRun(t, b, spec, `ls /proc | grep -c '^[0-9]*$'; cat /etc/shadow`)
	if !res.Confinement.Isolated || !res.Confinement.Confined || res.ExitCode == 0 {
		t.Fatalf("after the zygote died: exit %d, %q, %s", res.ExitCode, res.Output, res.Confinement.Summary())
	}
	if again := oneZygote(t, b); again == z {
		t.Fatal("the dead zygote was kept")
	}
}

// waitGone waits until process pid is gone or a zombie.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for range 1000 {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		if i := strings.LastIndexByte(string(b), ')'); i > 0 && strings.HasPrefix(string(b[i+1:]), " Z") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("process %d is still there", pid)
}

// TestBoxConcurrent: commands run at once by one Box each see only their
// own processes, and all end.
func TestBoxConcurrent(t *testing.T) {
	needZygote(t)
	spec := sandbox.Spec{Dir: t.TempDir(), Limits: sandbox.DefaultLimits}
	b := newBox(t, spec)
	var wg sync.WaitGroup
	errs := make(chan string, 40)
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 3 {
				s := spec
				s.Shell = `sleep 0.1; ls /proc | grep -c '^[0-9]*$'; echo ` + strconv.Itoa(i*10+j)
				s.Timeout = time.Minute
				res, err := b.Run(context.Background(), &s)
				if err != nil {
					errs <- err.Error()
					continue
				}
				f := strings.Fields(res.Output)
				if n, _ := strconv.Atoi(f[0]); len(f) != 2 || n > 5 || f[1] != strconv.Itoa(i*10+j) || !res.Confinement.Isolated {
					errs <- res.Output
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if n := len(sandbox.BoxZygotes(b)); n < 1 || n > 4 {
		t.Fatalf("%d zygotes", n)
	}
}

// TestBoxClose: closing a Box ends its zygotes; it runs nothing after.
func TestBoxClose(t *testing.T) {
	needZygote(t)
	spec := sandbox.Spec{Dir: t.TempDir(), Limits: sandbox.DefaultLimits}
	b := newBox(t, spec)
	boxRun(t, b, spec, "true")
	z := oneZygote(t, b)
	b.Close()
	waitGone(t, z)
	s := spec
	s.Shell = "true"
	if _, err := b.Run(context.Background(), &s); !errors.Is(err, sandbox.ErrInvalidSpec) {
		t.Fatalf("after Close: %v", err)
	}
}

// TestBoxTimeout: a command past its timeout is ended with what it
// started, and the zygote runs the next.
func TestBoxTimeout(t *testing.T) {
	needZygote(t)
	spec := sandbox.Spec{Dir: t.TempDir(), Limits: sandbox.DefaultLimits}
	b := newBox(t, spec)
	s := spec
	s.Timeout = 300 * time.Millisecond
	s.Grace = 100 * time.Millisecond
	res := boxRun(t, b, s, `trap '' TERM; sleep 300 & wait`)
	if !res.TimedOut || res.ExitCode != -1 {
		t.Fatalf("timed out %v, exit %d", res.TimedOut, res.ExitCode)
	}
	if res := boxRun(t, b, spec, `pgrep -c -x sleep; echo ok`); res.Output != "0\nok\n" {
		t.Fatalf("next: %q", res.Output)
	}
}

// TestBoxScratchEmptied: each command finds Scratch empty.
func TestBoxScratchEmptied(t *testing.T) {
	needZygote(t)
	dir := t.TempDir()
	spec := sandbox.Spec{Dir: dir, Scratch: filepath.Join(dir, "tmp"), Limits: sandbox.DefaultLimits}
	b := newBox(t, spec)
	boxRun(t, b, spec, `mkdir -p "$TMPDIR/a/b" && echo x > "$TMPDIR/a/b/f" && ln -s / "$TMPDIR/root"`)
	if res := boxRun(t, b, spec, `ls -A "$TMPDIR"`); res.Output != "" {
		t.Fatalf("Scratch holds %q", res.Output)
	}
}

// TestBoxParentDies: a zygote whose caller dies is killed.
func TestBoxParentDies(t *testing.T) {
	needZygote(t)
	if os.Getenv("SANDBOX_TEST_BOX_CHILD") != "" {
		spec := sandbox.Spec{Dir: os.Getenv("SANDBOX_TEST_BOX_CHILD"), Limits: sandbox.DefaultLimits}
		b, err := sandbox.NewBox(&spec)
		if err != nil {
			t.Fatal(err)
		}
		boxRun(t, b, spec, "true")
		os.Stdout.WriteString("zygote " + strconv.Itoa(oneZygote(t, b)) + "\n")
		time.Sleep(time.Minute)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestBoxParentDies$", "-test.v")
	cmd.Env = append(os.Environ(), "SANDBOX_TEST_BOX_CHILD="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(out)
	z := 0
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "zygote "); ok {
			z, _ = strconv.Atoi(v)
			break
		}
	}
	if z == 0 {
		t.Fatal("the child reported no zygote")
	}
	cmd.Process.Kill()
	waitGone(t, z)
}

// TestBoxScratchLinkNotFollowed: a command that replaces Scratch (inside
// Dir) by a link to a directory outside its paths does not get that
// directory emptied after it; the next command is refused, as by Run.
func TestBoxScratchLinkNotFollowed(t *testing.T) {
	needZygote(t)
	dir, victim := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(victim, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := sandbox.Spec{Dir: dir, Scratch: filepath.Join(dir, "tmp"), Limits: sandbox.DefaultLimits}
	b := newBox(t, spec)
	boxRun(t, b, spec, `rm -rf "$TMPDIR" && ln -s `+victim+` "$TMPDIR"`)
	if _, err := os.Stat(filepath.Join(victim, "keep")); err != nil {
		t.Fatalf("the link was followed: %v", err)
	}
	s := spec
	s.Shell = "true"
	if _, err := b.Run(context.Background(), &s); !errors.Is(err, sandbox.ErrLinkBelowWritable) {
		t.Fatalf("the next command: %v", err)
	}
	// The one after gets another zygote, and another Scratch.
	if res := boxRun(t, b, spec, `ls -A "$TMPDIR"; echo ok`); res.Output != "ok\n" {
		t.Fatalf("then: %q", res.Output)
	}
	if _, err := os.Stat(filepath.Join(victim, "keep")); err != nil {
		t.Fatal(err)
	}
}

// TestBoxScratchPerZygote: commands running at once have Scratches of
// their own; once the Box is closed, none is left.
func TestBoxScratchPerZygote(t *testing.T) {
	needZygote(t)
	dir := t.TempDir()
	scratch := filepath.Join(dir, "tmp")
	spec := sandbox.Spec{Dir: dir, Scratch: scratch, Limits: sandbox.DefaultLimits}
	b := newBox(t, spec)
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]bool{}
	for range 6 { // more than the zygotes: some run as Run runs them
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := spec
			// All six run at once: each waits for the others.
			s.Shell = `ls -A "$TMPDIR"; echo mine > "$TMPDIR/f"; touch "started.$(basename "$TMPDIR")"
i=0; while [ "$(ls | grep -c '^started')" -lt 6 ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done
cat "$TMPDIR/f"; echo "$TMPDIR"`
			s.Timeout = time.Minute
			res, err := b.Run(context.Background(), &s)
			if err != nil {
				t.Error(err)
				return
			}
			f := strings.Fields(res.Output)
			if len(f) != 2 || f[0] != "mine" || filepath.Dir(f[1]) != scratch {
				t.Errorf("output %q", res.Output)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if seen[f[1]] {
				t.Errorf("%s shared by commands at once", f[1])
			}
			seen[f[1]] = true
		}()
	}
	wg.Wait()
	b.Close()
	if entries, err := os.ReadDir(scratch); err != nil || len(entries) != 0 {
		t.Fatalf("after Close, Scratch holds %v (%v)", entries, err)
	}
}

// TestBoxSweepsStaleCgroups: the empty pids cgroup a zygote leaves when
// the process that started it died is removed by the next zygote's start;
// one of a live process is kept.
func TestBoxSweepsStaleCgroups(t *testing.T) {
	needZygote(t)
	parent := sandbox.PidsCgroupParent()
	if parent == "" {
		t.Skip("no pids cgroup here")
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(parent, "hrns-sandbox-"+strconv.Itoa(dead.Process.Pid)+"-1")
	live := filepath.Join(parent, "hrns-sandbox-1-1") // init's
	for _, d := range []string{stale, live} {
		if err := os.Mkdir(d, 0o755); errors.Is(err, os.ErrPermission) {
			t.Skipf("this user makes no cgroup there: %v", err)
		} else if err != nil {
			t.Fatal(err)
		}
	}
	defer os.Remove(stale)
	defer os.Remove(live)
	spec := sandbox.Spec{Dir: t.TempDir(), Limits: sandbox.DefaultLimits}
	boxRun(t, newBox(t, spec), spec, "true")
	if _, err := os.Stat(stale); err == nil {
		t.Error("the stale cgroup is still there")
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the live process's cgroup was removed: %v", err)
	}
}

// TestBoxClearsSetID: what a command leaves set-user-ID in its paths
// loses the bit when it ends, as with Run.
func TestBoxClearsSetID(t *testing.T) {
	needZygote(t)
	needRoot(t, "another user's set-ID files give no one more than the user's own programs (see Run)")
	dir := t.TempDir()
	spec := sandbox.Spec{Dir: dir, Limits: sandbox.DefaultLimits}
	b := newBox(t, spec)
	res := boxRun(t, b, spec, `cp /bin/true suid && chmod 4755 suid && ls -l suid`)
	if !strings.HasPrefix(res.Output, "-rws") {
		t.Fatalf("the command could not make it: %q", res.Output)
	}
	fi, err := os.Stat(filepath.Join(dir, "suid"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSetuid != 0 || len(res.SetIDCleared) != 1 {
		t.Fatalf("mode %v, cleared %v", fi.Mode(), res.SetIDCleared)
	}
}

// TestBoxIdleZygoteEnds: a zygote idle for boxIdle exits; the next command
// gets another.
func TestBoxIdleZygoteEnds(t *testing.T) {
	needZygote(t)
	sandbox.SetBoxIdle(100 * time.Millisecond)
	defer sandbox.SetBoxIdle(0)
	spec := sandbox.Spec{Dir: t.TempDir(), Limits: sandbox.DefaultLimits}
	b := newBox(t, spec)
	boxRun(t, b, spec, "true")
	z := oneZygote(t, b)
	waitGone(t, z)
	for range 100 {
		if len(sandbox.BoxZygotes(b)) == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if pids := sandbox.BoxZygotes(b); len(pids) != 0 {
		t.Fatalf("still idle: %v", pids)
	}
	if res := boxRun(t, b, spec, "echo ok"); res.Output != "ok\n" || !res.Confinement.Isolated {
		t.Fatalf("then: %q, %s", res.Output, res.Confinement.Summary())
	}
}

// TestBoxOverlayAfresh: each command of a Box sees its overlay's lower
// layer as it is when it starts (the overlay is mounted again), and what
// the commands before wrote there, in the upper layer.
func TestBoxOverlayAfresh(t *testing.T) {
	needZygote(t)
	dir, state, lower := t.TempDir(), t.TempDir(), t.TempDir()
	upper, work, target := filepath.Join(state, "upper"), filepath.Join(state, "work"), filepath.Join(state, "target")
	for _, d := range []string{upper, work, target} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(lower, "one"), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := sandbox.Spec{
		Dir:       dir,
		ReadWrite: []string{state},
		Overlays:  []sandbox.Overlay{{Lower: lower, Upper: upper, Work: work, Target: target}},
		Limits:    sandbox.DefaultLimits,
	}
	b := newBox(t, spec)
	res := boxRun(t, b, spec, `ls `+target+`; cat `+target+`/one; echo mine > `+target+`/own`)
	if res.Output != "one\n1\n" || res.Confinement.Overlays != 1 {
		t.Fatalf("first: %q, %+v", res.Output, res.Confinement)
	}
	z := oneZygote(t, b)
	// The user's own programs change the shared cache meanwhile.
	if err := os.Remove(filepath.Join(lower, "one")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lower, "two"), []byte("2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res = boxRun(t, b, spec, `ls `+target+`; cat `+target+`/two; cat `+target+`/one 2>/dev/null || echo no-one`)
	if res.Output != "own\ntwo\n2\nno-one\n" {
		t.Fatalf("then: %q", res.Output)
	}
	if oneZygote(t, b) != z {
		t.Fatal("not the same zygote")
	}
}

// TestBoxDescriptors: a command of a Box gets its standard files and
// nothing else, as one of Run.
func TestBoxDescriptors(t *testing.T) {
	needZygote(t)
	spec := sandbox.Spec{Dir: t.TempDir(), Limits: sandbox.DefaultLimits}
	b := newBox(t, spec)
	for range 2 {
		if res := boxRun(t, b, spec, `ls /proc/self/fd`); res.Output != "0\n1\n2\n3\n" {
			t.Fatalf("descriptors: %q", res.Output)
		}
	}
}
