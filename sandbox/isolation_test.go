//go:build linux

package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/hrns-dev/hrns/sandbox"
	"golang.org/x/sys/unix"
)

// isolationHelper serves the tests of this file when the test binary is
// re-executed: it dials a Unix socket, or runs a command through the
// sandbox from a session whose controlling terminal is a pty. It reports
// whether it handled the run.
func isolationHelper() bool {
	if path := os.Getenv("SANDBOX_TEST_DIAL_UNIX"); path != "" {
		conn, err := net.DialTimeout("unix", path, 5*time.Second)
		if err != nil {
			fmt.Println("dial:", err)
			os.Exit(3)
		}
		conn.Close()
		fmt.Println("connected")
		os.Exit(0)
	}
	if sh := os.Getenv("SANDBOX_TEST_TTY_RUN"); sh != "" {
		// The control: this process, whose terminal the pty is, can
		// write to it.
		if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
			tty.WriteString("CONTROL\n")
			tty.Close()
		}
		dir, _ := os.MkdirTemp("", "tty-test-")
		res, err := sandbox.Run(context.Background(), &sandbox.Spec{Shell: sh, Dir: dir})
		os.RemoveAll(dir)
		if err != nil {
			fmt.Println("run:", err)
			os.Exit(1)
		}
		fmt.Print(res.Output)
		os.Exit(0)
	}
	return false
}

// needIsolation skips a test of what only the namespaces enforce where
// the kernel refuses them to a user other than root (user namespaces off or
// restricted). As root they are expected: the test runs, and fails if the
// command is not isolated.
func needIsolation(t *testing.T) {
	t.Helper()
	needLandlock(t, 1)
	if os.Geteuid() == 0 {
		return
	}
	if res := run(t, &sandbox.Spec{Shell: "true"}); !res.Confinement.Isolated {
		t.Skipf("the kernel does not isolate commands for this user: %s", res.Confinement.Summary())
	}
}

// TestProcessesHidden (issue 13, break 3): a command cannot list the
// host's processes nor read their command lines or environments: a
// server started with --api-key K showed K in /proc/<pid>/cmdline.
func TestProcessesHidden(t *testing.T) {
	needIsolation(t)
	const secret = "sk-DECOY-0123456789"
	decoy := exec.Command("/bin/sh", "-c", "sleep 100", "hrns-serve", "--api-key", secret)
	decoy.Env = []string{"HRNS_API_KEY=" + secret}
	decoy.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := decoy.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		syscall.Kill(-decoy.Process.Pid, syscall.SIGKILL)
		decoy.Wait()
	}()
	host := strconv.Itoa(decoy.Process.Pid)
	me := strconv.Itoa(os.Getpid())
	res := run(t, &sandbox.Spec{Shell: "cat /proc/" + host + "/cmdline /proc/" + host + "/environ /proc/" + me + "/cmdline; echo; " +
		"for p in /proc/[0-9]*; do echo \"$p $(tr '\\0' ' ' < $p/cmdline)\"; done; ps -e -o pid=,args="})
	t.Logf("output:\n%s", res.Output)
	if strings.Contains(res.Output, secret) {
		t.Errorf("the command read another process's secret:\n%s", res.Output)
	}
	if strings.Contains(res.Output, "hrns-serve") || strings.Contains(res.Output, "sleep 100") {
		t.Errorf("the command saw the decoy process:\n%s", res.Output)
	}
	// Only its own tree, in ls /proc and in ps: the sandbox's init, the
	// shell (and its subshells), tr and ps.
	own := regexp.MustCompile(`^(hrns-sandbox|/bin/sh -c |tr |ps )`)
	listed := 0
	for _, l := range strings.Split(res.Output, "\n") {
		m := regexp.MustCompile(`^/proc/(\d+) (.*)$`).FindStringSubmatch(l)
		if m == nil {
			m = regexp.MustCompile(`^\s+(\d+) (.*)$`).FindStringSubmatch(l)
		}
		if m == nil || m[2] == "" {
			continue
		}
		listed++
		if !own.MatchString(m[2]) {
			t.Errorf("the command sees process %s: %q", m[1], m[2])
		}
	}
	if listed < 4 {
		t.Errorf("only %d processes listed: the listing did not work", listed)
	}
	if !res.Confinement.Isolated {
		t.Errorf("not isolated: %s", res.Confinement.Summary())
	}
}

