package loop

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

// Arguments types as the built-in tools write theirs.
type encodeToolArgs struct {
	Path    string            `json:"path" jsonschema:"the file to read, relative to the working directory"`
	Offset  int               `json:"offset,omitempty" jsonschema:"the first line to read, counting from 1 (default 1)"`
	Mode    string            `json:"mode,omitempty" enum:"a,b" default:"a" jsonschema:"<mode> & \"quotes\" \u2028 é"`
	Globs   []string          `json:"globs,omitempty" jsonschema:"patterns like **/*.go"`
	Todos   []encodeTodo      `json:"todos" jsonschema:"the whole list"`
	Env     map[string]string `json:"env,omitempty"`
	Timeout float64           `json:"timeout_s,omitempty" default:"120"`
}

type encodeTodo struct {
	Content string `json:"content"`
	Status  string `json:"status" enum:"pending,in_progress,completed"`
}

// TestEncodeInferredSameBytes: for every schema schemaFor infers in this
// package's tests, encodeInferred writes json.Marshal's bytes, and does
// write them (the fast path is taken).
func TestEncodeInferredSameBytes(t *testing.T) {
	for _, typ := range []reflect.Type{
		reflect.TypeFor[inferArgs](), reflect.TypeFor[encodeToolArgs](), reflect.TypeFor[encodeTodo](),
		reflect.TypeFor[inferFilter](), reflect.TypeFor[map[string]any](), reflect.TypeFor[struct{}](),
	} {
		s, err := jsonschema.ForType(typ, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := refine(typ, s); err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := encodeInferred(s)
		if !ok {
			t.Errorf("%v: not written by encodeInferred", typ)
			continue
		}
		if string(got) != string(want) {
			t.Errorf("%v:\n got %s\nwant %s", typ, got, want)
		}
	}
}

// TestEncodeInferredRandom: over random schemas, of the fields
// encodeInferred writes and of others, it writes json.Marshal's bytes or
// declines (and declines whenever json.Marshal refuses).
func TestEncodeInferredRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 36))
	words := []string{"", "a", "path", "<b>&c", "é\u2028", "\x01\"\\", "type", "zz", "A"}
	var gen func(depth int) *jsonschema.Schema
	gen = func(depth int) *jsonschema.Schema {
		s := &jsonschema.Schema{}
		pick := func(n int) bool { return rng.IntN(n) == 0 }
		if pick(2) {
			s.Type = []string{"object", "string", "integer", "array", "boolean"}[rng.IntN(5)]
		}
		if pick(6) {
			s.Types = []string{"null", "array"}[:rng.IntN(3)]
		}
		if pick(3) {
			s.Description = words[rng.IntN(len(words))]
		}
		if pick(5) {
			s.Default = json.RawMessage([]string{`1`, ` "x" `, `{"a": [1, 2]}`, `"<&>"`, `null`, ``}[rng.IntN(6)])
		}
		if pick(5) {
			for range rng.IntN(3) {
				s.Enum = append(s.Enum, []any{"x", 1.5, true, nil, "<y>", map[string]any{"k": 1}}[rng.IntN(6)])
			}
		}
		if pick(4) {
			for range rng.IntN(3) {
				s.Required = append(s.Required, words[rng.IntN(len(words))])
			}
		}
		if depth < 3 && pick(3) {
			s.Properties = map[string]*jsonschema.Schema{}
			for range rng.IntN(4) {
				name := words[rng.IntN(len(words))]
				if pick(8) {
					s.Properties[name] = nil
				} else {
					s.Properties[name] = gen(depth + 1)
				}
				if pick(2) {
					s.PropertyOrder = append(s.PropertyOrder, name)
				}
			}
			if pick(6) {
				s.PropertyOrder = append(s.PropertyOrder, "missing")
			}
		}
		if depth < 3 && pick(5) {
			s.Items = gen(depth + 1)
		}
		if pick(6) {
			m := []float64{0, 255, -1.5, 1e21, 3}[rng.IntN(5)]
			s.Minimum = &m
		}
		if pick(6) {
			m := []float64{0, 255, -1.5, 1e-7, 3}[rng.IntN(5)]
			s.Maximum = &m
		}
		if depth < 3 && pick(5) {
			s.AdditionalProperties = gen(depth + 1)
		}
		if pick(6) {
			s.Not = &jsonschema.Schema{}
			if pick(3) {
				s.Not = gen(depth + 1)
			}
		}
		// Fields encodeInferred leaves to json.Marshal.
		switch rng.IntN(12) {
		case 0:
			s.Title = "t"
		case 1:
			m := 1.0
			s.ExclusiveMinimum = &m
		case 2:
			s.Extra = map[string]any{"x-k": 1}
		case 3:
			s.Format = "date"
		case 4:
			s.ItemsArray = []*jsonschema.Schema{{}}
		}
		return s
	}
	written := 0
	for i := range 20000 {
		s := gen(0)
		want, err := json.Marshal(s)
		got, ok := encodeInferred(s)
		if err != nil {
			if ok {
				t.Fatalf("schema %d: json.Marshal refuses it (%v), encodeInferred wrote %s", i, err, got)
			}
			continue
		}
		if !ok {
			continue
		}
		written++
		if string(got) != string(want) {
			t.Fatalf("schema %d (%s):\n got %s\nwant %s", i, fmt.Sprintf("%+v", *s), got, want)
		}
	}
	if written < 5000 {
		t.Errorf("encodeInferred wrote %d of 20000 schemas: the test no longer exercises it", written)
	}
}
