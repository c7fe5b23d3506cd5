//go:build linux

package tools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/tools"
	"golang.org/x/sys/unix"
)

// ttyHelper serves TestNoControllingTerminal when the test binary is
// re-executed with a pty as its controlling terminal: it runs a command
// with run_command and prints the result. It returns if not asked to.
func ttyHelper() {
	command := os.Getenv("TOOLS_TEST_TTY_RUN")
	if command == "" {
		return
	}
	// The control: this process, whose terminal the pty is, can write
	// to it.
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		tty.WriteString("CONTROL\n")
		tty.Close()
	}
	dir, _ := os.MkdirTemp("", "tty-test-")
	ts, err := tools.Shell(dir, &tools.ShellOptions{Unconfined: os.Getenv("TOOLS_TEST_TTY_UNCONFINED") != "", Home: dir + "/.home"})
	if err != nil {
		os.RemoveAll(dir)
		fmt.Println(err)
		os.Exit(1)
	}
	def, _ := ts.Lookup("run_command")
	raw, _ := json.Marshal(map[string]any{"command": command})
	var args map[string]any
	_ = json.Unmarshal(raw, &args)
	out, err := def.Handler(context.Background(), &loop.Call{ID: "c1", Name: "run_command", Arguments: raw, Args: args})
	os.RemoveAll(dir)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	for _, p := range out.Content {
		fmt.Println(p.Text)
	}
	os.Exit(0)
}

// TestNoControllingTerminal (issue 13): a command, sandboxed or not,
// cannot write to the terminal of the process that runs it, past the
// output capture.
func TestNoControllingTerminal(t *testing.T) {
	for _, unconfined := range []bool{false, true} {
		t.Run(fmt.Sprintf("unconfined=%v", unconfined), func(t *testing.T) {
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
			pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer pts.Close()
			exe, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(exe)
			cmd.Env = append(os.Environ(), "TOOLS_TEST_TTY_RUN=echo LEAK > /dev/tty; echo done")
			if unconfined {
				cmd.Env = append(cmd.Env, "TOOLS_TEST_TTY_UNCONFINED=1")
			}
			cmd.Stdin = pts
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			if err := cmd.Run(); err != nil {
				t.Fatalf("%v: %s", err, out.String())
			}
			pts.Close()
			var term bytes.Buffer
			buf := make([]byte, 4096)
			for {
				ptmx.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
				n, err := ptmx.Read(buf)
				term.Write(buf[:n])
				if err != nil || n == 0 {
					break
				}
			}
			t.Logf("result:\n%s\nterminal:\n%s", out.String(), term.String())
			if !strings.Contains(term.String(), "CONTROL") {
				t.Fatal("the control did not reach the terminal: the test tests nothing")
			}
			if strings.Contains(term.String(), "LEAK") {
				t.Errorf("the command wrote to the terminal")
			}
			if !strings.Contains(out.String(), "done") {
				t.Errorf("the command did not run: %s", out.String())
			}
		})
	}
}
