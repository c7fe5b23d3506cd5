package loop

import (
	"fmt"
	"unicode/utf8"
)

// Elide bounds s to about max bytes by cutting its middle: the head and tail
// are kept, on rune boundaries, with a marker saying how much was dropped,
// as the loop does with long tool results. A negative max means no bound.
func Elide(s string, max int) string {
	if max < 0 || len(s) <= max {
		return s
	}
	marker := func(n int) string { return fmt.Sprintf("\n\n[... %d bytes elided ...]\n\n", n) }
	keep := max - len(marker(len(s)))
	if keep < 2 {
		keep = 2
	}
	head, tail := keep/2, keep-keep/2
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	start := len(s) - tail
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return s[:head] + marker(start-head) + s[start:]
}
