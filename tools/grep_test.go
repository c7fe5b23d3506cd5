package tools_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/tools"
)

func newGrep(t *testing.T, opts *tools.GrepOptions) (*loop.Toolset, string) {
	t.Helper()
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return tools.GrepIn(root, opts), dir
}

// grepTree is a small repository: nested .gitignore files with negations
// and directory-only rules, .git/info/exclude, a .git directory, binary
// files, symbolic links in and out, and a hard link.
func grepTree(t *testing.T) (*loop.Toolset, string) {
	t.Helper()
	ts, dir := newGrep(t, &tools.GrepOptions{Workers: 3})
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"secret.txt": "needle outside\n"})
	writeTree(t, dir, map[string]string{
		".gitignore":        "*.log\nbuild/\n/top.txt\n!keep.log\n# a comment: needle\n\\#hash.txt\n",
		".git/info/exclude": "excluded.txt\n",
		".git/config":       "needle in git\n",
		"a.go":              "package a\n\n// needle one\nfunc A() {}\n",
		"b.txt":             "first\nNeedle two\nthird\nneedle three\n",
		"top.txt":           "needle ignored at the top\n",
		"keep.log":          "needle kept by !keep.log\n",
		"drop.log":          "needle dropped\n",
		"excluded.txt":      "needle excluded\n",
		"#hash.txt":         "needle escaped hash\n",
		"build/out.txt":     "needle in build\n",
		"sub/top.txt":       "needle: /top.txt is anchored to the root\n",
		"sub/.gitignore":    "local.txt\n!drop.log\n",
		"sub/local.txt":     "needle ignored in sub\n",
		"sub/drop.log":      "needle re-included in sub\n",
		"sub/deep/x.md":     "needle deep\n",
		"other/local.txt":   "needle: sub's rules stop at sub\n",
		"bin/data.bin":      "needle\x00binary\n",
		"bin/late.txt":      strings.Repeat("x\n", 4500) + "\x00\nneedle after the sniff window\n",
	})
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(dir, "out-link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "out-dir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.go", filepath.Join(dir, "in-link.go")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub", filepath.Join(dir, "sub-link")); err != nil {
		t.Fatal(err)
	}
	return ts, dir
}

