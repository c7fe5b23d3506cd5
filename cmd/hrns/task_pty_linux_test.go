package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// TestTaskSubagentApprovalOnATerminal: hrns run asks the person about a
// sub-agent's call, saying whose call it is, and the call runs once
// allowed; stdout holds the parent's answer alone.
func TestTaskSubagentApprovalOnATerminal(t *testing.T) {
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("t1", "task",
			`{"description":"write the note","task":"Write note.txt saying hi.","tools":["write_file"]}`)}},
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("c1", "write_file", `{"path":"note.txt","content":"hi\n"}`)}},
		openaitest.Reply{Text: "Wrote note.txt."},
		openaitest.Reply{Text: "The note is written."},
	)
	defer srv.Close()
	dir := workdir(t)
	shown, stdout := onTerminal(t, dir, srv, []string{"y\n"}, "run", "--tools", "write_file,task", "write a note with a sub-agent")
	if !strings.Contains(shown, "the sub-agent task: write_file wants to run:") {
		t.Errorf("the prompt does not say whose call it is:\n%q", shown)
	}
	if !strings.Contains(shown, "↳ task › write_file note.txt") {
		t.Errorf("the sub-agent's call is not shown under the task:\n%q", shown)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "note.txt")); err != nil || string(got) != "hi\n" {
		t.Errorf("note.txt = %q, %v", got, err)
	}
	if stdout != "The note is written.\n" {
		t.Errorf("stdout = %q", stdout)
	}
}
