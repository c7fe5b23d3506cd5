package loop

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// flatSchemas are input schemas of both kinds: with a flatObject, and
// without one (the last ones).
var flatSchemas = []string{
	`{"type":"object","properties":{"path":{"type":"string","description":"the file"}},"required":["path"],"additionalProperties":false}`,
	`{"type":"object","properties":{"path":{"type":"string"},"n":{"type":"integer","default":3},"e":{"type":"string","enum":["a","b"]},"x":{"type":"number"},"ok":{"type":"boolean"},"any":{}},"required":["path","e"]}`,
	`{"type":"object","properties":{}}`,
	`{"type":"object","title":"t","description":"d","properties":{"a":{"type":"integer","title":"a"}},"additionalProperties":false}`,
	`{"type":"object","properties":{"n":{"type":"integer","minimum":0}}}`,
	`{"type":"object","properties":{"s":{"type":"string","minLength":2}}}`,
	`{"type":"object","properties":{"s":{"type":["string","null"]}}}`,
	`{"type":"object","properties":{"e":{"enum":[1,"a"]}}}`,
	`{"type":"object","properties":{"o":{"type":"object"}}}`,
	`{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"string"}}`,
	`{"type":"object","properties":{"a":{"type":"string"}},"minProperties":1}`,
	`{"type":"object","properties":{"a":{"type":"string","format":"email"}}}`,
	`{"type":"object","properties":{"a":{"$ref":"#/$defs/s"}},"$defs":{"s":{"type":"string"}}}`,
	`{"type":"object","properties":{"a":{"not":{}}}}`,
	`{"type":"object","additionalProperties":{"not":{"type":"string"}}}`,
}

var flatArgs = []string{
	`{}`, `{"path":"a"}`, `{"path":1}`, `{"path":null}`, `{"path":"a","extra":1}`,
	`{"path":"a","e":"a"}`, `{"path":"a","e":"c"}`, `{"path":"a","e":"a","n":2}`, `{"path":"a","e":"a","n":2.5}`,
	`{"path":"a","e":"a","n":1e300}`, `{"path":"a","e":"a","n":-0}`, `{"path":"a","e":"a","x":1.5,"ok":true,"any":[1]}`,
	`{"path":"a","e":"a","ok":"true"}`, `{"a":1}`, `{"a":1.5}`, `{"a":"x"}`, `{"n":-1}`, `{"s":"x"}`, `{"s":null}`,
	`{"e":1}`, `{"o":{}}`, `{"o":[]}`, `{"a":"x","b":"y"}`, `{"a":"x","b":2}`, `{"a":"not an email"}`,
}

// checkFlat fails t if the flat check of schema accepts args that
// jsonschema-go refuses.
func checkFlat(t *testing.T, schema, args string) {
	t.Helper()
	r, err := resolveSchema(json.RawMessage(schema))
	if err != nil {
		return
	}
	f := flatFor(r.Schema())
	if f == nil {
		return
	}
	var v any
	if json.Unmarshal([]byte(args), &v) != nil {
		return
	}
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	if f.accepts(m) {
		if err := r.Validate(m); err != nil {
			t.Errorf("schema %s: the flat check accepts %s, which jsonschema-go refuses: %v", schema, args, err)
		}
	}
}

func TestFlatObjectNeverAcceptsMore(t *testing.T) {
	for _, s := range flatSchemas {
		for _, a := range flatArgs {
			checkFlat(t, s, a)
		}
	}
	// The first four have a flat check, the others none.
	for i, s := range flatSchemas {
		r, err := resolveSchema(json.RawMessage(s))
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if got, want := flatFor(r.Schema()) != nil, i < 4; got != want {
			t.Errorf("flat check of %s: %v, want %v", s, got, want)
		}
	}
	// Schemas that NewTool infers for plain arguments have one.
	type args struct {
		Path  string  `json:"path" jsonschema:"the file"`
		Limit int     `json:"limit,omitempty" default:"100"`
		Mode  string  `json:"mode,omitempty" enum:"fast,slow"`
		Ratio float64 `json:"ratio,omitempty"`
		Dry   bool    `json:"dry,omitempty"`
	}
	w, err := MustToolset(NewTool("t", "T.", func(context.Context, args) (string, error) { return "", nil })).lookup("t"), error(nil)
	if err != nil || w.flat == nil {
		t.Errorf("no flat check for the schema inferred from %T: %s", args{}, w.def.InputSchema)
	}
}

// Over the arguments the model sends, the parse of a tool with a flat check
// gives what jsonschema-go alone gives: the same arguments, or the same
// error.
func TestParseArgsSameWithoutFlat(t *testing.T) {
	for _, s := range flatSchemas[:4] {
		ts := MustToolset(&ToolDef{Name: "t", InputSchema: json.RawMessage(s), Handler: func(context.Context, *Call) (*Output, error) { return nil, nil }})
		w := ts.lookup("t")
		plain := *w
		plain.flat = nil
		for _, a := range flatArgs {
			raw1, m1, err1 := w.parseArgs([]byte(a))
			raw2, m2, err2 := plain.parseArgs([]byte(a))
			// jsonschema-go lists unexpected properties in the map's
			// order: compare the messages up to the list.
			msg := func(err error) string {
				s := err.Error()
				if i := strings.IndexByte(s, '['); i >= 0 {
					s = s[:i]
				}
				return s
			}
			if string(raw1) != string(raw2) || len(m1) != len(m2) || (err1 == nil) != (err2 == nil) || (err1 != nil && msg(err1) != msg(err2)) {
				t.Errorf("schema %s, args %s: %s %v %v, without the flat check %s %v %v", s, a, raw1, m1, err1, raw2, m2, err2)
			}
		}
	}
}

func FuzzFlatObject(f *testing.F) {
	for _, s := range flatSchemas {
		for _, a := range flatArgs {
			f.Add(s, a)
		}
	}
	f.Fuzz(func(t *testing.T, schema, args string) {
		if len(schema) > 4096 || len(args) > 4096 {
			return
		}
		checkFlat(t, schema, args)
	})
}