func TestGrep(t *testing.T) {
	ts, dir := grepTree(t)
	writeTree(t, dir, map[string]string{
		"ctx/c.txt":  "l1\nl2\nmatch A\nl4\nl5\nl6\nl7\nmatch B\nl9\nmatch C\nl11\n",
		"ctx/d.txt":  "match D\n",
		"crlf/w.txt": "one\r\nneedle crlf\r\n",
		"u/l1.txt":   "caf\xe9 needle\n",
	})
	// A hard link may be a file outside the root: skipped.
	writeTree(t, dir, map[string]string{"linked.go": "needle in a hard link\n"})
	if err := os.Link(filepath.Join(dir, "linked.go"), filepath.Join(dir, "hard.go")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{
			name: "ignores, binaries, links",
			args: map[string]any{"pattern": "needle"},
			want: `.gitignore:5: # a comment: needle
a.go:3: // needle one
b.txt:4: needle three
bin/late.txt:4502: needle after the sniff window
crlf/w.txt:2: needle crlf
keep.log:1: needle kept by !keep.log
other/local.txt:1: needle: sub's rules stop at sub
sub/deep/x.md:1: needle deep
sub/drop.log:1: needle re-included in sub
sub/top.txt:1: needle: /top.txt is anchored to the root
u/l1.txt:1: caf` + "\uFFFD" + ` needle
[files skipped: 1 binary, 2 with several hard links; 11 matching lines]`,
		},
		{
			name: "case insensitive, path",
			args: map[string]any{"pattern": "NEEDLE (two|three)", "path": "b.txt", "case_insensitive": true},
			want: "b.txt:2: Needle two\nb.txt:4: needle three\n[2 matching lines]",
		},
		{
			name: "regexp anchors per line",
			args: map[string]any{"pattern": `^needle \w+$`, "path": "b.txt"},
			want: "b.txt:4: needle three\n[1 matching line]",
		},
		{
			name: "an ignored file named explicitly is searched",
			args: map[string]any{"pattern": "needle", "path": "top.txt"},
			want: "top.txt:1: needle ignored at the top\n[1 matching line]",
		},
		{
			name: "a directory below an ignore file keeps its rules",
			args: map[string]any{"pattern": "needle", "path": "sub"},
			want: "sub/deep/x.md:1: needle deep\nsub/drop.log:1: needle re-included in sub\nsub/top.txt:1: needle: /top.txt is anchored to the root\n[3 matching lines]",
		},
		{
			name: "glob by name",
			args: map[string]any{"pattern": "needle", "glob": "*.md"},
			want: "sub/deep/x.md:1: needle deep\n[1 matching line]",
		},
		{
			name: "glob by path",
			args: map[string]any{"pattern": "needle", "glob": "sub/**/*.txt"},
			want: "sub/top.txt:1: needle: /top.txt is anchored to the root\n[1 matching line]",
		},
		{
			name: "glob relative to path",
			args: map[string]any{"pattern": "needle", "path": "sub", "glob": "deep/*"},
			want: "sub/deep/x.md:1: needle deep\n[1 matching line]",
		},
		{
			name: "context groups",
			args: map[string]any{"pattern": "match", "path": "ctx", "context": 1},
			want: `ctx/c.txt-2- l2
ctx/c.txt:3: match A
ctx/c.txt-4- l4
--
ctx/c.txt-7- l7
ctx/c.txt:8: match B
ctx/c.txt-9- l9
ctx/c.txt:10: match C
ctx/c.txt-11- l11
--
ctx/d.txt:1: match D
[4 matching lines]`,
		},
		{
			name: "context at the start of a file",
			args: map[string]any{"pattern": "l1$", "path": "ctx/c.txt", "context": 2},
			want: "ctx/c.txt:1: l1\nctx/c.txt-2- l2\nctx/c.txt-3- match A\n[1 matching line]",
		},
		{
			name: "max_results",
			args: map[string]any{"pattern": "match", "path": "ctx", "max_results": 2},
			want: "ctx/c.txt:3: match A\nctx/c.txt:8: match B\n[stopped at 2 matching lines (max_results); there may be more: narrow the pattern, path or glob]",
		},
		{
			name: "no match",
			args: map[string]any{"pattern": "nowhere", "glob": "*.go"},
			want: `(no line matches "nowhere" in . among files matching "*.go"; 1 file searched)` + "\n[files skipped: 2 with several hard links]",
		},
		{
			name: "empty lines match an empty pattern",
			args: map[string]any{"pattern": "^$", "path": "a.go"},
			want: "a.go:2:\n[1 matching line]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := callTool(t, t.Context(), ts, "grep", tt.args)
			if r.failed() {
				t.Fatal(r)
			}
			if diff := cmp.Diff(tt.want, r.text); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestGrepRefusals(t *testing.T) {
	ts, dir := grepTree(t)
	if err := mkfifo(filepath.Join(dir, "fifo")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{"no pattern", map[string]any{"pattern": ""}, "pattern is required"},
		{"bad regexp", map[string]any{"pattern": "(unclosed"}, `pattern "(unclosed" is not a valid regular expression: missing closing ): ` + "`(unclosed`"},
		{"huge regexp", map[string]any{"pattern": "a{1000}{1000}"}, "is not a valid regular expression"},
		{"long pattern", map[string]any{"pattern": strings.Repeat("a", 5000)}, "grep takes patterns of at most 4096"},
		{"context", map[string]any{"pattern": "x", "context": 11}, "context must be between 0 and 10"},
		{"max_results", map[string]any{"pattern": "x", "max_results": 5000}, "max_results must be between 1 and 1000"},
		{"bad glob", map[string]any{"pattern": "x", "glob": "a**b"}, "** must be a whole path segment"},
		{"dotdot", map[string]any{"pattern": "x", "path": "../"}, "is outside the working directory"},
		{"absolute", map[string]any{"pattern": "x", "path": "/etc"}, "is outside the working directory"},
		{"link out", map[string]any{"pattern": "needle", "path": "out-link.txt"}, "leads outside the working directory"},
		{"dir link out", map[string]any{"pattern": "needle", "path": "out-dir"}, "leads outside the working directory"},
		{"missing", map[string]any{"pattern": "x", "path": "nope"}, "nope does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := callTool(t, t.Context(), ts, "grep", tt.args)
			if !r.failed() || !strings.Contains(r.String(), tt.want) {
				t.Errorf("got %q, want an error containing %q", r.String(), tt.want)
			}
		})
	}
	// A FIFO named explicitly is not waited on.
	r := callTool(t, t.Context(), ts, "grep", map[string]any{"pattern": "x", "path": "fifo"})
	if r.failed() || !strings.Contains(r.text, "files skipped: 1 unreadable") {
		t.Errorf("fifo: %s", r)
	}
	// Nor is one met on the way; and an ignore file that is a link out of
	// the root is not read (its "*" would hide lone/found.txt).
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"ignore-all": "*\n"})
	writeTree(t, dir, map[string]string{"lone/found.txt": "needle alone\n"})
	if err := os.Symlink(filepath.Join(outside, "ignore-all"), filepath.Join(dir, "lone", ".gitignore")); err != nil {
		t.Fatal(err)
	}
	r = callTool(t, t.Context(), ts, "grep", map[string]any{"pattern": "needle", "path": "lone"})
	if r.failed() || r.text != "lone/found.txt:1: needle alone\n[1 matching line]" {
		t.Errorf("walk with a FIFO and an outside ignore file: %s", r)
	}
	r = callTool(t, t.Context(), ts, "grep", map[string]any{"pattern": "needle"})
	if r.failed() || !strings.Contains(r.text, "lone/found.txt:1: needle alone") {
		t.Errorf("walk with a FIFO: %s", r)
	}
}

