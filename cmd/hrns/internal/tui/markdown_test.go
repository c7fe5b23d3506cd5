package tui

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
	"github.com/google/go-cmp/cmp"
)

// mdSample has every element the chat renders.
const mdSample = "# Title\n\n" +
	"A paragraph with **bold**, *emphasis*, `code`, a [link](https://example.com/a) and <https://example.org>, long enough to wrap.\n" +
	"A soft break, and a hard one:  \nhere.\n\n" +
	"## Second level\n\n" +
	"- one\n- two\n  - nested, also long enough to be wrapped at the width\n\n" +
	"1. first\n2. second\n\n" +
	"> a quote\n> on two lines\n\n" +
	"```go\nfunc main() {\n\t// a comment\n\tfmt.Println(\"hi\", 42)\n}\n```\n\n" +
	"| name | size | note |\n|:-----|-----:|:----:|\n| a | 1 | x |\n| `b` | 22 | **y** |\n\n" +
	"---\n\n" +
	"![a picture](https://example.com/p.png) and <b>raw html</b>.\n"

// sgr matches the escape sequences the themes write.
var sgr = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// TestMarkdownGolden renders the sample at two widths, without colours
// (testdata/markdown_<width>.golden) and checks that the colours change
// nothing but the colours.
func TestMarkdownGolden(t *testing.T) {
	for _, width := range []int{40, 72} {
		plain := strings.Join(renderMarkdown(mdSample, width, &mdTheme{}), "\n") + "\n"
		path := filepath.Join("testdata", "markdown_"+strconv.Itoa(width)+".golden")
		if *update {
			if err := os.WriteFile(path, []byte(plain), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), plain); diff != "" {
			t.Errorf("width %d (-want +got):\n%s", width, diff)
		}
		dark := strings.Join(renderMarkdown(mdSample, width, &darkTheme), "\n") + "\n"
		if got := sgr.ReplaceAllString(dark, ""); got != plain {
			t.Errorf("width %d: the dark theme changes the text:\n%s", width, cmp.Diff(plain, got))
		}
	}
}

