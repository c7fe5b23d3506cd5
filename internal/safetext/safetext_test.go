package safetext

import (
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestEscape(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "ls -la ~/src", "ls -la ~/src"},
		{"the spoofed command", "echo x > f; id >> f #\r\x1b[2K  $ ls -la", `echo x > f; id >> f #\r\x1b[2K  $ ls -la`},
		{"backspaces", "rm -rf /\b\b\b\b\b\b\b\becho hi", `rm -rf /\b\b\b\b\b\b\b\becho hi`},
		{"OSC title and hyperlink", "\x1b]0;title\x07\x1b]8;;http://x\x1b\\link", `\x1b]0;title\a\x1b]8;;http://x\x1b\link`},
		{"C1 CSI and NEL", "a\u009b2Kb\u0085c", `a\u009b2Kb\u0085c`},
		{"DEL and NUL", "a\x7fb\x00c", `a\x7fb\x00c`},
		{"newline and tab", "a\nb\tc\vd\fe", `a\nb\tc\vd\fe`},
		{"bidi override", "ls \u202e-lh; rm -rf ~\u202c", `ls \u202e-lh; rm -rf ~\u202c`},
		{"bidi isolates", "\u2066a\u2067b\u2068c\u2069", `\u2066a\u2067b\u2068c\u2069`},
		{"bidi marks", "a\u200eb\u200fc\u061cd", `a\u200eb\u200fc\u061cd`},
		{"zero width", "r\u200bm\u200c \u200d-\u2060r\ufefff", `r\u200bm\u200c \u200d-\u2060r\ufefff`},
		{"soft hyphen", "pass\u00adwd", `pass\u00adwd`},
		{"line and paragraph separators", "a\u2028b\u2029c", `a\u2028b\u2029c`},
		{"other spaces", "rm\u00a0-rf\u3000x\u2003y", `rm\u00a0-rf\u3000x\u2003y`},
		{"hangul filler and braille blank", "a\u3164b\u2800c\u115fd", `a\u3164b\u2800c\u115fd`},
		{"variation selector and tag", "x\ufe0f\U000e0041", `x\ufe0f\U000e0041`},
		{"private use and unassigned", "\ue000\U0010ffff\u0378", `\ue000\U0010ffff\u0378`},
		{"invalid UTF-8", "a\xffb\xc3", `a\xffb\xc3`},
		{"accents and scripts pass", "café naïve Ελληνικά 日本語 ✓ →", "café naïve Ελληνικά 日本語 ✓ →"},
		{"decomposed accent passes", "e\u0301", "e\u0301"},
		{"stacked marks", "a\u0301\u0302\u0303\u0304", `a` + "\u0301\u0302" + `\u0303\u0304`},
		{"mark without a base", "\u0301x", `\u0301x`},
		{"literal backslash stays", `printf 'a\nb'`, `printf 'a\nb'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Escape(tt.in); got != tt.want {
				t.Errorf("Escape(%q)\n got %s\nwant %s", tt.in, got, tt.want)
			}
			if got, want := Unsafe(tt.in), Escape(tt.in) != tt.in; got != want {
				t.Errorf("Unsafe = %v, want %v", got, want)
			}
		})
	}
}

func TestEscapeText(t *testing.T) {
	in := "The answer:\n\tforty-two\r\x1b[2Kfake prompt\u202e \u0901"
	want := "The answer:\n\tforty-two\\r\\x1b[2Kfake prompt\\u202e \u0901"
	if got := EscapeText(in); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestRender(t *testing.T) {
	mark := func(e string) string { return "[" + e + "]" }
	tests := []struct {
		name    string
		in      string
		opts    *Options
		want    []Line
		escaped int
	}{
		{"empty", "", nil, []Line{{Text: ""}}, 0},
		{"lines", "a\nb\n", nil, []Line{{Text: "a"}, {Text: "b"}, {Text: ""}}, 0},
		{"tabs", "\tx := 1", nil, []Line{{Text: "    x := 1"}}, 0},
		{"marked escapes", "id #\r\x1b[2K$ ls", &Options{Mark: mark}, []Line{{Text: `id #[\r][\x1b][2K$ ls`}}, 2},
		{"carriage return of CRLF", "a\r\nb", nil, []Line{{Text: `a\r`}, {Text: "b"}}, 1},
		{"long line is cut", "abcdefghij", &Options{Width: 4}, []Line{{Text: "abcd"}, {Text: "efgh", Continued: true}, {Text: "ij", Continued: true}}, 0},
		{"an escape is never split", "abc\x1bd", &Options{Width: 4}, []Line{{Text: "abc"}, {Text: `\x1b`, Continued: true}, {Text: "d", Continued: true}}, 1},
		{"an escape wider than the line", "\x1b", &Options{Width: 2}, []Line{{Text: `\x1b`}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Render(tt.in, tt.opts)
			if diff := cmp.Diff(tt.want, got.Lines); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
			if got.Escaped != tt.escaped {
				t.Errorf("escaped %d, want %d", got.Escaped, tt.escaped)
			}
		})
	}
}

// shownRaw reports whether a terminal or a reader could be fooled by r
// appearing in the output: this is the test's own list, written from the
// Unicode categories rather than from the package's code.
func shownRaw(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f: // C0, DEL, C1
		return false
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069: // bidi
		return false
	case r == 0x2028 || r == 0x2029:
		return false
	case unicode.Is(unicode.Cf, r), unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r),
		unicode.Is(unicode.Variation_Selector, r), unicode.Is(unicode.Zl, r), unicode.Is(unicode.Zp, r):
		return false
	case unicode.Is(unicode.Zs, r):
		return r == ' '
	}
	return unicode.IsGraphic(r)
}

