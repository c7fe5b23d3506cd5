package gemini

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

// multiTurnRequest is a conversation with every kind of part: system
// messages in two places, media, thoughts and signatures on text and on
// calls, calls with and without API ids, results with errors and media, and
// a user message after the results (merged into the same user turn).
func multiTurnRequest() *llm.Request {
	return &llm.Request{
		Model: "gemini-3-pro-preview",
		Messages: []llm.Message{
			llm.SystemMessage("You are terse."),
			{Role: llm.RoleUser, Parts: []llm.Part{
				llm.TextPart("What is in these?"),
				llm.ImagePart("image/png", []byte("\x89PNG")),
				llm.ImagePart("", []byte("GIF89a")),
				{Kind: llm.PartImage, Media: &llm.Media{MIMEType: "image/jpeg", URL: "https://example.com/a.jpg"}},
				llm.DocumentPart("application/pdf", "report.pdf", []byte("%PDF-1.7")),
			}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{
				reasoningPart("Look at both files.", ""),
				llm.TextPart("Let me look."),
				callPart("gemini_call_r1_0", "read", ` {"path":"a.txt"} `, "c2lnLWE="),
				callPart("fc-2", "read", `{"path": "b.txt"`, ""),
			}},
			{Role: llm.RoleTool, Parts: []llm.Part{
				{Kind: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "gemini_call_r1_0", Content: []llm.Part{llm.TextPart("contents of a")}}},
				{Kind: llm.PartToolResult, ToolResult: &llm.ToolResult{CallID: "fc-2", Name: "read", IsError: true, Content: []llm.Part{
					llm.TextPart("here is the chart"), llm.ImagePart("image/gif", []byte("GIF89a")),
				}}},
			}},
			llm.SystemMessage("Be brief in the answer."),
			llm.UserMessage("Also: summarise."),
			{Role: llm.RoleAssistant, Parts: []llm.Part{
				llm.TextPart("Done <3"), reasoningPart("", "dGV4dC1zaWc="),
			}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{reasoningPart("", "b25seS1zaWc=")}},
			{Role: llm.RoleAssistant, Parts: []llm.Part{{Kind: llm.PartReasoning, Reasoning: &llm.Reasoning{Redacted: "enc"}}}},
			llm.UserMessage("Thanks & bye"),
		},
	}
}

func TestMultiTurnGolden(t *testing.T) {
	body, err := (&Client{}).marshalRequest(multiTurnRequest())
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "multiturn.request.json", body)
}

// toolSchemas are the schemas the tools golden renders: what loop infers
// from Go types, and JSON Schema features the subset lacks.
var toolSchemas = []llm.ToolSpec{
	{Name: "read_file", Description: "Read a file.", InputSchema: json.RawMessage(`{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"type": "object",
		"properties": {
			"path": {"type": "string", "description": "Where."},
			"offset": {"type": "integer", "minimum": 0, "default": 0, "format": "int64"},
			"limit": {"type": ["integer", "null"], "exclusiveMinimum": 0}
		},
		"required": ["path", "missing"],
		"additionalProperties": false
	}`)},
	{Name: "no_args", Description: "Takes nothing.", InputSchema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)},
	{Name: "no_schema"},
	{Name: "shapes", InputSchema: json.RawMessage(`{
		"type": "object",
		"$defs": {
			"point": {"type": "object", "properties": {"x": {"type": "number", "format": "double"}, "y": {"type": "number"}}, "required": ["x", "y"]},
			"tree": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/tree"}}}}
		},
		"properties": {
			"kind": {"const": "circle"},
			"mode": {"enum": ["fast", "slow", null]},
			"level": {"type": "integer", "enum": [1, 2, 3], "description": "How hard."},
			"center": {"$ref": "#/$defs/point", "description": "The middle."},
			"tree": {"$ref": "#/$defs/tree"},
			"label": {"anyOf": [{"type": "string", "maxLength": 20, "format": "email"}, {"type": "null"}]},
			"size": {"oneOf": [{"type": "number"}, {"type": "string", "pattern": "^[0-9]+px$"}]},
			"when": {"type": "string", "format": "date-time"},
			"tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 5, "uniqueItems": true},
			"meta": {"type": "object", "additionalProperties": {"type": "string"}},
			"both": {"allOf": [{"$ref": "#/$defs/point"}, {"type": "object", "properties": {"z": {"type": "number"}}, "required": ["z"]}]},
			"any": {},
			"multi": {"type": ["string", "number", "null"], "description": "Either."}
		}
	}`)},
}

func TestToolsGolden(t *testing.T) {
	req := &llm.Request{
		Model:      "gemini-2.5-flash",
		Messages:   []llm.Message{llm.UserMessage("go")},
		Tools:      toolSchemas,
		ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "read_file"},
	}
	body, err := (&Client{}).marshalRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "tools.request.json", body)
}

func TestToolChoice(t *testing.T) {
	tools := []llm.ToolSpec{{Name: "f"}}
	for _, tt := range []struct {
		choice llm.ToolChoice
		want   string // the toolConfig, or "" for none
	}{
		{llm.ToolChoice{}, ""},
		{llm.ToolChoice{Mode: llm.ToolChoiceNone}, `{"functionCallingConfig":{"mode":"NONE"}}`},
		{llm.ToolChoice{Mode: llm.ToolChoiceRequired}, `{"functionCallingConfig":{"mode":"ANY"}}`},
		{llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "f"}, `{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["f"]}}`},
	} {
		body, err := (&Client{}).marshalRequest(&llm.Request{Messages: []llm.Message{llm.UserMessage("x")}, Tools: tools, ToolChoice: tt.choice})
		if err != nil {
			t.Fatal(err)
		}
		var got struct{ ToolConfig json.RawMessage }
		json.Unmarshal(body, &got)
		if string(got.ToolConfig) != tt.want {
			t.Errorf("%+v: toolConfig %s, want %s", tt.choice, got.ToolConfig, tt.want)
		}
	}
	// No tools, no tool config.
	body, _ := (&Client{}).marshalRequest(&llm.Request{Messages: []llm.Message{llm.UserMessage("x")}, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceNone}})
	if strings.Contains(string(body), "toolConfig") {
		t.Errorf("tool config without tools: %s", body)
	}
}

