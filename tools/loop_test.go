package tools_test

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/tools"
)

// toolResults returns the tool results the model received in its last
// request, by call ID.
func toolResults(t *testing.T, model *llmtest.Model) map[string]llm.ToolResult {
	t.Helper()
	reqs := model.Requests()
	if len(reqs) == 0 {
		t.Fatal("the model got no request")
	}
	out := map[string]llm.ToolResult{}
	for _, m := range reqs[len(reqs)-1].Messages {
		if m.Role != llm.RoleTool {
			continue
		}
		for _, p := range m.Parts {
			out[p.ToolResult.CallID] = *p.ToolResult
		}
	}
	return out
}

func call(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: llm.Arguments(args)}
}

// TestAgentRun drives the built-in tools through a real agent run with a
// scripted model, and checks what the model received.
func TestAgentRun(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("run_command uses /bin/sh")
	}
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"notes.txt": "todo: write tests\n"})
	ts, err := tools.ByName([]string{"read_file", "list_files", "edit_file", "write_file", "run_command"}, &tools.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	model := llmtest.NewModel(
		// Two read-only calls in one message run together.
		llmtest.Calls(
			call("c1", "list_files", `{}`),
			call("c2", "read_file", `{"path":"notes.txt"}`),
		),
		llmtest.Calls(
			call("c3", "edit_file", `{"path":"notes.txt","old_string":"todo","new_string":"done"}`),
			call("c4", "write_file", `{"path":"out/report.md","content":"# Report\n"}`),
			call("c5", "run_command", `{"command":"cat notes.txt; ls out; exit 4"}`),
			call("c6", "read_file", `{"path":"../escape.txt"}`),
			call("c7", "run_command", `{"command":"rm -rf /"}`),
		),
		llmtest.Text("All done."),
	)
	var asked []string
	approver := loop.ApproverFunc(func(_ context.Context, req *loop.ApprovalRequest) (loop.Decision, error) {
		asked = append(asked, req.Call.ID)
		if req.Call.ID == "c7" {
			return loop.Decision{Verdict: loop.Reject, Reason: "not on my machine"}, nil
		}
		return loop.Decision{Verdict: loop.Approve}, nil
	})
	agent := loop.NewAgent(model, ts, &loop.Options{Approver: approver})
	res, err := agent.Run(t.Context(), []llm.Message{llm.UserMessage("tidy up")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "All done." {
		t.Errorf("answer %q", res.Answer)
	}
	if got := strings.Join(asked, ","); got != "c3,c4,c5,c7" {
		t.Errorf("approvals asked for %s, want the changing calls c3,c4,c5,c7", got)
	}

	// The tool specs the model saw.
	var names []string
	for _, s := range model.Requests()[0].Tools {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "read_file,list_files,edit_file,write_file,run_command" {
		t.Errorf("tools offered: %s", got)
	}

	// What the model received.
	reqs := model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	results := toolResults(t, model)
	want := map[string]struct {
		text    string
		isError bool
	}{
		"c1": {"notes.txt", false},
		"c2": {"     1\ttodo: write tests\n", false},
		"c3": {"replaced 1 occurrence in notes.txt", false},
		"c4": {"created out/report.md (9 bytes)", false},
		"c5": {"done: write tests\nreport.md\n[exit code: 4]", true},
		"c6": {`tool "read_file" failed: path "../escape.txt" is outside the working directory`, true},
		"c7": {`the call to tool "run_command" was rejected: not on my machine`, true},
	}
	for id, w := range want {
		r, ok := results[id]
		if !ok {
			t.Errorf("no result for %s", id)
			continue
		}
		if !strings.HasPrefix(r.Text(), w.text) || r.IsError != w.isError {
			t.Errorf("%s: got %q (error %v), want %q (error %v)", id, r.Text(), r.IsError, w.text, w.isError)
		}
	}
	if got := readTestFile(t, filepath.Join(dir, "notes.txt")); got != "done: write tests\n" {
		t.Errorf("notes.txt holds %q", got)
	}
}

// TestAgentRunWithoutApprover checks that without an approver the changing
// tools are refused and change nothing.
func TestAgentRunWithoutApprover(t *testing.T) {
	dir := t.TempDir()
	ts, err := tools.ByName([]string{"write_file"}, &tools.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	model := llmtest.NewModel(
		llmtest.Call("c1", "write_file", `{"path":"x.txt","content":"x"}`),
		llmtest.Text("ok"),
	)
	if _, err := loop.NewAgent(model, ts, nil).Run(t.Context(), []llm.Message{llm.UserMessage("go")}); err != nil {
		t.Fatal(err)
	}
	r := toolResults(t, model)["c1"]
	if !r.IsError || !strings.Contains(r.Text(), "requires approval") {
		t.Errorf("got %q", r.Text())
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 0 {
		t.Errorf("files were written: %v", m)
	}
}
