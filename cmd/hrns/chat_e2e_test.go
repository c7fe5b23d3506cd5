package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// tmuxSession runs hrns in a detached tmux session of its own server (a
// socket in a temporary directory), 100 columns by 40 rows.
type tmuxSession struct {
	t      *testing.T
	socket string
}

func startTmux(t *testing.T, dir string, env []string, args ...string) *tmuxSession {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	s := &tmuxSession{t: t, socket: filepath.Join(t.TempDir(), "tmux.sock")}
	cmdline := "env -i " + strings.Join(quoteAll(env), " ") + " " + shQuote(hrnsBin) + " " + strings.Join(quoteAll(args), " ") +
		"; echo; echo \"hrns exited $?\"; sleep 60"
	cmd := exec.Command("tmux", "-S", s.socket, "-f", "/dev/null", "new-session", "-d", "-x", "100", "-y", "40", "-c", dir, cmdline)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("tmux", "-S", s.socket, "kill-server").Run() })
	return s
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = shQuote(s)
	}
	return out
}

// screen is what the pane shows now.
func (s *tmuxSession) screen() string {
	out, err := exec.Command("tmux", "-S", s.socket, "capture-pane", "-p").Output()
	if err != nil {
		s.t.Fatalf("capture-pane: %v", err)
	}
	return string(out)
}

// send types keys, as tmux send-keys names them.
func (s *tmuxSession) send(keys ...string) {
	if out, err := exec.Command("tmux", append([]string{"-S", s.socket, "send-keys"}, keys...)...).CombinedOutput(); err != nil {
		s.t.Fatalf("send-keys: %v: %s", err, out)
	}
}

// await waits until the screen shows want, and returns it.
func (s *tmuxSession) await(want string) string {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a hang, not a speed check
	for {
		scr := s.screen()
		if strings.Contains(scr, want) {
			return scr
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the screen never showed %q; it shows:\n%s", want, scr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestChatInTmux drives the real binary in a terminal: hrns with no
// arguments opens the chat, a write is approved from its diff, the answer
// is shown, /exit leaves, and hrns run --continue follows up on the saved
// conversation.
func TestChatInTmux(t *testing.T) {
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_1", "write_file", `{"path":"hello.txt","content":"hello, world\n"}`)}},
		openaitest.Reply{Text: "I wrote **hello.txt**."},
		openaitest.Reply{Text: "It says hello."},
	)
	defer srv.Close()
	dir := t.TempDir()
	home := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TERM=xterm-256color",
		"OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=sk-test", "OPENAI_MODEL=gpt-4.1"}
	s := startTmux(t, dir, env)
	s.await("Ask, or /help")
	s.send("write hello.txt", "Enter")
	scr := s.await("Allow write_file?")
	for _, want := range []string{"write_file wants to create hello.txt", "1 + hello, world", "y yes", "a always write_file"} {
		if !strings.Contains(scr, want) {
			t.Errorf("the approval does not show %q:\n%s", want, scr)
		}
	}
	s.send("y")
	scr = s.await("I wrote hello.txt.")
	if !strings.Contains(scr, "✓ write_file hello.txt") {
		t.Errorf("no line for the call:\n%s", scr)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "hello.txt")); err != nil || string(got) != "hello, world\n" {
		t.Errorf("hello.txt = %q, %v", got, err)
	}
	s.send("/exit", "Enter")
	scr = s.await("hrns exited 0")
	if !strings.Contains(scr, "Conversation ") || !strings.Contains(scr, "saved: hrns chat --resume") {
		t.Errorf("no word of the saved conversation:\n%s", scr)
	}

	// The conversation goes on from hrns run.
	cmd := exec.Command(hrnsBin, "run", "--continue", "what does it say?")
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "It says hello.") {
		t.Fatalf("run --continue: %v\n%s", err, out)
	}
	reqs := srv.Requests()
	last := string(reqs[len(reqs)-1].Body)
	for _, want := range []string{"write hello.txt", "I wrote **hello.txt**.", "what does it say?"} {
		if !strings.Contains(last, want) {
			t.Errorf("the follow-up request lacks %q: %s", want, last)
		}
	}
}
