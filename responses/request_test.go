package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// golden compares got, indented, with testdata/name, or rewrites the file
// with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, got, "", "  "); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, got)
	}
	buf.WriteByte('\n')
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), buf.String()); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
}

// fullRequest uses every feature the client renders.
func fullRequest() *llm.Request {
	temp := 0.2
	parallel := false
	return &llm.Request{
		Model: "gpt-5",
		Messages: []llm.Message{
			llm.SystemMessage("You are terse."),
			{Role: llm.RoleUser, Parts: []llm.Part{
				llm.TextPart("What is in these?"),
				llm.ImagePart("image/png", []byte("\x89PNG")),
				{Kind: llm.PartImage, Media: &llm.Media{URL: "https://example.com/a.jpg"}},
				llm.DocumentPart("application/pdf", "report.pdf", []byte("%PDF-1.7")),
				{Kind: llm.PartDocument, Media: &llm.Media{MIMEType: "application/pdf", URL: "https://example.com/b.pdf"}},
			}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{
				{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{Text: "Look at both.", Redacted: "gAAAAenc1"}},
				{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{Text: "thinking from another provider", Signature: "sig"}},
				llm.TextPart("Let me look."),
				{Kind: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "call_1", Name: "read", Arguments: llm.Arguments(` {"path":"a.txt"} `)}},
				{Kind: llm.PartToolCall, ToolCall: &llm.ToolCall{ID: "call_2", Name: "read", Arguments: llm.Arguments(`{"path": "b.txt"`)}},
			}},
			{Role: llm.RoleTool, Parts: []llm.Part{
				{Kind: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "call_1", Name: "read", Content: []llm.Part{llm.TextPart("contents of a")}}},
				{Kind: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "call_2", Name: "read", IsError: true, Content: []llm.Part{
					llm.TextPart("here is the chart"), llm.ImagePart("image/gif", []byte("GIF89a")),
				}}},
			}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{llm.TextPart("Done.")}},
			llm.UserMessage("Thanks <3 & bye"),
		},
		Tools: []llm.ToolSpec{
			{Name: "read", Description: "Read a file.", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)},
			{Name: "noargs"},
		},
		ToolChoice:        llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "read"},
		MaxTokens:         1000,
		Temperature:       &temp,
		ParallelToolCalls: &parallel,
	}
}

func TestRequestGolden(t *testing.T) {
	c := &Client{Model: "default", Reasoning: &Reasoning{Effort: "low", Summary: "auto"}}
	body, err := c.marshalRequest(fullRequest())
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "full.request.json", body)

	// The smallest request: the client's model, nothing optional.
	body, err = (&Client{Model: "gpt-5-mini"}).marshalRequest(userRequest("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"model":"gpt-5-mini","input":[{"type":"message","role":"user","content":"hi"}],"include":["reasoning.encrypted_content"],"store":false,"stream":true}`; string(body) != want {
		t.Errorf("body = %s\nwant %s", body, want)
	}
	body, err = (&Client{Model: "m", Store: true, EncryptedReasoning: EncryptedReasoningNever}).marshalRequest(userRequest("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"model":"m","input":[{"type":"message","role":"user","content":"hi"}],"store":true,"stream":true}`; string(body) != want {
		t.Errorf("body = %s\nwant %s", body, want)
	}
}

// Strict mode: schemas in the supported subset are strict (with
// additionalProperties added where missing); others go non-strict as they
// are.
func TestStrictGolden(t *testing.T) {
	schemas := []struct{ name, schema string }{
		{"all_required", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["a","b"]}`},
		{"already_strict", `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`},
		{"nested", `{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"x":{"type":["number","null"]}},"required":["x"]}},"choice":{"anyOf":[{"type":"string"},{"type":"object","properties":{"y":{"type":"boolean"}},"required":["y"]}]}},"required":["items","choice"]}`},
		{"defs", `{"type":"object","properties":{"n":{"$ref":"#/$defs/node"}},"required":["n"],"$defs":{"node":{"type":"object","properties":{"v":{"type":"string"}},"required":["v"]}}}`},
		{"empty_object", `{"type":"object","properties":{}}`},
		{"optional_property", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"]}`},
		{"nested_optional", `{"type":"object","properties":{"o":{"type":"object","properties":{"x":{"type":"string"}}}},"required":["o"]}`},
		{"open_object", `{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"string"}}},"required":["m"]}`},
		{"additional_true", `{"type":"object","properties":{},"additionalProperties":true}`},
		{"one_of", `{"type":"object","properties":{"a":{"oneOf":[{"type":"string"},{"type":"number"}]}},"required":["a"]}`},
		{"all_of", `{"type":"object","allOf":[{"properties":{"a":{"type":"string"}}}]}`},
		{"root_any_of", `{"anyOf":[{"type":"object"}]}`},
		{"not_object", `{"type":"string"}`},
		{"missing_schema", ``},
		{"numbers_and_text_kept", `{"type":"object","properties":{"n":{"type":"integer","maximum":9007199254740993,"description":"<a> & b"}},"required":["n"]}`},
	}
	var specs []llm.ToolSpec
	for _, s := range schemas {
		specs = append(specs, llm.ToolSpec{Name: s.name, InputSchema: json.RawMessage(s.schema)})
	}
	tools, err := renderTools(specs, true, "gpt-5")
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(tools)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "strict.tools.json", body)

	// NoStrict: nothing strict, schemas as given.
	tools, err = renderTools(specs[:1], false, "gpt-5")
	if err != nil {
		t.Fatal(err)
	}
	if *tools[0].Strict || string(tools[0].Parameters) != schemas[0].schema {
		t.Errorf("NoStrict rendered %+v", tools[0])
	}
}

