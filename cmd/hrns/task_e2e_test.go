package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// taskScript is a parent that delegates to a sub-agent, which reads a
// file and answers; then the parent answers.
func taskScript() *openaitest.Server {
	return openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("t1", "task",
			`{"description":"find the greeting","task":"Read hello.txt and say what it says.","tools":["read_file"]}`)}},
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("c1", "read_file", `{"path":"hello.txt"}`)}},
		openaitest.Reply{Text: "SUBAGENT-ANSWER: it says hello from the file."},
		openaitest.Reply{Text: "The file greets you."},
	)
}

// checkSubagentRequests: the sub-agent's requests hold only its task (its
// own context) and offer only the tools it was given; the parent's last
// request has its answer as the task call's result.
func checkSubagentRequests(t *testing.T, srv *openaitest.Server, parentPrompt string) {
	t.Helper()
	reqs := srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4", len(reqs))
	}
	var child struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(reqs[1].Body, &child); err != nil {
		t.Fatal(err)
	}
	body := string(reqs[1].Body)
	if strings.Contains(body, parentPrompt) || !strings.Contains(body, "Read hello.txt and say what it says.") {
		t.Errorf("the sub-agent's context is not its own: %s", body)
	}
	if len(child.Tools) != 1 || child.Tools[0].Function.Name != "read_file" {
		t.Errorf("the sub-agent is offered %+v, want read_file alone", child.Tools)
	}
	if got := toolResults(t, reqs[3].Body); len(got) != 1 || got[0] != "SUBAGENT-ANSWER: it says hello from the file." {
		t.Errorf("the task call's result = %q", got)
	}
	if strings.Contains(string(reqs[3].Body), "hello from the file\\n") {
		t.Errorf("the sub-agent's tool result reached the parent's context: %s", reqs[3].Body)
	}
}

// TestTaskSubagentInRun: hrns run --tools read_file,task runs a sub-agent
// with its own context and the tools it names; stderr shows its calls
// folded under the task call, stdout only the parent's answer.
func TestTaskSubagentInRun(t *testing.T) {
	srv := taskScript()
	defer srv.Close()
	r := hrns(t, workdir(t), srv, "run", "--tools", "read_file,task", "what does hello.txt say? use a sub-agent")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if r.stdout != "The file greets you.\n" {
		t.Errorf("stdout = %q, want the parent's answer alone", r.stdout)
	}
	for _, want := range []string{"→ task ", "  ↳ task › read_file hello.txt", "✓ task find the greeting: SUBAGENT-ANSWER"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	checkSubagentRequests(t, srv, "use a sub-agent")
}

// TestTaskSubagentInChat: in the chat, the task call is one line that
// counts its sub-agent's calls; Ctrl+O unfolds them.
func TestTaskSubagentInChat(t *testing.T) {
	srv := taskScript()
	defer srv.Close()
	dir := workdir(t)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TERM=xterm-256color",
		"OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=sk-test", "OPENAI_MODEL=test-model"}
	s := startTmux(t, dir, env, "chat", "--tools", "read_file,task")
	s.await("Ask, or /help")
	s.send("what does hello.txt say? use a sub-agent", "Enter")
	scr := s.await("The file greets you.")
	if !strings.Contains(scr, "✓ task find the greeting · 1 call · SUBAGENT-ANSWER") {
		t.Errorf("no folded line for the task:\n%s", scr)
	}
	if strings.Contains(scr, "read_file hello.txt") {
		t.Errorf("the sub-agent's call is not folded:\n%s", scr)
	}
	s.send("C-o")
	s.await("  ✓ task › read_file hello.txt")
	checkSubagentRequests(t, srv, "use a sub-agent")
}

// TestTaskSubagentApprovalInChat: a sub-agent's call that needs approval
// is asked of the same person, saying whose call it is; once allowed it
// runs, and the sub-agent's line stays folded.
func TestTaskSubagentApprovalInChat(t *testing.T) {
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("t1", "task",
			`{"description":"write the note","task":"Write note.txt saying hi.","tools":["write_file"]}`)}},
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("c1", "write_file", `{"path":"note.txt","content":"hi\n"}`)}},
		openaitest.Reply{Text: "Wrote note.txt."},
		openaitest.Reply{Text: "The note is written."},
	)
	defer srv.Close()
	dir := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TERM=xterm-256color",
		"OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=sk-test", "OPENAI_MODEL=test-model"}
	s := startTmux(t, dir, env, "chat", "--tools", "write_file,task")
	s.await("Ask, or /help")
	s.send("write a note with a sub-agent", "Enter")
	scr := s.await("Allow write_file?")
	if !strings.Contains(scr, "the sub-agent task: write_file wants to create note.txt") {
		t.Errorf("the approval does not say it is the sub-agent's call:\n%s", scr)
	}
	s.send("y")
	scr = s.await("The note is written.")
	if !strings.Contains(scr, "✓ task write the note · 1 call") {
		t.Errorf("no folded task line:\n%s", scr)
	}
	if got, err := os.ReadFile(dir + "/note.txt"); err != nil || string(got) != "hi\n" {
		t.Errorf("note.txt = %q, %v", got, err)
	}
}
