//go:build linux

package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/sandbox"
	"golang.org/x/sys/unix"
)

// The attacks of TestEscape run as root, as a model-written command
// would: each tries to break one property the sandbox promises
// (docs/codemode.md) and prints "ESCAPED <what>" where it succeeds, then
// "DONE" (so that an attack that stopped early, or killed the helper, is
// seen). Host-side checks follow where the harm would show outside.

// escapeEnv is what an attack aims at, outside the command's paths.
type escapeEnv struct {
	dir        string // the command's working directory
	secret     string // held in files and an environment it must not read
	secretPath string // a host file holding secret, in no granted path
	outside    string // a host directory it must not write
	decoy      *exec.Cmd
	bins       string // a ReadOnly directory of set-user-ID and capable binaries
	keyDesc    string // a key of root's user keyring, holding secret
	tcp, udp   string // loopback listeners of the host
	tcpHits    *atomic.Int64
	udpConn    net.PacketConn
	abstract   string // an abstract Unix socket of the host
	absHits    *atomic.Int64
}

type escapeAttack struct {
	name  string
	shell string
	// isolatedOnly: what only the namespaces can stop (or an attack that
	// would reach the host's processes without them).
	isolatedOnly bool
	spec         func(*sandbox.Spec, *escapeEnv)
	// after checks the host once the command is gone.
	after func(*testing.T, *escapeEnv, *sandbox.Result)
}

