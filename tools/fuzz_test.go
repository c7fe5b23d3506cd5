package tools_test

import (
	"path"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/tools"
)

// FuzzHTMLToMarkdown checks that no page makes the conversion fail, panic
// or return more than the cap.
func FuzzHTMLToMarkdown(f *testing.F) {
	for _, b := range htmlBombs {
		if len(b.page) < 4096 {
			f.Add(b.page)
		}
	}
	f.Add("<blockquote><pre>a\n\nb</pre></blockquote>")
	f.Add("<table><tr><td colspan=3>a<td>b</table>")
	f.Add("<p><b id=1><b id=2><b id=3></p><p>x<p>y")
	f.Fuzz(func(t *testing.T, page string) {
		const maxBytes = 4096
		res, err := tools.HTMLToMarkdown(t.Context(), page, nil, maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Text) > maxBytes {
			t.Fatalf("%d bytes, more than %d", len(res.Text), maxBytes)
		}
	})
}

// FuzzGlobMatch checks the step-by-step matcher against the backtracking
// one it replaced, on short patterns and paths.
func FuzzGlobMatch(f *testing.F) {
	f.Add("**/*.go", "a/b/c.go")
	f.Add("a/**/b/**/c", "a/x/b/y/c")
	f.Add("**/*/**/*/x", "d/d/d/x")
	f.Add("[a-c]?/**", "bx/q")
	f.Fuzz(func(t *testing.T, pattern, name string) {
		segs := cleanGlob(pattern)
		if segs == nil || len(pattern) > 256 || len(segs) > 8 || name == "" || strings.Count(name, "/") > 8 {
			return
		}
		parts := strings.Split(name, "/")
		for _, p := range parts {
			if p == "" {
				return
			}
		}
		want := matchSegs(segs, parts)
		if got := tools.GlobMatch(strings.Join(segs, "/"), name); got != want {
			t.Fatalf("%q ~ %q: %v, backtracking says %v", pattern, name, got, want)
		}
	})
}

// cleanGlob splits a pattern as list_files does, or returns nil for one
// it refuses.
func cleanGlob(pattern string) []string {
	if strings.HasPrefix(pattern, "/") {
		return nil
	}
	var segs []string
	for _, s := range strings.Split(pattern, "/") {
		switch {
		case s == "" || s == ".":
			continue
		case s == "**":
			if len(segs) > 0 && segs[len(segs)-1] == "**" {
				continue
			}
		case strings.Contains(s, "**"):
			return nil
		default:
			if _, err := path.Match(s, ""); err != nil {
				return nil
			}
		}
		segs = append(segs, s)
	}
	if len(segs) == 0 {
		return nil
	}
	return segs
}

// matchSegs is the backtracking matcher list_files used before.
func matchSegs(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(name); i++ {
				if matchSegs(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}
