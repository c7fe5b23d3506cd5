package anthropic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hrns-dev/hrns/anthropic"
	"github.com/hrns-dev/hrns/anthropic/anthropictest"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// updating reports whether the -update flag, which request_test.go defines
// in the same test binary, asks to rewrite golden files.
func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// Argument types of the typed tools: descriptions, optional fields, enums
// on strings, integers and list items, defaults, a nullable nested object,
// a list of objects and a map.
type searchArgs struct {
	Query   string         `json:"query" jsonschema:"what to search for"`
	Limit   int            `json:"limit,omitempty" jsonschema:"how many results" default:"10"`
	Sort    string         `json:"sort,omitempty" jsonschema:"result order" enum:"relevance,date" default:"relevance"`
	Tags    []string       `json:"tags,omitempty" jsonschema:"only results with these tags" enum:"go,rust,python"`
	Filters *searchFilter  `json:"filters,omitempty" jsonschema:"optional filters"`
	Sources []searchSource `json:"sources" jsonschema:"where to search"`
	Level   int            `json:"level" enum:"1,2,3"`
}

type searchFilter struct {
	After  string `json:"after,omitempty" jsonschema:"ISO date"`
	Author string `json:"author"`
}

type searchSource struct {
	Name   string  `json:"name"`
	Weight float64 `json:"weight,omitempty" default:"1.5"`
}

type writeArgs struct {
	Path      string            `json:"path" jsonschema:"file to write, relative to the workspace"`
	Content   string            `json:"content" jsonschema:"the whole new content"`
	Mode      string            `json:"mode,omitempty" jsonschema:"how to write" enum:"create,overwrite,append" default:"create"`
	Sync      bool              `json:"sync,omitempty" jsonschema:"fsync after writing"`
	Metadata  map[string]string `json:"metadata,omitempty" jsonschema:"extended attributes"`
	LineRange []int             `json:"line_range,omitempty" jsonschema:"first and last line to replace"`
}

// renderingToolset is the set of tools whose rendering the goldens pin, built
// the four ways an application builds tools.
func renderingToolset(t *testing.T) *loop.Toolset {
	t.Helper()
	search := loop.NewTool("search", "Searches the knowledge base.", func(context.Context, searchArgs) ([]string, error) {
		return nil, nil
	})
	write := loop.NewTool("write_file", "Writes a file. Fails if it exists, unless mode says otherwise.", func(context.Context, writeArgs) (string, error) {
		return "", nil
	})
	seed, err := loop.FromTool("lookup_project", loop.NewSimpleTool(
		"Looks up a project name",
		[]loop.ToolArgument{
			{Name: "id", Type: "string"},
			{Name: "kind", Type: "string", Description: "what the id names", Enum: []any{"repo", "team"}},
			{Name: "verbose", Type: "boolean", Optional: true},
			{Name: "fields", Type: "array", Optional: true, Description: "fields to return"},
			{Name: "depth", Type: "integer", Optional: true},
		},
		func(map[string]any) string { return "" },
	))
	if err != nil {
		t.Fatal(err)
	}
	raw := &loop.ToolDef{
		Name:        "calc",
		Description: "Evaluates an expression: a < b && c > d — with unicode, é.",
		InputSchema: json.RawMessage(`{
			"type": "object",
			"properties": {
				"expr": {"type": "string", "description": "the expression", "minLength": 1},
				"precision": {"type": "integer", "minimum": 0, "maximum": 20, "default": 6},
				"vars": {"type": "object", "additionalProperties": {"type": "number"}},
				"format": {"anyOf": [{"type": "string", "enum": ["plain", "latex"]}, {"type": "null"}]}
			},
			"required": ["expr"],
			"additionalProperties": false
		}`),
		Handler: func(context.Context, *loop.Call) (*loop.Output, error) { return loop.TextOutput(""), nil },
	}
	noArgs := &loop.ToolDef{
		Name:        "get_time",
		Description: "Returns the current time.",
		Handler:     func(context.Context, *loop.Call) (*loop.Output, error) { return loop.TextOutput(""), nil },
	}
	ts, err := loop.NewToolset(search, write, seed, raw, noArgs)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// The wire formats one tool spec is rendered to. Each renders a request
// offering specs and returns the "tools" array of the body sent.
var wireFormats = []struct {
	name   string
	golden string
	render func(t *testing.T, specs []llm.ToolSpec) json.RawMessage
	// schema returns the name, description and input schema of each tool
	// of a tools array, for the cross-format check.
	schema func(t *testing.T, tools json.RawMessage) []renderedTool
}{
	{
		name:   "anthropic",
		golden: "tools.anthropic.json",
		render: func(t *testing.T, specs []llm.ToolSpec) json.RawMessage {
			srv := anthropictest.NewServer(anthropictest.Reply{Text: "ok"})
			defer srv.Close()
			// The default client: the last tool carries the cache
			// breakpoint, as it is sent.
			c := &anthropic.Client{BaseURL: srv.URL(), Model: "claude-test", HTTPClient: srv.Client()}
			return sentTools(t, c, specs, func() []byte { return srv.Requests()[0].Body })
		},
		schema: func(t *testing.T, tools json.RawMessage) []renderedTool {
			var ws []struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				InputSchema json.RawMessage `json:"input_schema"`
			}
			mustUnmarshal(t, tools, &ws)
			out := make([]renderedTool, len(ws))
			for i, w := range ws {
				out[i] = renderedTool{w.Name, w.Description, canonical(t, w.InputSchema)}
			}
			return out
		},
	},
	{
		name:   "openai",
		golden: "tools.openai.json",
		render: func(t *testing.T, specs []llm.ToolSpec) json.RawMessage {
			srv := openaitest.NewServer(openaitest.Reply{Text: "ok"})
			defer srv.Close()
			c := &openai.Client{BaseURL: srv.URL(), Model: "gpt-test"}
			return sentTools(t, c, specs, func() []byte { return srv.Requests()[0].Body })
		},
		schema: func(t *testing.T, tools json.RawMessage) []renderedTool {
			var ws []struct {
				Type     string `json:"type"`
				Function struct {
					Name        string          `json:"name"`
					Description string          `json:"description"`
					Parameters  json.RawMessage `json:"parameters"`
				} `json:"function"`
			}
			mustUnmarshal(t, tools, &ws)
			out := make([]renderedTool, len(ws))
			for i, w := range ws {
				if w.Type != "function" {
					t.Errorf("tool %d has type %q, want function", i, w.Type)
				}
				out[i] = renderedTool{w.Function.Name, w.Function.Description, canonical(t, w.Function.Parameters)}
			}
			return out
		},
	},
}

