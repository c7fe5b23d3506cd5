package main

import (
	"os"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// TestChatProgramApprovalInTmux: in the real binary's chat, a run_code
// program is put to the person as numbered lines, blank ones included and
// its escape shown escaped, not as one JSON string; and the plan the model
// records is shown as a checklist.
func TestChatProgramApprovalInTmux(t *testing.T) {
	program := "text = read_file(path=\"hello.txt\")\n\n\n# \x1b[2K hidden?\nresult = len(text)\n"
	plan := `{"todos":[{"content":"Count the bytes","status":"completed"},{"content":"Report","status":"in_progress"}]}`
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{programCall(t, "c1", program)}},
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("c2", "todo_write", plan)}},
		openaitest.Reply{Text: "It has 20 bytes."},
	)
	defer srv.Close()
	dir := workdir(t)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TERM=xterm-256color",
		"OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=sk-test", "OPENAI_MODEL=gpt-4.1"}
	s := startTmux(t, dir, env, "chat", "--tools", "run_code,read_file,todo_write")
	s.await("Ask, or /help")
	s.send("count the bytes of hello.txt", "Enter")
	scr := s.await("Allow run_code?")
	for _, want := range []string{
		"run_code wants to run a program of 5 lines",
		`1 │ text = read_file(path="hello.txt")`,
		"2 │\n", "3 │\n",
		`4 │ # \x1b[2K hidden?`,
		"5 │ result = len(text)",
	} {
		if !strings.Contains(scr, want) {
			t.Errorf("the approval does not show %q:\n%s", want, scr)
		}
	}
	if strings.Contains(scr, `\n`) || strings.Contains(scr, `"code"`) {
		t.Errorf("the program is shown as JSON:\n%s", scr)
	}
	s.send("y")
	scr = s.await("It has 20 bytes.")
	for _, want := range []string{"✓ todo_write plan of 2 steps", "✓ Count the bytes", "▶ Report"} {
		if !strings.Contains(scr, want) {
			t.Errorf("the plan is not shown as a checklist (%q):\n%s", want, scr)
		}
	}
	if strings.Contains(scr, `"todos"`) {
		t.Errorf("the plan is shown as JSON:\n%s", scr)
	}
}
