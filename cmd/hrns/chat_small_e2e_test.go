package main

import (
	"os"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// TestChatSmallOnesInTmux: a refused write is said once (by the call's
// line, with the reason), Esc during a turn prints one line, and /tools
// shows its columns aligned.
func TestChatSmallOnesInTmux(t *testing.T) {
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("c1", "write_file", `{"path":"x.txt","content":"x\n"}`)}},
		openaitest.Reply{Text: "Not written."},
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("c2", "run_command", `{"command":"sleep 30"}`)}},
	)
	defer srv.Close()
	dir := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TERM=xterm-256color",
		"OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=sk-test", "OPENAI_MODEL=gpt-4.1"}
	s := startTmux(t, dir, env, "chat", "--allow", "run_command", "--no-sandbox")
	s.await("Ask, or /help")

	s.send("write x", "Enter")
	s.await("Allow write_file?")
	s.send("n")
	s.await("Why not?")
	s.send("not today", "Enter")
	scr := s.await("Not written.")
	if n := strings.Count(scr, "not today"); n != 1 {
		t.Errorf("the refusal is shown %d times, want once:\n%s", n, scr)
	}
	if !strings.Contains(scr, "✗ write_file x.txt · the call to tool \"write_file\" was rejected: not today") {
		t.Errorf("the call's line does not say it was refused:\n%s", scr)
	}

	s.send("run it", "Enter")
	s.await("running run_command")
	s.send("Escape")
	scr = s.awaitFunc("the turn's end", func(scr string) bool {
		return strings.Contains(scr, "interrupted") && !strings.Contains(scr, "Esc interrupts")
	})
	if n := strings.Count(scr, "interrupted"); n != 1 {
		t.Errorf("Esc printed %d lines about it, want one:\n%s", n, scr)
	}

	s.send("/tools", "Enter")
	scr = s.await("Tools (")
	col := -1
	for _, l := range strings.Split(scr, "\n") {
		for _, desc := range []string{"Reads a text file", "Writes a file", "Runs a shell command", "Lists files"} {
			if i := strings.Index(l, desc); i >= 0 && strings.HasPrefix(l, "  ") {
				if col >= 0 && i != col {
					t.Errorf("/tools columns are not aligned (%d vs %d):\n%s", i, col, scr)
				}
				col = i
			}
		}
	}
	if col < 0 {
		t.Errorf("/tools lists no description:\n%s", scr)
	}
}
