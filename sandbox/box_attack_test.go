//go:build linux

package sandbox_test

// Attacks on a Box by its commands: each command is the attacker's, and
// so is a sequence of them in the same Box. Each test is an attack that
// must fail.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/sandbox"
	"golang.org/x/sys/unix"
)

// TestBoxAttackZygoteLimits: prlimit(2) lets a process change the limits
// of another process of its user (any thread of it) without a
// capability, and a command is root as its zygote is: a command lowering
// the zygote's limits (or raising a soft one to its hard one) must not
// leave them to the next command.
func TestBoxAttackZygoteLimits(t *testing.T) {
	needZygote(t)
	spec := sandbox.Spec{Dir: t.TempDir(), Limits: sandbox.DefaultLimits}
	b := newBox(t, spec)
	first := boxRun(t, b, spec, `command -v prlimit >/dev/null || { echo no-prlimit; exit; }
cat /proc/self/limits
for t in /proc/1/task/*; do prlimit --pid ${t##*/} --nofile=20:20 --core=unlimited --stack=100000:100000; done
prlimit --pid 1 --nofile --core | grep -c 20 >&2`)
	if strings.Contains(first.Output, "no-prlimit") {
		t.Skip("no prlimit in the sandbox")
	}
	if !strings.HasSuffix(first.Output, "1\n") {
		t.Fatalf("the zygote's limits were not changed, the attack is not shown: %q", first.Output)
	}
	want := strings.TrimSuffix(first.Output, "1\n")
	if got := boxRun(t, b, spec, `cat /proc/self/limits`).Output; got != want {
		t.Fatalf("the next command's limits:\n%s\nthe first's:\n%s", got, want)
	}
}

// TestBoxAttackOverlayUnmountLink: before each command a zygote unmounts
// each overlay to mount it afresh, as root with every capability, by its
// Target's path, which lies in a path the commands write. A command that
// puts a link on the way to it (its parent renamed, a link in its place)
// must not lead that unmount elsewhere (here /proc), changing the mounts
// the next command finds: the caller's check of the grants refuses the
// next command and ends the zygote. The link is then taken away, as
// another command of the Box, in another zygote, could do at any time.
func TestBoxAttackOverlayUnmountLink(t *testing.T) {
	needZygote(t)
	dir, lower := t.TempDir(), t.TempDir()
	for _, d := range []string{"state/upper", "state/work", "home/target"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	spec := sandbox.Spec{
		Dir:      dir,
		Overlays: []sandbox.Overlay{{Lower: lower, Upper: filepath.Join(dir, "state/upper"), Work: filepath.Join(dir, "state/work"), Target: filepath.Join(dir, "home/target")}},
		Limits:   sandbox.DefaultLimits,
	}
	const mounts = `awk '{print $5}' /proc/self/mountinfo 2>&1 | sort`
	b := newBox(t, spec)
	want := boxRun(t, b, spec, mounts).Output
	res := boxRun(t, b, spec, `mv home home2 && mkdir x && ln -s /proc x/target && ln -s x home && echo planted`)
	if res.Output != "planted\n" || res.Confinement.Overlays != 1 {
		t.Fatalf("first: %q, %+v", res.Output, res.Confinement)
	}
	z := oneZygote(t, b)
	s := spec
	s.Shell, s.Timeout = "true", time.Minute
	_, err := b.Run(context.Background(), &s) // the overlay's path holds a link: refused
	if err == nil {
		t.Fatal("a command ran with a link on the way to its overlay")
	}
	// Another command, elsewhere, takes the link away.
	if err := os.Remove(filepath.Join(dir, "home")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "home2"), filepath.Join(dir, "home")); err != nil {
		t.Fatal(err)
	}
	res = boxRun(t, b, spec, mounts)
	if oneZygote(t, b) == z {
		t.Log("the same zygote ran the command with the link and the next")
	}
	if res.Output != want {
		t.Fatalf("the mounts were\n%s\nand are\n%s", want, res.Output)
	}
}