// TestUnixSocketOutside (issue 13, break 6): a pathname Unix socket
// outside the command's paths cannot be reached, with the network denied or
// allowed, nor an abstract socket of the host, and /proc/net/unix does not
// list them when the network is denied; a socket in the workdir still
// works.
func TestUnixSocketOutside(t *testing.T) {
	needIsolation(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	listen := func(t *testing.T, path string) <-chan struct{} {
		ln, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		accepted := make(chan struct{}, 16)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				accepted <- struct{}{}
				c.Close()
			}
		}()
		return accepted
	}
	outside := filepath.Join(t.TempDir(), "agent.sock")
	accepted := listen(t, outside)
	abstract := fmt.Sprintf("@hrns-sandbox-test-%d", os.Getpid())
	acceptedAbstract := listen(t, abstract)
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("network=%v", allow), func(t *testing.T) {
			dir := t.TempDir()
			res := run(t, &sandbox.Spec{
				Command:      []string{exe},
				Dir:          dir,
				Env:          []string{"SANDBOX_TEST_DIAL_UNIX=" + outside},
				ReadOnly:     []string{exe},
				AllowNetwork: allow,
			})
			if res.ExitCode != 3 || !strings.HasPrefix(res.Output, "dial: ") {
				t.Errorf("exit %d, output %q; want a refused dial", res.ExitCode, res.Output)
			}
			select {
			case <-accepted:
				t.Errorf("the listener outside accepted a connection from the sandbox")
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := exec.LookPath("socat"); err == nil {
				res := run(t, &sandbox.Spec{Shell: "socat -u OPEN:/dev/null UNIX-CONNECT:" + outside, AllowNetwork: allow})
				if res.ExitCode == 0 {
					t.Errorf("socat reached %s: %s", outside, res.Output)
				}
				select {
				case <-accepted:
					t.Errorf("the listener outside accepted socat's connection")
				case <-time.After(100 * time.Millisecond):
				}
			}

			// An abstract socket of the host: another network
			// namespace's, or scoped out by Landlock (ABI 6).
			if abi, _ := sandbox.Supported(); abi >= 6 || !allow {
				res := run(t, &sandbox.Spec{
					Command:      []string{exe},
					Env:          []string{"SANDBOX_TEST_DIAL_UNIX=" + abstract},
					ReadOnly:     []string{exe},
					AllowNetwork: allow,
				})
				if res.ExitCode != 3 || !strings.HasPrefix(res.Output, "dial: ") {
					t.Errorf("abstract socket: exit %d, output %q; want a refused dial", res.ExitCode, res.Output)
				}
				select {
				case <-acceptedAbstract:
					t.Errorf("the abstract listener accepted a connection from the sandbox")
				case <-time.After(100 * time.Millisecond):
				}
			}

			// The control: a socket in the workdir is reachable.
			inside := filepath.Join(dir, "own.sock")
			acceptedInside := listen(t, inside)
			res = run(t, &sandbox.Spec{
				Command:      []string{exe},
				Dir:          dir,
				Env:          []string{"SANDBOX_TEST_DIAL_UNIX=" + inside},
				ReadOnly:     []string{exe},
				AllowNetwork: allow,
			})
			if res.ExitCode != 0 || res.Output != "connected\n" {
				t.Errorf("exit %d, output %q; want a connection to the workdir's socket", res.ExitCode, res.Output)
			}
			select {
			case <-acceptedInside:
			case <-time.After(5 * time.Second):
				t.Errorf("the workdir's listener saw no connection")
			}
		})
	}
	// The socket table: with the network denied, the command's network
	// namespace lists none of the host's sockets.
	res := run(t, &sandbox.Spec{Shell: "cat /proc/net/unix"})
	if strings.Contains(res.Output, outside) || strings.Contains(res.Output, abstract) {
		t.Errorf("/proc/net/unix lists the host's socket:\n%s", res.Output)
	}
}

// TestNoControllingTerminal (issue 13): a command cannot write to the
// terminal of the process that runs it, past the output capture: it has
// no controlling terminal, and the terminal's device is out of reach.
func TestNoControllingTerminal(t *testing.T) {
	needLandlock(t, 1)
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer ptmx.Close()
	var unlock int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); errno != 0 {
		t.Fatal(errno)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	ptsName := fmt.Sprintf("/dev/pts/%d", n)
	pts, err := os.OpenFile(ptsName, os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pts.Close()

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A process in a session of its own, whose controlling terminal is
	// the pty, runs the command through the sandbox.
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "SANDBOX_TEST_TTY_RUN=echo LEAK-TTY > /dev/tty; echo LEAK-PTS > "+ptsName+"; echo done")
	cmd.Stdin = pts
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	pts.Close()
	ptmx.SetReadDeadline(time.Now().Add(2 * time.Second))
	var term bytes.Buffer
	buf := make([]byte, 4096)
	for {
		n, err := ptmx.Read(buf)
		term.Write(buf[:n])
		if err != nil || strings.Contains(term.String(), "LEAK") {
			break
		}
		if n == 0 {
			break
		}
		ptmx.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	}
	t.Logf("captured output:\n%s\nterminal:\n%s", out.String(), term.String())
	if !strings.Contains(term.String(), "CONTROL") {
		t.Fatalf("the control did not reach the terminal: the test does not test anything")
	}
	if strings.Contains(term.String(), "LEAK") {
		t.Errorf("the command wrote to the terminal:\n%s", term.String())
	}
	if !strings.Contains(out.String(), "done") {
		t.Errorf("the command did not run: %s", out.String())
	}
}

