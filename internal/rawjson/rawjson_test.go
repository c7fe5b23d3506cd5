package rawjson

import (
	"encoding/json"
	"testing"
)

func TestShapes(t *testing.T) {
	for _, tc := range []struct {
		raw   string
		null  bool
		str   string
		isStr bool
	}{
		{raw: "", null: true},
		{raw: " \n\t", null: true},
		{raw: "null", null: true},
		{raw: " null ", null: true},
		{raw: "nul"},
		{raw: `"null"`, str: "null", isStr: true},
		{raw: ` "a\u00e9\n" `, str: "a\u00e9\n", isStr: true},
		{raw: `""`, str: "", isStr: true},
		{raw: `"unterminated`},
		{raw: `"a" "b"`},
		{raw: `1`},
		{raw: `{"a":"b"}`},
		{raw: `["a"]`},
	} {
		if got := IsNull(json.RawMessage(tc.raw)); got != tc.null {
			t.Errorf("IsNull(%q) = %v, want %v", tc.raw, got, tc.null)
		}
		if got, ok := String(json.RawMessage(tc.raw)); got != tc.str || ok != tc.isStr {
			t.Errorf("String(%q) = %q, %v; want %q, %v", tc.raw, got, ok, tc.str, tc.isStr)
		}
	}
}
