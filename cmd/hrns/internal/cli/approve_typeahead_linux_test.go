package cli

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hrns-dev/hrns/loop"
)

// openPTY opens a pseudo-terminal: the master, where the test types, and
// the terminal, which the approver reads as its stdin.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// Drain the echo, so that it never fills the master's buffer.
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, err := m.Read(buf); err != nil {
				return
			}
		}
	}()
	return m, s
}

// TestTypeAheadIsNotAnAnswer: on a terminal, what the person typed before
// a question is not its answer. A "y" typed before the first question (in
// the terminal, not read yet) and one typed between two questions (read
// by then) are passed over; the answer typed after each question decides.
// Before, each "y" allowed the call unseen.
func TestTypeAheadIsNotAnAnswer(t *testing.T) {
	master, tty := openPTY(t)
	var errOut syncBuffer
	a := newTermApprover(&IO{In: tty, Err: &errOut, Interactive: func() bool { return true }}, &loop.Permissions{})
	ask := func(prompts int) <-chan loop.Decision {
		got := make(chan loop.Decision, 1)
		go func() {
			d, err := a.Approve(t.Context(), approvalReq("run_command", `{"command":"rm -rf build"}`))
			if err != nil {
				t.Error(err)
			}
			got <- d
		}()
		// The question is on the screen.
		for deadline := time.Now().Add(30 * time.Second); strings.Count(errOut.String(), "Allow?") < prompts; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no question:\n%s", errOut.String())
			}
		}
		return got
	}
	answer := func(got <-chan loop.Decision, n int) loop.Decision {
		t.Helper()
		master.WriteString("n\n")
		for deadline := time.Now().Add(30 * time.Second); strings.Count(errOut.String(), "Tell the model why") < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the answer was not read:\n%s", errOut.String())
			}
		}
		master.WriteString("\n")
		select {
		case d := <-got:
			return d
		case <-time.After(30 * time.Second):
			t.Fatalf("no decision:\n%s", errOut.String())
			return loop.Decision{}
		}
	}

	master.WriteString("y\n") // before the first question
	if d := answer(ask(1), 1); d.Verdict != loop.Reject {
		t.Fatalf("first question: %v, want the answer typed after it (no); the line typed before it was taken:\n%s", d.Verdict, errOut.String())
	}
	// Between two questions: the reader reads it at once.
	master.WriteString("y\n")
	time.Sleep(50 * time.Millisecond)
	if d := answer(ask(2), 2); d.Verdict != loop.Reject {
		t.Fatalf("second question: %v, want no; the line typed before it was taken:\n%s", d.Verdict, errOut.String())
	}
	if n := strings.Count(errOut.String(), "typed before this question was passed over"); n < 1 {
		t.Errorf("the person was not told a line typed ahead was passed over:\n%s", errOut.String())
	}
}
