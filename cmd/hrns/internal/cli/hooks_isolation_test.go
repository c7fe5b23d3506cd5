//go:build linux

package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/sandbox"
)

// TestShellHookNotIsolatedNotRun: on a machine that isolates commands, a
// hook whose sandbox root cannot be built (a working directory whose path
// is 4094 bytes long: its mount point under the root's staging /tmp is
// too long) is refused, not run with Landlock alone; the call fails,
// saying why. Before, it ran (not isolated): its exit 2 denied the call
// with the reason it wrote, "hookran".
func TestShellHookNotIsolatedNotRun(t *testing.T) {
	if err := sandbox.Isolation(); err != nil {
		t.Skipf("commands are not isolated here: %v", err)
	}
	dir := t.TempDir()
	for len(dir) < 4094-250 {
		dir = filepath.Join(dir, strings.Repeat("d", 200))
	}
	dir = filepath.Join(dir, strings.Repeat("e", 4094-len(dir)-1))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Skipf("a path of 4094 bytes: %v", err)
	}
	env := &hookEnv{workdir: dir, sessionID: "s", mode: loop.ModeDefault}
	call := &loop.HookInput{Event: loop.HookPreTool, Tool: "run_command", Arguments: json.RawMessage(`{"command":"ls"}`)}
	h := shellHook(loop.HookPreTool, HookConfig{Matcher: "run_command", Command: `touch ran; echo hookran >&2; exit 2`, Timeout: 30}, env)
	out, err := h.Func(context.Background(), call)
	if err == nil || !strings.Contains(err.Error(), "cannot isolate") || !strings.Contains(err.Error(), "root could not be built") {
		t.Fatalf("%+v, %v; want the hook refused, not isolated", out, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := root.Stat("ran"); err == nil {
		t.Fatal("the hook ran")
	}
}
