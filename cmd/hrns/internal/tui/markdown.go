package tui

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"
	"github.com/hrns-dev/hrns/cmd/hrns/internal/goldmark/ast"
	"github.com/hrns-dev/hrns/cmd/hrns/internal/goldmark/parser"
	"github.com/hrns-dev/hrns/cmd/hrns/internal/goldmark/text"
	"github.com/hrns-dev/hrns/cmd/hrns/internal/goldmark/util"
)

// The chat renders answers with goldmark's CommonMark parser and the small
// terminal renderer below, not with a Markdown renderer of the Charm
// libraries: those link a syntax highlighter and an HTML sanitiser whose
// package initialisation (lexers, styles, compiled regular expressions)
// costs every hrns command about 14 ms and 5.7 MB at start, whether it
// opens the chat or not (measured for issue 21; `git log -p
// docs/performance.md` has that round). The parser is goldmark v1.8.2's,
// in a copy of its own (cmd/hrns/internal/goldmark) that builds its
// regular expressions and case-folding table on first use instead of at
// package initialisation, which every hrns command ran (about a tenth of
// `hrns run`'s start-up); nothing here is built before the first answer
// is rendered either.
//
// Every piece of text goes through [mdClean] on its way out, so nothing in
// the Markdown (character references included: `&#27;` is an ESC to a
// CommonMark parser) can reach the terminal as a control or format
// character; the only escape sequences in the output are the theme's SGR
// sequences.

// mdTheme holds the SGR parameters of each element ("1;4" is bold and
// underlined); an empty field leaves the element unstyled, so the zero
// theme renders plain text.
type mdTheme struct {
	heading, strong, emph, strike, code, link, url, rule, quote, tableHead string
	// kw, str, com and num colour keywords, string literals, comments and
	// numbers in code blocks.
	kw, str, com, num string
}

// darkTheme is the chat's theme: the 16 ANSI colours only, like styles.go.
var darkTheme = mdTheme{
	heading: "1;94", strong: "1", emph: "3", strike: "9", code: "33",
	link: "4;36", url: "2", rule: "2", quote: "2", tableHead: "1",
	kw: "35", str: "32", com: "2;3", num: "33",
}

// span is text with its style (SGR parameters; "" is plain).
type span struct{ text, style string }

// mdLine is one rendered line.
type mdLine []span

// mdParser is goldmark's CommonMark parser plus GFM tables, built at first
// use.
var mdParser = sync.OnceValue(func() parser.Parser {
	return parser.NewParser(
		parser.WithBlockParsers(parser.DefaultBlockParsers()...),
		parser.WithInlineParsers(parser.DefaultInlineParsers()...),
		parser.WithParagraphTransformers(append(parser.DefaultParagraphTransformers(),
			util.Prioritized(tableTransformer{}, 200))...),
	)
})

// mdMaxInput bounds what is parsed: an answer longer than this is shown
// as wrapped text by the caller.
const mdMaxInput = 1 << 20

// renderMarkdown renders src for a terminal width columns wide (at least
// 8) and returns its lines, none wider than width.
func renderMarkdown(src string, width int, th *mdTheme) []string {
	width = max(width, 8)
	source := []byte(src)
	doc := mdParser().Parse(text.NewReader(source))
	r := &mdRenderer{src: source, th: th}
	lines := r.blocks(doc, width)
	if len(lines) == 0 {
		return nil
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		var b strings.Builder
		for _, s := range mergeSpans(trimLine(l)) {
			if s.style == "" || s.text == "" {
				b.WriteString(s.text)
				continue
			}
			b.WriteString("\x1b[" + s.style + "m" + s.text + "\x1b[0m")
		}
		out[i] = b.String()
	}
	return out
}

// trimLine removes the spaces at the end of a line, styled or not.
func trimLine(l mdLine) mdLine {
	for len(l) > 0 {
		last := &l[len(l)-1]
		t := strings.TrimRight(last.text, " ")
		if t != "" {
			l = append(l[:len(l)-1:len(l)-1], span{t, last.style})
			break
		}
		l = l[:len(l)-1]
	}
	return l
}

