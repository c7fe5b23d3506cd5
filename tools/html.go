package tools

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/url"
	"strconv"
	"strings"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/marker"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/strikethrough"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Markdown is the result of [HTMLToMarkdown].
type Markdown struct {
	// Title is the document's <title>, whitespace collapsed.
	Title string
	// Text is the Markdown, at most the maxBytes given to HTMLToMarkdown.
	Text string
	// Cut reports that the document holds more than Text shows: the
	// conversion stopped at its bound.
	Cut bool
}

// The bounds of HTMLToMarkdown. An HTML page can ask a converter for far
// more output than it is long (a long <pre> inside hundreds of nested
// block quotes repeats their "> " on every line) or for far more work (a
// table whose rows are all padded to its widest one); these keep both in
// proportion to the text asked for, whatever the page.
const (
	// maxHTMLDepth is the deepest element nesting kept: tags below it are
	// dropped and their content joins their parent. (The parser refuses
	// documents nested deeper than 512.)
	maxHTMLDepth = 128
	// maxIndentDepth is the deepest nesting of block quotes and lists
	// rendered as such; deeper ones are rendered as plain blocks, so a
	// line's prefix stays short.
	maxIndentDepth = 8
	// maxIndentWidth bounds the width one level of indentation adds: "> "
	// or a list marker as long as "9999. ".
	maxIndentWidth = 6
	// maxFormatting bounds the formatting elements (b, i, a, font...)
	// open at once. The parser reopens those a block closed in every
	// block that follows: with many open, each short paragraph of the
	// page would become as many elements (320 KB of HTML, 630 MiB).
	maxFormatting = 4
	// maxTitleBytes bounds the title returned.
	maxTitleBytes = 1 << 10
)

// HTMLToMarkdown converts an HTML document to Markdown for a model to read,
// and returns the document's title too. It uses
// github.com/JohannesKaufmann/html-to-markdown, after reducing the
// document to what a reader needs and to what the bounds below allow.
//
// It keeps the text and its structure: headings, paragraphs, links and
// images (made absolute against base, when base is not nil), lists, block
// quotes, pre-formatted code as fenced blocks, inline code, emphasis,
// strikethrough and tables. It drops the head, scripts, styles,
// navigation, forms, frames, embedded SVG and hidden elements, and images
// inlined as data: URLs (their alt text stays, as "(image: alt)").
//
// The work and the output are bounded whatever the document: Text is at
// most maxBytes long (0 or less means 64 KiB); the document is cut once
// the Markdown it would give passes about twice that, before the
// conversion proper; elements nested deeper than 128 are flattened into
// their parent, at most 4 unclosed formatting elements (b, i, a...) are
// kept open at once, block quotes and lists nested deeper than 8 are
// rendered as plain paragraphs, and tables lose their cell spans (and
// become paragraphs when their grid does not fit the budget). Cut says
// when anything was left out for these bounds. The conversion stops when
// ctx ends (it is checked while tokenizing, parsing, pruning and
// rendering), with ctx's error.
func HTMLToMarkdown(ctx context.Context, doc string, base *url.URL, maxBytes int) (Markdown, error) {
	if maxBytes <= 0 {
		maxBytes = 64 << 10
	}
	budget := 2*maxBytes + 4096
	// Every token costs at least one unit of the budget once parsed
	// (text, elements, the lines they start), so the document is cut
	// after as many tokens before it is parsed.
	flat, flatCut, err := flattenHTML(ctx, doc, maxHTMLDepth, budget)
	if err != nil {
		return Markdown{}, err
	}
	root, err := html.Parse(&ctxReader{ctx: ctx, r: strings.NewReader(flat)})
	if err != nil {
		if ctx.Err() != nil {
			return Markdown{}, ctx.Err()
		}
		// The parser can nest deeper than the tags do (it reopens
		// formatting elements); try once more, much flatter.
		if flat, flatCut, err = flattenHTML(ctx, doc, 16, budget); err != nil {
			return Markdown{}, err
		}
		if root, err = html.Parse(&ctxReader{ctx: ctx, r: strings.NewReader(flat)}); err != nil {
			return Markdown{}, errors.Join(ctx.Err(), errors.New("the HTML could not be parsed"))
		}
	}
	res := Markdown{Title: cutString(findTitle(root), maxTitleBytes)}
	p := &pruner{ctx: ctx, budget: budget}
	if base != nil {
		p.baseLen = len(base.String())
	}
	p.prune(root, 0, false)
	if p.err != nil {
		return Markdown{}, p.err
	}
	res.Cut = p.cut || flatCut

	conv := newMarkdownConverter()
	var opts []converter.ConvertOptionFunc
	opts = append(opts, converter.WithContext(ctx))
	if base != nil {
		opts = append(opts, converter.WithDomain(base.String()))
	}
	md, err := conv.ConvertNode(root, opts...)
	if err != nil {
		return Markdown{}, err
	}
	if err := ctx.Err(); err != nil {
		return Markdown{}, err
	}
	text := strings.TrimSpace(string(md))
	if len(text) > maxBytes {
		text = strings.TrimRight(cutString(text, maxBytes), " \t\n")
		res.Cut = true
	}
	res.Text = text
	return res, nil
}

