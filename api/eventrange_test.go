package api

import (
	"strconv"
	"strings"
	"testing"
)

func TestParseEventRange(t *testing.T) {
	for _, tt := range []struct {
		in       string
		from, to int64
		ok       bool
	}{
		{"12-15", 12, 15, true},
		{"0-0", 0, 0, true},
		{"7-7", 7, 7, true},
		{"9223372036854775807-9223372036854775807", 1<<63 - 1, 1<<63 - 1, true},
		{"15-12", 0, 0, false},
		{"-1-3", 0, 0, false},
		{"+1-3", 0, 0, false},
		{"1-+3", 0, 0, false},
		{"1--3", 0, 0, false},
		{"1-3-5", 0, 0, false},
		{"1 - 3", 0, 0, false},
		{"1-", 0, 0, false},
		{"-", 0, 0, false},
		{"", 0, 0, false},
		{"12", 0, 0, false},
		{"0x1-0x2", 0, 0, false},
		{"9223372036854775808-9223372036854775809", 0, 0, false},
		{strings.Repeat("0", 40) + "1-2", 0, 0, false}, // longer than any range written
	} {
		from, to, ok := ParseEventRange(tt.in)
		if from != tt.from || to != tt.to || ok != tt.ok {
			t.Errorf("ParseEventRange(%q) = %d, %d, %v; want %d, %d, %v", tt.in, from, to, ok, tt.from, tt.to, tt.ok)
		}
	}
}

// FuzzParseEventRange: whatever a server sends, a range read is well
// formed and is what FormatEventRange writes for it.
func FuzzParseEventRange(f *testing.F) {
	for _, s := range []string{"12-15", "0-0", "15-12", "-1-3", "1-3-5", "", "9223372036854775807-9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		from, to, ok := ParseEventRange(s)
		if !ok {
			if from != 0 || to != 0 {
				t.Fatalf("ParseEventRange(%q) refused it but returned %d, %d", s, from, to)
			}
			return
		}
		if from < 0 || from > to {
			t.Fatalf("ParseEventRange(%q) = %d, %d", s, from, to)
		}
		a, b, _ := strings.Cut(s, "-")
		if x, _ := strconv.ParseInt(a, 10, 64); x != from {
			t.Fatalf("ParseEventRange(%q): from %d", s, from)
		}
		if y, _ := strconv.ParseInt(b, 10, 64); y != to {
			t.Fatalf("ParseEventRange(%q): to %d", s, to)
		}
		if g, h, ok := ParseEventRange(FormatEventRange(from, to)); !ok || g != from || h != to {
			t.Fatalf("round trip of %d-%d = %d, %d, %v", from, to, g, h, ok)
		}
	})
}