// escapeAttacks: each runs one stage and two, isolated and not.
var escapeAttacks = []escapeAttack{
	{
		name: "capabilities",
		shell: `for s in self; do
  grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/$s/status | grep -v '0000000000000000$' | sed 's/^/ESCAPED /'
  grep -qE '^NoNewPrivs:[[:space:]]+1$' /proc/$s/status || echo ESCAPED no_new_privs unset
done
sh -c 'grep -E "^Cap(Prm|Eff)" /proc/self/status | grep -v "0000000000000000$" | sed "s/^/ESCAPED grandchild /"'
capsh --has-p=cap_sys_admin 2>/dev/null && echo ESCAPED capsh
echo DONE`,
	},
	{
		// Set-user-ID root and file-capability binaries, in a ReadOnly
		// path (mounted as it is) and in the working directory
		// (nosuid): no_new_privs and the empty bounding set keep
		// their privileges from the command.
		name: "setuid and file capabilities",
		shell: `for b in $BINS/suidgrep $BINS/capgrep ./suidgrep ./capgrep; do
  out=$($b -E '^(Cap(Prm|Eff)|Uid)' /proc/self/status) && echo "RAN $b" || echo "NOTRUN $b"
  echo "$out" | grep -E '^Cap' | grep -v '0000000000000000$' | sed "s|^|ESCAPED $b |"
done
echo DONE`,
		after: func(t *testing.T, _ *escapeEnv, res *sandbox.Result) {
			// Each ran without its privileges, or was refused
			// (a file whose capabilities cannot be granted).
			ran, refused := strings.Count(res.Output, "RAN "), strings.Count(res.Output, "capgrep: Operation not permitted")
			if ran+refused != 4 || !strings.Contains(res.Output, "RAN ./suidgrep") {
				t.Errorf("%d of the 4 privileged binaries ran, %d were refused:\n%s", ran, refused, res.Output)
			}
		},
	},
	{
		// The command cannot give a file capabilities, directly or in
		// a user namespace of its own, that would be live outside.
		name: "file capabilities written",
		shell: `cp /bin/true t && chmod 755 t
setcap cap_setuid,cap_sys_admin+ep t 2>/dev/null && echo ESCAPED setcap
unshare -U setcap cap_setuid+ep t 2>/dev/null && echo ESCAPED setcap in a user namespace
unshare -Ur setcap cap_setuid+ep t 2>/dev/null && echo ESCAPED setcap as root of a user namespace
getcap t
echo DONE`,
		after: func(t *testing.T, env *escapeEnv, _ *sandbox.Result) {
			filepath.WalkDir(env.dir, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && d.Name() != "capgrep" { // capgrep is the test's
					buf := make([]byte, 64)
					if n, err := unix.Lgetxattr(p, "security.capability", buf); err == nil {
						t.Errorf("%s has file capabilities (%x)", p, buf[:n])
					}
				}
				return nil
			})
		},
	},
	{
		name: "host files",
		shell: `for p in $SECRET_PATH /proc/1/root$SECRET_PATH /proc/$PPID/root$SECRET_PATH /proc/$DECOY/root$SECRET_PATH /proc/1/cwd/../../../..$SECRET_PATH /proc/$PPID/task/*/root$SECRET_PATH /proc/1/task/*/root$SECRET_PATH; do
  cat $p 2>/dev/null && echo ESCAPED read $p
done
for f in environ cmdline; do for p in 1 $PPID $DECOY; do tr '\0' '\n' < /proc/$p/$f 2>/dev/null | grep -q HRNS_DECOY && echo ESCAPED $f $p; done; done
for p in 1 $PPID $DECOY; do cat /proc/$p/environ >/dev/null 2>&1 && echo ESCAPED environ $p; done
cat /etc/shadow >/dev/null 2>&1 && echo ESCAPED shadow
echo DONE`,
	},
	{
		// The helper (the namespace's init, outside the Landlock
		// domain): its descriptors (the status pipe: a forged exit
		// status), memory and maps.
		name: "helper's descriptors and memory",
		shell: `for p in 1 $PPID; do
  for f in 0 1 2 3 4 5 6 7 8 9; do
    readlink /proc/$p/fd/$f 2>/dev/null && echo ESCAPED readlink $p $f
    (: < /proc/$p/fd/$f) 2>/dev/null && echo ESCAPED open $p $f
  done
  (echo '{"exited":0}' > /proc/$p/fd/4) 2>/dev/null && echo ESCAPED forged status $p
  dd if=/proc/$p/mem of=/dev/null count=0 2>/dev/null && echo ESCAPED mem $p
  cat /proc/$p/maps >/dev/null 2>&1 && echo ESCAPED maps $p
  cat /proc/$p/stack >/dev/null 2>&1 && echo ESCAPED stack $p
  ls /proc/$p/map_files/ >/dev/null 2>&1 && echo ESCAPED map_files $p
done
echo DONE; exit 3`,
		after: func(t *testing.T, _ *escapeEnv, res *sandbox.Result) {
			if res.ExitCode != 3 {
				t.Errorf("exit %d, want the command's 3", res.ExitCode)
			}
		},
	},
	{
		name: "ptrace",
		shell: `strace -o /dev/null true && echo CONTROL traced its own child
for p in 1 $PPID $DECOY; do
  timeout 5 strace -p $p -o /dev/null 2>/dev/null; [ $? -ne 1 ] && echo ESCAPED ptrace $p
done
echo DONE`,
		after: func(t *testing.T, _ *escapeEnv, res *sandbox.Result) {
			if !strings.Contains(res.Output, "CONTROL traced its own child") {
				t.Errorf("strace could not trace even the command's own child")
			}
		},
	},
	{
		// Signals to the helper (a Go program: SIGQUIT would end it,
		// and the command with it) and to a host process.
		name: "signals",
		shell: `for s in QUIT TERM HUP INT USR1 SEGV STOP KILL; do
  for p in 1 $PPID $DECOY; do kill -$s $p 2>/dev/null && echo ESCAPED kill -$s $p; done
done
kill -0 $DECOY 2>/dev/null && echo ESCAPED kill -0 decoy
sleep 0.2
echo DONE`,
		after: func(t *testing.T, env *escapeEnv, _ *sandbox.Result) {
			if err := env.decoy.Process.Signal(syscall.Signal(0)); err != nil {
				t.Errorf("the decoy is gone: %v", err)
			}
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", env.decoy.Process.Pid)); bytes.Contains(b, []byte(") T ")) {
				t.Errorf("the decoy was stopped: %s", b)
			}
		},
	},
	{
		// kill -1: every process the command may signal. Isolated,
		// that is its own namespace (the helper, its init, ignores
		// what it does not handle); without the namespaces Landlock's
		// scoping alone would stand between this and every process
		// of root on the host, so it runs only isolated.
		name:         "kill -1",
		isolatedOnly: true,
		shell: `kill -KILL -1; kill -QUIT -1; kill -0 -1 2>/dev/null
echo DONE`,
	},
	{
		name: "writes outside",
		shell: `for d in / /etc /usr /usr/bin /tmp /var /root /dev /dev/shm /sys/fs/cgroup $OUTSIDE /proc/1/root$OUTSIDE /proc/$PPID/root$OUTSIDE /proc/1/cwd/.. /proc/$PPID/cwd/..; do
  touch $d/hrns-escape 2>/dev/null && echo ESCAPED write $d
done
ln -s $OUTSIDE/hrns-escape link; echo x > link 2>/dev/null && echo ESCAPED write through a symbolic link
ln /etc/passwd hl 2>/dev/null && echo ESCAPED hard link
ln $SECRET_PATH hl2 2>/dev/null && echo ESCAPED hard link to the secret
mv $OUTSIDE moved 2>/dev/null && echo ESCAPED rename
(cat /proc/sys/kernel/hostname > /proc/sys/kernel/hostname) 2>/dev/null && echo ESCAPED sysctl
(echo 0 > /proc/self/oom_score_adj) 2>/dev/null && echo ESCAPED oom_score_adj
(echo 1 > /proc/sysrq-trigger) 2>/dev/null && echo ESCAPED sysrq
for f in $(find /sys/fs/cgroup -maxdepth 3 -name cgroup.procs 2>/dev/null); do (echo $$ > $f) 2>/dev/null && echo ESCAPED cgroup $f; done
echo DONE`,
		after: func(t *testing.T, env *escapeEnv, _ *sandbox.Result) {
			entries, err := os.ReadDir(env.outside)
			if err != nil || len(entries) != 0 {
				t.Errorf("the directory outside: %v, %v", entries, err)
			}
			for _, p := range []string{"/etc/hrns-escape", "/usr/hrns-escape", "/tmp/hrns-escape", "/hrns-escape"} {
				if _, err := os.Lstat(p); err == nil {
					os.Remove(p)
					t.Errorf("%s was written", p)
				}
			}
		},
	},
	{
		// The devices every command may write (/dev/null, /dev/zero,
		// /dev/full, /dev/tty) are the host's nodes: root owns them,
		// and Landlock does not govern a file's mode, owner or times.
		// A chmod 000 /dev/null would break the host's other users.
		// The probes set what is there already (same mode, owner;
		// times kept by the check), so that a hole changes nothing.
		name:         "host devices' metadata",
		isolatedOnly: true,
		shell: `for d in /dev/null /dev/zero /dev/full /dev/tty; do
  [ -e $d ] || continue
  chmod 666 $d 2>/dev/null && echo ESCAPED chmod $d
  chown 0:0 $d 2>/dev/null && echo ESCAPED chown $d
  touch -c -r $d $d 2>/dev/null && echo ESCAPED touch $d
done
echo x > /dev/null && head -c 3 /dev/zero | od -An -tx1 | grep -q '00 00 00' && echo WRITES WORK
echo DONE`,
		after: func(t *testing.T, _ *escapeEnv, res *sandbox.Result) {
			if !strings.Contains(res.Output, "WRITES WORK") {
				t.Errorf("the devices are no longer usable:\n%s", res.Output)
			}
		},
	},
	{
		// The root's read-only binds (made with mount_setattr):
		// remounts, unmounts and mount_setattr(2) itself, also from a
		// user and mount namespace of the command's own, where it
		// holds CAP_SYS_ADMIN but the mounts are locked.
		name:         "remount",
		isolatedOnly: true,
		shell: `cat > try.pl <<'EOF'
my $w = shift;
if ($w eq "userns") {
  # unshare(CLONE_NEWUSER|CLONE_NEWNS) in this process, which keeps the
  # namespace's capabilities (an exec without a uid map would lose them).
  syscall(272, 0x10000000|0x00020000) == 0 or die "unshare: $!\n";
  open(my $st, "<", "/proc/self/status"); while (<$st>) { print "USERNS $_" if /^CapEff/ }
}
my ($none, $tmpfs, $proc, $local, $empty) = ("none", "tmpfs", "proc", "/usr/local", "");
for my $p (@ARGV) {
  my $a = pack("QQQQ", 0, 1|2, 0, 0); # attr_clr: MOUNT_ATTR_RDONLY|MOUNT_ATTR_NOSUID
  syscall(442, -100, $p, 0x8000, $a, 32) == 0 and print "ESCAPED $w mount_setattr $p\n";
  my $t = syscall(428, -100, $p, 1|0x80000|0x8000); # open_tree(OPEN_TREE_CLONE|AT_RECURSIVE)
  if ($t >= 0) {
    syscall(442, $t, $empty, 0x1000|0x8000, $a, 32) == 0 and print "ESCAPED $w mount_setattr on a clone of $p\n";
    syscall(429, $t, $empty, -100, $local, 4) == 0 and print "ESCAPED $w move_mount of a clone of $p\n";
  }
  syscall(165, $none, $p, 0, 32|4096, 0) == 0 and print "ESCAPED $w remount rw $p\n";
  syscall(165, $none, $p, 0, 32, 0) == 0 and print "ESCAPED $w remount rw,suid $p\n";
  syscall(166, $p, 2) == 0 and print "ESCAPED $w umount $p\n";
}
syscall(165, $none, $local, $tmpfs, 0, 0) == 0 and print "ESCAPED $w mount tmpfs\n";
syscall(165, $proc, $local, $proc, 0, 0) == 0 and print "ESCAPED $w mount proc\n";
open(my $o, ">", "/usr/hrns-escape") and print "ESCAPED $w wrote /usr\n";
open(my $o2, ">>", "/etc/passwd") and print "ESCAPED $w opened /etc/passwd to write\n";
print "TRIED $w\n";
EOF
for w in here userns; do perl try.pl $w /usr /etc/passwd / /proc/sys /sys/fs/cgroup "$PWD"; done
for m in /usr "$PWD"; do mount -o remount,rw,bind $m 2>/dev/null && echo ESCAPED mount -o remount $m; done
unshare -m --propagation unchanged true 2>/dev/null && echo ESCAPED unshare -m
echo DONE`,
		after: func(t *testing.T, _ *escapeEnv, res *sandbox.Result) {
			if !strings.Contains(res.Output, "TRIED here\n") || !strings.Contains(res.Output, "TRIED userns\n") ||
				!strings.Contains(res.Output, "USERNS CapEff:\t000001ffffffffff") {
				t.Errorf("not every way was tried:\n%s", res.Output)
			}
		},
	},
	{
		// Root's keyrings are not namespaced: a command could read the
		// keys host processes of root keep there, and leave keys
		// behind for them and for later commands.
		name: "kernel keyrings",
		shell: `perl -e '
my ($desc) = @ARGV;
for my $ring (-4, -5, -3) {
  my $t = q(user); my $d = qq(hrns-escape-$ring); my $v = q(planted);
  my $k = syscall(248, $t, $d, $v, length($v), $ring);
  print qq(ESCAPED add_key to $ring\n) if $k >= 0;
  my $f = syscall(250, 10, $ring, $t, $desc, 0);
  print qq(ESCAPED found the host key in $ring\n) if $f >= 0;
}
my $g = syscall(250, 0, -4, 0); print qq(ESCAPED the user keyring $g\n) if $g >= 0;
' "$KEYDESC"
[ -x $BINS/keyctl ] && $BINS/keyctl
echo DONE`,
		after: func(t *testing.T, env *escapeEnv, _ *sandbox.Result) {
			for _, ring := range []int{unix.KEY_SPEC_USER_KEYRING, unix.KEY_SPEC_USER_SESSION_KEYRING} {
				for _, d := range []string{"hrns-escape-" + strconv.Itoa(ring), "hrns-escape--4", "hrns-escape--5"} {
					if id, err := unix.KeyctlSearch(ring, "user", d, 0); err == nil {
						unix.KeyctlInt(unix.KEYCTL_UNLINK, id, ring, 0, 0)
						t.Errorf("the command left key %q in keyring %d", d, ring)
					}
				}
			}
		},
	},
	{
		name: "network denied",
		shell: `cut -d: -f1 /proc/net/dev | tail -n +3 | tr -d ' ' | grep -vx lo | sed 's/^/ESCAPED interface /'
ip=$(hostname -I 2>/dev/null | cut -d' ' -f1)
for a in 127.0.0.1:$TCP $ip:$TCP; do timeout 5 bash -c "echo x > /dev/tcp/${a%:*}/${a#*:}" 2>/dev/null && echo ESCAPED tcp $a; done
timeout 5 bash -c "echo x > /dev/udp/127.0.0.1/$UDP" 2>/dev/null
socat -u OPEN:/dev/null ABSTRACT-CONNECT:$ABSTRACT 2>/dev/null && echo ESCAPED abstract
echo DONE`,
		after: func(t *testing.T, env *escapeEnv, _ *sandbox.Result) {
			if n := env.tcpHits.Load(); n != 0 {
				t.Errorf("the host's TCP listener accepted %d connections", n)
			}
			if n := env.absHits.Load(); n != 0 {
				t.Errorf("the host's abstract socket accepted %d connections", n)
			}
			env.udpConn.SetReadDeadline(time.Now())
			if n, _, err := env.udpConn.ReadFrom(make([]byte, 16)); err == nil {
				t.Errorf("the host's UDP listener received %d bytes", n)
			}
		},
	},
	{
		// With the network allowed (no network namespace), abstract
		// Unix sockets of the host stay out of reach (Landlock's
		// scoping).
		name:  "network allowed, abstract sockets",
		spec:  func(s *sandbox.Spec, _ *escapeEnv) { s.AllowNetwork = true },
		shell: `socat -u OPEN:/dev/null ABSTRACT-CONNECT:$ABSTRACT 2>/dev/null && echo ESCAPED abstract; echo DONE`,
		after: func(t *testing.T, env *escapeEnv, _ *sandbox.Result) {
			if n := env.absHits.Load(); n != 0 {
				t.Errorf("the host's abstract socket accepted %d connections", n)
			}
		},
	},
	{
		name:  "descriptors",
		shell: `echo "FDS $(ls /proc/self/fd | tr '\n' ' ')"; echo DONE`,
		after: func(t *testing.T, _ *escapeEnv, res *sandbox.Result) {
			if !strings.Contains(res.Output, "FDS 0 1 2 3 \n") {
				t.Errorf("descriptors beyond the standard three:\n%s", res.Output)
			}
		},
	},
	{
		name: "descriptors with a proxy and input",
		spec: func(s *sandbox.Spec, _ *escapeEnv) {
			s.Proxy = &sandbox.Proxy{Dial: refuseDial}
			s.Stdin = strings.NewReader("in\n")
		},
		shell: `read x; echo "FDS $(ls /proc/self/fd | tr '\n' ' ')"; echo DONE`,
		after: func(t *testing.T, _ *escapeEnv, res *sandbox.Result) {
			if !strings.Contains(res.Output, "FDS 0 1 2 3 \n") {
				t.Errorf("descriptors beyond the standard three:\n%s", res.Output)
			}
		},
	},
	{
		// The limits hold for the command and its children: none can
		// raise a hard limit back.
		name: "limits raised",
		shell: `for l in t v f; do (ulimit -H -$l unlimited) 2>/dev/null && echo ESCAPED raised -$l; done
prlimit --pid $$ --cpu=unlimited:unlimited 2>/dev/null && echo ESCAPED prlimit
sh -c 'grep -E "^Max (cpu time|address space|file size)" /proc/self/limits' | grep unlimited | sed 's/^/ESCAPED /'
echo DONE`,
	},
	{
		// A fork bomb that also leaves the process group and the
		// session: the pids cgroup stops it, and nothing of it
		// outlives Run. (DONE comes first: the shell itself may be
		// refused a fork, and exit.)
		name: "fork bomb",
		spec: func(s *sandbox.Spec, _ *escapeEnv) {
			s.Limits.Processes = 24
			s.Timeout = 3 * time.Second
			s.Grace = 500 * time.Millisecond
		},
		shell: `b() { setsid sh -c 'trap "" TERM HUP; while :; do sleep 1 & done' & b & b & wait; }; echo DONE; b`,
		after: func(t *testing.T, _ *escapeEnv, res *sandbox.Result) {
			if res.Confinement.Processes != "cgroup" {
				t.Errorf("the processes were bounded by %q", res.Confinement.Processes)
			}
			if !strings.Contains(res.Output, "Cannot fork") {
				t.Errorf("the bomb never hit the limit")
			}
			if pid := findCmdline("trap \"\" TERM HUP"); pid != "" && !gone(pid) {
				t.Errorf("process %s of the fork bomb outlived Run", pid)
			}
		},
	},
}

