package browser

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseKey feeds model-written key names to the parser: it never
// panics, and what it accepts is a key it can dispatch.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"Enter", "a", "Control+a", "Shift+Tab", "F5", "+", "++", "Control++", "F13", "é", "Meta+Alt+ArrowDown", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, mods, err := parseKey(s)
		if err != nil {
			if !strings.Contains(err.Error(), "unknown") {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		if k.key == "" || mods < 0 || mods > 15 || !utf8.ValidString(k.key) && utf8.ValidString(s) {
			t.Fatalf("%q gave %+v %d", s, k, mods)
		}
	})
}

// FuzzParseEnvironment feeds callers' environment entries to the parser.
func FuzzParseEnvironment(f *testing.F) {
	for _, s := range []string{`{"kind":"web"}`, `"web"`, `null`, `{"start_url":"https://a.b/"}`, `{"mode":{"type":"text"}}`,
		`{"mode":{"width":5000,"height":1}}`, `{"start_url":"javascript:x"}`, `{`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseEnvironment(b)
		if err != nil {
			return
		}
		var o Options
		e.Apply(&o)
		if o.ViewportWidth > 4096 || o.ViewportHeight > 4096 || o.ViewportWidth < 0 {
			t.Fatalf("%s gave a viewport of %dx%d", b, o.ViewportWidth, o.ViewportHeight)
		}
		if o.StartURL != "" && !strings.HasPrefix(strings.ToLower(o.StartURL), "http") {
			t.Fatalf("%s gave the start URL %q", b, o.StartURL)
		}
	})
}
