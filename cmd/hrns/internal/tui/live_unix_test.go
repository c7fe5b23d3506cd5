//go:build unix

package tui

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/tools"
)

// TestLiveCommandOutput: the last lines of a running command show under
// its line, escaped, while it runs.
func TestLiveCommandOutput(t *testing.T) {
	h := newHarness(t,
		llmtest.Call("c1", "run_command", `{"command":"printf 'building\\033[31m red\\n'; read x < gate; echo done"}`),
		llmtest.Text("Built."))
	h.c.cfg.WithLiveOutput = func(ctx context.Context, f func(string, []byte)) context.Context { return tools.WithLiveOutput(ctx, f) }
	if err := syscall.Mkfifo(filepath.Join(h.dir, "gate"), 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	h.c.cfg.Allow.AlwaysAllow("run_command", "")
	h.typeText("build it")
	guard := time.NewTimer(30 * time.Second) // a hang, not a speed check
	defer guard.Stop()
	for !strings.Contains(h.screen(), "│ building") {
		select {
		case e := <-h.c.events:
			h.c.Update(e)
		case <-guard.C:
			t.Fatalf("the running command's output never showed:\n%s", h.screen())
		}
	}
	if raw := h.c.screen(); strings.Contains(raw, "\x1b[31m red") || !strings.Contains(h.screen(), `building\x1b[31m red`) {
		t.Errorf("the command's escape reached the screen raw:\n%q", raw)
	}
	if err := os.WriteFile(filepath.Join(h.dir, "gate"), []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.settle()
	if s := h.screen(); strings.Contains(s, "│ building") || !strings.Contains(s, "Built.") {
		t.Errorf("after the command:\n%s", s)
	}
}