// TestBoxAttackZygoteProc: the zygote is the command's PID 1, and only
// one thread of it is confined; the others keep root's capabilities. A
// command (root, no capability) must not reach its memory, descriptors,
// environment, root or working directory through /proc, by any thread.
// What refuses it is the ptrace check: every thread of the zygote holds
// capabilities the command lacks. With the confined thread's permitted
// set emptied (and no CLONE_NEWIPC, which needs it) this fails: its
// memory, descriptors and cwd are open to the command, and a ptrace(2) or
// process_vm_writev(2) on that thread (same Landlock domain) would write
// the memory of the zygote's unconfined threads.
func TestBoxAttackZygoteProc(t *testing.T) {
	needZygote(t)
	spec := sandbox.Spec{Dir: t.TempDir(), Limits: sandbox.DefaultLimits}
	b := newBox(t, spec)
	res := boxRun(t, b, spec, `n=0
for p in /proc/1 /proc/1/task/*; do
	n=$((n+1))
	for f in mem environ; do
		(exec 3<$p/$f) 2>/dev/null && echo "read $p/$f"
		(exec 3>$p/$f) 2>/dev/null && echo "write $p/$f"
	done
	ls $p/fd/ | while read fd; do
		readlink $p/fd/$fd 2>/dev/null && echo "link $p/fd/$fd"
		(exec 3<$p/fd/$fd) 2>/dev/null && echo "open $p/fd/$fd"
	done
	ls $p/root/ >/dev/null 2>&1 && echo "root $p"
	ls $p/cwd/ >/dev/null 2>&1 && echo "cwd $p"
done
echo "$n"`)
	if res.Output == "" || strings.Count(res.Output, "\n") != 1 || res.Output == "1\n" {
		t.Fatalf("reached the zygote: %q", res.Output)
	}
}

// TestBoxAttackSurvivors: what a command leaves running, however it left
// it (a session of its own, a double fork, a stopped process, a user and
// PID namespace of its own, a listener on an abstract socket of the
// network namespace the Box's commands share) is gone when the next
// command starts.
func TestBoxAttackSurvivors(t *testing.T) {
	needZygote(t)
	spec := sandbox.Spec{Dir: t.TempDir(), Limits: sandbox.DefaultLimits}
	b := newBox(t, spec)
	boxRun(t, b, spec, `setsid sleep 1000 &
(sleep 1000 & ) &
sh -c 'kill -STOP $$; sleep 1000' &
nohup sh -c 'trap "" TERM HUP INT; sleep 1000' >/dev/null 2>&1 &
unshare -U -p -f sleep 1000 2>/dev/null &
command -v socat >/dev/null && socat ABSTRACT-LISTEN:hrns-box-attack,fork EXEC:"echo left" 2>/dev/null &
sleep 0.2; true`)
	res := boxRun(t, b, spec, `for p in /proc/[0-9]*; do n=${p#/proc/}; [ $n = 1 ] || [ $n = $$ ] || cat $p/cmdline; done
command -v socat >/dev/null && socat - ABSTRACT-CONNECT:hrns-box-attack 2>/dev/null </dev/null; true`)
	if res.Output != "" {
		t.Fatalf("left by the command before: %q", res.Output)
	}
}

// TestBoxAttackSignalZygote: the zygote is a process of the command's
// user. Landlock's signal scope keeps a command from signalling it, but
// not through its confined thread, whose domain is the command's: a
// SIGTERM or SIGQUIT there ended the zygote (the Go runtime's default),
// and the command with it. A zygote takes every signal a command may send
// it and goes on.
func TestBoxAttackSignalZygote(t *testing.T) {
	needZygote(t)
	spec := sandbox.Spec{Dir: t.TempDir(), Limits: sandbox.DefaultLimits}
	b := newBox(t, spec)
	// Each command starts with every signal at its default.
	if res := boxRun(t, b, spec, `grep -E '^Sig(Ign|Blk)' /proc/self/status`); res.Output != "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n" {
		t.Fatalf("signals: %q", res.Output)
	}
	z := oneZygote(t, b)
	res := boxRun(t, b, spec, `for t in /proc/1/task/*; do for s in $(seq 1 31) $(seq 34 64); do kill -$s ${t##*/} 2>/dev/null; done; done; echo done`)
	if res.Output != "done\n" || res.ExitCode != 0 {
		t.Fatalf("output %q, exit %d", res.Output, res.ExitCode)
	}
	boxRun(t, b, spec, "true")
	if oneZygote(t, b) != z {
		t.Fatal("the zygote was replaced")
	}
}

