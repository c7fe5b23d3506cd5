package gemini

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/tools"
)

// subsetKeys are the keywords of Gemini's Schema object.
var subsetKeys = map[string]bool{
	"type": true, "format": true, "title": true, "description": true, "nullable": true, "enum": true,
	"properties": true, "required": true, "propertyOrdering": true, "items": true, "minItems": true,
	"maxItems": true, "minLength": true, "maxLength": true, "pattern": true, "minimum": true,
	"maximum": true, "minProperties": true, "maxProperties": true, "default": true, "anyOf": true,
}

var subsetTypes = map[string]bool{"STRING": true, "NUMBER": true, "INTEGER": true, "BOOLEAN": true, "ARRAY": true, "OBJECT": true}

// checkSubset fails unless s is a schema of Gemini's subset: known
// keywords only, an upper-case type or anyOf on every schema, string
// enums, required naming properties, and a propertyOrdering listing them.
func checkSubset(t *testing.T, path string, s map[string]any) {
	t.Helper()
	for k := range s {
		if !subsetKeys[k] {
			t.Errorf("%s: keyword %q is not in the subset", path, k)
		}
	}
	typ, _ := s["type"].(string)
	if typ == "" && s["anyOf"] == nil {
		t.Errorf("%s: neither a type nor anyOf: %v", path, s)
	}
	if typ != "" && !subsetTypes[typ] {
		t.Errorf("%s: type %q", path, typ)
	}
	if e, ok := s["enum"]; ok {
		for _, v := range e.([]any) {
			if _, ok := v.(string); !ok {
				t.Errorf("%s: enum value %v is not a string", path, v)
			}
		}
	}
	props, _ := s["properties"].(map[string]any)
	if p, ok := s["properties"]; ok && len(props) == 0 {
		t.Errorf("%s: empty properties %v", path, p)
	}
	for _, r := range anyList(s["required"]) {
		if props[r.(string)] == nil {
			t.Errorf("%s: required %q is not a property", path, r)
		}
	}
	if len(props) > 1 && len(anyList(s["propertyOrdering"])) != len(props) {
		t.Errorf("%s: propertyOrdering %v for %d properties", path, s["propertyOrdering"], len(props))
	}
	for name, p := range props {
		checkSubset(t, path+"."+name, p.(map[string]any))
	}
	if it, ok := s["items"].(map[string]any); ok {
		checkSubset(t, path+"[]", it)
	}
	for i, a := range anyList(s["anyOf"]) {
		checkSubset(t, path+"|"+string(rune('0'+i)), a.(map[string]any))
	}
}

func anyList(v any) []any { l, _ := v.([]any); return l }

// TestRealSchemasRender renders the schemas of the built-in tools and of
// tools inferred from Go types, and checks that they are in the subset.
func TestRealSchemasRender(t *testing.T) {
	ts, err := tools.ByName(tools.Names(), &tools.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	type point struct {
		X, Y float64
	}
	type input struct {
		Name    string            `json:"name" jsonschema:"the name"`
		Count   int               `json:"count,omitempty" default:"3"`
		Tags    []string          `json:"tags"`
		Where   *point            `json:"where,omitempty"`
		Points  []point           `json:"points"`
		Labels  map[string]string `json:"labels,omitempty"`
		Enabled bool              `json:"enabled"`
		Any     any               `json:"any,omitempty"`
	}
	typed := loop.NewTool("typed", "A tool of every kind of field.", func(context.Context, input) (string, error) { return "", nil })
	specs := append(ts.Specs(), loop.MustToolset(typed).Specs()...)
	if len(specs) < 8 {
		t.Fatalf("%d specs", len(specs))
	}
	ws, err := renderTools(specs)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ws[0].FunctionDeclarations {
		if d.Parameters == nil {
			continue
		}
		b, _ := json.Marshal(d.Parameters)
		var s map[string]any
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		if s["type"] != "OBJECT" {
			t.Errorf("%s: parameters of type %v", d.Name, s["type"])
		}
		checkSubset(t, d.Name, s)
	}
}

// FuzzSchema renders any JSON as a tool schema: it fails with an error or
// gives a schema of the subset, never panics, and stays bounded.
func FuzzSchema(f *testing.F) {
	for _, spec := range toolSchemas {
		if len(spec.InputSchema) > 0 {
			f.Add(string(spec.InputSchema))
		}
	}
	f.Add(`{"type":"object","properties":{"a":{"$ref":"#/$defs/a"}},"$defs":{"a":{"allOf":[{"$ref":"#/$defs/a"}]}}}`)
	f.Add(`{"type":"object","properties":{"a":{"type":[],"enum":[],"anyOf":[],"items":[]}}}`)
	f.Fuzz(func(t *testing.T, in string) {
		if !json.Valid([]byte(in)) || len(in) > 1<<16 {
			return
		}
		s, err := renderSchema(json.RawMessage(in))
		if err != nil {
			return
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("rendering does not encode: %v", err)
		}
		if len(b) > 64*len(in)+1<<20 {
			t.Fatalf("%d bytes rendered from %d", len(b), len(in))
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		checkSubset(t, "schema", m)
		if strings.Contains(string(b), `"$ref"`) && !strings.Contains(in, `$ref":"$ref`) {
			// A $ref may survive only as a property name.
			var walk func(v any, key string)
			walk = func(v any, key string) {
				if o, ok := v.(map[string]any); ok {
					for k, x := range o {
						if k == "$ref" && key != "properties" {
							t.Fatalf("a $ref survived: %s", b)
						}
						walk(x, k)
					}
				}
				for _, x := range anyList(v) {
					walk(x, "")
				}
			}
			walk(m, "")
		}
	})
}