func TestGrepBounds(t *testing.T) {
	ts, dir := newGrep(t, &tools.GrepOptions{MaxOutputBytes: 100, MaxFileBytes: 12000, MaxResults: 200})
	var many strings.Builder
	for i := range 200 {
		fmt.Fprintf(&many, "hit %03d %s\n", i, strings.Repeat(".", 30))
	}
	writeTree(t, dir, map[string]string{
		"many.txt": many.String(),
		"big.txt":  strings.Repeat("hit\n", 3100),
		"long.txt": strings.Repeat("é", 1000) + " hit " + strings.Repeat("b", 1000) + "\n",
	})
	// 100 bytes is raised to 4 KiB; each line is 52 bytes.
	r := callTool(t, t.Context(), ts, "grep", map[string]any{"pattern": "hit", "glob": "many.txt", "max_results": 200})
	if r.failed() || !strings.HasSuffix(r.text, "many.txt:78: hit 077 ..............................\n[output cut at 4 KiB after 78 matching lines; narrow the pattern, path or glob]") {
		t.Errorf("output bound: %s", r)
	}
	r = callTool(t, t.Context(), ts, "grep", map[string]any{"pattern": "hit", "glob": "big.txt"})
	if r.failed() || !strings.Contains(r.text, "files skipped: 1 larger than 12000 bytes") {
		t.Errorf("file bound: %s", r)
	}
	r = callTool(t, t.Context(), ts, "grep", map[string]any{"pattern": "hit", "glob": "long.txt"})
	want := "long.txt:1: …" + strings.Repeat("é", 50) + " hit " + strings.Repeat("b", 295) + "… [line of 3005 bytes cut]"
	if r.failed() || !strings.HasPrefix(r.text, want) {
		t.Errorf("long line:\n got %s\nwant %s", r, want)
	}
	if def, _ := ts.Lookup("grep"); !def.Concurrent || def.RequiresApproval {
		t.Error("grep is not a concurrent tool without approval")
	}
}

func TestGrepCancelled(t *testing.T) {
	ts, dir := newGrep(t, nil)
	for i := range 200 {
		writeTree(t, dir, map[string]string{fmt.Sprintf("d%d/f.txt", i): "needle\n"})
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r := callTool(t, ctx, ts, "grep", map[string]any{"pattern": "needle"})
	if r.err == nil || !strings.Contains(r.err.Error(), "context canceled") {
		t.Errorf("cancelled search: %s", r)
	}
}

// TestGrepDeterministic checks that the order of results does not depend
// on the number of workers.
func TestGrepDeterministic(t *testing.T) {
	dir := t.TempDir()
	for i := range 60 {
		writeTree(t, dir, map[string]string{
			fmt.Sprintf("d%02d/f.txt", i%7):       fmt.Sprintf("needle %d\n", i),
			fmt.Sprintf("d%02d/%02d.txt", i%7, i): strings.Repeat("x\n", i*50) + "needle\n",
		})
	}
	var want string
	for _, workers := range []int{1, 2, 8} {
		ts, err := tools.Grep(dir, &tools.GrepOptions{Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		r := callTool(t, t.Context(), ts, "grep", map[string]any{"pattern": "needle", "max_results": 50, "context": 1})
		if r.failed() {
			t.Fatal(r)
		}
		if want == "" {
			want = r.text
		} else if diff := cmp.Diff(want, r.text); diff != "" {
			t.Errorf("%d workers: (-1 worker +got)\n%s", workers, diff)
		}
	}
}
