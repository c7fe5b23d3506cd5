//go:build unix

package tools_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/hrns-dev/hrns/tools"
)

// TestLiveOutput: run_command sends its output to the context's sink as it
// comes, confined or not, and the model's result is unchanged.
func TestLiveOutput(t *testing.T) {
	for _, unconfined := range []bool{false, true} {
		ts, _ := newShell(t, &tools.ShellOptions{Unconfined: unconfined})
		var mu sync.Mutex
		var got strings.Builder
		ctx := tools.WithLiveOutput(t.Context(), func(command string, p []byte) {
			mu.Lock()
			defer mu.Unlock()
			got.WriteString(command + "|" + string(p))
		})
		r := run(t, ctx, ts, "echo one; echo two >&2", 0)
		mu.Lock()
		live := got.String()
		mu.Unlock()
		if !strings.Contains(live, "echo one; echo two >&2|") || !strings.Contains(live, "one\n") || !strings.Contains(live, "two\n") {
			t.Errorf("unconfined=%v: live output %q", unconfined, live)
		}
		if !strings.Contains(r.text, "one") || !strings.Contains(r.text, "two") {
			t.Errorf("unconfined=%v: the result lost output: %q", unconfined, r.text)
		}
	}
}