// mergeSpans joins neighbouring spans of one style.
func mergeSpans(l mdLine) mdLine {
	var out mdLine
	for _, s := range l {
		if n := len(out); n > 0 && out[n-1].style == s.style {
			out[n-1].text += s.text
			continue
		}
		out = append(out, s)
	}
	return out
}

// mdMinWidth is the narrowest column a container (list item, quote, code
// block) indents its content to; below it, content is not indented.
const mdMinWidth = 6

type mdRenderer struct {
	src []byte
	th  *mdTheme
}

// join combines two styles.
func join(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + ";" + b
}

// blocks renders the children of parent, with a blank line between
// blocks except in tight lists.
func (r *mdRenderer) blocks(parent ast.Node, width int) []mdLine {
	var out []mdLine
	tight := false
	if l, ok := parent.(*ast.List); ok {
		tight = l.IsTight
	}
	var prev ast.Node
	for c := parent.FirstChild(); c != nil; c = c.NextSibling() {
		ls := r.block(c, width)
		if len(ls) == 0 {
			continue
		}
		if prev != nil && !tight && prev.Kind() != ast.KindTextBlock {
			out = append(out, nil)
		}
		out = append(out, ls...)
		prev = c
	}
	return out
}

func (r *mdRenderer) block(n ast.Node, width int) []mdLine {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		return wrapSpans(r.inlines(n, ""), width)
	case *ast.Heading:
		var pre []span
		if n.Level > 1 {
			pre = []span{{strings.Repeat("#", n.Level) + " ", r.th.heading}}
		}
		return wrapSpans(append(pre, r.inlines(n, r.th.heading)...), width)
	case *ast.ThematicBreak:
		return []mdLine{{{strings.Repeat("─", width), r.th.rule}}}
	case *ast.FencedCodeBlock:
		lang := ""
		if n.Info != nil {
			lang = string(n.Language(r.src))
		}
		return r.code(n, lang, width)
	case *ast.CodeBlock:
		return r.code(n, "", width)
	case *ast.HTMLBlock:
		var b bytes.Buffer
		b.Write(n.Lines().Value(r.src))
		if n.HasClosure() {
			b.Write(n.ClosureLine.Value(r.src))
		}
		return r.verbatim(b.String(), width, "")
	case *ast.Blockquote:
		if width-2 < mdMinWidth {
			return r.blocks(n, width)
		}
		return prefix(r.blocks(n, width-2), span{"│ ", r.th.quote}, span{"│ ", r.th.quote})
	case *ast.List:
		var out []mdLine
		num := n.Start
		for item := n.FirstChild(); item != nil; item = item.NextSibling() {
			marker := "• "
			if n.IsOrdered() {
				marker = strconv.Itoa(num) + ". "
				num++
			}
			mw := ansi.StringWidth(marker)
			if mw > width/2 {
				marker, mw = "• ", 2
			}
			if width-mw < mdMinWidth {
				marker, mw = "", 0
			}
			if len(out) > 0 && !n.IsTight {
				out = append(out, nil)
			}
			body := r.blocks(item, width-mw)
			if len(body) == 0 {
				body = []mdLine{nil}
			}
			out = append(out, prefix(body, span{marker, ""}, span{strings.Repeat(" ", mw), ""})...)
		}
		return out
	case *mdTable:
		return r.table(n, width)
	}
	if n.Type() == ast.TypeBlock && n.Lines().Len() > 0 {
		return r.verbatim(string(n.Lines().Value(r.src)), width, "")
	}
	return r.blocks(n, width)
}

// code renders a code block, highlighted, indented by two columns, its
// long lines broken at the width.
func (r *mdRenderer) code(n ast.Node, lang string, width int) []mdLine {
	src := string(n.Lines().Value(r.src))
	src = strings.TrimSuffix(src, "\n")
	indent := 2
	if width-indent < mdMinWidth {
		indent = 0
	}
	var out []mdLine
	for _, l := range highlight(lang, src, r.th) {
		for _, b := range breakSpans(l, width-indent) {
			out = append(out, append(mdLine{{strings.Repeat(" ", indent), ""}}, b...))
		}
	}
	return out
}

