package anthropic

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hrns-dev/hrns/llm"
)

// TestRenderResponseFormat checks the wire form of llm.ResponseFormat: a
// strict format is output_config.format (structured outputs); any other is
// an instruction in the last system block.
func TestRenderResponseFormat(t *testing.T) {
	t.Parallel()
	const closed = `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}`
	const open = `{"type": "object", "properties": {"n": {"type": "integer"}}}`
	const hi = `"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]`
	tests := []struct {
		name   string
		client Client
		f      *llm.ResponseFormat
		want   string
	}{
		{"strict", Client{Model: "m", Cache: &CachePolicy{}},
			&llm.ResponseFormat{Name: "count", Schema: json.RawMessage(closed), Strict: true},
			`{"model":"m","max_tokens":8192,` + hi + `,"output_config":{"format":{"type":"json_schema","schema":` + closed + `}},"stream":true}`},
		{"strict with effort", Client{Model: "m", Cache: &CachePolicy{}, Effort: "low"},
			&llm.ResponseFormat{Name: "count", Schema: json.RawMessage(closed), Strict: true},
			`{"model":"m","max_tokens":8192,` + hi + `,"output_config":{"effort":"low","format":{"type":"json_schema","schema":` + closed + `}},"stream":true}`},
		{"not strict: told in the system prompt, which is cached", Client{Model: "m", Cache: &CachePolicy{System: true}},
			&llm.ResponseFormat{Name: "count", Description: "How many.", Schema: json.RawMessage(open)},
			`{"model":"m","max_tokens":8192,"system":[{"type":"text","text":"Give your final answer as a single JSON value, with no other text, matching this JSON Schema (count): How many.\n` +
				`{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}}}","cache_control":{"type":"ephemeral"}}],` + hi + `,"stream":true}`},
		{"none", Client{Model: "m", Cache: &CachePolicy{}}, nil,
			`{"model":"m","max_tokens":8192,` + hi + `,"stream":true}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := userRequest("hi")
			req.ResponseFormat = tt.f
			got, err := tt.client.marshalRequest(req)
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
		Model: "claude-sonnet-4-5",
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
// non-strict response format, with the default cache policy. Run with
// -update to rewrite them.
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
			checkGolden(t, name, body)
		})
	}
}
