package server

import (
	"testing"
	"time"
)

// SetPageWriteTimeout sets the time a client has to take a piece of a
// page of events, or a turn of an event stream, until t ends.
func SetPageWriteTimeout(t testing.TB, d time.Duration) {
	old := pageWriteTimeout
	pageWriteTimeout = d
	t.Cleanup(func() { pageWriteTimeout = old })
}
