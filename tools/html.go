package tools

import (
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// HTMLToMarkdown converts an HTML document to Markdown for a model to read,
// and returns the document's title too.
//
// It keeps the text and its structure: headings, paragraphs, links and
// images (made absolute against base, when base is not nil), lists (nested
// ones indented), block quotes, pre-formatted code as fenced blocks, inline
// code, emphasis and simple tables. It drops what a reader does not need:
// the head, scripts, styles, navigation, forms, frames and embedded SVG.
// Whitespace is collapsed as a browser would.
func HTMLToMarkdown(doc string, base *url.URL) (title, markdown string) {
	root, err := html.Parse(strings.NewReader(doc))
	if err != nil { // html.Parse only fails on read errors
		return "", ""
	}
	c := &mdConv{base: base, col0: true}
	c.title = findTitle(root)
	c.children(root)
	return c.title, c.result()
}

// mdConv writes Markdown while walking the HTML tree.
type mdConv struct {
	base  *url.URL
	title string
	out   strings.Builder
	// prefix starts every line: "> " in block quotes, indentation in list
	// items.
	prefix string
	// brk is the pending line break before the next text: 0, 1 (a new
	// line) or 2 (a blank line); brkPrefix is the prefix when it was
	// asked for.
	brk       int
	brkPrefix string
	// space is a pending space between words.
	space bool
	// col0: the next text starts a line (its prefix is not written yet).
	col0 bool
	// afterMarker: a list marker was just written, so a block starting
	// inside the item does not break the line.
	afterMarker bool
	lists       []*mdList
}

type mdList struct {
	ordered bool
	next    int
}

func (c *mdConv) blockBreak(n int) {
	if c.afterMarker || c.out.Len() == 0 {
		return
	}
	if c.brk == 0 {
		c.brkPrefix = c.prefix
	}
	c.brk = max(c.brk, n)
	if len(c.prefix) < len(c.brkPrefix) {
		c.brkPrefix = c.prefix
	}
}

// flush writes the pending break, prefix or space before new text.
func (c *mdConv) flush() {
	if c.brk > 0 && c.out.Len() > 0 {
		c.out.WriteByte('\n')
		if c.brk == 2 {
			c.out.WriteString(strings.TrimRight(c.brkPrefix, " "))
			c.out.WriteByte('\n')
		}
		c.col0 = true
	}
	c.brk = 0
	if c.col0 {
		c.out.WriteString(c.prefix)
		c.col0, c.space = false, false
	} else if c.space {
		c.out.WriteByte(' ')
		c.space = false
	}
}

// write writes s, which holds no line breaks, as inline text.
func (c *mdConv) write(s string) {
	if s == "" {
		return
	}
	c.flush()
	c.out.WriteString(s)
	c.afterMarker = false
}

// text writes the text of a text node, collapsing whitespace.
func (c *mdConv) text(s string) {
	if s == "" {
		return
	}
	if isSpace(s[0]) {
		c.space = true
	}
	for i, w := range strings.Fields(s) {
		if i > 0 {
			c.space = true
		}
		c.write(w)
	}
	if isSpace(s[len(s)-1]) {
		c.space = true
	}
}

func isSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\f'
}

