// Package rawjson reads a few shapes out of an undecoded JSON value: the
// checks validators make on a json.RawMessage before deciding how to
// decode it.
package rawjson

import (
	"bytes"
	"encoding/json"
)

// IsNull reports whether raw is absent (empty or blank) or the JSON null.
func IsNull(raw json.RawMessage) bool {
	s := bytes.TrimSpace(raw)
	return len(s) == 0 || string(s) == "null"
}

// String reports whether raw is a valid JSON string, and returns it
// decoded.
func String(raw json.RawMessage) (string, bool) {
	s := bytes.TrimSpace(raw)
	if len(s) == 0 || s[0] != '"' {
		return "", false
	}
	var out string
	if json.Unmarshal(s, &out) != nil {
		return "", false
	}
	return out, true
}