// newMarkdownConverter returns the converter of HTMLToMarkdown. A
// converter is cheap to make; one per document keeps them independent.
func newMarkdownConverter() *converter.Converter {
	conv := converter.NewConverter(converter.WithPlugins(
		base.NewBasePlugin(),
		commonmark.NewCommonmarkPlugin(
			commonmark.WithListEndComment(false),
			commonmark.WithLinkEmptyContentBehavior(commonmark.LinkBehaviorSkip),
		),
		strikethrough.NewStrikethroughPlugin(),
		table.NewTablePlugin(
			// Aligned padding makes every cell of a column as wide as
			// the widest: output in rows times width.
			table.WithCellPaddingBehavior(table.CellPaddingBehaviorMinimal),
			table.WithSpanCellBehavior(table.SpanBehaviorEmpty),
			table.WithHeaderPromotion(true),
		),
	))
	// Once the context ends, render nothing more: the walk unwinds at
	// once, whatever is left.
	conv.Register.Renderer(func(ctx converter.Context, _ converter.Writer, _ *html.Node) converter.RenderStatus {
		if ctx.Err() != nil {
			return converter.RenderSuccess
		}
		return converter.RenderTryNext
	}, converter.PriorityEarly-1)
	conv.Register.RendererFor("blockquote", converter.TagTypeBlock, renderBlockquote, converter.PriorityEarly)
	return conv
}

// renderBlockquote replaces the commonmark plugin's block quotes, which
// leave every line of a code block after the first outside the quote (v2.5.2
// puts "> " after real newlines only, and a code block's newlines are a
// marker until the very end).
func renderBlockquote(ctx converter.Context, w converter.Writer, n *html.Node) converter.RenderStatus {
	var buf bytes.Buffer
	ctx.RenderChildNodes(ctx, &buf, n)
	content := bytes.TrimSpace(buf.Bytes())
	if len(content) == 0 {
		return converter.RenderSuccess
	}
	codeNL := []byte(string(marker.BytesMarkerCodeBlockNewline))
	out := make([]byte, 0, len(content)+len(content)/8+2)
	out = append(out, "> "...)
	newlines := 0
	for i := 0; i < len(content); i++ {
		switch {
		case content[i] == '\n':
			if newlines++; newlines > 2 {
				continue // at most one blank line between blocks
			}
			out = append(out, "\n> "...)
		case bytes.HasPrefix(content[i:], codeNL):
			newlines = 0
			out = append(out, codeNL...)
			out = append(out, "> "...)
			i += len(codeNL) - 1
		default:
			newlines = 0
			out = append(out, content[i])
		}
	}
	// No trailing space on the quote's blank lines.
	out = bytes.ReplaceAll(out, []byte("> \n"), []byte(">\n"))
	out = bytes.ReplaceAll(out, append([]byte("> "), codeNL...), append([]byte(">"), codeNL...))
	w.WriteString("\n\n")
	w.Write(out)
	w.WriteString("\n\n")
	return converter.RenderSuccess
}

// ctxReader reads from r until ctx ends, then fails with ctx's error.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p[:min(len(p), 32<<10)])
}

// voidElements have no end tag and hold nothing.
var voidElements = map[atom.Atom]bool{
	atom.Area: true, atom.Base: true, atom.Br: true, atom.Col: true,
	atom.Embed: true, atom.Hr: true, atom.Img: true, atom.Input: true,
	atom.Link: true, atom.Meta: true, atom.Source: true, atom.Track: true,
	atom.Wbr: true, atom.Param: true, atom.Keygen: true,
}

// formattingElements are those the parser reopens after a block that
// closed them (the HTML standard's "active formatting elements").
var formattingElements = map[atom.Atom]bool{
	atom.A: true, atom.B: true, atom.Big: true, atom.Code: true, atom.Em: true,
	atom.Font: true, atom.I: true, atom.Nobr: true, atom.S: true,
	atom.Small: true, atom.Strike: true, atom.Strong: true, atom.Tt: true,
	atom.U: true,
}

// rawTextElements hold text the tokenizer does not read as markup.
var rawTextElements = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Textarea: true, atom.Title: true,
	atom.Xmp: true, atom.Iframe: true, atom.Noembed: true, atom.Noframes: true,
	atom.Noscript: true, atom.Plaintext: true,
}