// result returns the Markdown written, with line ends trimmed.
func (c *mdConv) result() string {
	lines := strings.Split(c.out.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// inline renders the children of n as one line of text.
func (c *mdConv) inline(n *html.Node) string {
	sub := &mdConv{base: c.base, col0: true}
	sub.children(n)
	return strings.Join(strings.Fields(sub.out.String()), " ")
}

func (c *mdConv) children(n *html.Node) {
	for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
		c.node(ch)
	}
}

// skipped are the elements dropped with their content.
var skipped = map[atom.Atom]bool{
	atom.Head: true, atom.Script: true, atom.Style: true, atom.Noscript: true,
	atom.Template: true, atom.Nav: true, atom.Svg: true, atom.Math: true,
	atom.Iframe: true, atom.Frame: true, atom.Frameset: true, atom.Object: true,
	atom.Embed: true, atom.Canvas: true, atom.Audio: true, atom.Video: true,
	atom.Button: true, atom.Input: true, atom.Select: true, atom.Textarea: true,
	atom.Option: true, atom.Dialog: true, atom.Link: true, atom.Meta: true,
}

// blocks are the elements that stand as paragraphs of their own.
var blocks = map[atom.Atom]bool{
	atom.P: true, atom.Div: true, atom.Section: true, atom.Article: true,
	atom.Main: true, atom.Header: true, atom.Footer: true, atom.Aside: true,
	atom.Figure: true, atom.Figcaption: true, atom.Address: true,
	atom.Details: true, atom.Summary: true, atom.Fieldset: true, atom.Form: true,
	atom.Dl: true, atom.Center: true, atom.Hgroup: true, atom.Caption: true,
}

func (c *mdConv) node(n *html.Node) {
	switch n.Type {
	case html.TextNode:
		c.text(n.Data)
		return
	case html.ElementNode:
	default:
		if n.Type == html.DocumentNode {
			c.children(n)
		}
		return
	}
	if skipped[n.DataAtom] || hasAttr(n, "hidden") || attr(n, "aria-hidden") == "true" {
		return
	}
	switch a := n.DataAtom; {
	case blocks[a]:
		c.blockBreak(2)
		c.children(n)
		c.blockBreak(2)
	case a == atom.H1 || a == atom.H2 || a == atom.H3 || a == atom.H4 || a == atom.H5 || a == atom.H6:
		level := int(n.Data[1] - '0')
		if t := c.inline(n); t != "" {
			c.blockBreak(2)
			c.write(strings.Repeat("#", level) + " " + t)
			c.blockBreak(2)
		}
	case a == atom.Br:
		c.blockBreak(1)
	case a == atom.Hr:
		c.blockBreak(2)
		c.write("---")
		c.blockBreak(2)
	case a == atom.Pre:
		c.pre(n)
	case a == atom.Blockquote:
		c.blockBreak(2)
		old := c.prefix
		c.prefix += "> "
		c.children(n)
		c.prefix = old
		c.blockBreak(2)
	case a == atom.Ul || a == atom.Ol || a == atom.Menu:
		c.list(n)
	case a == atom.Li: // outside a list
		c.item(n, "- ")
	case a == atom.Dt:
		c.blockBreak(1)
		c.children(n)
		c.blockBreak(1)
	case a == atom.Dd:
		c.blockBreak(1)
		old := c.prefix
		c.prefix += "  "
		c.children(n)
		c.prefix = old
		c.blockBreak(1)
	case a == atom.Table:
		c.table(n)
	case a == atom.A:
		c.link(n)
	case a == atom.Img:
		c.image(n)
	case a == atom.Strong || a == atom.B:
		c.wrapped(n, "**")
	case a == atom.Em || a == atom.I:
		c.wrapped(n, "*")
	case a == atom.Del || a == atom.S || a == atom.Strike:
		c.wrapped(n, "~~")
	case a == atom.Code || a == atom.Kbd || a == atom.Samp || a == atom.Tt:
		t := strings.Join(strings.Fields(textContent(n)), " ")
		fence := "`"
		if strings.Contains(t, "`") {
			fence = "``"
		}
		c.inlineText(n, fence+t+fence, t != "")
	default:
		c.children(n)
	}
}

// inlineText writes s, the rendering of inline element n, keeping the
// spaces around n's text.
func (c *mdConv) inlineText(n *html.Node, s string, ok bool) {
	if !ok {
		return
	}
	raw := textContent(n)
	if raw != "" && isSpace(raw[0]) {
		c.space = true
	}
	c.write(s)
	if raw != "" && isSpace(raw[len(raw)-1]) {
		c.space = true
	}
}

func (c *mdConv) wrapped(n *html.Node, mark string) {
	t := c.inline(n)
	c.inlineText(n, mark+t+mark, t != "")
}

func (c *mdConv) link(n *html.Node) {
	t := c.inline(n)
	href := strings.TrimSpace(attr(n, "href"))
	switch {
	case t == "":
	case href == "" || strings.HasPrefix(href, "#") || strings.HasPrefix(strings.ToLower(href), "javascript:"):
		c.inlineText(n, t, true)
	default:
		c.inlineText(n, "["+t+"]("+c.resolve(href)+")", true)
	}
}

func (c *mdConv) image(n *html.Node) {
	alt := strings.Join(strings.Fields(attr(n, "alt")), " ")
	src := strings.TrimSpace(attr(n, "src"))
	switch {
	case src == "" || strings.HasPrefix(src, "data:"):
		if alt != "" {
			c.write("[image: " + alt + "]")
		}
	default:
		c.write("![" + alt + "](" + c.resolve(src) + ")")
	}
}

func (c *mdConv) resolve(ref string) string {
	u, err := url.Parse(ref)
	if err != nil {
		return ref
	}
	if c.base != nil {
		u = c.base.ResolveReference(u)
	}
	s := u.String()
	return strings.NewReplacer(" ", "%20", "(", "%28", ")", "%29").Replace(s)
}

func (c *mdConv) pre(n *html.Node) {
	raw := textContent(n)
	raw = strings.TrimPrefix(raw, "\n")
	raw = strings.TrimRight(raw, " \t\r\n")
	if raw == "" {
		return
	}
	lang := codeLanguage(n)
	if lang == "" {
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			if ch.Type == html.ElementNode && ch.DataAtom == atom.Code {
				lang = codeLanguage(ch)
				break
			}
		}
	}
	fence := "```"
	for strings.Contains(raw, fence) {
		fence += "`"
	}
	c.blockBreak(2)
	c.write(fence + lang)
	for _, line := range strings.Split(raw, "\n") {
		c.out.WriteByte('\n')
		if line == "" {
			c.out.WriteString(strings.TrimRight(c.prefix, " "))
		} else {
			c.out.WriteString(c.prefix + strings.TrimRight(line, "\r"))
		}
	}
	c.out.WriteByte('\n')
	c.out.WriteString(c.prefix + fence)
	c.blockBreak(2)
}