// findCmdline is a process whose command line contains s, or "".
func findCmdline(s string) string {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && bytes.Contains(b, []byte(s)) {
			return e.Name()
		}
	}
	return ""
}

var escapedLine = regexp.MustCompile(`(?m)^.*ESCAPED.*$`)

// TestEscape runs each attack of escapeAttacks on both of the helper's
// paths (one stage, where it starts the command from a thread it
// confines, and two), isolated and not, and checks that it got nowhere.
func TestEscape(t *testing.T) {
	needLandlock(t, 6)
	if os.Geteuid() != 0 {
		t.Skip("the attacks are those of a command run by root")
	}
	env := newEscapeEnv(t)
	for _, a := range escapeAttacks {
		for _, isolated := range []bool{true, false} {
			if a.isolatedOnly && !isolated {
				continue
			}
			for _, two := range []bool{false, true} {
				name := fmt.Sprintf("%s/isolated=%v/two-stages=%v", a.name, isolated, two)
				t.Run(name, func(t *testing.T) {
					env.dir = t.TempDir()
					prepareBins(t, env.dir)
					spec := sandbox.Spec{
						Shell:  a.shell,
						Dir:    env.dir,
						Limits: sandbox.DefaultLimits,
						Env: []string{
							"SECRET_PATH=" + env.secretPath, "OUTSIDE=" + env.outside,
							"DECOY=" + strconv.Itoa(env.decoy.Process.Pid), "BINS=" + env.bins,
							"KEYDESC=" + env.keyDesc, "TCP=" + portOf(env.tcp), "UDP=" + portOf(env.udp),
							"ABSTRACT=" + env.abstract,
						},
						ReadOnly: []string{env.bins},
						Timeout:  time.Minute,
					}
					if a.spec != nil {
						a.spec(&spec, env)
					}
					env.tcpHits.Store(0)
					env.absHits.Store(0)
					sandbox.SetTwoStages(two)
					sandbox.SetNoIsolation(!isolated)
					res, err := sandbox.Run(t.Context(), &spec)
					sandbox.SetTwoStages(false)
					sandbox.SetNoIsolation(false)
					if err != nil {
						t.Fatalf("Run: %v", err)
					}
					if res.Confinement.Isolated != isolated || !res.Confinement.Confined {
						t.Fatalf("confinement: %s", res.Confinement.Summary())
					}
					if esc := escapedLine.FindAllString(res.Output, -1); len(esc) > 0 {
						t.Errorf("escaped:\n%s", strings.Join(esc, "\n"))
					}
					if strings.Contains(res.Output, env.secret) {
						t.Errorf("the secret was read")
					}
					if !strings.Contains(res.Output, "DONE\n") {
						t.Errorf("the attack did not run to its end (exit %d, signal %q)", res.ExitCode, res.Signal)
					}
					if a.after != nil {
						a.after(t, env, res)
					}
					t.Logf("%s\noutput:\n%s", res.Confinement.Summary(), res.Output)
				})
			}
		}
	}
}

