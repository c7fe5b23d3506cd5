package tui

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/loop/compact"
	"github.com/hrns-dev/hrns/tools"
)

var update = flag.Bool("update", false, "rewrite the golden screens in testdata/")

// harness drives a chat the way Bubble Tea does, one message at a time,
// without a terminal: keys go to Update, and the run's events are read
// from the chat's channel and given to Update until the chat is idle.
type harness struct {
	t     *testing.T
	c     *chat
	model *llmtest.Model
	dir   string
}

func newHarness(t *testing.T, replies ...llmtest.Reply) *harness {
	t.Helper()
	dir := t.TempDir()
	ts, err := tools.ByName([]string{"read_file", "write_file", "edit_file", "run_command"},
		&tools.Config{Dir: dir, Shell: &tools.ShellOptions{Unconfined: true}})
	if err != nil {
		t.Fatal(err)
	}
	m := llmtest.NewModel(replies...)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := newChat(ctx, &Config{Model: m, ModelName: "gpt-4.1", Tools: ts, System: "You help.", Workdir: dir})
	t.Cleanup(c.stop)
	fixed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c.now = func() time.Time { return fixed }
	c.tick = nil
	c.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	return &harness{t: t, c: c, model: m, dir: dir}
}

// typeText types s and presses Enter.
func (h *harness) typeText(s string) {
	for _, r := range s {
		h.c.Update(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
	h.key(tea.KeyPressMsg{Code: tea.KeyEnter})
}

func (h *harness) key(k tea.KeyPressMsg) tea.Cmd {
	_, cmd := h.c.Update(k)
	return cmd
}

func (h *harness) press(s string) { h.key(tea.KeyPressMsg{Code: rune(s[0]), Text: s}) }

// settle gives the chat its events until it is idle or asks a question.
func (h *harness) settle() {
	h.t.Helper()
	guard := time.NewTimer(30 * time.Second) // a hang, not a speed check
	defer guard.Stop()
	for h.c.busy && (h.c.approval == nil || h.c.reason) {
		select {
		case e := <-h.c.events:
			h.c.Update(e)
		case <-guard.C:
			h.t.Fatal("the chat never settled")
		}
	}
}

// screen is what the terminal shows, without colours.
func (h *harness) screen() string {
	lines := strings.Split(ansi.Strip(h.c.screen()), "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	return strings.Join(lines, "\n") + "\n"
}

func (h *harness) golden(name string) {
	h.t.Helper()
	got := h.screen()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			h.t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		h.t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		h.t.Errorf("screen %s differs from %s:\n--- got\n%s--- want\n%s", name, path, got, want)
	}
}

func TestAnswerMarkdown(t *testing.T) {
	h := newHarness(t, llmtest.Reply{Reasoning: "The user greets me.", Text: "# Hello\n\nSome **bold** text:\n\n- one\n- two\n",
		Usage: llm.Usage{InputTokens: 12000, CacheReadTokens: 8000, OutputTokens: 500}})
	h.typeText("hi there")
	h.settle()
	h.golden("answer")
	h.key(tea.KeyPressMsg{Code: 't', Mod: tea.ModCtrl})
	if s := h.screen(); !strings.Contains(s, "The user greets me.") {
		t.Errorf("Ctrl+T does not show the thinking:\n%s", s)
	}
}

func TestEditApprovalDiff(t *testing.T) {
	h := newHarness(t,
		llmtest.Call("c1", "edit_file", `{"path":"main.go","old_string":"\treturn 5","new_string":"\treturn 6"}`),
		llmtest.Text("Done: five is six now."))
	src := "package main\n\nfunc a() int {\n\treturn 1\n}\n\nfunc b() int {\n\treturn 5\n}\n\nfunc c() int {\n\treturn 9\n}\n"
	os.WriteFile(filepath.Join(h.dir, "main.go"), []byte(src), 0o644)
	h.typeText("make b return 6")
	h.settle()
	if h.c.approval == nil {
		t.Fatal("no approval asked")
	}
	h.golden("edit_approval")
	h.press("y")
	h.settle()
	h.golden("edit_done")
	got, _ := os.ReadFile(filepath.Join(h.dir, "main.go"))
	if !strings.Contains(string(got), "return 6") {
		t.Errorf("the edit did not run: %s", got)
	}
}

func TestWriteRefusedWithReason(t *testing.T) {
	h := newHarness(t,
		llmtest.Call("c1", "write_file", `{"path":"notes.txt","content":"new\n"}`),
		llmtest.Text("OK, I leave it."))
	os.WriteFile(filepath.Join(h.dir, "notes.txt"), []byte("old\n"), 0o644)
	h.typeText("rewrite notes")
	h.settle()
	if s := h.screen(); !strings.Contains(s, "write_file wants to overwrite notes.txt") || !strings.Contains(s, "1      - old") || !strings.Contains(s, "1 + new") {
		t.Fatalf("the approval does not show an overwrite with its diff:\n%s", s)
	}
	h.press("n")
	h.typeText("keep my notes")
	h.settle()
	reqs := h.model.Requests()
	last := reqs[len(reqs)-1].Messages
	res := last[len(last)-1]
	if res.Role != llm.RoleTool || !strings.Contains(res.Parts[0].ToolResult.Text(), "keep my notes") {
		t.Errorf("the model was not told the reason: %+v", res)
	}
	if got, _ := os.ReadFile(filepath.Join(h.dir, "notes.txt")); string(got) != "old\n" {
		t.Errorf("the refused write ran: %q", got)
	}
}

func TestCreateAndCommandPrefix(t *testing.T) {
	h := newHarness(t,
		llmtest.Call("c1", "run_command", `{"command":"ls -a"}`),
		llmtest.Call("c2", "run_command", `{"command":"ls ."}`),
		llmtest.Call("c3", "run_command", `{"command":"ls; touch pwned"}`),
		llmtest.Text("Listed."))
	h.typeText("list")
	h.settle()
	if s := h.screen(); !strings.Contains(s, "p always “ls …”") {
		t.Fatalf("no prefix offered:\n%s", s)
	}
	h.press("p")
	h.settle()
	// "ls ." matched the prefix; "ls; touch pwned" must be asked.
	if h.c.approval == nil || !strings.Contains(string(h.c.approval.msg.req.Call.Arguments), "touch") {
		t.Fatalf("the command with an operator was not asked about: %+v", h.c.approval)
	}
	h.golden("command_approval")
	h.key(tea.KeyPressMsg{Code: tea.KeyEscape})
	h.settle()
	if _, err := os.Stat(filepath.Join(h.dir, "pwned")); err == nil {
		t.Error("the refused command ran")
	}
	if s := h.screen(); !strings.Contains(s, "turn interrupted") {
		t.Errorf("Esc did not end the turn:\n%s", s)
	}
}

func TestUntrustedTextEscaped(t *testing.T) {
	h := newHarness(t, llmtest.Text("ok \x1b[2J\x1b]8;;http://x\x07link\u202e done"))
	h.typeText("hi")
	h.settle()
	raw := h.c.screen()
	for _, bad := range []string{"\x1b[2J", "\x1b]8", "\a", "\u202e"} {
		if strings.Contains(raw, bad) {
			t.Errorf("the screen holds %q from the model", bad)
		}
	}
	if !strings.Contains(h.screen(), `\x1b[2J`) {
		t.Errorf("the escape is not shown as text:\n%s", h.screen())
	}
}

func TestCtrlCCancelsThenExits(t *testing.T) {
	h := newHarness(t, llmtest.Reply{Block: true}, llmtest.Text("after"))
	h.typeText("wait")
	if !h.c.busy {
		t.Fatal("no run")
	}
	if cmd := h.key(tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl}); cmd != nil {
		t.Fatal("the first Ctrl-C quit")
	}
	h.settle()
	if s := h.screen(); !strings.Contains(s, "turn interrupted") {
		t.Errorf("the turn was not interrupted:\n%s", s)
	}
	// The conversation goes on after an interrupted turn.
	h.typeText("again")
	h.settle()
	if s := h.screen(); !strings.Contains(s, "after") {
		t.Errorf("no answer after the interruption:\n%s", s)
	}
	h.key(tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl})
	cmd := h.key(tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl})
	if cmd == nil {
		t.Fatal("the second Ctrl-C did not quit")
	}
	if _, ok := cmd().(tea.QuitMsg); !ok {
		t.Error("the second Ctrl-C did not quit")
	}
}

