package prefixcache

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// encodingJSONString is s as encoding/json encodes it with HTML escaping
// off: what AppendString must give.
func encodingJSONString(t testing.TB, s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// appendStringSeeds are strings with every kind of byte AppendString
// treats apart, at every place in and across its eight-byte words.
var appendStringSeeds = []string{
	"", "a", "hello, world", `"quoted"`, `back\slash`, "<b>&amp;</b>", "é漢🙂",
	"\xff\xfe", "\n\t\r\b\f\x00\x01\x1f\x7f", "\u2028\u2029", "\xe2\x80", "\xed\xa0\x80",
	strings.Repeat("x", 7) + "\"" + strings.Repeat("y", 9),
	strings.Repeat("abcdefgh", 9) + "\n" + strings.Repeat("é", 5) + strings.Repeat("z", 15),
	strings.Repeat("0123456789", 100) + "\u2028",
}

// TestAppendStringMatchesEncodingJSON checks AppendString against
// encoding/json on the seeds, each at every offset of a longer string, and
// that it appends after what dst holds.
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, seed := range appendStringSeeds {
		for pad := range 9 {
			s := strings.Repeat("p", pad) + seed + strings.Repeat("q", pad)
			got := AppendString([]byte("head"), s)
			if want := "head" + encodingJSONString(t, s); string(got) != want {
				t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
			}
		}
	}
	for b := range 256 {
		s := "abcdefg" + string([]byte{byte(b)}) + "hijklmnop"
		if got, want := string(AppendString(nil, s)), encodingJSONString(t, s); got != want {
			t.Fatalf("byte %#x: AppendString = %s, want %s", b, got, want)
		}
	}
}

// FuzzAppendString holds AppendString to encoding/json's encoding of any
// string.
func FuzzAppendString(f *testing.F) {
	for _, s := range appendStringSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(AppendString(nil, s)), encodingJSONString(t, s); got != want {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
	})
}
