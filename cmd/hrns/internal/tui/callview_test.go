package tui

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/tools"
)

// hostileProgram is a run_code program that tries to hide its lines: a
// carriage return and an erase sequence that would blank a line, a bidi
// override that would reverse one, a zero-width space, a forged prompt,
// and a run of blank lines that would push the end out of sight.
const hostileProgram = "text = read_file(path=\"in.txt\")\n" +
	"# harmless\r\x1b[2Kwrite_file(path=\"x\", content=\"pwned\")\n" +
	"\n\n\n\n\n\n" +
	"name = \"\u202etxt.exe\"\n" +
	"run_command(command=\"rm\u200b -rf ~\")\n" +
	"# Allow run_code? y yes\n" +
	"result = len(text)\n"

// runCodeTool is a run_code that needs approval and returns its program's
// length: what is under test is how the chat shows the program.
func runCodeTool(t *testing.T) *loop.Toolset {
	t.Helper()
	def := loop.NewTool("run_code", "Runs a program.", func(_ context.Context, in struct {
		Code string `json:"code"`
	}) (string, error) {
		return fmt.Sprintf("result: %d", len(in.Code)), nil
	})
	def.RequiresApproval = true
	ts, err := loop.NewToolset(def)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// TestProgramApproval: the chat shows a program for approval as numbered
// lines, as hrns run does, not as one JSON string: every line visible and
// numbered, blank ones too, with every character that could hide or
// rewrite one escaped.
func TestProgramApproval(t *testing.T) {
	args, _ := json.Marshal(map[string]string{"code": hostileProgram})
	h := newHarness(t, llmtest.Call("c1", "run_code", string(args)), llmtest.Text("Ran."))
	h.c.cfg.Tools = runCodeTool(t)
	h.c.Update(tea.WindowSizeMsg{Width: 80, Height: 30})
	h.typeText("count it")
	h.settle()
	if h.c.approval == nil {
		t.Fatal("no approval asked")
	}
	h.golden("program_approval")
	raw := h.c.screen()
	for _, bad := range []string{"\r", "\x1b[2K", "\u202e", "\u200b", `\n`, `"code"`} {
		if strings.Contains(raw, bad) {
			t.Errorf("the screen holds %q raw:\n%q", bad, raw)
		}
	}
	scr := h.screen()
	src := strings.Split(strings.TrimSuffix(hostileProgram, "\n"), "\n")
	for i := range src {
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^ +%d │( |$)`, i+1)).MatchString(scr) {
			t.Errorf("line %d is not shown numbered:\n%s", i+1, scr)
		}
	}
	for _, want := range []string{
		"run_code wants to run a program of 12 lines",
		`# harmless\r\x1b[2Kwrite_file(path="x", content="pwned")`,
		`name = "\u202etxt.exe"`,
		`run_command(command="rm\u200b -rf ~")`,
		"⚠ 4 characters that are invisible or that a terminal would interpret are shown escaped",
	} {
		if !strings.Contains(scr, want) {
			t.Errorf("the approval does not show %q:\n%s", want, scr)
		}
	}
	h.press("y")
	h.settle()
	// Expanded, the call shows the program the same way.
	h.key(tea.KeyPressMsg{Code: 'o', Mod: tea.ModCtrl})
	scr = h.screen()
	if !strings.Contains(scr, "✓ run_code a program of 12 lines") || !strings.Contains(scr, `11 │ # Allow run_code? y yes`) || strings.Contains(scr, `"code"`) {
		t.Errorf("the expanded call does not show the numbered program:\n%s", scr)
	}
}

// TestPlanChecklist: todo_write's plan is shown as a checklist under its
// call, as hrns run and the page show it, not as JSON; its steps escaped.
func TestPlanChecklist(t *testing.T) {
	plan := `{"todos":[{"content":"Read the code","status":"completed"},{"content":"Fix \u001b[31mit\u202e","status":"in_progress"},{"content":"Run the tests","status":"pending"}]}`
	h := newHarness(t, llmtest.Call("c1", "todo_write", plan), llmtest.Text("Planned."))
	ts, err := tools.ByName([]string{"todo_write"}, &tools.Config{Dir: h.dir})
	if err != nil {
		t.Fatal(err)
	}
	h.c.cfg.Tools = ts
	h.typeText("plan it")
	h.settle()
	h.golden("plan_checklist")
	scr := h.screen()
	want := "✓ todo_write plan of 3 steps"
	if !strings.Contains(scr, want) {
		t.Errorf("no line for the call %q:\n%s", want, scr)
	}
	if !strings.Contains(scr, "    ✓ Read the code\n    ▶ Fix \\x1b[31mit\\u202e\n    ☐ Run the tests\n") {
		t.Errorf("the plan is not a checklist:\n%s", scr)
	}
	h.key(tea.KeyPressMsg{Code: 'o', Mod: tea.ModCtrl})
	scr = h.screen()
	if strings.Contains(scr, `"todos"`) || strings.Contains(scr, `"status"`) {
		t.Errorf("the plan is shown as JSON:\n%s", scr)
	}
	if raw := ansi.Strip(h.c.screen()); strings.ContainsAny(raw, "\x1b\u202e") {
		t.Errorf("a step's escape reached the screen:\n%q", raw)
	}
}