// flattenHTML returns doc without the start and end tags that open
// elements nested deeper than maxDepth, judged from the tags alone (an end
// tag closes up to the element it names, as the parser does). Their text
// stays, in their parent. Formatting elements beyond maxFormatting open
// at once (start tags not yet matched by an end tag) are dropped too. It
// keeps about maxTokens tokens (with the formatting elements the parser
// may reopen for them), and reports whether it left some out. It reads
// doc once, and stops when ctx ends.
func flattenHTML(ctx context.Context, doc string, maxDepth, maxTokens int) (_ string, cut bool, _ error) {
	z := html.NewTokenizer(strings.NewReader(doc))
	var (
		out     strings.Builder
		stack   []string
		skipRaw bool // inside a raw-text element that was dropped
		fmtOpen int  // formatting elements opened and not yet ended
		tokens  int  // the nodes the parser may make of what was kept
	)
	out.Grow(len(doc))
	for i := 0; ; i++ {
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return "", false, err
			}
		}
		tt := z.Next()
		if tt == html.ErrorToken {
			if z.Err() == io.EOF {
				return out.String(), false, nil
			}
			return "", false, z.Err()
		}
		if tokens >= maxTokens && tt != html.EndTagToken {
			return out.String(), true, nil
		}
		// A start tag may make the parser reopen every formatting
		// element open: count those nodes too.
		tokens++
		if tt == html.StartTagToken {
			tokens += fmtOpen
		}
		raw := z.Raw()
		switch tt {
		case html.StartTagToken:
			name, _ := z.TagName()
			a := atom.Lookup(name)
			if voidElements[a] {
				break
			}
			if len(stack) >= maxDepth || (formattingElements[a] && fmtOpen >= maxFormatting) {
				skipRaw = rawTextElements[a]
				continue
			}
			if formattingElements[a] {
				fmtOpen++
			}
			stack = append(stack, string(name))
		case html.EndTagToken:
			name, _ := z.TagName()
			a := atom.Lookup(name)
			if voidElements[a] {
				break
			}
			k := len(stack) - 1
			for k >= 0 && stack[k] != string(name) {
				k--
			}
			switch {
			case k >= 0:
				stack = stack[:k]
			case formattingElements[a] && fmtOpen > 0:
				// Closed by a block already, but still reopened by the
				// parser until this end tag.
			default:
				continue // closes nothing that was kept
			}
			if formattingElements[a] && fmtOpen > 0 {
				fmtOpen--
			}
		case html.TextToken:
			if skipRaw {
				skipRaw = false // the raw text of a dropped element
				continue
			}
		}
		skipRaw = false
		out.Write(raw)
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
	atom.Title: true,
}

// indenting are the elements whose content the Markdown indents or
// prefixes, line by line.
var indenting = map[atom.Atom]bool{
	atom.Blockquote: true, atom.Ul: true, atom.Ol: true, atom.Menu: true,
	atom.Dd: true, atom.Li: true,
}

// pruner reduces a parsed document to what HTMLToMarkdown converts: it
// drops what a reader does not need, takes away what would let the
// converter's output or work grow out of proportion, and cuts the
// document where the Markdown it gives would pass the budget.
type pruner struct {
	ctx context.Context
	// budget is what is left of the Markdown bytes the rest of the
	// document may give, counted generously (see cost).
	budget  int
	baseLen int // the length of the base URL links are resolved against
	cut     bool
	err     error
	visited int
}

// prune walks the children of n; indent is the number of indenting
// elements above them, pre whether they are inside a <pre>. It returns
// false once the walk stopped: the budget is spent (the rest of the
// document is removed) or the context ended.
func (p *pruner) prune(n *html.Node, indent int, pre bool) bool {
	for ch := n.FirstChild; ch != nil; {
		next := ch.NextSibling
		if p.visited++; p.visited%1024 == 0 {
			if p.err = p.ctx.Err(); p.err != nil {
				return false
			}
		}
		if !p.node(ch, indent, pre) {
			// Remove what follows: the ancestors remove theirs.
			for ch = next; ch != nil; ch = next {
				next = ch.NextSibling
				n.RemoveChild(ch)
			}
			return false
		}
		ch = next
	}
	return true
}