func TestSlashCommands(t *testing.T) {
	h := newHarness(t, llmtest.Reply{Text: "hi", Usage: llm.Usage{InputTokens: 1000, OutputTokens: 100}})
	h.typeText("hello")
	h.settle()
	h.typeText("/model other-model")
	if h.c.modelName != "other-model" {
		t.Errorf("model = %q", h.c.modelName)
	}
	h.typeText("/cost")
	h.typeText("/tools")
	h.golden("slash")
	h.typeText("/clear")
	if len(h.c.msgs) != 1 || h.c.msgs[0].Role != llm.RoleSystem {
		t.Errorf("/clear left %d messages", len(h.c.msgs))
	}
	if cmd := h.c.command("/exit"); cmd == nil {
		t.Error("/exit does not quit")
	}
}

func TestQueuedWhileBusy(t *testing.T) {
	h := newHarness(t, llmtest.Text("first"), llmtest.Text("second"))
	h.typeText("one")
	h.typeText("two") // typed while the first turn runs
	h.settle()        // the end of the first turn starts the second
	h.settle()
	if n := len(h.model.Requests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

func TestCloseCalls(t *testing.T) {
	msgs := []llm.Message{llm.UserMessage("x"), {Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "a", Name: "t"}}}}}
	got := closeCalls(msgs)
	if len(got) != 3 || got[2].Role != llm.RoleTool || got[2].Parts[0].ToolResult.CallID != "a" {
		t.Errorf("closeCalls = %+v", got)
	}
	if len(closeCalls(msgs[:1])) != 1 {
		t.Error("a complete transcript was changed")
	}
}

