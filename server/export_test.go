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

// SetBodyReadTimeout sets the time a client has to send each MiB begun
// of a request's body, until t ends.
func SetBodyReadTimeout(t testing.TB, d time.Duration) {
	old := bodyReadTimeout
	bodyReadTimeout = d
	t.Cleanup(func() { bodyReadTimeout = old })
}