// refuseDial is a Proxy's Dial that refuses everything.
func refuseDial(ctx context.Context, network, address string) (net.Conn, error) {
	return nil, sandbox.ErrDestinationRefused
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// newEscapeEnv sets up the targets: a secret file in a directory the
// command is not granted, a directory outside, a decoy process holding
// the secret in its environment, a key in root's user keyring, loopback
// listeners and a ReadOnly directory of privileged binaries.
func newEscapeEnv(t *testing.T) *escapeEnv {
	t.Helper()
	env := &escapeEnv{
		secret:  fmt.Sprintf("hrns-secret-%d-%d", os.Getpid(), time.Now().UnixNano()),
		outside: t.TempDir(),
		tcpHits: new(atomic.Int64),
		absHits: new(atomic.Int64),
	}
	hidden := t.TempDir()
	env.secretPath = filepath.Join(hidden, "secret")
	if err := os.WriteFile(env.secretPath, []byte(env.secret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env.decoy = exec.Command("sleep", "3600")
	env.decoy.Env = []string{"HRNS_DECOY=" + env.secret}
	if err := env.decoy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.decoy.Process.Kill(); env.decoy.Wait() })

	env.keyDesc = "hrns-escape-host-" + strconv.Itoa(os.Getpid())
	if id, err := unix.AddKey("user", env.keyDesc, []byte(env.secret), unix.KEY_SPEC_USER_KEYRING); err == nil {
		t.Cleanup(func() { unix.KeyctlInt(unix.KEYCTL_UNLINK, id, unix.KEY_SPEC_USER_KEYRING, 0, 0) })
	}

	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	env.tcp = ln.Addr().String()
	go accept(ln, env.tcpHits)
	if env.udpConn, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.udpConn.Close() })
	env.udp = env.udpConn.LocalAddr().String()
	env.abstract = fmt.Sprintf("hrns-escape-%d", os.Getpid())
	al, err := net.Listen("unix", "@"+env.abstract)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { al.Close() })
	go accept(al, env.absHits)

	env.bins = t.TempDir()
	prepareBins(t, env.bins)
	if runtime.GOARCH == "amd64" {
		// keyctl(2) by the i386 and x32 conventions too, which a
		// filter of the amd64 numbers alone would let through.
		src := filepath.Join(t.TempDir(), "keyctl.c")
		if err := os.WriteFile(src, []byte(keyctlC), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("gcc", "-O", "-o", filepath.Join(env.bins, "keyctl"), src).CombinedOutput(); err != nil {
			t.Logf("no keyctl probe (gcc: %v: %s)", err, out)
		}
	}
	return env
}

