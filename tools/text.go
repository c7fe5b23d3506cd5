package tools

import (
	"bytes"
	"fmt"
	"unicode/utf8"
)

// sniffLen is how much of a file is looked at to tell text from binary.
const sniffLen = 8 << 10

// looksBinary reports whether b, the first bytes of a file, hold a NUL byte
// or invalid UTF-8. full says b may end in the middle of the file, so that an
// incomplete UTF-8 sequence at its end is not held against it.
func looksBinary(b []byte, full bool) bool {
	if bytes.IndexByte(b, 0) >= 0 {
		return true
	}
	if full {
		// Drop a rune cut by the end of the sample (at most 3 bytes).
		for i := 0; i < utf8.UTFMax-1 && len(b) > 0; i++ {
			r, size := utf8.DecodeLastRune(b)
			if r != utf8.RuneError || size != 1 {
				break
			}
			b = b[:len(b)-1]
		}
	}
	return !utf8.Valid(b)
}

// headTail is an io.Writer that keeps the first and the last bytes written
// to it, up to a total of max, and counts the rest. It is used for command
// output, whose start and end are what matter.
type headTail struct {
	max   int
	head  []byte
	tail  []byte // a ring once full
	start int    // index of the oldest byte of tail
	total int64
}

func newHeadTail(max int) *headTail {
	return &headTail{max: max}
}

func (w *headTail) Write(p []byte) (int, error) {
	n := len(p)
	w.total += int64(n)
	headMax := w.max / 2
	if room := headMax - len(w.head); room > 0 {
		k := min(room, len(p))
		w.head = append(w.head, p[:k]...)
		p = p[k:]
	}
	tailMax := w.max - headMax
	if tailMax <= 0 {
		return n, nil
	}
	for len(p) > 0 {
		if len(w.tail) < tailMax {
			k := min(tailMax-len(w.tail), len(p))
			w.tail = append(w.tail, p[:k]...)
			p = p[k:]
			continue
		}
		if len(p) >= tailMax {
			copy(w.tail, p[len(p)-tailMax:])
			w.start = 0
			return n, nil
		}
		k := copy(w.tail[w.start:], p)
		p = p[k:]
		w.start = (w.start + k) % tailMax
	}
	return n, nil
}

// String returns what was kept; when bytes were dropped, a marker between
// head and tail says how many.
func (w *headTail) String() string {
	tail := append(append([]byte(nil), w.tail[w.start:]...), w.tail[:w.start]...)
	dropped := w.total - int64(len(w.head)) - int64(len(tail))
	if dropped <= 0 {
		return string(w.head) + string(tail)
	}
	head := w.head
	// Keep whole runes on both sides of the cut.
	for i := len(head) - 1; i >= 0 && i >= len(head)-utf8.UTFMax; i-- {
		if utf8.RuneStart(head[i]) {
			if !utf8.FullRune(head[i:]) {
				head = head[:i]
			}
			break
		}
	}
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	dropped = w.total - int64(len(head)) - int64(len(tail))
	return fmt.Sprintf("%s\n\n[... %d bytes of output omitted ...]\n\n%s", head, dropped, tail)
}

// size writes a byte count for a tool description: "50 KiB", "1 MiB",
// "300 bytes".
func size(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