func TestRequestErrors(t *testing.T) {
	deep := strings.Repeat(`{"type":"array","items":`, 40) + `{"type":"string"}` + strings.Repeat("}", 40)
	tests := []struct {
		name    string
		req     *llm.Request
		model   string
		errText string
		is      error
	}{
		{"nil", nil, "m", "nil request", nil},
		{"no model", userRequest("x"), "", "no model", nil},
		{"bad model", userRequest("x"), "../x", "invalid model name", nil},
		{"model with a colon", userRequest("x"), "a:b", "invalid model name", nil},
		{"negative max tokens", &llm.Request{MaxTokens: -1}, "m", "negative MaxTokens", nil},
		{"negative budget", &llm.Request{Reasoning: &llm.ReasoningConfig{BudgetTokens: -5}}, "m", "negative reasoning budget", nil},
		{"unknown role", &llm.Request{Messages: []llm.Message{{Role: "robot"}}}, "m", `unknown role "robot"`, nil},
		{"image in system", &llm.Request{Messages: []llm.Message{{Role: llm.RoleSystem, Parts: []llm.Part{llm.ImagePart("image/png", []byte("x"))}}}}, "m", "system messages", llm.ErrUnsupported},
		{"tool call in user", &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{callPart("a", "b", "{}", "")}}}}, "m", "user messages", llm.ErrUnsupported},
		{"media without data", &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartImage, Media: &llm.Media{}}}}}}, "m", "neither data nor URL", nil},
		{"result of an unknown call", &llm.Request{Messages: []llm.Message{llm.ToolResultMessage("nope", "x")}}, "m", "answers no call", nil},
		{"text in a tool message", &llm.Request{Messages: []llm.Message{{Role: llm.RoleTool, Parts: []llm.Part{llm.TextPart("x")}}}}, "m", "tool results only", nil},
		{"tool without a name", &llm.Request{Tools: []llm.ToolSpec{{}}}, "m", "has no name", nil},
		{"invalid schema", &llm.Request{Tools: []llm.ToolSpec{{Name: "f", InputSchema: json.RawMessage(`{`)}}}, "m", "not valid JSON", nil},
		{"schema not an object", &llm.Request{Tools: []llm.ToolSpec{{Name: "f", InputSchema: json.RawMessage(`[1]`)}}}, "m", "not a JSON object", nil},
		{"deep schema", &llm.Request{Tools: []llm.ToolSpec{{Name: "f", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":` + deep + `}}`)}}}, "m", "too deep", nil},
		{"remote ref", &llm.Request{Tools: []llm.ToolSpec{{Name: "f", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"https://x/y"}}}`)}}}, "m", "only references", nil},
		{"bad type", &llm.Request{Tools: []llm.ToolSpec{{Name: "f", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":3}}}`)}}}, "m", "neither a string", nil},
		{"tool choice without name", &llm.Request{Tools: []llm.ToolSpec{{Name: "f"}}, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceTool}}, "m", "without a tool name", nil},
		{"unknown tool choice", &llm.Request{Tools: []llm.ToolSpec{{Name: "f"}}, ToolChoice: llm.ToolChoice{Mode: "maybe"}}, "m", "unknown tool choice", nil},
		{"bad response schema", &llm.Request{ResponseFormat: &llm.ResponseFormat{Schema: json.RawMessage(`nope`)}}, "m", "not valid JSON", nil},
		{"extra overriding", &llm.Request{Messages: []llm.Message{llm.UserMessage("x")}, Extra: map[string]json.RawMessage{"contents": json.RawMessage(`[]`)}}, "m", "set by the provider", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &Client{Model: tt.model}
			_, err := collect(c.Stream(t.Context(), tt.req))
			if err == nil || !strings.Contains(err.Error(), tt.errText) || !strings.HasPrefix(err.Error(), "gemini: ") {
				t.Fatalf("err = %v, want %q", err, tt.errText)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("err = %v, want %v", err, tt.is)
			}
		})
	}
}

// TestSchemaNodesBounded checks that $ref inlining cannot blow a small
// schema up: each definition refers to the next twice.
func TestSchemaNodesBounded(t *testing.T) {
	var defs []string
	for i := range 30 {
		defs = append(defs, `"d`+string(rune('a'+i%26))+string(rune('a'+i/26))+`":{"type":"object","properties":{"l":{"$ref":"#/$defs/d`+string(rune('a'+(i+1)%26))+string(rune('a'+(i+1)/26))+`"},"r":{"$ref":"#/$defs/d`+string(rune('a'+(i+1)%26))+string(rune('a'+(i+1)/26))+`"}}}`)
	}
	schema := `{"type":"object","$defs":{` + strings.Join(defs, ",") + `},"properties":{"root":{"$ref":"#/$defs/daa"}}}`
	_, err := renderSchema(json.RawMessage(schema))
	if !errors.Is(err, errSchemaTooLarge) {
		t.Fatalf("err = %v", err)
	}
}
