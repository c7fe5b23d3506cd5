package tools_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hrns-dev/hrns/tools"
)

// htmlBombs are pages built to make an HTML to Markdown converter produce
// far more than it reads, or work far longer than the page is long.
var htmlBombs = []struct{ name, page string }{
	// The red team's page: 306 KB of nested block quotes around a long
	// <pre>, whose every line repeats the quotes' "> " prefixes (150 MB of
	// Markdown and 1 GiB allocated by the converter hrns had before).
	{"quotes-around-pre", strings.Repeat("<blockquote>", 500) + "<pre>" + strings.Repeat("x\n", 150_000) + "</pre>"},
	// Lists nest the same way, with indentation instead of "> ".
	{"lists-around-pre", strings.Repeat("<ul><li>", 250) + "<pre>" + strings.Repeat("x\n", 150_000) + "</pre>"},
	// Deeper than the parser accepts (512): the old converter returned
	// nothing at all.
	{"quotes-past-parser-limit", strings.Repeat("<blockquote>", 5000) + "<p>text</p><pre>" + strings.Repeat("x\n", 150_000) + "</pre>"},
	// Inline elements that a converter renders from the inside out.
	{"nested-inline", strings.Repeat("<b><i>", 250) + strings.Repeat("x ", 100_000)},
	// A table whose rows are all padded to the widest one.
	{"table-padding", "<table><tr>" + strings.Repeat("<td>x</td>", 3000) + "</tr>" + strings.Repeat("<tr><td>y</td></tr>", 3000) + "</table>"},
	// Cells that span more rows and columns than there are.
	{"table-spans", "<table><tr><td>a</td></tr><tr><td colspan=100000 rowspan=100000>x</td></tr></table>"},
	// Formatting elements closed by a paragraph are reopened by the
	// parser in every paragraph after it: 320 KB of HTML, 630 MiB
	// allocated by the parser alone, with either converter.
	{"formatting-reopened", reopenedFormatting()},
	// Many empty elements, each of which starts a line.
	{"many-rules", strings.Repeat("<ol><li><hr>", 100) + strings.Repeat("<hr>", 500_000)},
}

func reopenedFormatting() string {
	var b strings.Builder
	b.WriteString("<p>")
	for i := range 100 {
		fmt.Fprintf(&b, "<b id=b%d>", i)
	}
	b.WriteString("</p>")
	b.WriteString(strings.Repeat("<p>x</p>", 40_000))
	return b.String()
}

// TestHTMLToMarkdownBombs converts each bomb and checks that the Markdown
// stays within the cap and that the conversion allocates a bounded amount
// of memory, however much the page asks for. Run with -v for the figures.
func TestHTMLToMarkdownBombs(t *testing.T) {
	const maxBytes = 64 << 10
	const maxAlloc = 64 << 20
	for _, b := range htmlBombs {
		t.Run(b.name, func(t *testing.T) {
			res, alloc := convertMeasured(t, b.page, maxBytes)
			t.Logf("in %d bytes, out %d bytes (cut %v), allocated %.1f MiB", len(b.page), len(res.Text), res.Cut, float64(alloc)/(1<<20))
			if len(res.Text) > maxBytes {
				t.Errorf("%d bytes of Markdown, more than the cap %d", len(res.Text), maxBytes)
			}
			if alloc > maxAlloc {
				t.Errorf("allocated %d MiB converting a %d KB page, more than %d MiB", alloc>>20, len(b.page)>>10, maxAlloc>>20)
			}
			if strings.TrimSpace(res.Text) == "" {
				t.Errorf("no Markdown at all")
			}
		})
	}
}

// convertMeasured converts page and returns the result and the bytes
// allocated meanwhile (an upper bound of the heap the conversion needed).
func convertMeasured(t testing.TB, page string, maxBytes int) (tools.Markdown, uint64) {
	t.Helper()
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	res, err := tools.HTMLToMarkdown(context.Background(), page, nil, maxBytes)
	runtime.ReadMemStats(&m1)
	if err != nil {
		t.Fatal(err)
	}
	return res, m1.TotalAlloc - m0.TotalAlloc
}

