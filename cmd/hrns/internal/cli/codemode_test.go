package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/tools"
)

func TestNamedTools(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		names   []string
		want    string
		caps    string // run_code's capabilities, as its description lists them
		wantErr string
	}{
		{names: []string{"read_file", "run_code", "grep"}, want: "read_file,grep,run_code", caps: "- read_file(|- grep("},
		{names: []string{"run_code"}, want: "run_code", caps: "No capabilities are granted"},
		{names: []string{" todo_write ", "", "todo_write"}, want: "todo_write"},
		{names: []string{"run_code", "rm_rf"}, wantErr: `tools: unknown tool "rm_rf"; the built-in tools are read_file, list_files, write_file, edit_file, grep, run_command, web_fetch, upload_media, todo_write, run_code`},
	}
	for _, tt := range tests {
		ts, err := namedTools(tt.names, &toolEnv{Dir: dir})
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("%v: got %v, want %q", tt.names, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tt.names, err)
		}
		if got := strings.Join(ts.Names(), ","); got != tt.want {
			t.Errorf("%v: got %s, want %s", tt.names, got, tt.want)
		}
		if def, ok := ts.Lookup(runCodeName); ok {
			for _, c := range strings.Split(tt.caps, "|") {
				if !strings.Contains(def.Description, c) {
					t.Errorf("%v: run_code's description lacks %q:\n%s", tt.names, c, def.Description)
				}
			}
			// Without an approver of programs, the loop's approver
			// decides them: run_code requires approval.
			if !def.RequiresApproval {
				t.Errorf("%v: run_code does not require approval", tt.names)
			}
		}
	}
	if diff := cmp.Diff(defaultTools, toolNames("", nil, nil)); diff != "" {
		t.Errorf("defaults (-want +got)\n%s", diff)
	}
	if got := toolNames("all", nil, nil); !slices.Contains(got, runCodeName) || got[len(got)-1] != taskToolName {
		t.Errorf("all = %v, without run_code, then task", got)
	}
}

// TestRunCodeApprovals runs hrns run --tools run_code,read_file,write_file
// at a terminal: the program is shown (escaped) and approved, then its
// call of write_file, which requires approval, asks again; read_file does
// not.
func TestRunCodeApprovals(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.txt"), []byte("forty-two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	program := "text = read_file(path=\"in.txt\")\n# \x1b[2K looks innocent\nwrite_file(path=\"out.txt\", content=str(len(text)))\nresult = len(text)\n"
	args, _ := json.Marshal(map[string]string{"code": program})
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c1", "run_code", string(args))}},
		openaitest.Reply{Text: "Done."},
	)
	defer srv.Close()
	var out, errOut bytes.Buffer
	stdio := &IO{In: strings.NewReader("y\ny\n"), Out: &out, Err: &errOut, Getenv: func(string) string { return "" }, Interactive: func() bool { return true }}
	code := Run(t.Context(), []string{"run", "--base-url", srv.URL(), "--model", "m", "--tools", "run_code,read_file,write_file", "--no-skills", "--workdir", dir, "Copy it"}, stdio)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s", code, errOut.String())
	}
	log := errOut.String()
	for _, want := range []string{
		"run_code wants to run:\n  ⚠ 1 characters that are invisible or that a terminal would interpret are shown escaped (\\r, \\x1b, \\u202e...)\n  1 │ text = read_file(path=\"in.txt\")\n  2 │ # \\x1b[2K looks innocent\n",
		"write_file wants to run:\n  write out.txt (2 bytes, 1 lines)\n  +17\n",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("stderr lacks %q:\n%s", want, log)
		}
	}
	if n := strings.Count(log, "Allow?"); n != 2 {
		t.Errorf("%d approvals asked, want 2 (the program, then write_file):\n%s", n, log)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "out.txt")); string(got) != "17" {
		t.Errorf("out.txt = %q", got)
	}
	// The model reads the program's result.
	reqs := srv.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), `result: 17`) {
		t.Errorf("the second request does not carry the result:\n%s", reqs[len(reqs)-1].Body)
	}
}

