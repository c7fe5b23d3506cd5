package openai

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
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

// formatRequest is a tool-calling conversation with a response format.
func formatRequest(strict bool) *llm.Request {
	schema := `{"type":"object","properties":{"city":{"type":"string","description":"the capital"}},"required":["city"],"additionalProperties":false}`
	if !strict {
		schema = `{"type":"object","properties":{"city":{"type":"string"},"note":{"type":"string"}},"required":["city"]}`
	}
	return &llm.Request{
		Model: "gpt-4.1",
		Messages: []llm.Message{
			SystemMessage("You answer in JSON."),
			UserMessage("Capital of France?"),
			AssistantMessage("France"),
			UserMessage("Your final answer was rejected: the answer is not valid JSON. Answer again with only a JSON value."),
		},
		Tools:          []llm.ToolSpec{{Name: "lookup", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)}},
		ResponseFormat: &llm.ResponseFormat{Name: "capital", Description: "The capital city.", Schema: json.RawMessage(schema), Strict: strict},
	}
}

// TestResponseFormatGolden pins the bodies of requests with a strict and a
// non-strict response format. Run with -update to rewrite them.
func TestResponseFormatGolden(t *testing.T) {
	for _, strict := range []bool{true, false} {
		name := "format_strict.request.json"
		if !strict {
			name = "format_open.request.json"
		}
		t.Run(name, func(t *testing.T) {
			c := Client{}
			body, err := c.marshalRequest(formatRequest(strict))
			if err != nil {
				t.Fatal(err)
			}
			checkBodyGolden(t, name, body)
		})
	}
}

// checkBodyGolden compares a request body, indented, with testdata/name;
// with -update it rewrites the file first.
func checkBodyGolden(t *testing.T, name string, raw []byte) {
	t.Helper()
	var got bytes.Buffer
	if err := json.Indent(&got, raw, "", "  "); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, raw)
	}
	got.WriteByte('\n')
	golden := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got.String()); diff != "" {
		t.Errorf("request body differs from %s (-want +got):\n%s", golden, diff)
	}
}
