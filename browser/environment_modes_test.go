package browser_test

import (
	"testing"

	"github.com/hrns-dev/hrns/browser"
)

func TestEnvironmentModes(t *testing.T) {
	for _, tt := range []struct {
		entry      string
		multimodal bool
		text       bool
		chars      int
		err        bool
	}{
		{`{"kind":"web"}`, false, false, 0, false},
		{`{"mode":"multimodal"}`, true, false, 0, false},
		{`{"mode":{"type":"multimodal","width":800,"height":600},"page_chars":300}`, true, false, 300, false},
		{`{"mode":{"type":"visual","markdown":true}}`, true, false, 0, false},
		{`{"mode":{"type":"visual"}}`, false, false, 0, false},
		{`{"mode":"text","page_chars":50}`, false, true, 50, false},
		{`{"mode":"holographic"}`, false, false, 0, true},
		{`{"page_chars":-5}`, false, false, 0, true},
		{`{"page_chars":1000001}`, false, false, 0, true},
	} {
		e, err := browser.ParseEnvironment([]byte(tt.entry))
		if (err != nil) != tt.err {
			t.Errorf("%s: error %v", tt.entry, err)
			continue
		}
		if err != nil {
			continue
		}
		var o browser.Options
		e.Apply(&o)
		if o.Multimodal != tt.multimodal || e.TextOnly() != tt.text || o.PageChars != tt.chars {
			t.Errorf("%s: multimodal %v, text %v, page chars %d", tt.entry, o.Multimodal, e.TextOnly(), o.PageChars)
		}
	}
}