// keyctlC asks for the user keyring's ID (keyctl KEYCTL_GET_KEYRING_ID,
// KEY_SPEC_USER_KEYRING) by each system call convention of amd64.
const keyctlC = `#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(void) {
	long r = syscall(250, 0, -4, 0), r32;
	if (r >= 0) printf("ESCAPED keyctl %ld\n", r);
	__asm__ volatile ("int $0x80" : "=a"(r32) : "a"(288), "b"(0), "c"(-4), "d"(0) : "memory");
	if (r32 >= 0) printf("ESCAPED i386 keyctl %ld\n", r32);
	r = syscall(0x40000000 | 250, 0, -4, 0);
	if (r >= 0) printf("ESCAPED x32 keyctl %ld\n", r);
	printf("KEYCTL PROBED\n");
	return 0;
}
`

func accept(ln net.Listener, hits *atomic.Int64) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		hits.Add(1)
		c.Close()
	}
}

// prepareBins puts in dir a set-user-ID root copy of grep and one with
// file capabilities (CAP_SYS_ADMIN, CAP_DAC_OVERRIDE effective).
func prepareBins(t *testing.T, dir string) {
	t.Helper()
	grep, err := os.ReadFile("/bin/grep")
	if err != nil {
		t.Fatal(err)
	}
	suid, capable := filepath.Join(dir, "suidgrep"), filepath.Join(dir, "capgrep")
	for _, p := range []string{suid, capable} {
		if err := os.WriteFile(p, grep, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(suid, 0o4755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("setcap", "cap_sys_admin,cap_dac_override+ep", capable).CombinedOutput(); err != nil {
		t.Fatalf("setcap: %v: %s", err, out)
	}
}

// TestConfiningThreadEnds: run as root, the helper starts the command
// from a thread it confines alone (no_new_privs, Landlock, the seccomp
// filter, the capability sets). That thread must end with its goroutine:
// returned to the Go scheduler it would run the helper's other work
// confined (or, the other way round, an unconfined thread would have
// started the command). While the command runs, no thread of the helper
// has no_new_privs or a seccomp filter, and the command has both.
func TestConfiningThreadEnds(t *testing.T) {
	needLandlock(t, 1)
	if os.Geteuid() != 0 {
		t.Skip("one stage is for root")
	}
	for _, isolated := range []bool{true, false} {
		for _, two := range []bool{false, true} {
			t.Run(fmt.Sprintf("isolated=%v/two-stages=%v", isolated, two), func(t *testing.T) {
				dir := t.TempDir()
				started := make(chan struct{})
				var once atomic.Bool
				out := writerFunc(func(p []byte) {
					if bytes.Contains(p, []byte("started")) && once.CompareAndSwap(false, true) {
						close(started)
					}
				})
				done := make(chan error, 1)
				sandbox.SetTwoStages(two)
				sandbox.SetNoIsolation(!isolated)
				defer sandbox.SetTwoStages(false)
				defer sandbox.SetNoIsolation(false)
				go func() {
					_, err := sandbox.Run(t.Context(), &sandbox.Spec{
						Shell:  "echo started; while [ ! -e stop ]; do sleep 0.02; done",
						Dir:    dir,
						Limits: sandbox.DefaultLimits,
						Output: out,
					})
					done <- err
				}()
				defer func() {
					os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644)
					if err := <-done; err != nil {
						t.Errorf("Run: %v", err)
					}
				}()
				select {
				case <-started:
				case err := <-done:
					done <- err
					t.Fatalf("the command ended before it started: %v", err)
				}
				helper := helperPID(t)
				// The confining thread ends once the command has
				// started: wait for it, boundedly.
				var confined []string
				for range 1000 {
					confined = confinedThreads(helper)
					if len(confined) == 0 {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
				if len(confined) > 0 {
					t.Errorf("threads of the helper still confined: %s", strings.Join(confined, "; "))
				}
				kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", helper, helper))
				var cmdPID string
				for _, task := range taskIDs(helper) {
					b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", helper, task))
					if f := strings.Fields(string(b)); len(f) > 0 {
						cmdPID = f[0]
					}
				}
				if cmdPID == "" {
					t.Fatalf("the helper has no child (%q)", kids)
				}
				st, _ := os.ReadFile("/proc/" + cmdPID + "/status")
				if !regexp.MustCompile(`(?m)^NoNewPrivs:\s+1$`).Match(st) || !regexp.MustCompile(`(?m)^Seccomp:\s+2$`).Match(st) {
					t.Errorf("the command %s is not confined:\n%s", cmdPID, st)
				}
			})
		}
	}
}

// helperPID is the sandbox helper this test process started.
func helperPID(t *testing.T) int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		_, rest, _ := strings.Cut(string(stat), ") ")
		if f := strings.Fields(rest); len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) && string(cmdline) == "hrns-sandbox\x00" {
			return pid
		}
	}
	t.Fatal("no sandbox helper found")
	return 0
}

func taskIDs(pid int) []string {
	entries, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.Name())
	}
	return ids
}