var _ loop.Approver = (*approver)(nil)

func llmReplyCall(name, args string) llmtest.Reply { return llmtest.Call("c1", name, args) }
func llmReplyText(s string) llmtest.Reply          { return llmtest.Text(s) }

// TestAutoCompaction: the chat runs with the compaction its Config gives
// for the model in use (asked again after /model), and says in a line
// that it compacted, from what to what.
func TestAutoCompaction(t *testing.T) {
	var replies []llmtest.Reply
	for i := range 4 {
		r := llmtest.Call(fmt.Sprintf("c%d", i), "read_file", `{"path":"big.txt"}`)
		r.Usage = llm.Usage{InputTokens: int64(300 + 1100*i), OutputTokens: 10}
		replies = append(replies, r)
	}
	replies = append(replies, llmtest.Text("read it four times"), llmtest.Text("again"))
	h := newHarness(t, replies...)
	if err := os.WriteFile(filepath.Join(h.dir, "big.txt"), []byte(strings.Repeat("a line of the big file\n", 180)), 0o644); err != nil {
		t.Fatal(err)
	}
	var asked []string
	h.c.cfg.Compaction = func(model string) *loop.Compaction {
		asked = append(asked, model)
		return &loop.Compaction{ContextWindow: 4000, KeepTurns: 1, Strategy: compact.Trim{}}
	}
	h.typeText("read big.txt four times")
	h.settle()
	screen := strings.Join(strings.Fields(h.screen()), " ") // the line wraps
	if !strings.Contains(screen, "(context compacted by trim: ") || !strings.Contains(screen, "of a 4.0k window; before the next request)") {
		t.Errorf("no compaction line on the screen:\n%s", screen)
	}
	if h.c.msgs[len(h.c.msgs)-1].Text() != "read it four times" {
		t.Errorf("the conversation ends with %q", h.c.msgs[len(h.c.msgs)-1].Text())
	}
	h.typeText("/model other-model")
	h.typeText("again")
	h.settle()
	if !slices.Equal(asked, []string{"gpt-4.1", "other-model"}) {
		t.Errorf("compaction asked for %q, want each run's model", asked)
	}
}

