package tools_test

import (
	"bytes"
	"regexp"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/tools"
)

// naiveGrep returns the numbers of the lines of data that match pattern,
// one line at a time: what grep's faster search must agree with.
func naiveGrep(re *regexp.Regexp, data []byte) []int {
	var n []int
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) > 1 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1] // the newline ending the last line
	}
	for i, l := range lines {
		if re.Match(l) {
			n = append(n, i+1)
		}
	}
	return n
}

func TestGrepAgreesWithALineByLineSearch(t *testing.T) {
	data := []byte("Key one\n\u212aey kelvin\nſecret long s\nSECRET\né needle NEEDLE\nfoo\r\nbar foo\n\nlast")
	for _, tt := range []struct {
		pattern string
		fold    bool
	}{
		{"key", true}, {"secret", true}, {"needle", true}, {"NEEDLE", false}, {"foo$", false},
		{`^$`, false}, {"last", false}, {`\Alast`, false}, {`o\nb`, false}, {`(?s)foo.bar`, false},
		{"x*", false}, {`(ab)+cde`, true}, {`[^a]needle`, false},
	} {
		got, err := tools.GrepLines(tt.pattern, tt.fold, data)
		if err != nil {
			t.Fatal(err)
		}
		flags := ""
		if tt.fold {
			flags = "(?i)"
		}
		want := naiveGrep(regexp.MustCompile(flags+tt.pattern), data)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%q fold=%v: (-line by line +grep)\n%s", tt.pattern, tt.fold, diff)
		}
	}
}

func TestRequiredLiteral(t *testing.T) {
	for _, tt := range []struct {
		pattern string
		lit     string
		fold    bool
	}{
		{"errors.Join", "errors", false},
		{`func \(\w+ \*Reader\) Read`, " *Reader) Read", false},
		{"(?i)Deprecated: Use", "deprecated: use", true},
		{"(?i)caf\u00e9", "", false}, // not ASCII in either case
		{"a|b", "", false},
		{`(abc)+x{2,}`, "abc", false},
		{`a\nbcdef`, "", false}, // holds a newline
	} {
		lit, fold := tools.RequiredLiteral(tt.pattern)
		if lit != tt.lit || fold != tt.fold {
			t.Errorf("%q: got %q %v, want %q %v", tt.pattern, lit, fold, tt.lit, tt.fold)
		}
	}
}

// FuzzGrep checks that grep's search (a literal, then the regexp over the
// whole file, then the line) finds the lines a line by line search does.
func FuzzGrep(f *testing.F) {
	f.Add("key", true, []byte("Key\n\u212aey\nkey\n"))
	f.Add("a.c", false, []byte("abc\na\nc\n"))
	f.Add(`^\s*$`, false, []byte("\n \n\t\nx"))
	f.Add(`(?i)ſ+t`, false, []byte("st\nſt\nST"))
	f.Fuzz(func(t *testing.T, pattern string, fold bool, data []byte) {
		if len(pattern) > 64 || len(data) > 4096 || bytes.IndexByte(data, 0) >= 0 {
			return
		}
		flags := ""
		if fold {
			flags = "(?i)"
		}
		re, err := regexp.Compile(flags + pattern)
		if err != nil {
			return
		}
		got, err := tools.GrepLines(pattern, fold, data)
		if err != nil {
			return
		}
		want := naiveGrep(re, data)
		if !slices.Equal(want, got) {
			t.Errorf("%q fold=%v on %q: line by line %v, grep %v", pattern, fold, data, want, got)
		}
	})
}
