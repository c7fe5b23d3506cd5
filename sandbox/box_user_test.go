//go:build linux

package sandbox_test

// A Box run by a user other than root: its zygote is root in a user
// namespace of its own, and each command enters one nested in it. The
// machine's tests run as root: TestBoxAsUser runs the Box's tests (and
// its attacks) again as another user, in a copy of this test binary.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/sandbox"
	"golang.org/x/sys/unix"
)

// asUserEnv marks a test binary run as another user by TestBoxAsUser.
const asUserEnv = "SANDBOX_TEST_AS_USER"

// testUser is the user TestBoxAsUser and the box-user benchmark run as:
// nobody, whom nothing on the machine belongs to.
const testUser = 65534

// asUser returns a copy of this test binary that testUser may execute,
// and a directory it owns (its TMPDIR and HOME), both removed with tb.
func asUser(tb testing.TB) (exe, home string) {
	tb.Helper()
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "hrns-sandbox-user-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	home = filepath.Join(dir, "home")
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.Mkdir(home, 0o700); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chown(home, testUser, testUser); err != nil {
		tb.Fatal(err)
	}
	exe = filepath.Join(dir, "sandbox.test")
	src, err := os.Open(self)
	if err != nil {
		tb.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(exe, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		tb.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		tb.Fatal(err)
	}
	return exe, home
}

// userCommand is exe run as testUser with args, in home.
func userCommand(exe, home string, args ...string) *exec.Cmd {
	cmd := exec.Command(exe, args...)
	cmd.Dir = home
	cmd.Env = []string{asUserEnv + "=1", "PATH=" + os.Getenv("PATH"), "TMPDIR=" + home, "HOME=" + home}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: testUser, Gid: testUser, Groups: []uint32{}},
		Pdeathsig:  syscall.SIGKILL,
	}
	return cmd
}

// TestBoxAsUser runs the Box's tests (TestBox*: its zygote's, and the
// attacks on it) as another user: the zygote must be used, and every
// attack must fail, as for root. Those of root alone (the set-ID bits
// cleared, the zygote's capabilities) skip themselves there.
func TestBoxAsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("run as root: it runs the Box's tests as another user (as that user, they run here)")
	}
	needIsolation(t)
	exe, home := asUser(t)
	args := []string{"-test.run", "^TestBox", "-test.v", "-test.count=1", "-test.timeout=8m"}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	out, err := userCommand(exe, home, args...).CombinedOutput()
	results := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s*--- (PASS|FAIL|SKIP): (\S+)`).FindAllSubmatch(out, -1) {
		results[string(m[2])] = string(m[1])
	}
	if results["TestBoxZygoteForUser"] == "SKIP" && bytes.Contains(out, []byte(noUserNS)) {
		t.Skipf("the kernel refuses this user the namespaces:\n%s", out)
	}
	if err != nil || slices.Contains(slices.Collect(mapValues(results)), "FAIL") {
		t.Fatalf("as user %d: %v\n%s", testUser, err, out)
	}
	for _, name := range []string{
		"TestBoxZygoteForUser", "TestBoxUserNSRefused", "TestBoxRunsLikeRun", "TestBoxBackgroundKilled", "TestBoxMountsUnchanged",
		"TestBoxZygoteReplaced", "TestBoxConcurrent", "TestBoxTimeout", "TestBoxParentDies",
		"TestBoxDescriptors", "TestBoxOverlayAfresh", "TestBoxRequireIsolation",
		"TestBoxAttackZygoteLimits", "TestBoxAttackZygoteProc", "TestBoxAttackZygotePtrace",
		"TestBoxAttackSurvivors", "TestBoxAttackSignalZygote", "TestBoxAttackForkBomb",
		"TestBoxAttackScratchTooFull", "TestBoxAttackOverlayUnmountLink",
	} {
		if results[name] != "PASS" {
			t.Errorf("%s as user %d: %q", name, testUser, results[name])
		}
	}
	for name, r := range results {
		if r == "SKIP" {
			t.Logf("skipped as user %d: %s", testUser, name)
		}
	}
	if t.Failed() {
		t.Logf("%s", out)
	}
}

func mapValues(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

// noUserNS begins the skip of a test whose user the kernel refuses the
// namespaces.
const noUserNS = "the kernel does not isolate commands for this user"

// TestBoxZygoteForUser: a Box run by a user other than root runs its
// commands in a zygote (it ran each as Run does: a helper per command),
// each as that user, without a capability, in a user namespace of its
// own, with no_new_privs, and Run's confinement.
func TestBoxZygoteForUser(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("for a user other than root: TestBoxAsUser runs it as one")
	}
	needIsolation(t)
	dir := t.TempDir()
	spec := sandbox.Spec{Dir: dir, Limits: sandbox.DefaultLimits}
	b := newBox(t, spec)
	const probe = `id -u; id -g; cat /proc/self/uid_map /proc/self/gid_map /proc/self/setgroups
