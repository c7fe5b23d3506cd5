package server

import (
	"regexp"
	"testing"
)

// uuidRE is the language validUUID checks, as the regular expression the
// server once matched every request's path with.
var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$`)

var uuidCases = []struct {
	in   string
	want bool
}{
	{"0b6c1e3e-5d7a-4f7e-9a51-2f8f3c1d9e47", true},
	{"0B6C1E3E-5D7A-4F7E-9A51-2F8F3C1D9E47", true},
	{"0b6c1e3e5d7a4f7e9a512f8f3c1d9e47", true},
	{"0b6c1e3e-5d7a4f7e-9a512f8f3c1d9e47", true},
	{"0b6c1e3e5d7a-4f7e9a51-2f8f3c1d9e47", true},
	{"", false},
	{"-", false},
	{"0b6c1e3e-5d7a-4f7e-9a51-2f8f3c1d9e4", false},    // 31 digits
	{"0b6c1e3e-5d7a-4f7e-9a51-2f8f3c1d9e477", false},  // 33 digits
	{"0b6c1e3e--5d7a-4f7e-9a51-2f8f3c1d9e47", false},  // two hyphens
	{"-0b6c1e3e-5d7a-4f7e-9a51-2f8f3c1d9e47", false},  // leading hyphen
	{"0b6c1e3e-5d7a-4f7e-9a51-2f8f3c1d9e47-", false},  // trailing hyphen
	{"0b6c1e3-e5d7a-4f7e-9a51-2f8f3c1d9e47", false},   // hyphen misplaced
	{"0b6c1e3e-5d7a-4f7e-9a51-2f8f3c1d9e4g", false},   // not hex
	{"0b6c1e3e-5d7a-4f7e-9a51-2f8f3c1d9e47\n", false}, // $ is the text's end
	{"{0b6c1e3e-5d7a-4f7e-9a51-2f8f3c1d9e47}", false},
	{"0b6c1e3e 5d7a 4f7e 9a51 2f8f3c1d9e47", false},
	{"0b6c1e3e-5d7a-4f7e-9a51-2f8f3c1d9é47", false},
	{"0b6c1e3e-5d7a-4f7e-9a51-2f8f3c1d9e47\x00", false},
}

func TestValidUUID(t *testing.T) {
	for _, c := range uuidCases {
		if got := validUUID(c.in); got != c.want {
			t.Errorf("validUUID(%q) = %v, want %v", c.in, got, c.want)
		}
		if got := uuidRE.MatchString(c.in); got != c.want {
			t.Errorf("the regular expression on %q: %v, want %v (a wrong case)", c.in, got, c.want)
		}
	}
}

// FuzzValidUUID checks that validUUID takes exactly the regular
// expression's language.
func FuzzValidUUID(f *testing.F) {
	for _, c := range uuidCases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validUUID(s), uuidRE.MatchString(s); got != want {
			t.Fatalf("validUUID(%q) = %v, the regular expression %v", s, got, want)
		}
	})
}
