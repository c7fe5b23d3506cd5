//go:build !unix

package tui

// onResize does nothing where there is no SIGWINCH (Windows), as Bubble
// Tea's resize handling did nothing there.
func onResize(f func()) (stop func()) { return func() {} }