// TestDescribeProgram: hrns run shows a program as callview renders it,
// every line numbered (blank ones too), escaped, a long one continued.
func TestDescribeProgram(t *testing.T) {
	tests := []struct {
		name    string
		code    string
		want    []string
		escaped int
	}{
		{"bidi", "x = 1\n\u202eevil = 2\nprint(x)\n", []string{"  1 │ x = 1", `  2 │ \u202eevil = 2`, "  3 │ print(x)"}, 1},
		{"blank lines and an escape", "a = 1\n\n\n\x1b[2Kb = 2\n\n", []string{"  1 │ a = 1", "  2 │ ", "  3 │ ", `  4 │ \x1b[2Kb = 2`, "  5 │ "}, 1},
		{"long line", "s = \"" + strings.Repeat("x", 130) + "\"", []string{"  1 │ s = \"" + strings.Repeat("x", 115), "    ↪ " + strings.Repeat("x", 15) + "\""}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, _ := json.Marshal(map[string]string{"code": tt.code})
			got := describeCall(runCodeName, args, nil)
			if diff := cmp.Diff(tt.want, got.lines); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
			if got.escaped != tt.escaped {
				t.Errorf("%d escaped, want %d", got.escaped, tt.escaped)
			}
		})
	}
}

func TestPlanNarration(t *testing.T) {
	plan := `{"todos":[{"content":"Read the code","status":"completed"},{"content":"Fix \u001b[31mit","status":"in_progress"},{"content":"Test","status":"pending"}]}`
	_, log := render(false, []loop.Chunk{
		{Type: loop.ChunkToolCallStart, ToolCall: &loop.ToolCallInfo{ID: "1", Name: "todo_write", Arguments: json.RawMessage(plan)}},
		{Type: loop.ChunkToolCallResult, ToolCall: &loop.ToolCallInfo{ID: "1", Name: "todo_write", Arguments: json.RawMessage(plan)}, Content: "The plan is recorded."},
	})
	want := "  plan:\n    ✓ Read the code\n    ▶ Fix \\x1b[31mit\n    ☐ Test\n"
	if !strings.HasSuffix(log, want) {
		t.Errorf("log:\n%s\nwant it to end with:\n%s", log, want)
	}
}

// TestMCPServeAllWithoutRunCode: hrns mcp serve --tools all serves every
// built-in tool but run_code, whose programs an MCP client has no use for.
func TestMCPServeAllWithoutRunCode(t *testing.T) {
	cs, _ := serve(t, nil, "--tools", "all")
	var names []string
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	if diff := cmp.Diff(slices.Sorted(slices.Values(tools.Names())), names); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
}

// TestRunCodeCheckedBeforeApproval: a program naming a tool that was not
// selected is refused by the check, before anyone is asked about it.
func TestRunCodeCheckedBeforeApproval(t *testing.T) {
	dir := t.TempDir()
	args, _ := json.Marshal(map[string]string{"code": "write_file(path=\"x.txt\", content=\"x\")\n"})
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c1", "run_code", string(args))}},
		openaitest.Reply{Text: "Refused."},
	)
	defer srv.Close()
	var out, errOut bytes.Buffer
	stdio := &IO{In: strings.NewReader("y\ny\n"), Out: &out, Err: &errOut, Getenv: func(string) string { return "" }, Interactive: func() bool { return true }}
	code := Run(t.Context(), []string{"run", "--base-url", srv.URL(), "--model", "m", "--tools", "run_code,read_file", "--no-skills", "--workdir", dir, "Write"}, stdio)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s", code, errOut.String())
	}
	if strings.Contains(errOut.String(), "Allow?") {
		t.Errorf("a refused program was put to the person:\n%s", errOut.String())
	}
	if !strings.Contains(string(srv.Requests()[1].Body), "1:1: undefined: write_file") {
		t.Errorf("the model is not told why:\n%s", srv.Requests()[1].Body)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.txt")); !os.IsNotExist(err) {
		t.Errorf("x.txt: %v", err)
	}
}