// verbatim renders text line by line, long lines broken at the width.
func (r *mdRenderer) verbatim(s string, width int, style string) []mdLine {
	s = strings.TrimSuffix(s, "\n")
	var out []mdLine
	for _, l := range strings.Split(s, "\n") {
		out = append(out, breakSpans(mdLine{{expandTabs(l), style}}, width)...)
	}
	return out
}

// prefix puts first before the first line and rest before the others.
func prefix(lines []mdLine, first, rest span) []mdLine {
	for i, l := range lines {
		p := rest
		if i == 0 {
			p = first
		}
		lines[i] = append(mdLine{p}, l...)
	}
	return lines
}

// inlines renders the inline children of n as spans; "\n" in a span's
// text is a hard line break.
func (r *mdRenderer) inlines(n ast.Node, style string) []span {
	var out []span
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		out = r.inline(c, style, out)
	}
	return out
}

func (r *mdRenderer) inline(n ast.Node, style string, out []span) []span {
	switch n := n.(type) {
	case *ast.Text:
		out = append(out, span{unescapeText(n.Value(r.src)), style})
		if n.HardLineBreak() {
			out = append(out, span{"\n", ""})
		} else if n.SoftLineBreak() {
			out = append(out, span{" ", ""})
		}
		return out
	case *ast.String:
		return append(out, span{string(n.Value), style})
	case *ast.CodeSpan:
		var b strings.Builder
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			switch t := c.(type) {
			case *ast.Text:
				b.Write(t.Value(r.src))
			case *ast.String:
				b.Write(t.Value)
			}
		}
		return append(out, span{b.String(), join(style, r.th.code)})
	case *ast.Emphasis:
		s := r.th.emph
		if n.Level >= 2 {
			s = r.th.strong
		}
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			out = r.inline(c, join(style, s), out)
		}
		return out
	case *ast.Link:
		start := len(out)
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			out = r.inline(c, join(style, r.th.link), out)
		}
		var label strings.Builder
		for _, s := range out[start:] {
			label.WriteString(s.text)
		}
		if dest := unescapeText(n.Destination); dest != "" && dest != label.String() {
			out = append(out, span{" ", ""}, span{"(" + dest + ")", join(style, r.th.url)})
		}
		return out
	case *ast.AutoLink:
		return append(out, span{string(n.URL(r.src)), join(style, r.th.link)})
	case *ast.Image:
		out = append(out, span{"[image: ", join(style, r.th.url)})
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			out = r.inline(c, style, out)
		}
		return append(out, span{"]", join(style, r.th.url)}, span{" ", ""}, span{"(" + unescapeText(n.Destination) + ")", join(style, r.th.url)})
	case *ast.RawHTML:
		var b bytes.Buffer
		for i := 0; i < n.Segments.Len(); i++ {
			seg := n.Segments.At(i)
			b.Write(seg.Value(r.src))
		}
		return append(out, span{b.String(), style})
	}
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		out = r.inline(c, style, out)
	}
	return out
}

// unescapeText resolves what goldmark leaves in a text's source for its
// renderer to resolve: backslash escapes of punctuation and character
// references (`&amp;`, `&#x2192;`).
func unescapeText(b []byte) string {
	if bytes.IndexByte(b, '\\') < 0 && bytes.IndexByte(b, '&') < 0 {
		return string(b)
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c == '\\' && i+1 < len(b) && util.IsPunct(b[i+1]) {
			out = append(out, b[i+1])
			i++
			continue
		}
		if c == '&' {
			// The longest entity name is 32 bytes with its & and ;.
			if j := bytes.IndexByte(b[i:min(len(b), i+40)], ';'); j > 0 {
				ref := b[i : i+j+1]
				if v := util.ResolveEntityNames(util.ResolveNumericReferences(ref)); !bytes.Equal(v, ref) {
					out = append(out, v...)
					i += j
					continue
				}
			}
		}
		out = append(out, c)
	}
	return string(out)
}

