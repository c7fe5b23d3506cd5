package client

import (
	"net/http"
	"testing"
)

// TestSkipOwn: the cursor moves past a post's own events only when the
// server's range starts at the cursor and is no longer than the results
// could append; anything else (another server, a malformed or hostile
// header) leaves it where it was, and the log is read on from there.
func TestSkipOwn(t *testing.T) {
	for _, tt := range []struct {
		header string
		cursor int64
		n      int
		want   int64
	}{
		{"6-8", 6, 1, 8},
		{"6-6", 6, 1, 6},   // a post again: nothing appended
		{"7-9", 6, 1, 6},   // something came in between
		{"5-8", 6, 1, 6},   // not from here
		{"6-19", 6, 1, 6},  // longer than one result appends
		{"6-38", 6, 7, 38}, // seven results
		{"", 6, 1, 6},      // a server without the addition
		{"6-", 6, 1, 6},
		{"8-6", 6, 1, 6},
		{"6-9223372036854775807", 6, 1, 6},
	} {
		h := http.Header{}
		if tt.header != "" {
			h.Set("Hrns-Events", tt.header)
		}
		if got := skipOwn(h, tt.cursor, tt.n); got != tt.want {
			t.Errorf("skipOwn(%q, %d, %d) = %d, want %d", tt.header, tt.cursor, tt.n, got, tt.want)
		}
	}
	if got := skipOwn(nil, 6, 1); got != 6 {
		t.Errorf("skipOwn(nil header) = %d, want 6", got)
	}
}
