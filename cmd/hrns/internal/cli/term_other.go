//go:build !linux && !windows && !darwin && !dragonfly && !freebsd && !netbsd && !openbsd

package cli

// isTerminal reports false where hrns cannot tell a terminal: calls that
// need approval are refused unless --yes is given.
func isTerminal(uintptr) bool { return false }

// flushInput does nothing where hrns cannot tell a terminal.
func flushInput(uintptr) {}
