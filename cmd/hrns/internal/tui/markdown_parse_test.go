package tui

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/cmd/hrns/internal/goldmark/ast"
	"github.com/hrns-dev/hrns/cmd/hrns/internal/goldmark/text"
)

// mdPieces are what mdCorpus builds documents of: every kind of HTML
// block and raw HTML (the parser's regular expressions), autolinks and
// e-mail addresses, character references, link references whose labels
// fold case beyond ASCII, and the block and inline syntax around them.
var mdPieces = []string{
	"<script>", "<script type=\"text/x\">\nalert(1)\n</script>", "</script>", "<pre>", "</pre>", "<style>", "</style>",
	"<textarea>", "</TEXTAREA>", "<!-- c -->", "<!--", "-->", "<?php x ?>", "<?", "?>", "<!DOCTYPE html>", "<!x",
	"<![CDATA[ x ]]>", "<![CDATA[", "]]>", "<div>", "</div>", "<DIV class=\"a\">", "<table>", "</td>", "<custom-tag a=1 b='2' c=\"3\" d>",
	"<a href=\"x\">", "</a >", "<img src=x/>", "<x-y:z>", "<br/>", "<  div>", "<div\n>", "<a\nb=\"c\">", "<a b=>", "<a b='c>",
	"<http://a.b/c?d=e>", "<https://example.com/a_b>", "<user@example.com>", "<a@b-c.d>", "<a@-b.c>", "<mailto:x@y.z>", "foo@bar.baz", "www.example.com",
	"&amp;", "&#27;", "&#x1F600;", "&copy;", "&nbsp;", "&ngE;", "&bogus;", "&#;",
	"[ẞ]: /url\n", "[ss]", "[SS]", "[ΑΓΩ]: /φου \"t\"\n", "[αγω]", "[Foo\n  bar]: /url\n", "[foo bar]", "[ǅ]: /dz\n", "[ǆ]", "[ﬀ]", "[ff]: /ff\n", "[K]", "[k]: /k\n", "[İ]",
	"\n", "\n", "\n\n", "# ", "## ", "> ", "- ", "* ", "1. ", "2) ", "```\n", "```go\n", "~~~", "    ", "\t", "---\n", "***", "===\n",
	"|a|b|\n|-|-|\n", "| x | y |\n", "|:-|-:|\n",
	"*", "**", "_", "__", "`", "``", "[", "]", "(", ")", "(/u \"t\")", "<", ">", "\\", "!", "![i](/p.png)", "[l](/u)", "  \n",
	"foo", "bar baz", "word ", "ǅ", "ﬀ", "K", "İ", "é", "日本", " ",
}

// mdCorpus returns n documents made of mdPieces, the same every time and
// with every Go release (its own splitmix64, not math/rand's streams).
func mdCorpus(n int) []string {
	state := uint64(36)
	next := func(bound int) int {
		state += 0x9e3779b97f4a7c15
		z := state
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		return int((z ^ z>>31) % uint64(bound))
	}
	docs := make([]string, n)
	for i := range docs {
		var b strings.Builder
		for range 1 + next(30) {
			b.WriteString(mdPieces[next(len(mdPieces))])
		}
		docs[i] = b.String()
	}
	return docs
}

// mdTree writes the parser's tree of src: each node's kind, its lines or
// segment, and what the renderer reads of it (HTML block types, link
// destinations and titles, autolink types, heading levels, list markers).
func mdTree(src []byte) string {
	var b strings.Builder
	doc := mdParser().Parse(text.NewReader(src))
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			b.WriteString(")")
			return ast.WalkContinue, nil
		}
		b.WriteString("(" + n.Kind().String())
		if n.Type() == ast.TypeBlock {
			for i := range n.Lines().Len() {
				s := n.Lines().At(i)
				fmt.Fprintf(&b, " %d-%d/%d", s.Start, s.Stop, s.Padding)
			}
		}
		switch n := n.(type) {
		case *ast.Text:
			fmt.Fprintf(&b, " %d-%d soft=%t hard=%t raw=%t", n.Segment.Start, n.Segment.Stop, n.SoftLineBreak(), n.HardLineBreak(), n.IsRaw())
		case *ast.String:
			fmt.Fprintf(&b, " %q", n.Value)
		case *ast.HTMLBlock:
			fmt.Fprintf(&b, " type=%d closure=%t", n.HTMLBlockType, n.HasClosure())
		case *ast.RawHTML:
			for i := range n.Segments.Len() {
				s := n.Segments.At(i)
				fmt.Fprintf(&b, " %d-%d", s.Start, s.Stop)
			}
		case *ast.Link:
			fmt.Fprintf(&b, " %q %q", n.Destination, n.Title)
		case *ast.Image:
			fmt.Fprintf(&b, " %q %q", n.Destination, n.Title)
		case *ast.AutoLink:
			fmt.Fprintf(&b, " %d %q", n.AutoLinkType, n.URL(src))
		case *ast.Heading:
			fmt.Fprintf(&b, " %d", n.Level)
		case *ast.List:
			fmt.Fprintf(&b, " %c %d tight=%t", n.Marker, n.Start, n.IsTight)
		case *ast.Emphasis:
			fmt.Fprintf(&b, " %d", n.Level)
		case *ast.FencedCodeBlock:
			if n.Info != nil {
				fmt.Fprintf(&b, " info=%d-%d", n.Info.Segment.Start, n.Info.Segment.Stop)
			}
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// TestMarkdownParseUnchanged keeps the chat's Markdown the same, tree and
// rendered text, over 3,000 generated documents (mdCorpus): a hash of each
// document's tree and rendering is in testdata/markdown_parse.golden,
// written by goldmark v1.8.2 as upstream wrote it (the copy in
// cmd/hrns/internal/goldmark before its regular expressions and tables
// were built on first use; go test -update rewrites the file).
func TestMarkdownParseUnchanged(t *testing.T) {
	docs := mdCorpus(3000)
	var got strings.Builder
	for _, d := range docs {
		tree := mdTree([]byte(d))
		rendered := strings.Join(renderMarkdown(d, 60, &darkTheme), "\n")
		h := sha256.Sum256([]byte(tree + "\x00" + rendered))
		got.WriteString(hex.EncodeToString(h[:8]) + "\n")
	}
	path := filepath.Join("testdata", "markdown_parse.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	wl, gl := strings.Split(string(want), "\n"), strings.Split(got.String(), "\n")
	if len(wl) != len(gl) {
		t.Fatalf("%d documents hashed, the golden file has %d", len(gl)-1, len(wl)-1)
	}
	bad := 0
	for i := range gl {
		if wl[i] != gl[i] {
			if bad++; bad <= 5 {
				t.Errorf("document %d parses or renders differently: %q\ntree: %s", i, docs[i], mdTree([]byte(docs[i])))
			}
		}
	}
	if bad > 5 {
		t.Errorf("and %d more documents", bad-5)
	}
}
