package loop

import (
	"regexp"
	"strings"
	"testing"
)

// toolNamePattern is what validToolName checks, as a regular expression.
var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func TestValidToolName(t *testing.T) {
	for _, name := range []string{
		"", "a", "read_file", "A-Z_09", strings.Repeat("x", 64), strings.Repeat("x", 65),
		"read file", "read.file", "naïve", "a\x00", "\n", "tool\n", "ｆｕｌｌ", "-", "_",
	} {
		if got, want := validToolName(name), toolNamePattern.MatchString(name); got != want {
			t.Errorf("validToolName(%q) = %v, want %v", name, got, want)
		}
	}
}

// FuzzValidToolName checks validToolName against the regular expression
// on any string.
func FuzzValidToolName(f *testing.F) {
	for _, s := range []string{"", "read_file", strings.Repeat("y", 64), strings.Repeat("y", 65), "a b", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if got, want := validToolName(name), toolNamePattern.MatchString(name); got != want {
			t.Fatalf("validToolName(%q) = %v, want %v", name, got, want)
		}
	})
}
