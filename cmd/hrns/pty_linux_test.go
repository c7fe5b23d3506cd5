package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// openPTY opens a pseudo-terminal. Output processing is off, so that the
// bytes read from the master are the bytes hrns wrote.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlocking the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("naming the pseudo-terminal: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("opening the pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	tio, err := unix.IoctlGetTermios(int(s.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Oflag &^= unix.OPOST
	if err := unix.IoctlSetTermios(int(s.Fd()), unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	return m, s
}

// The attack of issue 13 through the built binary on a terminal: the prompt
// shows the carriage return and the erase sequence escaped and
// highlighted, so the person sees "id" and refuses, and nothing runs.
func TestSpoofedApprovalOnATerminal(t *testing.T) {
	attack := "echo x > f; id >> f #\r\x1b[2K  $ ls -la"
	args, _ := json.Marshal(map[string]string{"command": attack})
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("c1", "run_command", string(args))}},
		openaitest.Reply{Text: "Not run."},
	)
	defer srv.Close()
	master, tty := openPTY(t)
	dir := workdir(t)
	cmd := exec.CommandContext(t.Context(), hrnsBin, "run", "list the files")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=sk-test", "OPENAI_MODEL=test-model"}
	var stdout bytes.Buffer
	cmd.Stdin, cmd.Stderr, cmd.Stdout = tty, tty, &stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close() // the child holds it; reading the master ends when it exits

	var screen bytes.Buffer
	read := make(chan error, 1)
	prompted := make(chan struct{})
	go func() {
		buf := make([]byte, 4096)
		asked := false
		for {
			n, err := master.Read(buf)
			screen.Write(buf[:n])
			if !asked && bytes.Contains(screen.Bytes(), []byte("Allow?")) {
				asked = true
				close(prompted)
			}
			if err != nil {
				read <- err
				return
			}
		}
	}()
	select {
	case <-prompted:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("no prompt")
	}
	io.WriteString(master, "n\nit hides a command\n")
	err := cmd.Wait()
	<-read
	if err != nil {
		t.Fatalf("hrns: %v\n%q", err, screen.String())
	}
	shown := screen.String()
	const on, off = "\x1b[7m", "\x1b[27m"
	want := "  $ echo x > f; id >> f #" + on + `\r` + off + on + `\x1b` + off + "[2K  $ ls -la\n"
	if !strings.Contains(shown, want) {
		t.Errorf("the terminal does not show the command escaped and highlighted; want %q in\n%q", want, shown)
	}
	if rest := strings.NewReplacer(on, "", off, "").Replace(shown); strings.ContainsAny(rest, "\x1b\r\b") {
		t.Errorf("the terminal got control bytes besides the highlights:\n%q", shown)
	}
	if _, err := os.Stat(filepath.Join(dir, "f")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused command ran")
	}
	if got := toolResults(t, srv.Requests()[1].Body)[0]; !strings.Contains(got, "it hides a command") {
		t.Errorf("the model is not told why: %q", got)
	}
	if stdout.String() != "Not run.\n" {
		t.Errorf("stdout = %q", stdout.String())
	}
}