// TestNotIsolatedSaysSo: where the namespaces cannot be had, the command
// still runs, confined by Landlock, and the result says what it lacks.
func TestNotIsolatedSaysSo(t *testing.T) {
	sandbox.SetNoIsolation(true)
	defer sandbox.SetNoIsolation(false)
	res := run(t, &sandbox.Spec{Shell: "echo ran"})
	if res.Output != "ran\n" || res.Confinement.Isolated {
		t.Fatalf("output %q, isolated %v", res.Output, res.Confinement.Isolated)
	}
	if s := res.Confinement.Summary(); !strings.Contains(s, "not isolated") {
		t.Errorf("the summary does not say the command was not isolated: %s", s)
	}
}

// TestSameUser: the command runs as the caller's user and group, with no
// capabilities, whether or not it is root (a user other than root builds
// the isolated root as root of a user namespace, then becomes itself again
// in a nested one).
func TestSameUser(t *testing.T) {
	res := run(t, &sandbox.Spec{Shell: "id -u; id -g; grep CapEff /proc/self/status"})
	want := fmt.Sprintf("%d\n%d\nCapEff:\t0000000000000000\n", os.Geteuid(), os.Getegid())
	if res.Output != want {
		t.Errorf("output %q, want %q (%s)", res.Output, want, res.Confinement.Summary())
	}
}

// TestRootMountsReadOnly: in the command's root, every mount is read-only
// but those of the paths it may write and /proc (whose kernel settings,
// /proc/sys, are read-only): without Landlock too, the root confines
// writes, including to submounts brought along by a recursive bind.
func TestRootMountsReadOnly(t *testing.T) {
	needIsolation(t)
	t.Run("setattr", testRootMountsReadOnly)
	// As on a kernel before 5.12: the mount table read and each mount
	// remounted.
	sandbox.SetNoSetattr(true)
	defer sandbox.SetNoSetattr(false)
	t.Run("remount", testRootMountsReadOnly)
}

func testRootMountsReadOnly(t *testing.T) {
	dir, extra := t.TempDir(), t.TempDir()
	scratch := filepath.Join(t.TempDir(), "scratch")
	res := run(t, &sandbox.Spec{Shell: "cat /proc/self/mountinfo", Dir: dir, Scratch: scratch, ReadWrite: []string{extra}})
	// The devices the command may write are mounted read-only too: a
	// device is written through one all the same, and its node (the
	// host's) keeps its mode, owner and times (TestEscape).
	writable := map[string]bool{dir: true, scratch: true, extra: true, "/proc": true}
	seen := 0
	for _, line := range strings.Split(res.Output, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		seen++
		mp, opts := f[4], strings.Split(f[5], ",")
		ro := len(opts) > 0 && opts[0] == "ro"
		if writable[mp] == ro && !(mp == "/proc" && ro) {
			t.Errorf("%s is mounted %s", mp, f[5])
		}
	}
	if seen < 10 {
		t.Fatalf("only %d mounts in the root:\n%s", seen, res.Output)
	}
	for _, p := range []string{"/proc/sys", "/usr"} {
		if !strings.Contains(res.Output, " "+p+" ") {
			t.Errorf("%s is not a mount of the root:\n%s", p, res.Output)
		}
	}
}

// TestPrivateTmp: with PrivateTmp the command writes a /tmp of its own,
// where the host's files are not, and nothing of it reaches the host's;
// without it /tmp is not there to write.
func TestPrivateTmp(t *testing.T) {
	needIsolation(t)
	marker := filepath.Join("/tmp", fmt.Sprintf("hrns-private-tmp-%d", os.Getpid()))
	host := marker + "-host"
	if err := os.WriteFile(host, []byte("host"), 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(host)
	defer os.Remove(marker)
	res := run(t, &sandbox.Spec{Shell: "test -e " + host + " && echo seen; echo x > " + marker + " && cat " + marker, PrivateTmp: true})
	if res.ExitCode != 0 || res.Output != "x\n" {
		t.Fatalf("exit %d, output %q", res.ExitCode, res.Output)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the command's /tmp reached the host's: %v", err)
	}
	res = run(t, &sandbox.Spec{Shell: "echo x > " + marker})
	if res.ExitCode == 0 {
		t.Fatal("wrote /tmp without PrivateTmp")
	}
}

// TestTerminals: with Terminals the command opens pseudo-terminals of its
// own devpts, where no terminal of the host is; without it it has none.
func TestTerminals(t *testing.T) {
	needIsolation(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	prog := `import os, pty
m, s = os.openpty()
print(os.ttyname(s), sorted(os.listdir("/dev/pts")))`
	res := run(t, &sandbox.Spec{Command: []string{"python3", "-c", prog}, Terminals: true})
	if res.ExitCode != 0 || res.Output != "/dev/pts/0 ['0', 'ptmx']\n" {
		t.Fatalf("exit %d, output %q", res.ExitCode, res.Output)
	}
	res = run(t, &sandbox.Spec{Command: []string{"python3", "-c", prog}})
	if res.ExitCode == 0 {
		t.Fatalf("a terminal without Terminals: %q", res.Output)
	}
}
