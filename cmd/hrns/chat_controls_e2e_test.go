package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// requestModel is the model a Chat Completions request names.
func requestModel(t *testing.T, body []byte) string {
	t.Helper()
	var r struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("request body: %v", err)
	}
	return r.Model
}

// awaitFunc waits until the screen satisfies ok, and returns it.
func (s *tmuxSession) awaitFunc(what string, ok func(string) bool) string {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a hang, not a speed check
	for {
		scr := s.screen()
		if ok(scr) {
			return scr
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the screen never showed %s; it shows:\n%s", what, scr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestChatControlsInTmux drives the chat's in-session controls in a real
// terminal: Shift+Tab cycles the permission mode shown on the status line
// (and acceptEdits lets a write run unasked), "/" opens a menu of
// commands filtered as one types, /model lists the provider's models
// (GET /v1/models) in a picker and switches, "@" completes the workdir's
// paths but not the ignored ones, and hrns chat --resume without an ID
// opens a picker of this directory's conversations whose choice continues
// with the model it was switched to.
func TestChatControlsInTmux(t *testing.T) {
	srv := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_1", "write_file", `{"path":"notes.txt","content":"written\n"}`)}},
		openaitest.Reply{Text: "Wrote notes.txt."},
		openaitest.Reply{Text: "The handler handles."},
		openaitest.Reply{Text: "Still test-model."},
	)
	defer srv.Close()
	dir := t.TempDir()
	for name, body := range map[string]string{
		".gitignore":       "secret/\n",
		"src/handler.go":   "package src\n",
		"secret/handle.go": "package secret\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	home := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TERM=xterm-256color",
		"OPENAI_BASE_URL=" + srv.URL(), "OPENAI_API_KEY=sk-test", "OPENAI_MODEL=gpt-4.1"}
	s := startTmux(t, dir, env)
	s.await("Ask, or /help")
	s.await("⏵ default")

	// Shift+Tab: default → acceptEdits → plan → default → acceptEdits.
	s.send("BTab")
	s.await("⏵ acceptEdits")
	s.send("BTab")
	s.await("⏵ plan")
	s.send("BTab")
	s.await("⏵ default")
	s.send("BTab")
	s.await("⏵ acceptEdits")
	s.send("write notes", "Enter")
	scr := s.await("Wrote notes.txt.")
	if strings.Contains(scr, "Allow write_file?") {
		t.Errorf("acceptEdits asked for a write:\n%s", scr)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "notes.txt")); err != nil || string(got) != "written\n" {
		t.Errorf("notes.txt = %q, %v", got, err)
	}

	// "/" opens the menu; typing filters it.
	s.send("/")
	scr = s.await("/compact")
	for _, want := range []string{"/model", "/resume", "/tools", "pick a model of the provider"} {
		if !strings.Contains(scr, want) {
			t.Errorf("the / menu lacks %q:\n%s", want, scr)
		}
	}
	s.send("mo")
	s.awaitFunc("the menu filtered to /model and /mode", func(scr string) bool {
		return !strings.Contains(scr, "/compact") && strings.Contains(scr, "/mode")
	})
	s.send("Enter") // the first match: /model
	scr = s.await("Pick a model")
	if !strings.Contains(scr, "test-model") || !strings.Contains(scr, "gpt-4.1") {
		t.Errorf("the picker lacks the provider's models:\n%s", scr)
	}
	s.send("test")
	s.await("filter: test")
	s.send("Enter")
	s.await("model: test-model from the next message on")
	s.await("· test-model")

	// "@" completes paths, not the ignored ones.
	s.send("what does @hand")
	scr = s.await("@src/handler.go")
	if strings.Contains(scr, "secret/handle.go") {
		t.Errorf("an ignored path is offered:\n%s", scr)
	}
	s.send("Tab")
	s.await("› what does @src/handler.go")
	s.send("do?", "Enter")
	s.await("The handler handles.")
	reqs := srv.Requests()
	last := reqs[len(reqs)-1].Body
	if got := requestModel(t, last); got != "test-model" {
		t.Errorf("the request after /model names %q", got)
	}
	if !strings.Contains(string(last), "what does @src/handler.go do?") {
		t.Errorf("the completed path is not in the message: %s", last)
	}
	s.send("/exit", "Enter")
	s.await("hrns exited 0")

	// --resume without an ID: a picker of the conversations, with age.
	s2 := startTmux(t, dir, env, "chat", "--resume")
	scr = s2.await("Resume a conversation")
	if !strings.Contains(scr, "write notes") || !strings.Contains(scr, "just now") {
		t.Errorf("the picker lacks the conversation's first line or age:\n%s", scr)
	}
	s2.send("Enter")
	s2.await("Resumed conversation")
	s2.await("· test-model")
	s2.send("still there?", "Enter")
	s2.await("Still test-model.")
	reqs = srv.Requests()
	if got := requestModel(t, reqs[len(reqs)-1].Body); got != "test-model" {
		t.Errorf("the resumed conversation asks %q, not the model it was switched to", got)
	}
}
