package loop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

var update = flag.Bool("update", false, "rewrite golden files")

func noop(context.Context, *loop.Call) (*loop.Output, error) { return loop.TextOutput(""), nil }

func TestToolsetRefusesDuplicates(t *testing.T) {
	ts := loop.MustToolset(&loop.ToolDef{Name: "read", Handler: noop})
	err := ts.Add(&loop.ToolDef{Name: "read", Description: "another", Handler: noop})
	if !errors.Is(err, loop.ErrDuplicateTool) {
		t.Fatalf("Add duplicate: err = %v", err)
	}
	if def, _ := ts.Lookup("read"); def.Description != "" || ts.Len() != 1 {
		t.Errorf("the duplicate replaced the first tool")
	}
	other := loop.MustToolset(&loop.ToolDef{Name: "write", Handler: noop}, &loop.ToolDef{Name: "read", Handler: noop})
	if _, err := loop.Join(ts, other); !errors.Is(err, loop.ErrDuplicateTool) {
		t.Fatalf("Join with a clash: err = %v", err)
	}
	if _, err := loop.NewToolset(&loop.ToolDef{Name: "a", Handler: noop}, &loop.ToolDef{Name: "a", Handler: noop}); !errors.Is(err, loop.ErrDuplicateTool) {
		t.Fatalf("NewToolset with a clash: err = %v", err)
	}
}

func TestToolsetRefusesInvalidTools(t *testing.T) {
	tests := []struct {
		name string
		def  *loop.ToolDef
	}{
		{"empty name", &loop.ToolDef{Handler: noop}},
		{"name with space", &loop.ToolDef{Name: "read file", Handler: noop}},
		{"no handler", &loop.ToolDef{Name: "x"}},
		{"schema not JSON", &loop.ToolDef{Name: "x", Handler: noop, InputSchema: json.RawMessage(`{`)}},
		{"schema not an object", &loop.ToolDef{Name: "x", Handler: noop, InputSchema: json.RawMessage(`{"type":"string"}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := new(loop.Toolset).Add(tt.def); !errors.Is(err, loop.ErrInvalidTool) {
				t.Fatalf("err = %v, want ErrInvalidTool", err)
			}
		})
	}
	if _, err := loop.ToolsetFromMap(map[string]loop.Tool{"x": loop.NewSimpleTool("x", []loop.ToolArgument{{Name: "a", Type: "str"}}, nil)}); !errors.Is(err, loop.ErrInvalidTool) {
		t.Errorf("bad argument type: err = %v", err)
	}
}

func TestToolOrderIsStable(t *testing.T) {
	simple := func() loop.Tool { return loop.NewSimpleTool("d", nil, func(map[string]any) string { return "" }) }
	m := map[string]loop.Tool{"zeta": simple(), "alpha": simple(), "mid": simple()}
	for range 5 {
		ts, err := loop.ToolsetFromMap(m)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"alpha", "mid", "zeta"}, ts.Names()); diff != "" {
			t.Fatalf("map order (-want +got):\n%s", diff)
		}
	}
	a := loop.MustToolset(&loop.ToolDef{Name: "b", Handler: noop}, &loop.ToolDef{Name: "a", Handler: noop})
	b := loop.MustToolset(&loop.ToolDef{Name: "c", Handler: noop})
	j, err := loop.Join(a, b)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range j.Specs() {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{"b", "a", "c"}, names); diff != "" {
		t.Errorf("wiring order (-want +got):\n%s", diff)
	}
}

// Types for the schema golden file: every feature of schema inference.
type searchArgs struct {
	Query   string        `json:"query" jsonschema:"what to search for"`
	Limit   int           `json:"limit,omitempty" jsonschema:"how many results" default:"10"`
	Sort    string        `json:"sort,omitempty" jsonschema:"result order" enum:"relevance,date" default:"relevance"`
	Tags    []string      `json:"tags,omitempty" jsonschema:"only results with these tags" enum:"go,rust,python"`
	Filters *searchFilter `json:"filters,omitempty" jsonschema:"optional filters"`
	Sources []source      `json:"sources" jsonschema:"where to search"`
	Level   int           `json:"level" enum:"1,2,3"`
}

type searchFilter struct {
	After  string `json:"after,omitempty" jsonschema:"ISO date"`
	Author string `json:"author"`
}

type source struct {
	Name   string  `json:"name"`
	Weight float64 `json:"weight,omitempty" default:"1.5"`
}

func TestSchemaInferenceGolden(t *testing.T) {
	tool := loop.NewTool("search", "Searches.", func(context.Context, searchArgs) (string, error) { return "", nil })
	// Indent keeps the bytes' key order: property order is part of what
	// the model sees, and must follow the struct's field order.
	var buf bytes.Buffer
	if err := json.Indent(&buf, tool.InputSchema, "", "  "); err != nil {
		t.Fatal(err)
	}
	got := buf.Bytes()
	golden := filepath.Join("testdata", "search_schema.golden.json")
	if *update {
		if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)+"\n"); diff != "" {
		t.Errorf("schema (-want +got):\n%s", diff)
	}
	// The schema must be usable: the toolset compiles it.
	if _, err := loop.NewToolset(tool); err != nil {
		t.Fatal(err)
	}
}

func TestNewToolPanicsOnUnusableType(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("NewTool with a func-typed field did not panic")
		}
	}()
	loop.NewTool("bad", "", func(context.Context, struct{ F func() }) (string, error) { return "", nil })
}

func TestSimpleToolRefinements(t *testing.T) {
	tool := loop.NewSimpleTool("Reads.", []loop.ToolArgument{
		{Name: "path", Type: "string", Description: "file path"},
		{Name: "mode", Type: "string", Optional: true, Enum: []any{"text", "hex"}},
	}, func(map[string]any) string { return "" })
	def, err := loop.FromTool("read", tool)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"object","properties":{"mode":{"type":"string","enum":["text","hex"]},"path":{"type":"string","description":"file path"}},"required":["path"]}`
	if string(def.InputSchema) != want {
		t.Errorf("got  %s\nwant %s", def.InputSchema, want)
	}
	_ = llm.ToolSpec{}
}