// confinedThreads lists the threads of pid with no_new_privs or a seccomp
// filter.
func confinedThreads(pid int) []string {
	var confined []string
	for _, task := range taskIDs(pid) {
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, task))
		if err != nil {
			continue // ended
		}
		for line := range strings.Lines(string(st)) {
			f := strings.Fields(line)
			if len(f) == 2 && (f[0] == "NoNewPrivs:" || f[0] == "Seccomp:") && f[1] != "0" {
				confined = append(confined, task+" "+strings.TrimSpace(line))
			}
		}
	}
	return confined
}

// TestNotIsolatedRootSaysMetadata: without the namespaces, a command run by
// root changes the mode of a file of root outside its paths (Landlock
// does not govern metadata; here a file of the test, set-user-ID), and
// the confinement's note says it can. Isolated, it cannot reach the file.
func TestNotIsolatedRootSaysMetadata(t *testing.T) {
	needLandlock(t, 1)
	if os.Geteuid() != 0 {
		t.Skip("the hole is root's")
	}
	f := filepath.Join(t.TempDir(), "hostfile")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, isolated := range []bool{true, false} {
		t.Run(fmt.Sprintf("isolated=%v", isolated), func(t *testing.T) {
			defer os.Chmod(f, 0o644)
			sandbox.SetNoIsolation(!isolated)
			res := run(t, &sandbox.Spec{Command: []string{"chmod", "4755", f}})
			sandbox.SetNoIsolation(false)
			fi, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			changed := fi.Mode()&os.ModeSetuid != 0
			said := strings.Contains(res.Confinement.Summary(), "change the mode and times of any file of root")
			t.Logf("changed %v; %s", changed, res.Confinement.Summary())
			if isolated && (changed || said) {
				t.Errorf("isolated: changed %v, said %v", changed, said)
			}
			if !isolated && changed && !said {
				t.Errorf("the command made a file outside its paths set-user-ID, and the confinement does not say it could: %s", res.Confinement.Summary())
			}
		})
	}
}
