package sandbox

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// capture keeps the head and tail of a stream, counting what it drops.
type capture struct {
	max int

	mu    sync.Mutex // guards the fields below
	head  []byte
	tail  []byte // the last bytes seen, up to twice tailMax before trimming
	total int64
}

func newCapture(max int) *capture { return &capture{max: max} }

func (c *capture) headMax() int { return c.max / 2 }
func (c *capture) tailMax() int { return c.max - c.max/2 }

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	c.total += int64(n)
	if room := c.headMax() - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	c.tail = append(c.tail, p...)
	if len(c.tail) > 2*c.tailMax() {
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-c.tailMax():]...)
	}
	return n, nil
}

// String returns everything if it fit, else the head, a marker saying how
// many bytes were elided, and the tail, cut on rune boundaries.
func (c *capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total <= int64(c.max) {
		return string(c.head) + string(c.tail)
	}
	head, tail := c.head, c.tail
	if len(tail) > c.tailMax() {
		tail = tail[len(tail)-c.tailMax():]
	}
	head = trimPartialRune(head)
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	dropped := c.total - int64(len(head)) - int64(len(tail))
	return fmt.Sprintf("%s\n[... %d bytes elided ...]\n%s", head, dropped, tail)
}

func (c *capture) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b.
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

// counter passes writes on to w, counting them.
type counter struct {
	w io.Writer
	n atomic.Int64
}

func (c *counter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	// A failing writer must not stop the copy, which would leave the
	// command blocked on a full pipe: its errors are ignored.
	_, _ = c.w.Write(p)
	return len(p), nil
}

// output returns where the command's output goes and how to read, once it
// is done, what was kept and how much was written.
func output(spec *Spec, max int) (io.Writer, func() (string, int64)) {
	if spec.Output != nil {
		c := &counter{w: spec.Output}
		return c, func() (string, int64) { return "", c.n.Load() }
	}
	c := newCapture(max)
	return c, func() (string, int64) { return c.String(), c.Total() }
}