// TestMarkdownStyles checks that each element gets its style.
func TestMarkdownStyles(t *testing.T) {
	th := &mdTheme{heading: "H", strong: "B", emph: "I", code: "C", link: "L", url: "U", rule: "R", quote: "Q", tableHead: "T", kw: "K", str: "S", com: "M", num: "N"}
	for _, tc := range []struct{ name, in, want string }{
		{"heading", "# Hi", "\x1b[HmHi\x1b[0m"},
		{"heading2", "## Hi", "\x1b[Hm## Hi\x1b[0m"},
		{"strong", "**b**", "\x1b[Bmb\x1b[0m"},
		{"emphasis", "*i*", "\x1b[Imi\x1b[0m"},
		{"nested", "***x***", "\x1b[I;Bmx\x1b[0m"},
		{"code span", "`c`", "\x1b[Cmc\x1b[0m"},
		{"link", "[t](u)", "\x1b[Lmt\x1b[0m \x1b[Um(u)\x1b[0m"},
		{"link to its text", "[http://x](http://x)", "\x1b[Lmhttp://x\x1b[0m"},
		{"autolink", "<http://x>", "\x1b[Lmhttp://x\x1b[0m"},
		{"quote", "> q", "\x1b[Qm│ \x1b[0mq"},
		{"rule", "---", "\x1b[Rm" + strings.Repeat("─", 40) + "\x1b[0m"},
		{"go", "```go\nfunc f() { return \"s\" // c\n```", "  \x1b[Kmfunc\x1b[0m f() { \x1b[Kmreturn\x1b[0m \x1b[Sm\"s\"\x1b[0m \x1b[Mm// c\x1b[0m"},
		{"python", "```python\nif x == 3: # no\n```", "  \x1b[Kmif\x1b[0m x == \x1b[Nm3\x1b[0m: \x1b[Mm# no\x1b[0m"},
		{"unknown language", "```klingon\nif 3\n```", "  if 3"},
		{"block comment", "```c\n/* a\nb */ int\n```", "  \x1b[Mm/* a\x1b[0m\n  \x1b[Mmb */\x1b[0m \x1b[Kmint\x1b[0m"},
		{"digit outside ASCII", "```go\nx := ٣٤ + 1\n```", "  x := \x1b[Nm٣٤\x1b[0m + \x1b[Nm1\x1b[0m"},
		{"unterminated", "```go\n\"abc\n/* x\n```", "  \x1b[Sm\"abc\x1b[0m\n  \x1b[Mm/* x\x1b[0m"},
		{"table head", "| a |\n|---|\n| b |", "\x1b[Tma\x1b[0m\n\x1b[Rm─\x1b[0m\nb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(renderMarkdown(tc.in, 40, th), "\n")
			if got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestMarkdownText checks the layout of the cases the golden file does
// not show.
func TestMarkdownText(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		width    int
		want     []string
	}{
		{"wrap", "aaa bbb ccc ddd", 8, []string{"aaa bbb", "ccc ddd"}},
		{"long word", "x abcdefghijklmnopq y", 8, []string{"x", "abcdefgh", "ijklmnop", "q y"}},
		{"wide runes", "日本語の文日本語の文", 8, []string{"日本語の", "文日本語", "の文"}},
		{"width at least 8", "aaa bbb ccc", 2, []string{"aaa bbb", "ccc"}},
		{"escapes and references", `\*a\* &amp; &rarr; &#x41; \q`, 30, []string{`*a* & → A \q`}},
		{"hard break", "a\\\nb", 10, []string{"a", "b"}},
		{"ordered start", "3. c\n4. d", 10, []string{"3. c", "4. d"}},
		{"loose list", "- a\n\n- b", 10, []string{"• a", "", "• b"}},
		{"table escaped pipe", "| a |\n|---|\n| x \\| y |", 20, []string{"a", "─────", "x | y"}},
		{"table in a paragraph", "text\n| a | b |\n| - | - |\n| 1 | 2 |", 20, []string{"text", "", "a │ b", "──┼──", "1 │ 2"}},
		{"table short row", "| a | b |\n|---|---|\n| 1 |", 20, []string{"a │ b", "──┼──", "1 │"}},
		{"table shrinks", "| aaaa bbbb | c |\n|---|---|\n| x | y |", 10, []string{"aaaa │ c", "bbbb │", "─────┼──", "x    │ y"}},
		{"not a table: cells differ", "| a | b |\n|---|\n", 20, []string{"| a | b | |---|"}},
		{"not a table: no pipe", "a\n:-:", 20, []string{"a :-:"}},
		{"code tabs and long lines", "```\n\tabcdefghij\n```", 8, []string{"      ab", "  cdefgh", "  ij"}},
		{"html block", "<div>\n<b>x</b>\n</div>", 20, []string{"<div>", "<b>x</b>", "</div>"}},
		{"character reference to a control", "a&#x9b;b &#x202e;c &#0;d", 30, []string{"a\uFFFDb \uFFFDc \uFFFDd"}},
		{"narrow nesting", "> > > - - x", 8, []string{"│ x"}},
		{"empty", "", 10, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := renderMarkdown(tc.in, tc.width, &mdTheme{})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzMarkdown renders any text at any width, with and without colours,
// and requires: no line wider than the width; no escape sequence but the
// theme's SGR sequences, and no control, format or invalid character at
// all once they are removed; the same text with and without colours.
func FuzzMarkdown(f *testing.F) {
	f.Add(mdSample, uint8(40))
	for _, s := range []string{
		"\x1b[31mred\x1b]0;title\a", "&#27;[2J &#x1b; &#155; \u009b", "`\x1b` **\x1b** [\x1b](\x1b)",
		"```go\n\"\x1b\n```", "| \x1b | b |\n|--|--|\n| \r | \b |", "\xff\xfe", "a\u202eb\u200bc",
		"- - - - - - - - - - x", "> > > > > > > > q", "| a |\n|---|\n| " + strings.Repeat("x ", 40) + "|",
	} {
		f.Add(s, uint8(10))
	}
	f.Fuzz(func(t *testing.T, in string, w uint8) {
		width := max(int(w)%120, 8)
		plain := renderMarkdown(in, width, &mdTheme{})
		dark := renderMarkdown(in, width, &darkTheme)
		if len(plain) != len(dark) {
			t.Fatalf("%d lines plain, %d dark", len(plain), len(dark))
		}
		for i, l := range dark {
			stripped := sgr.ReplaceAllString(l, "")
			if stripped != plain[i] {
				t.Fatalf("line %d: %q dark, %q plain", i, l, plain[i])
			}
			if w := ansi.StringWidth(stripped); w > width {
				t.Fatalf("line %d is %d wide, more than %d: %q", i, w, width, stripped)
			}
			if !utf8.ValidString(stripped) {
				t.Fatalf("line %d: invalid UTF-8: %q", i, stripped)
			}
			for _, r := range stripped {
				if r != ' ' && !unicode.IsGraphic(r) {
					t.Fatalf("line %d: %U reaches the terminal: %q", i, r, l)
				}
			}
		}
	})
}

// TestMarkdownWideTable: a table far wider than the screen shares the
// width, its cells wrapped, every line within the width.
func TestMarkdownWideTable(t *testing.T) {
	in := "| a | b | c |\n|---|---|---|\n| " + strings.Repeat("word ", 2000) + "| x | " + strings.Repeat("y", 300) + " |\n"
	lines := renderMarkdown(in, 30, &mdTheme{})
	if len(lines) < 100 {
		t.Fatalf("%d lines: the long cell was not wrapped", len(lines))
	}
	for i, l := range lines {
		if w := ansi.StringWidth(l); w > 30 {
			t.Fatalf("line %d is %d wide: %q", i, w, l)
		}
	}
	if !strings.HasPrefix(lines[0], "a") || !strings.Contains(lines[1], "┼") {
		t.Errorf("header: %q %q", lines[0], lines[1])
	}
}
