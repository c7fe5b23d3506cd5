package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoInTmux: the first thing a keyless newcomer runs holds a
// conversation in a terminal about the directory it runs in, for as many
// turns as they like, and says it is scripted.
func TestDemoInTmux(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"README.md":   "# Garden Planner\n\nPlans gardens by the season.\n",
		"go.mod":      "module example.org/garden\n\ngo 1.23\n",
		"plan/sow.go": "package plan\n\n// TODO: frost dates\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TERM=xterm-256color"}
	s := startTmux(t, dir, env, "demo")
	scr := s.await("Ask, or /help")
	if !strings.Contains(scr, "not a language model") {
		t.Errorf("the demo does not say it is scripted:\n%s", scr)
	}
	if strings.Contains(scr, ".jsonl") {
		t.Errorf("the banner names a file:\n%s", scr)
	}
	s.send("Tell me about this directory", "Enter")
	s.await("Plans gardens by the season.")
	s.send("read go.mod", "Enter")
	s.await("module example.org/garden")
	s.send("find TODO", "Enter")
	s.await("plan/sow.go:3:")
	s.send("what is the weather?", "Enter")
	s.await("scripted demo model")
	s.send("/exit", "Enter")
	s.await("hrns exited 0")
}
