package cli

import (
	"os"
	"testing"
)

// newPipe returns a pipe whose reader blocks until the test ends.
func newPipe(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(); r.Close() })
	return r, w
}
