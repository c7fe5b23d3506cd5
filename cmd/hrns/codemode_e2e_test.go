package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// programCall is a call of run_code with program as its code.
func programCall(t *testing.T, id, program string) llm.ToolCall {
	t.Helper()
	args, err := json.Marshal(map[string]string{"code": program})
	if err != nil {
		t.Fatal(err)
	}
	return call(id, "run_code", string(args))
}

// TestRunCodeCallsGrantedCapabilities: the model writes a program that
// calls two granted capabilities (read_file and grep) and returns a
// result computed from both, in one tool call.
func TestRunCodeCallsGrantedCapabilities(t *testing.T) {
	dir := workdir(t)
	program := `text = read_file(path="hello.txt")
hits = grep(pattern="ship", path="notes.md")
result = {"hello": "hello from the file" in text, "hits": hits.count("\n"), "first": hits.split("\n")[0]}
`
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{programCall(t, "c1", program)}},
		openaitest.Reply{Text: "Done."},
	)
	defer srv.Close()
	r := hrns(t, dir, srv, "run", "--tools", "run_code,read_file,grep", "--yes", "--json", "Count")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	got := toolResults(t, reqs[1].Body)
	want := `result: {"hello":true,"hits":1,"first":"notes.md:2: ship it"}`
	if len(got) != 1 || got[0] != want {
		t.Errorf("run_code's result = %q, want %q", got, want)
	}
	// The offer: run_code lists its capabilities, which are also tools.
	var body struct {
		Tools []struct {
			Function struct {
				Name        string `json:"name"`
				Description string `json:"description"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range body.Tools {
		names = append(names, tl.Function.Name)
		if tl.Function.Name == "run_code" && (!strings.Contains(tl.Function.Description, "- read_file(") || !strings.Contains(tl.Function.Description, "- grep(")) {
			t.Errorf("run_code's description does not list its capabilities:\n%s", tl.Function.Description)
		}
	}
	if strings.Join(names, ",") != "read_file,grep,run_code" {
		t.Errorf("tools offered: %v", names)
	}
	// The --json lines carry the call and its result.
	if !strings.Contains(r.stdout, `"type":"tool_call_result"`) || !strings.Contains(r.stdout, `"name":"run_code"`) {
		t.Errorf("--json lines lack the call:\n%s", r.stdout)
	}
}

// TestRunCodeRefusesUngrantedCapability: a program that names a tool not
// granted (run_command) is refused by the check before anything runs: its
// first line, a granted write_file, has no effect.
func TestRunCodeRefusesUngrantedCapability(t *testing.T) {
	dir := workdir(t)
	program := `write_file(path="side.txt", content="written")
run_command(command="touch boom.txt")
`
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{programCall(t, "c1", program)}},
		openaitest.Reply{Text: "Refused."},
	)
	defer srv.Close()
	r := hrns(t, dir, srv, "run", "--tools", "run_code,write_file", "--yes", "Do it")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	got := toolResults(t, srv.Requests()[1].Body)
	if len(got) != 1 || !strings.Contains(got[0], "2:1: undefined: run_command") || !strings.Contains(got[0], "write_file") {
		t.Errorf("run_code's result = %q, want the check's refusal naming run_command", got)
	}
	for _, f := range []string{"side.txt", "boom.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
			t.Errorf("%s exists (%v): the refused program ran", f, err)
		}
	}
	if !strings.Contains(r.stderr, "✗ run_code") {
		t.Errorf("the refusal is not narrated:\n%s", r.stderr)
	}
}

// TestTodoWritePlan: the plan is narrated as a checklist each time it
// changes.
func TestTodoWritePlan(t *testing.T) {
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("c1", "todo_write", `{"todos":[{"content":"Read hello.txt","status":"in_progress"},{"content":"Answer","status":"pending"}]}`)}},
		openaitest.Reply{ToolCalls: []llm.ToolCall{call("c2", "todo_write", `{"todos":[{"content":"Read hello.txt","status":"completed"},{"content":"Answer","status":"in_progress"}]}`)}},
		openaitest.Reply{Text: "Hello."},
	)
	defer srv.Close()
	r := hrns(t, workdir(t), srv, "run", "Plan it")
	if r.code != 0 || r.stdout != "Hello.\n" {
		t.Fatalf("exit %d stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"  plan:\n    ▶ Read hello.txt\n    ☐ Answer\n",
		"  plan:\n    ✓ Read hello.txt\n    ▶ Answer\n",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
}
