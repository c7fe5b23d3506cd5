// Package callview renders what a person is shown of a tool call, the same
// way in `hrns run` (cmd/hrns/internal/cli) and in the chat (cmd/hrns/internal/tui): a
// run_code program as numbered lines, a todo_write plan as a checklist.
//
// What it renders comes from the model, so every character of it goes
// through [safetext]: nothing in a program or a plan can hide a line,
// rewrite one, or drive the terminal.
package callview

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hrns-dev/hrns/internal/safetext"
	"github.com/hrns-dev/hrns/tools"
)

// A Line is one display line of a program.
type Line struct {
	// Gutter is the line's number and a bar ("  7 │ "), or, on a display
	// line that continues a source line too long for one, an arrow in
	// the same width ("    ↪ "). It is trusted text.
	Gutter string
	// Text is the program's text, escaped (with o.Mark's highlights).
	Text string
}

// Program renders the code of a run_code call: every source line numbered
// from 1, blank lines included, each rendered by [safetext.Render] with o
// (a line longer than o.Width continues on the next display line after
// ↪). The newline that ends the program is not a line of its own. escaped
// counts the characters shown escaped.
func Program(code string, o *safetext.Options) (lines []Line, escaped int) {
	blk := safetext.Render(strings.TrimSuffix(code, "\n"), o)
	sources := 0
	for _, l := range blk.Lines {
		if !l.Continued {
			sources++
		}
	}
	w := len(strconv.Itoa(sources))
	n := 0
	for _, l := range blk.Lines {
		g := strings.Repeat(" ", w) + " ↪ "
		if !l.Continued {
			n++
			g = fmt.Sprintf("%*d │ ", w, n)
		}
		lines = append(lines, Line{Gutter: g, Text: l.Text})
	}
	return lines, blk.Escaped
}

// Marks of a plan's steps.
const (
	MarkDone       = "✓"
	MarkInProgress = "▶"
	MarkPending    = "☐"
)

// Plan renders a todo_write plan as a checklist, one line per step: its
// mark (✓ completed, ▶ in progress, ☐ pending) and its text on one line,
// escaped, a newline in it shown as ⏎. An empty plan has no lines.
func Plan(plan *tools.TodoList) []string {
	var lines []string
	for _, t := range plan.Todos {
		mark := MarkPending
		switch t.Status {
		case tools.TodoCompleted:
			mark = MarkDone
		case tools.TodoInProgress:
			mark = MarkInProgress
		}
		lines = append(lines, mark+" "+OneLine(t.Content, tools.MaxTodoBytes))
	}
	return lines
}

// OneLine shows untrusted s on one line, escaped by [safetext.Escape]
// (newlines as ⏎), cut to about n bytes of s (at a character boundary,
// with … after).
func OneLine(s string, n int) string {
	cut := len(s) > n
	if cut {
		for n > 0 && s[n]&0xC0 == 0x80 {
			n--
		}
		s = s[:n]
	}
	s = safetext.Escape(strings.ReplaceAll(s, "\n", "⏎"))
	if cut {
		s += "…"
	}
	return s
}
