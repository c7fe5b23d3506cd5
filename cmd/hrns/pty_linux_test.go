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

// onTerminal runs hrns in dir with stdin and stderr on a pseudo-terminal,
// typing answers[i] once the prompt "Allow?" has appeared i+1 times. It
// returns what the terminal showed and stdout.
func onTerminal(t *testing.T, dir string, srv *openaitest.Server, answers []string, args ...string) (screen, stdout string) {
	t.Helper()
	master, tty := openPTY(t)
	cmd := exec.CommandContext(t.Context(), hrnsBin, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=sk-test", "OPENAI_MODEL=test-model"}
	var out bytes.Buffer
	cmd.Stdin, cmd.Stderr, cmd.Stdout = tty, tty, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close() // the child holds it; reading the master ends when it exits

	var shown bytes.Buffer
	read := make(chan error, 1)
	go func() {
		buf := make([]byte, 4096)
		for asked := 0; ; {
			n, err := master.Read(buf)
			shown.Write(buf[:n])
			if c := bytes.Count(shown.Bytes(), []byte("Allow?")); c > asked && asked < len(answers) {
				io.WriteString(master, answers[asked])
				asked++
			}
			if err != nil {
				read <- err
				return
			}
		}
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		<-read
		if err != nil {
			t.Fatalf("hrns: %v\n%q", err, shown.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		<-read
		t.Fatalf("hrns did not finish; the terminal shows:\n%q", shown.String())
	}
	return shown.String(), out.String()
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
	dir := workdir(t)
	shown, stdout := onTerminal(t, dir, srv, []string{"n\nit hides a command\n"}, "run", "list the files")
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
	if stdout != "Not run.\n" {
		t.Errorf("stdout = %q", stdout)
	}
}

// A long file to write: the prompt says how many lines are hidden, and
// the write can be allowed only after every line was shown.
func TestLongWriteIsSeenBeforeItIsAllowed(t *testing.T) {
	var content strings.Builder
	for i := range 60 {
		fmt.Fprintf(&content, "line %d\n", i+1)
	}
	args, _ := json.Marshal(map[string]string{"path": "big.txt", "content": content.String()})
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("c1", "write_file", string(args))}},
		openaitest.Reply{Text: "Written."},
	)
	defer srv.Close()
	dir := workdir(t)
	shown, _ := onTerminal(t, dir, srv, []string{"y\n", "v\n", "y\n"}, "run", "write big.txt")
	if !strings.Contains(shown, "41 more lines are not shown (61 in all)") || !strings.Contains(shown, "lines are not shown yet") {
		t.Errorf("the hidden lines are not told:\n%s", shown)
	}
	_, all, _ := strings.Cut(shown, "(all 61 lines)")
	for i := range 60 {
		if !strings.Contains(all, fmt.Sprintf("  +line %d\n", i+1)) {
			t.Fatalf("line %d is not shown after v:\n%s", i+1, shown)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "big.txt")); err != nil || string(b) != content.String() {
		t.Errorf("big.txt: %v", err)
	}
}
