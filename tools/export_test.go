package tools

import (
	"context"
	"net/netip"
	"strings"

	"github.com/hrns-dev/hrns/internal/imagesize"
	"github.com/hrns-dev/hrns/loop"
)

// WebExempt returns web_fetch with the default address policy, except that
// exempt addresses may be reached: a test can then serve a first hop on
// 127.0.0.1 and check that what follows is refused.
func WebExempt(opts *WebOptions, exempt func(netip.AddrPort) bool) *loop.Toolset {
	o := opts.withDefaults()
	o.exempt = exempt
	return loop.MustToolset(newWeb(o).tool())
}

// WebPSize reads a WebP image's size from its header.
var WebPSize = imagesize.WebP

// SetBeforeOpen makes the file tools call hook between looking at a path
// and opening it, until the test ends.
func SetBeforeOpen(t interface{ Cleanup(func()) }, hook func(rel string)) {
	beforeOpen = hook
	t.Cleanup(func() { beforeOpen = nil })
}

// SetListWork makes list_files report the pattern matching work of each
// call (its path.Match calls) to hook, until the test ends.
func SetListWork(t interface{ Cleanup(func()) }, hook func(int)) {
	listWork = hook
	t.Cleanup(func() { listWork = nil })
}

// GlobMatch reports whether the slash path name matches the list_files
// pattern.
func GlobMatch(pattern, name string) bool {
	g, err := compileGlob(pattern)
	if err != nil {
		panic(err)
	}
	return g.match(strings.Split(name, "/"))
}

// GrepLines returns the numbers of the lines of data that grep finds for
// pattern, or an error if the pattern is refused.
func GrepLines(pattern string, ignoreCase bool, data []byte) ([]int, error) {
	g := &grepTool{o: (&GrepOptions{MaxResults: 1 << 30}).withDefaults()}
	q, err := g.query(grepArgs{Pattern: pattern, CaseInsensitive: ignoreCase})
	if err != nil {
		return nil, err
	}
	q.max = 1 << 30
	var low []byte
	var n []int
	for _, l := range grepData(context.Background(), q, data, &low) {
		if l.match {
			n = append(n, l.n)
		}
	}
	return n, nil
}

// RequiredLiteral is the literal grep searches for before the pattern.
var RequiredLiteral = requiredLiteral
