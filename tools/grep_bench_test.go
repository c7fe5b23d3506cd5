package tools_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/tools"
)

// BenchmarkGrepGoroot searches the Go standard library's source, as the
// grep benchmark of bench/ does against grep -rn.
func BenchmarkGrepGoroot(b *testing.B) {
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Skipf("go env GOROOT: %v", err)
	}
	src := filepath.Join(strings.TrimSpace(string(goroot)), "src")
	if _, err := os.Stat(src); err != nil {
		b.Skipf("no Go source: %v", err)
	}
	ts, err := tools.Grep(src, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, pattern string }{
		{"literal", "errors.Join"},
		{"regexp", `func \(\w+ \*Reader\) Read\w*\(`},
		{"none", "zq_no_such_text_qz"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				r := callTool(b, b.Context(), ts, "grep", map[string]any{"pattern": bc.pattern, "max_results": 1000})
				if r.failed() {
					b.Fatal(r)
				}
			}
		})
	}
}
