package tools

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestHeadTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, max := range []int{1, 2, 10, 101} {
		for _, size := range []int{0, 1, 5, 10, 11, 100, 1000, 5000} {
			data := make([]byte, size)
			for i := range data {
				data[i] = byte('a' + rng.IntN(26))
			}
			w := newHeadTail(max)
			for rest := data; len(rest) > 0; {
				k := min(len(rest), 1+rng.IntN(40))
				w.Write(rest[:k])
				rest = rest[k:]
			}
			want := string(data)
			if size > max {
				head, tail := max/2, max-max/2
				want = fmt.Sprintf("%s\n\n[... %d bytes of output omitted ...]\n\n%s", data[:head], size-max, data[size-tail:])
			}
			if got := w.String(); got != want {
				t.Errorf("max %d size %d: got %q, want %q", max, size, got, want)
			}
		}
	}
	// Runes are not split at the cut.
	w := newHeadTail(7)
	w.Write([]byte(strings.Repeat("é", 10)))
	if got := w.String(); got != "é\n\n[... 14 bytes of output omitted ...]\n\néé" {
		t.Errorf("got %q", got)
	}
}
