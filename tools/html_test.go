package tools_test

import (
	"flag"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/hrns-dev/hrns/tools"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestHTMLToMarkdownGolden(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "page.html"))
	if err != nil {
		t.Fatal(err)
	}
	base, _ := url.Parse("https://hrns.example/docs/guide.html")
	res, err := tools.HTMLToMarkdown(t.Context(), string(in), base, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Title != "The hrns Guide" || res.Cut {
		t.Errorf("title %q, cut %v", res.Title, res.Cut)
	}
	md := res.Text
	golden := filepath.Join("testdata", "page.md")
	if *update {
		if err := os.WriteFile(golden, []byte(md+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if md+"\n" != string(want) {
		t.Errorf("markdown differs from %s (run with -update to accept):\n%s", golden, md)
	}
}

func TestHTMLToMarkdownCases(t *testing.T) {
	tests := []struct{ name, html, want string }{
		{"plain text", "hello   world", "hello world"},
		{"paragraphs", "<p>one</p><p>two</p>", "one\n\ntwo"},
		{"inline spacing", "<p>a <b>bold</b>, <i>it</i> <a href='https://x.test/'>link</a>.</p>", "a **bold**, *it* [link](https://x.test/)."},
		{"link without base", "<a href='/rel'>r</a>", "[r](/rel)"},
		{"empty link", "<a href='/x'></a>", ""},
		{"script link", "<a href='javascript:go()'>go</a> <a href='#top'>top</a>", "go top"},
		{"nested list", "<ul><li>a<ul><li>b<ol><li>c</li></ol></li></ul></li><li>d</li></ul>", "- a\n  \n  - b\n    \n    1. c\n- d"},
		{"heading levels", "<h4>four</h4><h6>six</h6>", "#### four\n\n###### six"},
		{"pre keeps whitespace", "<pre>  x\n    y\n</pre>", "```\n  x\n    y\n```"},
		{"pre with fence inside", "<pre>```\ncode\n```</pre>", "````\n```\ncode\n```\n````"},
		{"code with backtick", "<code>a`b</code>", "``a`b``"},
		{"quote with list", "<blockquote><ul><li>x</li><li>y</li></ul></blockquote>", "> - x\n> - y"},
		{"pre in quote", "<blockquote><pre>a\n\nb</pre></blockquote>", "> ```\n> a\n>\n> b\n> ```"},
		{"hidden", "<p>a</p><div hidden>secret</div><span aria-hidden='true'>icon</span><p>b</p>", "a\n\nb"},
		{"svg dropped", "<p>x<svg><title>t</title><text>y</text></svg></p>", "x"},
		{"data image", "<img src='data:image/png;base64,AAAA' alt='dot'>", "(image: dot)"},
		{"table without header", "<table><tr><td>a</td><td>b</td></tr><tr><td>c</td></tr></table>", "| a | b |\n|---|---|\n| c |  |"},
		{"definition list", "<dl><dt>term</dt><dd>meaning</dd></dl>", "term\n\nmeaning"},
		{"entities", "<p>a &amp; b &lt; c &nbsp;d</p>", "a & b &lt; c \u00a0d"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := tools.HTMLToMarkdown(t.Context(), tt.html, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			got := res.Text
			if got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