// node prunes n and what it holds, and charges it to the budget.
func (p *pruner) node(n *html.Node, indent int, pre bool) bool {
	switch n.Type {
	case html.TextNode:
		cost := textCost(n.Data, pre, indent)
		if cost > p.budget {
			// Keep the part of the text that fits.
			n.Data = cutString(n.Data, p.budget/(1+maxIndentWidth*indent))
			p.cut, p.budget = true, 0
			return false
		}
		p.budget -= cost
		return true
	case html.ElementNode:
	case html.CommentNode, html.DoctypeNode:
		n.Parent.RemoveChild(n)
		return true
	default:
		return p.prune(n, indent, pre)
	}
	if skipped[n.DataAtom] || hasAttr(n, "hidden") || strings.EqualFold(attr(n, "aria-hidden"), "true") {
		n.Parent.RemoveChild(n)
		return true
	}
	cost := 1 + maxIndentWidth*indent
	switch n.DataAtom {
	case atom.Img:
		src := strings.TrimSpace(attr(n, "src"))
		if src == "" || hasPrefixFold(src, "data:") {
			// An inlined image is data, not text; its alt text stays.
			alt := strings.Join(strings.Fields(attr(n, "alt")), " ")
			if alt == "" {
				n.Parent.RemoveChild(n)
				return true
			}
			t := &html.Node{Type: html.TextNode, Data: "(image: " + alt + ")"}
			n.Parent.InsertBefore(t, n)
			n.Parent.RemoveChild(n)
			return p.node(t, indent, pre)
		}
		cost += p.baseLen + len(src) + len(attr(n, "alt")) + len(attr(n, "title"))
	case atom.A:
		href := strings.TrimSpace(attr(n, "href"))
		if hasPrefixFold(href, "javascript:") || strings.HasPrefix(href, "#") {
			n.DataAtom, n.Data = atom.Span, "span" // no link to follow: keep the text
		} else {
			cost += p.baseLen + len(href) + len(attr(n, "title"))
		}
	case atom.Ol:
		// The marker's width indents the item's lines.
		if s, err := strconv.Atoi(strings.TrimSpace(attr(n, "start"))); err != nil || s < 0 || s > 9990 {
			delAttr(n, "start")
		}
	case atom.Table:
		// Rows are padded to the widest one: charge rows times columns.
		if rows, cols := tableShape(n); rows*(cols*4+2) > p.budget/4 {
			// Too big a grid for the budget: keep its text as blocks.
			untable(n)
		} else {
			cost += rows * (cols*4 + 2)
		}
	case atom.Td, atom.Th:
		// Spans are not kept: they add cells, as many as they say.
		delAttr(n, "colspan")
		delAttr(n, "rowspan")
	case atom.Pre:
		pre = true
	}
	if indenting[n.DataAtom] {
		if indent >= maxIndentDepth {
			n.DataAtom, n.Data = atom.Div, "div"
		} else if n.DataAtom != atom.Li { // an item is indented by its list
			indent++
		}
	}
	if cost > p.budget {
		n.Parent.RemoveChild(n)
		p.cut, p.budget = true, 0
		return false
	}
	p.budget -= cost
	return p.prune(n, indent, pre)
}

// textCost bounds the Markdown bytes text gives: outside <pre> whitespace
// collapses, and each character may be escaped; inside, every line starts
// with the prefix of the indent levels.
func textCost(s string, pre bool, indent int) int {
	if pre {
		return len(s) + strings.Count(s, "\n")*maxIndentWidth*indent
	}
	cost, space := 0, false
	for i := 0; i < len(s); i++ {
		if isSpace(s[i]) {
			if !space {
				cost++
			}
			space = true
			continue
		}
		space = false
		cost += 2 // a character and its escape
	}
	return cost
}

// tableShape counts the rows of table t and the cells of its longest row,
// as the table plugin will find them (nested tables included).
func tableShape(t *html.Node) (rows, cols int) {
	var walk func(*html.Node, *int)
	walk = func(n *html.Node, cells *int) {
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			if ch.Type != html.ElementNode {
				continue
			}
			switch ch.DataAtom {
			case atom.Tr:
				rows++
				k := 0
				walk(ch, &k)
				cols = max(cols, k)
				continue
			case atom.Td, atom.Th:
				if cells != nil {
					*cells++
				}
			}
			walk(ch, cells)
		}
	}
	walk(t, nil)
	return rows, cols
}

// untable turns table t into plain blocks, a paragraph per cell.
func untable(t *html.Node) {
	switch t.DataAtom {
	case atom.Table, atom.Thead, atom.Tbody, atom.Tfoot, atom.Tr, atom.Caption:
		t.DataAtom, t.Data = atom.Div, "div"
	case atom.Td, atom.Th:
		t.DataAtom, t.Data = atom.P, "p"
	}
	for ch := t.FirstChild; ch != nil; ch = ch.NextSibling {
		if ch.Type == html.ElementNode {
			untable(ch)
		}
	}
}

func isSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\f'
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
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

func delAttr(n *html.Node, key string) {
	kept := n.Attr[:0]
	for _, a := range n.Attr {
		if a.Namespace != "" || a.Key != key {
			kept = append(kept, a)
		}
	}
	n.Attr = kept
}
