package session

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzCheckFileName: a name checkFileName accepts is one local path
// element: it names a file inside files/, never a directory or outside.
func FuzzCheckFileName(f *testing.F) {
	for _, s := range []string{"a.txt", "../x", "..", ".", "a/b", `a\b`, ".bashrc", " a", "a\x00b", "é.pdf", "report (2).pdf", "a\u202eb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if checkFileName(name) != "" {
			return
		}
		if !filepath.IsLocal(name) || filepath.Base(name) != name || strings.ContainsAny(name, "/\\\x00") || strings.HasPrefix(name, ".") || len(name) > maxFileName {
			t.Fatalf("accepted %q", name)
		}
	})
}
