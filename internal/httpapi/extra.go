package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// MergeExtra adds the fields of extra (llm.Request.Extra) to the top level
// of body, a JSON object, after its own fields, in the order of the sorted
// names. A field body already has is refused, as is a value that is not
// JSON: extra adds fields and never changes what the provider set. provider
// prefixes the errors.
func MergeExtra(provider string, body []byte, extra map[string]json.RawMessage) ([]byte, error) {
	if len(extra) == 0 {
		return body, nil
	}
	var set map[string]json.RawMessage
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("%s: extra fields: the body is not an object: %w", provider, err)
	}
	end := bytes.LastIndexByte(body, '}')
	if end < 0 {
		return nil, fmt.Errorf("%s: extra fields: the body is not an object", provider)
	}
	out := bytes.NewBuffer(make([]byte, 0, len(body)+64*len(extra)))
	out.Write(body[:end])
	first := len(set) == 0
	for _, name := range slices.Sorted(maps.Keys(extra)) {
		if _, ok := set[name]; ok {
			return nil, fmt.Errorf("%s: extra field %q is set by the provider; extra fields cannot replace it", provider, name)
		}
		var v bytes.Buffer
		if err := json.Compact(&v, extra[name]); err != nil {
			return nil, fmt.Errorf("%s: extra field %q is not JSON: %w", provider, name, err)
		}
		if !first {
			out.WriteByte(',')
		}
		first = false
		k, _ := json.Marshal(name)
		out.Write(k)
		out.WriteByte(':')
		out.Write(v.Bytes())
	}
	out.Write(body[end:])
	return out.Bytes(), nil
}
