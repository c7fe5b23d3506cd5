package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestMergeExtra(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		extra map[string]json.RawMessage
		want  string // the body, or a substring of the error
		fail  bool
	}{
		{"none", `{"a":1}`, nil, `{"a":1}`, false},
		{"added in name order, compacted", `{"a":1}`, map[string]json.RawMessage{"z": json.RawMessage(" { \"x\" : 1 } "), "b": json.RawMessage(`"<&>"`)}, `{"a":1,"b":"<&>","z":{"x":1}}`, false},
		{"into an empty object", `{}`, map[string]json.RawMessage{"b": json.RawMessage(`true`)}, `{"b":true}`, false},
		{"a field of the body", `{"a":1}`, map[string]json.RawMessage{"a": json.RawMessage(`2`)}, `extra field "a" is set by the provider`, true},
		{"a null value of the body counts", `{"a":null}`, map[string]json.RawMessage{"a": json.RawMessage(`2`)}, `extra field "a"`, true},
		{"not JSON", `{"a":1}`, map[string]json.RawMessage{"b": json.RawMessage(`{`)}, `extra field "b" is not JSON`, true},
		{"empty value", `{"a":1}`, map[string]json.RawMessage{"b": nil}, `extra field "b" is not JSON`, true},
		{"body not an object", `[1]`, map[string]json.RawMessage{"b": json.RawMessage(`1`)}, `not an object`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MergeExtra("p", []byte(tt.body), tt.extra)
			if tt.fail {
				if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "p: ") {
					t.Fatalf("err %v, want %q", err, tt.want)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("got %s, %v; want %s", got, err, tt.want)
			}
		})
	}
}
