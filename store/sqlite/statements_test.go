package sqlite

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestNoBareLimitParameter checks that no statement of the package has a
// bare parameter as its LIMIT or OFFSET (see the package documentation:
// SQLite would prepare such a statement again at every new binding).
func TestNoBareLimitParameter(t *testing.T) {
	bare := regexp.MustCompile(`(?i)\b(LIMIT|OFFSET)\s+(\?\d*|\$\d+|:\w+|@\w+)(\s*$|\s*[^\s+\w]|\s+[^+\s])`)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue // the documentation names what is refused
			}
			if strings.Contains(strings.ToUpper(line), "LIMIT") {
				checked++
			}
			if m := bare.FindString(line); m != "" {
				t.Errorf("%s:%d: %q: write the parameter as an expression (`LIMIT ? + 0`)", f, i+1, strings.TrimSpace(m))
			}
		}
	}
	if checked < 10 {
		t.Fatalf("found %d lines with LIMIT: is the test reading the package's files?", checked)
	}
	for _, bad := range []string{"LIMIT ?", "LIMIT ?2)", "OFFSET ?`", "LIMIT ?1 OFFSET"} {
		if !bare.MatchString(bad) {
			t.Errorf("the check misses %q", bad)
		}
	}
	for _, good := range []string{"LIMIT ? + 0", "LIMIT ?2 + 0)", "OFFSET ? + 0`", "LIMIT 1"} {
		if bare.MatchString(good) {
			t.Errorf("the check refuses %q", good)
		}
	}
}