// TestAtCompletion: "@" lists the workdir's paths (walked off the UI's
// goroutine, .gitignore honoured) matching what follows it, and Tab puts
// the chosen one in place of the token, the cursor after it.
func TestAtCompletion(t *testing.T) {
	h := newHarness(t)
	for name, body := range map[string]string{".gitignore": "gen/\n", "cmd/main.go": "x", "gen/main.go": "x", "README.md": "x"} {
		p := filepath.Join(h.dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(body), 0o644)
	}
	for _, r := range "see @mai" {
		h.c.Update(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
	guard := time.NewTimer(30 * time.Second) // a hang, not a speed check
	defer guard.Stop()
	for h.c.menu == nil || len(h.c.menu.items) == 0 {
		select {
		case e := <-h.c.events:
			h.c.Update(e)
		case <-guard.C:
			t.Fatalf("no completion:\n%s", h.screen())
		}
	}
	if s := h.screen(); !strings.Contains(s, "@cmd/main.go") || strings.Contains(s, "gen/main.go") {
		t.Errorf("the completion menu:\n%s", s)
	}
	h.key(tea.KeyPressMsg{Code: tea.KeyTab})
	if got := h.c.input.Value(); got != "see @cmd/main.go " {
		t.Errorf("after Tab the input is %q", got)
	}
	if h.c.menu != nil {
		t.Error("the menu stays open after the completion")
	}
	for _, r := range "please" {
		h.c.Update(tea.KeyPressMsg{Code: r, Text: string(r)})
	}
	if got := h.c.input.Value(); got != "see @cmd/main.go please" {
		t.Errorf("typing after the completion gives %q", got)
	}
}

// TestModeCycle: Shift+Tab cycles default, acceptEdits and plan, and
// bypassPermissions only in a chat started in it; /mode sets one.
func TestModeCycle(t *testing.T) {
	h := newHarness(t)
	shiftTab := tea.KeyPressMsg{Code: tea.KeyTab, Mod: tea.ModShift}
	var seen []loop.PermissionMode
	for range 4 {
		h.key(shiftTab)
		seen = append(seen, h.c.perms.CurrentMode())
	}
	want := []loop.PermissionMode{loop.ModeAcceptEdits, loop.ModePlan, loop.ModeDefault, loop.ModeAcceptEdits}
	if !slices.Equal(seen, want) {
		t.Errorf("Shift+Tab gives %v, want %v", seen, want)
	}
	if s := h.screen(); !strings.Contains(s, "⏵ acceptEdits") {
		t.Errorf("the status line does not show the mode:\n%s", s)
	}
	h.typeText("/mode bypassPermissions")
	if h.c.perms.CurrentMode() != loop.ModeAcceptEdits || !strings.Contains(h.screen(), "offered only to a chat started in it") {
		t.Errorf("/mode bypassPermissions in a default chat: %s\n%s", h.c.perms.CurrentMode(), h.screen())
	}
	h.typeText("/mode plan")
	if h.c.perms.CurrentMode() != loop.ModePlan {
		t.Errorf("/mode plan: %s", h.c.perms.CurrentMode())
	}

	b := newHarness(t)
	b.c.perms.SetMode(loop.ModeBypass)
	b.c.bypassOK = true
	b.key(shiftTab)
	if got := b.c.perms.CurrentMode(); got != loop.ModeDefault {
		t.Errorf("after bypassPermissions: %s", got)
	}
	for range 3 {
		b.key(shiftTab)
	}
	if got := b.c.perms.CurrentMode(); got != loop.ModeBypass {
		t.Errorf("a chat started in bypassPermissions cycles back to it: %s", got)
	}
}
