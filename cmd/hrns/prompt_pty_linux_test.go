package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// question matches the end of what the terminal shows when hrns waits for
// an answer: an approval's prompt or the reason asked after a no.
var question = regexp.MustCompile(`(Allow\? [^\n]*: |Tell the model why \(optional\): )$`)

// quiet is how long a question must stay the last thing on the terminal
// before it is answered. It is no synchronisation: it is the window in
// which the progress line, drawn four times a second once a call has run
// for a second, would have drawn over the question.
const quiet = 1500 * time.Millisecond

// askedOnTerminal runs hrns in dir with stdin and stderr on a
// pseudo-terminal. Each time the terminal ends with a question, it waits
// for quiet and reports anything written in that time, then types the next
// answer. It returns what the terminal showed, the questions asked, and
// for each what was written while it waited for its answer.
func askedOnTerminal(t *testing.T, dir string, srv *openaitest.Server, answers []string, args ...string) (shown string, asked []string, over []string) {
	t.Helper()
	master, tty := openPTY(t)
	cmd := exec.CommandContext(t.Context(), hrnsBin, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=sk-test", "OPENAI_MODEL=test-model"}
	cmd.Stdin, cmd.Stderr, cmd.Stdout = tty, tty, io.Discard
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close() // the child holds it; reading the master ends when it exits
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	reads := make(chan []byte)
	go func() {
		defer close(reads)
		for {
			buf := make([]byte, 4096)
			n, err := master.Read(buf)
			if n > 0 {
				reads <- buf[:n]
			}
			if err != nil {
				return
			}
		}
	}()
	var screen bytes.Buffer
	guard := time.NewTimer(60 * time.Second) // a hang, not a speed check
	defer guard.Stop()
	var window <-chan time.Time // open while a question waits for its answer
	var during bytes.Buffer     // written while it waits
	for {
		select {
		case b, ok := <-reads:
			if !ok {
				if err := <-done; err != nil {
					t.Fatalf("hrns: %v\n%q", err, screen.String())
				}
				return screen.String(), asked, over
			}
			screen.Write(b)
			if window != nil {
				during.Write(b)
				continue
			}
			if m := question.FindString(screen.String()); m != "" && len(asked) < len(answers) {
				asked = append(asked, m)
				during.Reset()
				window = time.After(quiet)
			}
		case <-window:
			window = nil
			over = append(over, during.String())
			io.WriteString(master, answers[len(asked)-1])
		case <-guard.C:
			cmd.Process.Kill()
			t.Fatalf("hrns did not finish; the terminal shows:\n%q", screen.String())
		}
	}
}

// Issue 34: on a terminal nothing draws over a question. A program is put
// to the person (the progress line "running run_code" was ticking before),
// then a command it runs, refused with a reason: while each question waits
// for its answer, nothing is written on the terminal, so the question stays
// the last line and no spinner says the program already runs.
func TestNothingDrawsOverAQuestion(t *testing.T) {
	program := "out = run_command(command=\"echo hi > ran.txt\")\nresult = out\n"
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{programCall(t, "c1", program)}},
		openaitest.Reply{Text: "Not run."},
	)
	defer srv.Close()
	dir := workdir(t)
	shown, asked, over := askedOnTerminal(t, dir, srv, []string{"y\n", "n\n", "not now\n"},
		"run", "--tools", "run_code,run_command", "run it")
	if len(asked) != 3 {
		t.Fatalf("%d questions asked, want 3 (the program, the command, the reason):\n%q", len(asked), shown)
	}
	for i, w := range over {
		if w != "" {
			t.Errorf("written while the question %q waited for its answer: %q", asked[i], w)
		}
	}
	for _, want := range []string{"run_code wants to run:\n", "run_command wants to run:\n  $ echo hi > ran.txt\n"} {
		if !strings.Contains(shown, want) {
			t.Errorf("the terminal does not show %q:\n%q", want, shown)
		}
	}
	if _, err := os.Stat(dir + "/ran.txt"); err == nil {
		t.Errorf("the refused command ran")
	}
	if !strings.Contains(string(srv.Requests()[1].Body), "not now") {
		t.Errorf("the model is not told why")
	}
}