// TestHTMLToMarkdownKeepsDeepPages checks that a page nested deeper than
// the HTML parser accepts is converted, flattened, rather than lost.
func TestHTMLToMarkdownKeepsDeepPages(t *testing.T) {
	page := strings.Repeat("<div><blockquote>", 3000) + "<p>deep text</p>"
	res, err := tools.HTMLToMarkdown(t.Context(), page, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Text, "deep text") {
		t.Errorf("lost the text: %q", res.Text)
	}
}

// countdownCtx is a context whose Err reports cancellation from its nth
// call on: it ends in the middle of a conversion without any clock.
type countdownCtx struct {
	context.Context
	left atomic.Int64
}

func (c *countdownCtx) Err() error {
	if c.left.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// TestHTMLToMarkdownStopsWithContext cancels the conversion of a large
// page at points spread over all its stages (tokenizing, parsing, pruning,
// rendering: each looks at the context): it must return the context's
// error.
func TestHTMLToMarkdownStopsWithContext(t *testing.T) {
	page := strings.Repeat("<p>para <b>bold</b> <a href=x>link</a></p>\n", 20_000)
	// Count the looks at the context of a whole conversion.
	ctx := &countdownCtx{Context: context.Background()}
	ctx.left.Store(1 << 62)
	if _, err := tools.HTMLToMarkdown(ctx, page, nil, 1<<20); err != nil {
		t.Fatal(err)
	}
	total := 1<<62 - ctx.left.Load()
	t.Logf("%d looks at the context", total)
	for _, frac := range []float64{0, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99} {
		ctx := &countdownCtx{Context: context.Background()}
		ctx.left.Store(int64(frac * float64(total)))
		_, err := tools.HTMLToMarkdown(ctx, page, nil, 1<<20)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled after %.0f%% of the looks: %v, want context.Canceled", frac*100, err)
		}
	}
}

// BenchmarkHTMLToMarkdown reports the Markdown bytes and the bytes
// allocated per conversion, for the bombs and for ordinary pages.
func BenchmarkHTMLToMarkdown(b *testing.B) {
	golden, err := os.ReadFile("testdata/page.html")
	if err != nil {
		b.Fatal(err)
	}
	pages := append([]struct{ name, page string }{
		{"golden-page", string(golden)},
		{"long-article", strings.Repeat(string(golden), 200)},
	}, htmlBombs...)
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			var out int
			b.ReportAllocs()
			for b.Loop() {
				res, err := tools.HTMLToMarkdown(b.Context(), p.page, nil, 64<<10)
				if err != nil {
					b.Fatal(err)
				}
				out = len(res.Text)
			}
			b.ReportMetric(float64(len(p.page)), "in-bytes")
			b.ReportMetric(float64(out), "md-bytes")
		})
	}
}

// TestWebFetchHTMLBomb serves the red team's page to web_fetch: the
// result is cut at MaxTextBytes, says so, and the fetch allocates a
// bounded amount of memory.
func TestWebFetchHTMLBomb(t *testing.T) {
	page := htmlBombs[0].page
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, page)
	}))
	defer srv.Close()
	ts := testWeb(nil)
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	r := fetch(t, ts, srv.URL)
	runtime.ReadMemStats(&m1)
	alloc := m1.TotalAlloc - m0.TotalAlloc
	t.Logf("%d bytes of result, %.1f MiB allocated", len(r.text), float64(alloc)/(1<<20))
	if r.failed() || !strings.Contains(r.text, "the page holds more]") || len(r.text) > 64<<10+1024 {
		t.Errorf("got %d bytes: %.300s...", len(r.text), r)
	}
	if alloc > 64<<20 {
		t.Errorf("allocated %d MiB", alloc>>20)
	}
}
