// Package safetext shows untrusted text to a person who must judge it:
// every character that a terminal would interpret, or that a reader cannot
// see, is replaced by a visible escape.
//
//	fmt.Fprintf(w, "  $ %s\n", safetext.Escape(command))
//
// Text written by a model, a tool or an MCP server can carry carriage
// returns, backspaces, ANSI and OSC escape sequences, bidi overrides and
// zero-width characters. Printed raw, `echo x > f; id >> f #\r\x1b[2K  $ ls -la`
// shows only `$ ls -la`, and a person approves a command they did not see.
// The hrns command renders everything it asks approval for with this
// package (the command, the diff, the file to write, the tool's name), the
// MCP server renders the question of its approval elicitations with it, and
// the web page of `hrns serve` is to use the same rules.
//
// # What is escaped
//
// A rune is shown as it is only when it is graphic ([unicode.IsGraphic]) and
// none of the following. Everything else is escaped:
//
//   - C0 controls, DEL and C1 controls (including ESC, CR, BS and NEL):
//     `\r`, `\b`, `\x1b`, `\x7f`, `\u009b`;
//   - format characters (category Cf: bidi embeddings, overrides and
//     isolates U+202A–U+202E and U+2066–U+2069, marks, zero-width spaces
//     and joiners, the BOM, tags), the line and paragraph separators
//     U+2028 and U+2029, private-use and unassigned code points;
//   - other default-ignorable code points (Hangul fillers, the combining
//     grapheme joiner, variation selectors) and the blank U+2800;
//   - every space but U+0020, so that a no-break space cannot pass for a
//     word separator;
//   - combining marks that have no visible base, or that follow two marks
//     already, so that stacked marks cannot draw over neighbouring lines
//     (not in [EscapeText], whose text arrives in pieces);
//   - bytes that are not UTF-8, as `\xff`.
//
// Runes below U+0080 are escaped as `\xHH` (with the usual short forms
// `\a \b \f \n \r \t \v`), bytes that are not UTF-8 as `\xHH` with HH of 80
// or more, and other runes as `\uHHHH` or `\UHHHHHHHH`. A backslash is not
// escaped, so that commands read as they are written; an escape is told
// apart from the same characters typed literally by its mark (see
// [Options.Mark]) and by the count [Block.Escaped].
//
// The output of [Escape] and [Render] holds no byte below 0x20, no DEL, no
// C1 control and no escaped code point, apart from what Options.Mark adds.
package safetext

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxMarks is how many combining marks may follow one visible base rune.
const maxMarks = 2

// tabWidth is how many spaces stand for a tab in [Render].
const tabWidth = 4

// DefaultWidth is the line width of [Render] when Options.Width is 0.
const DefaultWidth = 120

// Escape returns s on one line with every character that is not plainly
// visible escaped, newlines and tabs included.
func Escape(s string) string { return EscapeMarked(s, nil) }

// EscapeMarked is [Escape] with each escape wrapped by mark, as
// [Options.Mark] does. A nil mark leaves escapes unmarked.
func EscapeMarked(s string, mark func(escape string) string) string {
	var e escaper
	var b strings.Builder
	e.each(s, func(text string, escaped bool) {
		if escaped && mark != nil {
			text = mark(text)
		}
		b.WriteString(text)
	})
	return b.String()
}

// EscapeText is [Escape] for flowing text, such as a model's answer shown
// on a terminal: newlines and tabs pass through, and so do combining
// marks, since such text arrives in pieces that may start with a mark;
// everything else that Escape escapes is escaped.
func EscapeText(s string) string {
	var e escaper
	e.keepNewlines, e.keepTabs, e.keepMarks = true, true, true
	var b strings.Builder
	e.each(s, func(text string, _ bool) {
		b.WriteString(text)
	})
	return b.String()
}

// Options configure [Render]. A nil *Options means the zero value.
type Options struct {
	// Width is the most runes of a display line; a longer line is cut and
	// continues on the next display line. 0 means DefaultWidth. Runes are
	// counted, not terminal cells: a wide rune counts as one.
	Width int
	// Mark, when set, wraps each escape, for instance in a terminal's
	// reverse video, so that it stands out from the same characters
	// typed literally. Its output is trusted and written as it is; it
	// counts towards no width. nil writes escapes unmarked.
	Mark func(escape string) string
}

