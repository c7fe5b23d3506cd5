package callview

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/internal/safetext"
	"github.com/hrns-dev/hrns/tools"
)

func TestProgram(t *testing.T) {
	mark := func(s string) string { return "[" + s + "]" }
	tests := []struct {
		name    string
		code    string
		opts    *safetext.Options
		want    []string
		escaped int
	}{
		{"one line", "x = 1", nil, []string{"1 │ x = 1"}, 0},
		{"the final newline is no line", "x = 1\n", nil, []string{"1 │ x = 1"}, 0},
		{"empty", "", nil, []string{"1 │ "}, 0},
		{"blank lines are numbered", "a\n\n\n\nb\n\n", nil, []string{"1 │ a", "2 │ ", "3 │ ", "4 │ ", "5 │ b", "6 │ "}, 0},
		{"hostile", "ok\r\x1b[2K# fine\n\u202eevil\u202c\nx\u200b = 1", &safetext.Options{Mark: mark},
			[]string{`1 │ ok[\r][\x1b][2K# fine`, `2 │ [\u202e]evil[\u202c]`, `3 │ x[\u200b] = 1`}, 5},
		{"a forged gutter stays inside its line", "a\n2 │ b\u2028c", nil, []string{"1 │ a", `2 │ 2 │ b\u2028c`}, 1},
		{"continued", "abcdefghij", &safetext.Options{Width: 4}, []string{"1 │ abcd", "  ↪ efgh", "  ↪ ij"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines, escaped := Program(tt.code, tt.opts)
			var got []string
			for _, l := range lines {
				got = append(got, l.Gutter+l.Text)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
			if escaped != tt.escaped {
				t.Errorf("%d escaped, want %d", escaped, tt.escaped)
			}
		})
	}
}

// Numbers are right-aligned in the width of the last one.
func TestProgramGutterWidth(t *testing.T) {
	var b strings.Builder
	for i := range 12 {
		fmt.Fprintf(&b, "l%d\n", i+1)
	}
	lines, _ := Program(b.String(), nil)
	if len(lines) != 12 || lines[0].Gutter != " 1 │ " || lines[11].Gutter != "12 │ " {
		t.Errorf("gutters: %q … %q (%d lines)", lines[0].Gutter, lines[len(lines)-1].Gutter, len(lines))
	}
}

func TestPlan(t *testing.T) {
	plan := &tools.TodoList{Todos: []tools.TodoItem{
		{Content: "Read the code", Status: tools.TodoCompleted},
		{Content: "Fix \x1b[31mit\nnow", Status: tools.TodoInProgress},
		{Content: "Test \u202e", Status: tools.TodoPending},
	}}
	want := []string{"✓ Read the code", `▶ Fix \x1b[31mit⏎now`, `☐ Test \u202e`}
	if diff := cmp.Diff(want, Plan(plan)); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if got := Plan(&tools.TodoList{Todos: []tools.TodoItem{}}); len(got) != 0 {
		t.Errorf("an empty plan: %q", got)
	}
}
