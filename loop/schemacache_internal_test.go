package loop

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/jsonschema-go/jsonschema"
)

// TestSchemaCache: the same bytes give the same compiled schema, other
// bytes another; an invalid schema is an error every time; the cache
// stays within its bounds.
func TestSchemaCache(t *testing.T) {
	a := json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","default":"x"}}}`)
	r1, err := compileSchema(a)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := compileSchema(append(json.RawMessage(nil), a...))
	if err != nil || r2 != r1 {
		t.Errorf("the same schema compiled again = %p, %v; want the first, %p", r2, err, r1)
	}
	other, err := compileSchema(json.RawMessage(`{"type":"object","properties":{"q":{"type":"integer"}}}`))
	if err != nil || other == r1 {
		t.Errorf("another schema = %p, %v; want its own", other, err)
	}
	if err := other.Validate(map[string]any{"q": "text"}); err == nil {
		t.Error("the other schema validated the first one's argument")
	}
	for range 2 {
		if _, err := compileSchema(json.RawMessage(`{"type":"string"}`)); err == nil {
			t.Error("a schema that is not an object's compiled")
		}
	}
	big := json.RawMessage(`{"type":"object","description":"` + strings.Repeat("d", maxCachedSchema) + `"}`)
	b1, err1 := compileSchema(big)
	b2, err2 := compileSchema(big)
	if err1 != nil || err2 != nil || b1 == b2 {
		t.Errorf("a schema over the bound: %p, %p (%v, %v); want two compilations", b1, b2, err1, err2)
	}
	for i := range 2 * maxCachedSchemas {
		if _, err := compileSchema(json.RawMessage(fmt.Sprintf(`{"type":"object","title":"t%d"}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	schemaCache.Lock()
	n := len(schemaCache.m)
	schemaCache.Unlock()
	if n > maxCachedSchemas {
		t.Errorf("the cache holds %d schemas, over its bound of %d", n, maxCachedSchemas)
	}
}

// Arguments types for TestInferredSchemas: every feature of inference and
// of refine.
type inferArgs struct {
	Query    string            `json:"query" jsonschema:"what to search for"`
	Limit    int               `json:"limit,omitempty" jsonschema:"how many" default:"10"`
	Sort     string            `json:"sort,omitempty" enum:"relevance,date" default:"relevance"`
	Tags     []string          `json:"tags,omitempty" enum:"go,rust,python"`
	Levels   []int             `json:"levels" enum:"1,2,3"`
	Ratio    float64           `json:"ratio,omitempty" default:"1.5"`
	Count    *uint             `json:"count,omitempty"`
	On       bool              `json:"on,omitempty" default:"true"`
	Filter   *inferFilter      `json:"filter,omitempty"`
	Sources  []inferFilter     `json:"sources"`
	Weights  map[string]int    `json:"weights,omitempty"`
	Nested   map[string][]bool `json:"nested,omitempty"`
	Raw      json.RawMessage   `json:"raw,omitempty"`
	Anything any               `json:"anything,omitempty"`
	Skipped  string            `json:"-"`
	//lint:ignore U1000 never used: the inference must leave unexported fields out
	unexported int
	inferEmbedded
}

type inferFilter struct {
	After  string `json:"after,omitempty" jsonschema:"ISO date"`
	Author string `json:"author"`
}

type inferEmbedded struct {
	Page int `json:"page,omitempty" default:"1"`
}

// TestInferredSchemas: a schema NewTool inferred is resolved as inferred,
// not decoded back from its bytes; decoding them gives the same schema
// (but for PropertyOrder, which only encoding reads), so the same
// validation.
func TestInferredSchemas(t *testing.T) {
	check := func(name string, raw json.RawMessage, err error, args []string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s, ok := inferredSchema(raw)
		if !ok {
			t.Fatalf("%s: the inferred schema was not kept", name)
		}
		var decoded jsonschema.Schema
		if err := json.Unmarshal(raw, &decoded); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(&decoded, s, cmpopts.IgnoreFields(jsonschema.Schema{}, "PropertyOrder")); diff != "" {
			t.Errorf("%s: the schema decoded from its bytes differs from the inferred one (-decoded +inferred):\n%s", name, diff)
		}
		direct, err := resolveSchema(raw)
		if err != nil {
			t.Fatal(err)
		}
		viaBytes, err := decoded.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range args {
			var v1, v2 map[string]any
			json.Unmarshal([]byte(a), &v1)
			json.Unmarshal([]byte(a), &v2)
			e1, e2 := fmt.Sprint(direct.Validate(v1)), fmt.Sprint(viaBytes.Validate(v2))
			if e1 != e2 {
				t.Errorf("%s: %s: validated as inferred: %s; decoded from its bytes: %s", name, a, e1, e2)
			}
			direct.ApplyDefaults(&v1)
			viaBytes.ApplyDefaults(&v2)
			if diff := cmp.Diff(v2, v1); diff != "" {
				t.Errorf("%s: %s: defaults applied (-decoded +inferred):\n%s", name, a, diff)
			}
		}
	}
	raw, err := schemaFor[inferArgs]()
	args := []string{
		`{"query":"q","levels":[1],"sources":[]}`,
		`{"query":"q","levels":[4],"sources":[]}`,
		`{"query":"q","levels":[1],"sources":[{"author":"a"}],"sort":"date","tags":["go"],"count":3,"filter":{"author":"b"},"weights":{"x":1},"nested":{"y":[true]},"raw":[1],"anything":null,"page":2}`,
		`{}`,
	}
	// One error each: with several, which one is told first depends on
	// the order of a map's iteration.
	for _, bad := range []string{`"query":1`, `"levels":"x"`, `"levels":[4]`, `"sources":[{}]`, `"sort":"other"`, `"tags":["c"]`, `"count":-1`, `"weights":{"x":"y"}`, `"on":"yes"`, `"page":"one"`, `"nested":{"y":[1]}`} {
		args = append(args, `{"query":"q","levels":[1],"sources":[],`+bad+`}`)
	}
	check("inferArgs", raw, err, args)
	raw, err = schemaFor[map[string]string]()
	check("map", raw, err, []string{`{"a":"b"}`, `{"a":1}`})
	raw, err = schemaFor[struct{}]()
	check("empty", raw, err, []string{`{}`, `{"a":1}`})

	// Resolving one inferred schema in several goroutines at once only
	// reads it (under -race).
	raw, _ = schemaFor[inferArgs]()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := resolveSchema(raw); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// TestInferredSchemaShared: the schemas kept in inferred are shared by
// every tool of their type, so resolving and validating with one from
// several goroutines at once must not write to it (run with -race).
func TestInferredSchemaShared(t *testing.T) {
	raw, err := schemaFor[inferArgs]()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := inferredSchema(raw); !ok {
		t.Fatal("the inferred schema is not kept")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			r, err := resolveSchema(raw)
			if err != nil {
				t.Error(err)
				return
			}
			args := map[string]any{"query": "x", "levels": []any{1.0}, "sources": []any{}}
			if err := r.ApplyDefaults(&args); err != nil {
				t.Error(err)
			}
			if err := r.Validate(args); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}