// codeLanguage reads a language from a class such as "language-go" or
// "lang-go".
func codeLanguage(n *html.Node) string {
	for _, cl := range strings.Fields(attr(n, "class")) {
		for _, p := range []string{"language-", "lang-"} {
			if l, ok := strings.CutPrefix(cl, p); ok && l != "" {
				return l
			}
		}
	}
	return ""
}

func (c *mdConv) list(n *html.Node) {
	l := &mdList{ordered: n.DataAtom == atom.Ol, next: 1}
	if s, err := strconv.Atoi(attr(n, "start")); err == nil {
		l.next = s
	}
	nested := len(c.lists) > 0
	if nested {
		c.blockBreak(1)
	} else {
		c.blockBreak(2)
	}
	c.lists = append(c.lists, l)
	for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
		if ch.Type == html.ElementNode && ch.DataAtom == atom.Li {
			marker := "- "
			if l.ordered {
				marker = strconv.Itoa(l.next) + ". "
				l.next++
			}
			c.item(ch, marker)
			continue
		}
		c.node(ch)
	}
	c.lists = c.lists[:len(c.lists)-1]
	if nested {
		c.blockBreak(1)
	} else {
		c.blockBreak(2)
	}
}

func (c *mdConv) item(n *html.Node, marker string) {
	c.blockBreak(1)
	c.write(marker[:len(marker)-1])
	c.space = true
	c.afterMarker = true
	old := c.prefix
	c.prefix += strings.Repeat(" ", len(marker))
	c.children(n)
	c.prefix = old
	c.afterMarker = false
	c.blockBreak(1)
}

func (c *mdConv) table(n *html.Node) {
	var rows [][]string
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			if ch.Type != html.ElementNode {
				continue
			}
			switch ch.DataAtom {
			case atom.Thead, atom.Tbody, atom.Tfoot:
				walk(ch)
			case atom.Tr:
				var row []string
				for cell := ch.FirstChild; cell != nil; cell = cell.NextSibling {
					if cell.Type == html.ElementNode && (cell.DataAtom == atom.Td || cell.DataAtom == atom.Th) {
						row = append(row, strings.ReplaceAll(c.inline(cell), "|", `\|`))
					}
				}
				if len(row) > 0 {
					rows = append(rows, row)
				}
			case atom.Caption:
				if t := c.inline(ch); t != "" {
					c.blockBreak(2)
					c.write(t)
				}
			}
		}
	}
	walk(n)
	if len(rows) == 0 {
		return
	}
	cols := 0
	for _, r := range rows {
		cols = max(cols, len(r))
	}
	c.blockBreak(2)
	for i, r := range rows {
		for len(r) < cols {
			r = append(r, "")
		}
		c.write("| " + strings.Join(r, " | ") + " |")
		c.blockBreak(1)
		if i == 0 { // Markdown wants a header row: the first row is it
			c.write("|" + strings.Repeat(" --- |", cols))
			c.blockBreak(1)
		}
	}
	c.blockBreak(2)
}

func findTitle(n *html.Node) string {
	if n.Type == html.ElementNode && n.DataAtom == atom.Title {
		return strings.Join(strings.Fields(textContent(n)), " ")
	}
	if n.Type == html.ElementNode && (n.DataAtom == atom.Svg || n.DataAtom == atom.Body) {
		return ""
	}
	for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
		if t := findTitle(ch); t != "" {
			return t
		}
	}
	return ""
}

func textContent(n *html.Node) string {
	if n.Type == html.TextNode {
		return n.Data
	}
	var b strings.Builder
	for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
		if ch.Type == html.ElementNode && ch.DataAtom == atom.Br {
			b.WriteByte('\n')
			continue
		}
		b.WriteString(textContent(ch))
	}
	return b.String()
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Namespace == "" && a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Namespace == "" && a.Key == key {
			return true
		}
	}
	return false
}