grep -E '^(Cap(Inh|Prm|Eff|Amb)|NoNewPrivs):' /proc/self/status
readlink /proc/self/ns/user`
	res := boxRun(t, b, spec, probe)
	if why := sandbox.BoxPerCall(b); why != "" {
		t.Fatalf("the Box runs each command as Run does: %s", why)
	}
	z := oneZygote(t, b)
	uid, gid := os.Geteuid(), os.Getegid()
	want := fmt.Sprintf(`%d
%d
%10d %10d %10d
%10d %10d %10d
deny
CapInh:	0000000000000000
CapPrm:	0000000000000000
CapEff:	0000000000000000
NoNewPrivs:	1
CapAmb:	0000000000000000
`, uid, gid, uid, 0, 1, gid, 0, 1)
	got, userNS, _ := strings.Cut(res.Output, "user:[")
	if userNS == "" {
		t.Fatalf("no user namespace: %q", res.Output)
	}
	// The kernel prints the status lines in its order: compare as sets.
	sortLines := func(s string) string {
		l := strings.Split(strings.TrimSpace(s), "\n")
		slices.Sort(l)
		return strings.Join(l, "\n")
	}
	if sortLines(got) != sortLines(want) {
		t.Fatalf("the command's identity:\n%s\nwant:\n%s", res.Output, want)
	}
	if runRes := run(t, &sandbox.Spec{Shell: "true", Dir: dir, Limits: sandbox.DefaultLimits}); res.Confinement.Summary() != runRes.Confinement.Summary() {
		t.Fatalf("confinement %q, Run's %q", res.Confinement.Summary(), runRes.Confinement.Summary())
	}
	// The next command, in the same zygote, is the same (a user
	// namespace of its own: its maps could not be written twice).
	res2 := boxRun(t, b, spec, probe)
	if got2, _, _ := strings.Cut(res2.Output, "user:["); got2 != got {
		t.Fatalf("the next command's identity:\n%s\nthe first's:\n%s", res2.Output, res.Output)
	}
	if oneZygote(t, b) != z {
		t.Fatal("not the same zygote")
	}
}

// TestBoxUserNSRefused: where the kernel refuses a zygote of a user
// other than root its commands' user namespaces (or the trace of their
// start), the Box runs every command as Run does, confined and isolated
// as Run confines it.
func TestBoxUserNSRefused(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("for a user other than root: TestBoxAsUser runs it as one")
	}
	needIsolation(t)
	sandbox.SetNoNestedUserNS(true)
	defer sandbox.SetNoNestedUserNS(false)
	spec := sandbox.Spec{Dir: t.TempDir(), Limits: sandbox.DefaultLimits}
	b := newBox(t, spec)
	for range 2 {
		res := boxRun(t, b, spec, "id -u; cat /etc/shadow")
		if want := strconv.Itoa(os.Geteuid()) + "\n"; !strings.HasPrefix(res.Output, want) || res.ExitCode == 0 ||
			!res.Confinement.Isolated || !res.Confinement.Confined {
			t.Fatalf("exit %d, %q, %s", res.ExitCode, res.Output, res.Confinement.Summary())
		}
	}
	if why := sandbox.BoxPerCall(b); !strings.Contains(why, "user namespace for each command") {
		t.Fatalf("why the commands run as Run runs them: %q", why)
	}
	if pids := sandbox.BoxZygotes(b); len(pids) != 0 {
		t.Fatalf("zygotes %v", pids)
	}
}

// zygoteAttackEnv makes this test binary, run as a command in a Box,
// attack its zygote (PID 1) directly: ptrace(2), process_vm_readv(2),
// /proc/PID/mem, pidfd_getfd(2) on every thread of it. Each that
// succeeds prints ESCAPED.
const zygoteAttackEnv = "SANDBOX_TEST_ATTACK_ZYGOTE"

// zygoteAttackHelper is the attack of zygoteAttackEnv (from TestMain).
func zygoteAttackHelper() {
	target := os.Getenv(zygoteAttackEnv) // 1, or a control
	if target == "" {
		return
	}
	tasks, err := os.ReadDir("/proc/" + target + "/task")
	if err != nil || len(tasks) == 0 {
		fmt.Println("no threads of the zygote:", err)
		os.Exit(2)
	}
	// An address mapped in the zygote: this binary is its, and is not
	// position-independent; if it were, the read fails with EFAULT,
	// which would still show that the access was allowed.
	addr := uintptr(0x400000)
	if b, err := os.ReadFile("/proc/self/maps"); err == nil {
		lo, _, _ := strings.Cut(string(b), "-")
		if a, err := strconv.ParseUint(lo, 16, 64); err == nil {
			addr = uintptr(a)
		}
	}
	denied := func(err error) bool {
		return errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ESRCH)
	}
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		if err := unix.PtraceAttach(tid); err == nil {
			fmt.Println("ESCAPED ptrace attach", tid)
			_ = unix.PtraceDetach(tid)
		}
		if err := unix.PtraceSeize(tid); err == nil {
			fmt.Println("ESCAPED ptrace seize", tid)
			_ = unix.PtraceDetach(tid)
		}
		buf := make([]byte, 16)
		if _, err := unix.ProcessVMReadv(tid, []unix.Iovec{{Base: &buf[0], Len: uint64(len(buf))}},
			[]unix.RemoteIovec{{Base: addr, Len: len(buf)}}, 0); !denied(err) {
			fmt.Println("ESCAPED process_vm_readv", tid, err)
		}
		if f, err := os.OpenFile(fmt.Sprintf("/proc/%s/task/%d/mem", target, tid), os.O_RDONLY, 0); err == nil {
			f.Close()
			fmt.Println("ESCAPED mem", tid)
		}
	}
	if target == "1" {
		if fd, err := unix.PidfdOpen(1, 0); err == nil {
			// The zygote's control socket.
			if got, err := unix.PidfdGetfd(fd, 5, 0); err == nil {
				unix.Close(got)
				fmt.Println("ESCAPED pidfd_getfd")
			}
			if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err == nil {
				// Dropped, as the zygote is the namespace's
				// init; seen below if not.
				time.Sleep(100 * time.Millisecond)
			}
			unix.Close(fd)
		}
	}
	if _, err := os.Stat("/proc/" + target); err != nil {
		fmt.Println("ESCAPED the zygote is gone:", err)
	}
	fmt.Println("DONE", len(tasks))
	os.Exit(0)
}

// TestBoxAttackZygotePtrace: a command (a program, not a shell) attacks
// its zygote's threads with every way to read or write another process's
// memory or take its descriptors: all are refused. For a user other than
// root the zygote is root in its user namespace, the command in a nested
// one: the ptrace check on capabilities, the zygote's not being dumpable
// and Landlock's ptrace scope each refuse it; the confined thread shares
// the command's Landlock domain, but not its user namespace.
func TestBoxAttackZygotePtrace(t *testing.T) {
	needZygote(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	spec := sandbox.Spec{Dir: t.TempDir(), ReadOnly: []string{filepath.Dir(exe)}, Limits: sandbox.DefaultLimits}
	b := newBox(t, spec)
	boxRun(t, b, spec, "true")
	if why := sandbox.BoxPerCall(b); why != "" {
		t.Fatalf("no zygote: %s", why)
	}
	z := oneZygote(t, b)
	// The control: the same attack on a process of the command's own
	// succeeds.
	control := boxRun(t, b, spec, "sleep 100 & "+zygoteAttackEnv+"=$! "+exe)
	if !strings.Contains(control.Output, "ESCAPED ptrace attach") || !strings.Contains(control.Output, "ESCAPED process_vm_readv") {
		t.Fatalf("the attack fails on a process of the command's own: %s", control.Output)
	}
	res := boxRun(t, b, spec, zygoteAttackEnv+"=1 "+exe)
	if !strings.Contains(res.Output, "DONE") || strings.Contains(res.Output, "ESCAPED") {
		t.Fatalf("the attack: exit %d\n%s", res.ExitCode, res.Output)
	}
	if n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(res.Output, "DONE"))); n < 2 {
		t.Fatalf("the zygote's threads: %q", res.Output)
	}
	boxRun(t, b, spec, "true")
	if oneZygote(t, b) != z {
		t.Fatalf("the zygote was replaced: %s", res.Output)
	}
}
