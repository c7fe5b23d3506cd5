package openai

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hrns-dev/hrns/llm"
)

// TestRenderResponseFormat checks the wire form of llm.ResponseFormat:
// response_format json_schema, strict as the request says.
func TestRenderResponseFormat(t *testing.T) {
	t.Parallel()
	const closed = `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}`
	const open = `{"type":"object","properties":{"n":{"type":"integer"}}}`
	const head = `{"model":"m","messages":[{"role":"user","content":"hi"}],`
	const stream = `"stream":true,"stream_options":{"include_usage":true}}`
	tests := []struct {
		name string
		f    *llm.ResponseFormat
		want string
	}{
		{"strict", &llm.ResponseFormat{Name: "count", Schema: json.RawMessage(closed), Strict: true},
			head + `"response_format":{"type":"json_schema","json_schema":{"name":"count","schema":` + closed + `,"strict":true}},` + stream},
		{"not strict, with a description", &llm.ResponseFormat{Name: "count", Description: "How many.", Schema: json.RawMessage(open)},
			head + `"response_format":{"type":"json_schema","json_schema":{"name":"count","description":"How many.","schema":` + open + `,"strict":false}},` + stream},
		{"no name", &llm.ResponseFormat{Schema: json.RawMessage(`{"type":"string"}`)},
			head + `"response_format":{"type":"json_schema","json_schema":{"name":"final_answer","schema":{"type":"string"},"strict":false}},` + stream},
		{"none", nil, head + stream},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := Client{Model: "m"}
			req := userRequest("hi")
			req.ResponseFormat = tt.f
			got, err := c.marshalRequest(req)
			if err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			if err := json.Compact(&want, []byte(tt.want)); err != nil {
				t.Fatalf("bad want: %v", err)
			}
			if diff := cmp.Diff(want.String(), string(got)); diff != "" {
				t.Errorf("body mismatch (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("schema not JSON", func(t *testing.T) {
		c := Client{Model: "m"}
		req := userRequest("hi")
		req.ResponseFormat = &llm.ResponseFormat{Schema: json.RawMessage(`{`)}
		if _, err := c.marshalRequest(req); err == nil {
			t.Fatal("no error")
		}
	})
}
