package tools

import (
	"net/netip"

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
var WebPSize = webpSize

// SetBeforeOpen makes the file tools call hook between looking at a path
// and opening it, until the test ends.
func SetBeforeOpen(t interface{ Cleanup(func()) }, hook func(rel string)) {
	beforeOpen = hook
	t.Cleanup(func() { beforeOpen = nil })
}