// decodeEscape parses the escape at the start of s, returning the bytes it
// stands for and its length.
func decodeEscape(t *testing.T, s string) (string, int) {
	t.Helper()
	if len(s) < 2 || s[0] != '\\' {
		t.Fatalf("not an escape: %q", s)
	}
	short := map[byte]string{'a': "\a", 'b': "\b", 'f': "\f", 'n': "\n", 'r': "\r", 't': "\t", 'v': "\v"}
	if v, ok := short[s[1]]; ok {
		return v, 2
	}
	n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[s[1]]
	if n == 0 || len(s) < 2+n {
		t.Fatalf("bad escape: %q", s)
	}
	v, err := strconv.ParseUint(s[2:2+n], 16, 32)
	if err != nil {
		t.Fatalf("bad escape %q: %v", s, err)
	}
	if s[1] == 'x' && v >= 0x80 {
		return string([]byte{byte(v)}), 2 + n
	}
	return string(rune(v)), 2 + n
}

// checkOutput checks the properties every rendering must have: no rune a
// terminal interprets or a reader cannot see, apart from the marks.
func checkOutput(t *testing.T, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Fatalf("output is not UTF-8: %q", out)
	}
	for _, r := range out {
		if !shownRaw(r) && !unicode.In(r, unicode.Mn, unicode.Me) {
			t.Fatalf("output holds %U: %q", r, out)
		}
	}
}

// The marks the fuzz test uses to find the escapes again: NUL cannot appear
// in the output otherwise.
const open, closing = "\x00<", ">\x00"

// decodeMarked returns what a marked rendering stands for.
func decodeMarked(t *testing.T, out string) string {
	t.Helper()
	var b strings.Builder
	for out != "" {
		lit, rest, found := strings.Cut(out, open)
		b.WriteString(lit)
		if !found {
			break
		}
		esc, after, ok := strings.Cut(rest, closing)
		if !ok {
			t.Fatalf("unclosed mark in %q", out)
		}
		v, n := decodeEscape(t, esc)
		if n != len(esc) {
			t.Fatalf("mark holds more than one escape: %q", esc)
		}
		b.WriteString(v)
		out = after
	}
	return b.String()
}

func FuzzRender(f *testing.F) {
	for _, s := range []string{
		"echo x > f; id >> f #\r\x1b[2K  $ ls -la",
		"a\u202eb\u2066c\u200b\u2028\u0085\x7f\xff\xc3",
		"\tfunc main() {\n\t\tfmt.Println(\"héllo\")\n}\n",
		"e\u0301\u0302\u0303 \u0301",
		strings.Repeat("x", 300),
	} {
		f.Add(s, 0)
		f.Add(s, 7)
	}
	f.Fuzz(func(t *testing.T, in string, width int) {
		width = width%200 + 1
		if width < 1 {
			width = -width + 1
		}
		esc := Escape(in)
		checkOutput(t, esc)
		if got := decodeMarked(t, EscapeMarked(in, func(e string) string { return open + e + closing })); got != in {
			t.Fatalf("EscapeMarked does not stand for the input:\n got %q\nwant %q", got, in)
		}
		if Unsafe(in) != (esc != in) {
			t.Fatalf("Unsafe(%q) = %v but Escape gives %q", in, Unsafe(in), esc)
		}
		checkOutput(t, strings.NewReplacer("\n", "", "\t", "").Replace(EscapeText(in)))
		if got := EscapeText(in); strings.Count(got, "\n") != strings.Count(in, "\n") {
			t.Fatalf("EscapeText lost newlines: %q", got)
		}

		plain := Render(in, &Options{Width: width})
		marked := Render(in, &Options{Width: width, Mark: func(e string) string { return open + e + closing }})
		if len(plain.Lines) != len(marked.Lines) || plain.Escaped != marked.Escaped {
			t.Fatalf("marks changed the layout")
		}
		// Every input rune is represented: joining the source lines
		// and decoding the escapes gives the input back, with a tab
		// shown as four spaces.
		var src []string
		for i, l := range plain.Lines {
			checkOutput(t, l.Text)
			if n := utf8.RuneCountInString(l.Text); n > width && !oneEscape(t, l.Text) && l.Text != "    " {
				t.Fatalf("line %d is %d runes wide, more than %d: %q", i, n, width, l.Text)
			}
			m := decodeMarked(t, marked.Lines[i].Text)
			if l.Continued != marked.Lines[i].Continued || (i == 0 && l.Continued) {
				t.Fatalf("line %d: bad continuation", i)
			}
			if l.Continued {
				src[len(src)-1] += m
			} else {
				src = append(src, m)
			}
		}
		if got, want := strings.Join(src, "\n"), strings.ReplaceAll(in, "\t", "    "); got != want {
			t.Fatalf("rendering does not stand for the input:\n got %q\nwant %q", got, want)
		}
	})
}

// oneEscape reports whether s is exactly one escape: a unit wider than
// the width has a line of its own.
func oneEscape(t *testing.T, s string) bool {
	if !strings.HasPrefix(s, `\`) {
		return false
	}
	_, n := decodeEscape(t, s)
	return n == len(s)
}
