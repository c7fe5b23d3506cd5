package loop_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/loop"
)

// deepSchema is an object schema of levels nested object properties
// ({"properties": {"a": ...}}, two brackets each) around {"type":
// "object"}: its JSON nests 2*levels+1 deep.
func deepSchema(levels int) string {
	return strings.Repeat(`{"type":"object","properties":{"a":`, levels) + `{"type":"object"}` + strings.Repeat(`}}`, levels)
}

// TestSchemaDepthBounded: a tool's input schema and an output schema are
// refused past loop.MaxSchemaDepth levels of JSON nesting, before they
// are decoded. jsonschema-go decodes a schema level by level, each level
// scanning all it holds again, so the work grew with the square of the
// depth: through hrns serve, one 150 KB session request (a schema 4,900
// levels deep, well within encoding/json's 10,000) held a core for
// 28 s, 43 s as an answer_format, and a few at once stalled every other
// key's requests. Counted in brackets, at the bound and one past it.
func TestSchemaDepthBounded(t *testing.T) {
	levels := (loop.MaxSchemaDepth - 1) / 2
	ok, deep := deepSchema(levels), deepSchema(levels+1) // 63 and 65 deep
	if n := strings.Count(ok, "{"); n > loop.MaxSchemaDepth || n+2 <= loop.MaxSchemaDepth {
		t.Fatalf("the schema at the bound nests %d deep", n)
	}
	var ts loop.Toolset
	h := func(context.Context, *loop.Call) (*loop.Output, error) { return &loop.Output{}, nil }
	if err := ts.Add(&loop.ToolDef{Name: "ok", Handler: h, InputSchema: []byte(ok)}); err != nil {
		t.Errorf("a schema %d deep: %v", strings.Count(ok, "{"), err)
	}
	err := ts.Add(&loop.ToolDef{Name: "deep", Handler: h, InputSchema: []byte(deep)})
	if !errors.Is(err, loop.ErrInvalidTool) || !strings.Contains(err.Error(), "nests deeper than") {
		t.Errorf("a schema %d deep: %v, want refused for its depth", strings.Count(deep, "{"), err)
	}
	// Brackets in strings are text, not depth.
	quoted := `{"type":"object","description":"` + strings.Repeat("{[", 200) + `"}`
	if err := ts.Add(&loop.ToolDef{Name: "quoted", Handler: h, InputSchema: []byte(quoted)}); err != nil {
		t.Errorf("a schema whose description holds brackets: %v", err)
	}
	if err := (&loop.OutputSchema{Schema: []byte(ok)}).Check(); err != nil {
		t.Errorf("an output schema %d deep: %v", strings.Count(ok, "{"), err)
	}
	err = (&loop.OutputSchema{Schema: []byte(deep)}).Check()
	if !errors.Is(err, loop.ErrOutputSchema) || !strings.Contains(err.Error(), "nests deeper than") {
		t.Errorf("an output schema %d deep: %v, want refused for its depth", strings.Count(deep, "{"), err)
	}
}
