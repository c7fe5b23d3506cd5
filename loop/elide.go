package loop

import (
	"fmt"
	"unicode/utf8"
)

// Elide bounds s to at most max bytes by cutting its middle: the head and
// tail are kept, on rune boundaries, with a marker saying how much was
// dropped, as the loop does with long tool results. When max is too small
// for the marker, only the head is kept. A negative max means no bound.
func Elide(s string, max int) string {
	if max < 0 || len(s) <= max {
		return s
	}
	marker := func(n int) string { return fmt.Sprintf("\n\n[... %d bytes elided ...]\n\n", n) }
	// The marker of the whole length is at least as long as the one
	// written, so head + marker + tail stays within max.
	keep := max - len(marker(len(s)))
	if keep < 2 {
		return s[:runeStart(s, max)]
	}
	head := runeStart(s, keep/2)
	start := len(s) - (keep - keep/2)
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return s[:head] + marker(start-head) + s[start:]
}

// runeStart returns the largest index i <= n (and <= len(s)) at which a
// rune of s starts, so s[:i] does not cut a rune.
func runeStart(s string, n int) int {
	n = min(n, len(s))
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}