// mdClean replaces every rune a terminal would interpret or a reader
// could not see (controls, format characters such as bidi overrides,
// invalid UTF-8, and so on: whatever is not graphic) with U+FFFD, and
// tabs with a space.
func mdClean(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || r != ' ' && !unicode.IsGraphic(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t':
			b.WriteByte(' ')
		case r == ' ' || r != utf8.RuneError && unicode.IsGraphic(r):
			b.WriteRune(r)
		default:
			b.WriteRune(utf8.RuneError)
		}
	}
	return b.String()
}

func expandTabs(s string) string { return strings.ReplaceAll(s, "\t", "    ") }

// wrapSpans fills lines of at most width columns with the words of spans,
// breaking at spaces and at "\n", and words longer than a line within
// them.
func wrapSpans(spans []span, width int) []mdLine {
	width = max(width, 1)
	var (
		lines        []mdLine
		cur          mdLine
		curW         int
		word         mdLine
		wordW        int
		space        bool
		spaceStyle   string
		lineHasWords bool
	)
	flushWord := func() {
		if wordW == 0 {
			word = word[:0]
			return
		}
		if lineHasWords && curW+1+wordW > width {
			lines = append(lines, cur)
			cur, curW, lineHasWords = nil, 0, false
		}
		if lineHasWords && space {
			cur = append(cur, span{" ", spaceStyle})
			curW++
		}
		if wordW > width-curW {
			// Longer than a line: it starts a line of its own (the line
			// before is full or empty) and is cut between runes.
			if curW > 0 {
				lines = append(lines, cur)
				cur, curW = nil, 0
			}
			for i, p := range breakSpans(word, width) {
				if i > 0 {
					lines = append(lines, cur)
				}
				cur, curW = p, lineWidth(p)
			}
		} else {
			cur = append(cur, word...)
			curW += wordW
		}
		lineHasWords = true
		word, wordW, space = nil, 0, false
	}
	for _, s := range spans {
		if s.text == "\n" {
			flushWord()
			lines = append(lines, cur)
			cur, curW, lineHasWords, space = nil, 0, false, false
			continue
		}
		t := mdClean(strings.ReplaceAll(s.text, "\n", " "))
		for t != "" {
			i := strings.IndexByte(t, ' ')
			if i < 0 {
				word = append(word, span{t, s.style})
				wordW += ansi.StringWidth(t)
				break
			}
			if i > 0 {
				word = append(word, span{t[:i], s.style})
				wordW += ansi.StringWidth(t[:i])
			}
			if wordW > 0 {
				flushWord()
			}
			if lineHasWords {
				space, spaceStyle = true, s.style
			}
			t = t[i+1:]
		}
	}
	flushWord()
	if len(cur) > 0 || lineHasWords {
		lines = append(lines, cur)
	}
	return lines
}

// lineWidth is the width of a line in columns.
func lineWidth(l mdLine) int {
	w := 0
	for _, s := range l {
		w += ansi.StringWidth(s.text)
	}
	return w
}

// breakSpans cleans a line and cuts it into lines of at most width
// columns, between runes.
func breakSpans(l mdLine, width int) []mdLine {
	width = max(width, 1)
	var (
		out  []mdLine
		cur  mdLine
		curW int
	)
	for _, s := range l {
		t := mdClean(s.text)
		start := 0
		for i, r := range t {
			w := ansi.StringWidth(string(r))
			if curW+w > width && curW > 0 {
				if i > start {
					cur = append(cur, span{t[start:i], s.style})
				}
				out = append(out, cur)
				cur, curW, start = nil, 0, i
			}
			curW += w
		}
		if start < len(t) {
			cur = append(cur, span{t[start:], s.style})
		}
	}
	return append(out, cur)
}

// The GFM table: a paragraph whose second line (or a later one) is a
// delimiter row (`| --- | :-: |`) with as many cells as the line before it
// becomes a table of that header and the lines after it.