// A Block is text rendered for display, line by line.
type Block struct {
	// Lines are the display lines. Each holds no newline and nothing a
	// terminal interprets, apart from what Options.Mark added.
	Lines []Line
	// Escaped counts the escapes: characters and bytes that are not
	// shown as themselves.
	Escaped int
}

// A Line is one display line of a [Block].
type Line struct {
	Text string
	// Continued says the line continues the one before it: the source
	// line was longer than the width.
	Continued bool
}

// Render cuts s at each "\n" and renders each line as [Escape] does, but
// with a tab shown as four spaces and lines longer than the width cut into
// several display lines. "" renders as one empty line.
func Render(s string, o *Options) Block {
	var opts Options
	if o != nil {
		opts = *o
	}
	if opts.Width <= 0 {
		opts.Width = DefaultWidth
	}
	var blk Block
	for _, src := range strings.Split(s, "\n") {
		var e escaper
		e.expandTabs = true
		var b strings.Builder
		n := 0 // runes on the current display line
		cont := false
		e.each(src, func(text string, escaped bool) {
			w := utf8.RuneCountInString(text)
			if n > 0 && n+w > opts.Width {
				blk.Lines = append(blk.Lines, Line{Text: b.String(), Continued: cont})
				b.Reset()
				n, cont = 0, true
			}
			if escaped {
				blk.Escaped++
				if opts.Mark != nil {
					text = opts.Mark(text)
				}
			}
			b.WriteString(text)
			n += w
		})
		blk.Lines = append(blk.Lines, Line{Text: b.String(), Continued: cont})
	}
	return blk
}

// Unsafe reports whether s holds anything [Escape] escapes.
func Unsafe(s string) bool {
	found := false
	var e escaper
	e.each(s, func(_ string, escaped bool) { found = found || escaped })
	return found
}

// escaper walks a string unit by unit: a rune shown as it is, an escape,
// or (with expandTabs) the spaces that stand for a tab.
type escaper struct {
	keepNewlines, keepTabs, keepMarks, expandTabs bool

	marks int  // combining marks since the last visible base
	base  bool // the last unit was a visible rune that marks may join
}

// each calls emit for each unit of s, in order; escaped says the unit is
// an escape.
func (e *escaper) each(s string, emit func(text string, escaped bool)) {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			e.base = false
			emit(fmt.Sprintf(`\x%02x`, s[i]), true)
			i++
			continue
		}
		i += size
		switch {
		case r == '\n' && e.keepNewlines:
			e.base = false
			emit("\n", false)
		case r == '\t' && e.keepTabs:
			e.base = false
			emit("\t", false)
		case r == '\t' && e.expandTabs:
			e.base = false
			emit(strings.Repeat(" ", tabWidth), false)
		case unicode.In(r, unicode.Mn, unicode.Me) && !hidden(r):
			if e.keepMarks || e.base && e.marks < maxMarks {
				e.marks++
				emit(string(r), false)
			} else {
				e.base = false
				emit(escape(r), true)
			}
		case visible(r):
			e.base, e.marks = r != ' ', 0
			emit(string(r), false)
		default:
			e.base = false
			emit(escape(r), true)
		}
	}
}

// visible reports whether r is shown as it is (combining marks aside).
func visible(r rune) bool {
	if r == ' ' {
		return true
	}
	return unicode.IsGraphic(r) && !unicode.Is(unicode.Zs, r) && !hidden(r)
}

// hidden reports whether r is graphic by category but draws nothing or
// changes how its neighbours draw.
func hidden(r rune) bool {
	return r == '\u2800' || // braille pattern blank
		unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector, unicode.Cf)
}

// escape returns the visible escape of r.
func escape(r rune) string {
	switch r {
	case '\a':
		return `\a`
	case '\b':
		return `\b`
	case '\f':
		return `\f`
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	case '\v':
		return `\v`
	}
	switch {
	case r < 0x80:
		return fmt.Sprintf(`\x%02x`, r)
	case r <= 0xFFFF:
		return fmt.Sprintf(`\u%04x`, r)
	default:
		return fmt.Sprintf(`\U%08x`, r)
	}
}