// Deep nesting beyond the strict limit goes non-strict.
func TestStrictDepth(t *testing.T) {
	schema := `{"type":"string"}`
	for range 11 {
		schema = `{"type":"object","properties":{"x":` + schema + `},"required":["x"]}`
	}
	if _, ok := strictSchema(json.RawMessage(schema)); ok {
		t.Error("11 nested objects made strict")
	}
}

func TestRequestErrors(t *testing.T) {
	c := &Client{Model: "m"}
	tests := []struct {
		name        string
		req         *llm.Request
		unsupported bool
	}{
		{"nil", nil, false},
		{"no model", &llm.Request{}, false},
		{"stop sequences", &llm.Request{StopSequences: []string{"\n"}, Messages: userRequest("x").Messages}, true},
		{"image in system", &llm.Request{Messages: []llm.Message{{Role: llm.RoleSystem, Parts: []llm.Part{llm.ImagePart("image/png", []byte("x"))}}}}, true},
		{"tool call in user", &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartToolCall, ToolCall: &llm.ToolCall{}}}}}}, true},
		{"unknown role", &llm.Request{Messages: []llm.Message{{Role: "robot"}}}, false},
		{"bad schema", &llm.Request{Tools: []llm.ToolSpec{{Name: "f", InputSchema: json.RawMessage(`{`)}}}, false},
		{"negative max tokens", &llm.Request{MaxTokens: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := c
			if tt.name == "no model" {
				cl = &Client{}
			}
			_, err := llm.Collect(cl.Stream(t.Context(), tt.req))
			if err == nil {
				t.Fatal("no error")
			}
			if errors.Is(err, llm.ErrUnsupported) != tt.unsupported {
				t.Errorf("err = %v, unsupported %v", err, !tt.unsupported)
			}
			if !strings.HasPrefix(err.Error(), "openai-responses: ") {
				t.Errorf("err = %q", err)
			}
		})
	}
}

// Encrypted reasoning is asked for except from model families that do not
// reason, which refuse it.
func TestEncryptedReasoningModes(t *testing.T) {
	tests := []struct {
		client Client
		model  string
		want   bool
	}{
		{Client{}, "gpt-5", true},
		{Client{}, "o4-mini", true},
		{Client{}, "gpt-5-codex", true},
		{Client{}, "some-future-model", true},
		{Client{}, "gpt-4.1", false},
		{Client{}, "gpt-4o-mini", false},
		{Client{}, "GPT-4o", false},
		{Client{}, "openai/gpt-4.1", false},
		{Client{}, "chatgpt-4o-latest", false},
		{Client{}, "gpt-5-chat-latest", false},
		{Client{Reasoning: &Reasoning{Effort: "low"}}, "gpt-4.1", true},
		{Client{EncryptedReasoning: EncryptedReasoningAlways}, "gpt-4o", true},
		{Client{EncryptedReasoning: EncryptedReasoningNever}, "gpt-5", false},
	}
	for _, tt := range tests {
		c := tt.client
		c.Model = tt.model
		body, err := c.marshalRequest(userRequest("hi"))
		if err != nil {
			t.Fatal(err)
		}
		if got := bytes.Contains(body, []byte(`"include":["reasoning.encrypted_content"]`)); got != tt.want {
			t.Errorf("%+v, model %s: include = %v", tt.client, tt.model, got)
		}
	}
	c := Client{Model: "m", EncryptedReasoning: "sometimes"}
	if _, err := c.marshalRequest(userRequest("hi")); err == nil {
		t.Error("an unknown mode was accepted")
	}
}