var (
	kindTable     = ast.NewNodeKind("HrnsTable")
	kindTableRow  = ast.NewNodeKind("HrnsTableRow")
	kindTableCell = ast.NewNodeKind("HrnsTableCell")
)

type mdAlign uint8

const (
	alignLeft mdAlign = iota
	alignCenter
	alignRight
)

type mdTable struct {
	ast.BaseBlock
	align []mdAlign
}

func (n *mdTable) Kind() ast.NodeKind             { return kindTable }
func (n *mdTable) Dump(src []byte, level int)     { ast.DumpHelper(n, src, level, nil, nil) }
func (n *mdTableRow) Kind() ast.NodeKind          { return kindTableRow }
func (n *mdTableRow) Dump(src []byte, level int)  { ast.DumpHelper(n, src, level, nil, nil) }
func (n *mdTableCell) Kind() ast.NodeKind         { return kindTableCell }
func (n *mdTableCell) Dump(src []byte, level int) { ast.DumpHelper(n, src, level, nil, nil) }
func (n *mdTableCell) IsRaw() bool                { return false }

type mdTableRow struct{ ast.BaseBlock }

type mdTableCell struct{ ast.BaseBlock }

// mdMaxColumns bounds a table's columns; a wider one stays a paragraph.
const mdMaxColumns = 64

type tableTransformer struct{}

// Transform turns a paragraph holding a table into the table (and the
// paragraph of the lines before it, if any).
func (tableTransformer) Transform(node *ast.Paragraph, reader text.Reader, pc parser.Context) {
	lines := node.Lines()
	src := reader.Source()
	for i := 1; i < lines.Len(); i++ {
		d := lines.At(i)
		align, ok := parseDelimRow(d.Value(src))
		if !ok {
			continue
		}
		head := splitRow(src, lines.At(i-1))
		if len(head) != len(align) {
			continue
		}
		t := &mdTable{align: align}
		t.AppendChild(t, tableRow(head, len(align)))
		for j := i + 1; j < lines.Len(); j++ {
			t.AppendChild(t, tableRow(splitRow(src, lines.At(j)), len(align)))
		}
		parent := node.Parent()
		if i-1 > 0 {
			lines.SetSliced(0, i-1)
			parent.InsertAfter(parent, node, t)
		} else {
			parent.ReplaceChild(parent, node, t)
		}
		return
	}
}

func tableRow(cells []text.Segment, n int) *mdTableRow {
	row := &mdTableRow{}
	for k := range n {
		c := &mdTableCell{}
		if k < len(cells) && !cells[k].IsEmpty() {
			segs := text.NewSegments()
			segs.Append(cells[k])
			c.SetLines(segs)
		}
		row.AppendChild(row, c)
	}
	return row
}

// parseDelimRow parses a delimiter row: cells of dashes with optional
// colons, separated by pipes.
func parseDelimRow(line []byte) ([]mdAlign, bool) {
	s := strings.TrimSpace(string(line))
	if !strings.Contains(s, "-") {
		return nil, false
	}
	if !strings.Contains(s, "|") {
		return nil, false
	}
	s = strings.TrimPrefix(s, "|")
	s = strings.TrimSuffix(s, "|")
	cells := strings.Split(s, "|")
	if len(cells) > mdMaxColumns {
		return nil, false
	}
	align := make([]mdAlign, len(cells))
	for k, c := range cells {
		c = strings.TrimSpace(c)
		left, right := strings.HasPrefix(c, ":"), strings.HasSuffix(c, ":")
		c = strings.Trim(c, ":")
		if c == "" || strings.Trim(c, "-") != "" {
			return nil, false
		}
		switch {
		case left && right:
			align[k] = alignCenter
		case right:
			align[k] = alignRight
		}
	}
	return align, true
}