// TestBoxAttackForkBomb: a zygote's commands are bounded by its pids
// cgroup (or RLIMIT_NPROC) as Run's are, and the next command finds the count back: it can
// start as many processes as the first.
func TestBoxAttackForkBomb(t *testing.T) {
	needZygote(t)
	limits := sandbox.DefaultLimits
	limits.Processes = 40
	spec := sandbox.Spec{Dir: t.TempDir(), Limits: limits}
	b := newBox(t, spec)
	// A child starts sleeps until it cannot; the shell then counts the
	// processes with builtins alone.
	const bomb = `sh -c 'n=0; while [ $n -lt 100 ]; do sleep 1000 & n=$((n+1)); done' 2>/dev/null
c=0; for p in /proc/[0-9]*; do c=$((c+1)); done; echo $c`
	first := boxRun(t, b, spec, bomb)
	// Another user without a pids cgroup gets RLIMIT_NPROC, as from
	// Run: set on each command, it counts its user namespace's
	// processes.
	if p := first.Confinement.Processes; p != "cgroup" && (p != "rlimit" || os.Geteuid() == 0) {
		t.Skip("no pids cgroup here: " + p)
	}
	// The cgroup holds the zygote too; RLIMIT_NPROC counts the
	// command's user namespace alone, and /proc lists the zygote (PID
	// 1) besides.
	most := limits.Processes - 1
	if first.Confinement.Processes == "rlimit" {
		most = limits.Processes + 1
	}
	n1, err := strconv.Atoi(strings.TrimSpace(first.Output))
	if err != nil || n1 > most {
		t.Fatalf("processes: %q", first.Output)
	}
	// The zygote's own threads count too, and it may have started one
	// more since: a few less.
	next := boxRun(t, b, spec, bomb)
	if n2, err := strconv.Atoi(strings.TrimSpace(next.Output)); err != nil || n2 < n1-4 {
		t.Fatalf("the first command had %d processes, the next %q", n1, next.Output)
	}
}

// TestBoxAttackScratchTooFull: a Box empties a command's Scratch with a
// bound on the entries it removes (here lowered to one batch of 1,024
// names); a command leaving more must not leave the rest to the next.
func TestBoxAttackScratchTooFull(t *testing.T) {
	needZygote(t)
	t.Cleanup(sandbox.SetRemoveRounds(1))
	spec := sandbox.Spec{Dir: t.TempDir(), Scratch: t.TempDir(), Limits: sandbox.DefaultLimits}
	b := newBox(t, spec)
	boxRun(t, b, spec, `cd "$TMPDIR" && i=0; while [ $i -lt 1100 ]; do : > f$i; i=$((i+1)); done`)
	if res := boxRun(t, b, spec, `ls -A "$TMPDIR" | wc -l`); strings.TrimSpace(res.Output) != "0" {
		t.Fatalf("the next command's Scratch holds %s entries", res.Output)
	}
}

// TestBoxZygoteNotDumpable: a zygote is not dumpable, so that reading or
// writing its memory (ptrace, process_vm_readv, /proc/PID/mem) needs
// CAP_SYS_PTRACE even of a process holding every other capability it
// holds. Its threads other than the confined one keep root's
// capabilities; what keeps a command out of them is the ptrace check on
// capabilities, and this is a second barrier, checked here with a
// thread of the test that holds the zygote's permitted capabilities but
// not CAP_SYS_PTRACE in its effective set (a dumpable zygote lets it
// read).
func TestBoxZygoteNotDumpable(t *testing.T) {
	needZygote(t)
	needRoot(t, "the zygote of another user is root in its user namespace, whose capabilities that user holds outside it (TestBoxAttackZygotePtrace attacks it from a command)")
	spec := sandbox.Spec{Dir: t.TempDir(), Limits: sandbox.DefaultLimits}
	b := newBox(t, spec)
	boxRun(t, b, spec, "true")
	pid := oneZygote(t, b)
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	lo, _, _ := strings.Cut(string(maps), "-")
	addr, err := strconv.ParseUint(lo, 16, 64)
	if err != nil {
		t.Fatalf("maps %q: %v", maps[:min(len(maps), 80)], err)
	}
	errc := make(chan error, 1)
	go func() {
		// This thread's credentials change: it ends with the goroutine
		// (locked, never unlocked).
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		data[unix.CAP_SYS_PTRACE/32].Effective &^= 1 << (unix.CAP_SYS_PTRACE % 32)
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			errc <- err
			return
		}
		buf := make([]byte, 16)
		_, err := unix.ProcessVMReadv(pid, []unix.Iovec{{Base: &buf[0], Len: uint64(len(buf))}},
			[]unix.RemoteIovec{{Base: uintptr(addr), Len: len(buf)}}, 0)
		errc <- err
	}()
	if err := <-errc; !errors.Is(err, unix.EPERM) {
		t.Fatalf("reading the zygote's memory without CAP_SYS_PTRACE: %v, want EPERM", err)
	}
}