// renderedTool is what a model is told about a tool, whatever the format.
type renderedTool struct {
	Name, Description string
	Schema            string // canonical JSON
}

// sentTools streams a request offering specs through m and returns the
// "tools" array of the body the server received.
func sentTools(t *testing.T, m llm.Model, specs []llm.ToolSpec, body func() []byte) json.RawMessage {
	t.Helper()
	req := &llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}, Tools: specs}
	if _, err := llm.Collect(m.Stream(context.Background(), req)); err != nil {
		t.Fatal(err)
	}
	var sent struct {
		Tools json.RawMessage `json:"tools"`
	}
	mustUnmarshal(t, body(), &sent)
	return sent.Tools
}

// TestToolRendering pins how one set of tool specs is rendered in each wire
// format, against testdata/tools.<format>.json (go test -update rewrites
// them), and checks that every format tells the model the same thing:
// names, descriptions and schemas, in the toolset's order.
func TestToolRendering(t *testing.T) {
	t.Parallel()
	ts := renderingToolset(t)
	specs := ts.Specs()
	var want []renderedTool
	for _, s := range specs {
		want = append(want, renderedTool{s.Name, s.Description, canonical(t, s.InputSchema)})
	}
	for _, f := range wireFormats {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			tools := f.render(t, specs)
			checkGolden(t, f.golden, tools)
			if diff := cmp.Diff(want, f.schema(t, tools)); diff != "" {
				t.Errorf("%s tools differ from the specs (-spec +wire):\n%s", f.name, diff)
			}
		})
	}
}

// canonical re-encodes JSON with sorted keys and no spacing.
func canonical(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v any
	mustUnmarshal(t, raw, &v)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimSpace(b.Bytes()))
}

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
}

// checkGolden compares JSON with testdata/name, indented; with -update it
// rewrites the file first.
func checkGolden(t *testing.T, name string, raw []byte) {
	t.Helper()
	var got bytes.Buffer
	if err := json.Indent(&got, raw, "", "  "); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, raw)
	}
	got.WriteByte('\n')
	golden := filepath.Join("testdata", name)
	if updating() {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got.String()); diff != "" {
		t.Errorf("JSON differs from %s (-want +got):\n%s", golden, diff)
	}
}