// splitRow splits a table row at its unescaped pipes into the segments of
// its cells, trimmed.
func splitRow(src []byte, line text.Segment) []text.Segment {
	start, stop := line.Start, line.Stop
	for stop > start && isSpace(src[stop-1]) {
		stop--
	}
	for start < stop && isSpace(src[start]) {
		start++
	}
	if start < stop && src[start] == '|' {
		start++
	}
	if stop > start && src[stop-1] == '|' && (stop-2 < start || src[stop-2] != '\\') {
		stop--
	}
	var cells []text.Segment
	cell := start
	for i := start; i <= stop && len(cells) <= mdMaxColumns; i++ {
		if i < stop && src[i] == '\\' {
			i++
			continue
		}
		if i == stop || src[i] == '|' {
			a, b := cell, min(i, stop)
			for a < b && isSpace(src[a]) {
				a++
			}
			for b > a && isSpace(src[b-1]) {
				b--
			}
			cells = append(cells, text.NewSegment(a, b))
			cell = i + 1
		}
	}
	return cells
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// table renders a table with columns separated by "│", its header bold
// and underlined by a rule; columns too wide for the width share it, their
// cells wrapped.
func (r *mdRenderer) table(t *mdTable, width int) []mdLine {
	ncol := len(t.align)
	var rows [][][]span
	for row := t.FirstChild(); row != nil; row = row.NextSibling() {
		var cells [][]span
		for c := row.FirstChild(); c != nil; c = c.NextSibling() {
			style := ""
			if row == t.FirstChild() {
				style = r.th.tableHead
			}
			cells = append(cells, r.inlines(c, style))
		}
		rows = append(rows, cells)
	}
	widths := make([]int, ncol)
	for _, row := range rows {
		for k, c := range row {
			for _, l := range wrapSpans(c, 1<<20) {
				widths[k] = max(widths[k], lineWidth(l))
			}
		}
	}
	avail := width - 3*(ncol-1)
	// Take from the widest column, down to the next widest at most each
	// time, until the columns fit or are one wide.
	for {
		sum, widest, next := 0, 0, 0
		for k, w := range widths {
			sum += w
			if w > widths[widest] {
				widest = k
			}
		}
		for k, w := range widths {
			if k != widest && w > next {
				next = w
			}
		}
		if sum <= avail || widths[widest] <= 1 {
			break
		}
		cut := min(sum-avail, max(widths[widest]-next, 1), widths[widest]-1)
		widths[widest] -= cut
	}
	// Wrapped, a column may need less than its share.
	wrapped := make([][][]mdLine, len(rows))
	used := make([]int, ncol)
	for i, row := range rows {
		wrapped[i] = make([][]mdLine, ncol)
		for k, c := range row {
			wrapped[i][k] = wrapSpans(c, widths[k])
			for _, l := range wrapped[i][k] {
				used[k] = max(used[k], lineWidth(l))
			}
		}
	}
	widths = used
	sep := span{" │ ", r.th.rule}
	var out []mdLine
	for i := range rows {
		cells := wrapped[i]
		height := 1
		for _, c := range cells {
			height = max(height, len(c))
		}
		for h := range height {
			var line mdLine
			for k := range ncol {
				if k > 0 {
					line = append(line, sep)
				}
				var cl mdLine
				if h < len(cells[k]) {
					cl = cells[k][h]
				}
				pad := max(widths[k]-lineWidth(cl), 0)
				left := 0
				switch t.align[k] {
				case alignRight:
					left = pad
				case alignCenter:
					left = pad / 2
				}
				line = append(line, span{strings.Repeat(" ", left), ""})
				line = append(line, cl...)
				line = append(line, span{strings.Repeat(" ", pad-left), ""})
			}
			out = append(out, line)
		}
		if i == 0 {
			var rule strings.Builder
			for k, w := range widths {
				if k > 0 {
					rule.WriteString("─┼─")
				}
				rule.WriteString(strings.Repeat("─", w))
			}
			out = append(out, mdLine{{rule.String(), r.th.rule}})
		}
	}
	// A table too wide even at one column each is cut at the width.
	for i, l := range out {
		if lineWidth(l) > width {
			out[i] = breakSpans(l, width)[0]
		}
	}
	return out
}
