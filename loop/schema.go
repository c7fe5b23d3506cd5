package loop

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// schemaFor infers the arguments schema of a typed tool from In.
func schemaFor[In any]() (json.RawMessage, error) {
	t := reflect.TypeFor[In]()
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct && !(t.Kind() == reflect.Map && t.Key().Kind() == reflect.String) {
		return nil, fmt.Errorf("arguments type %v is not a struct: a tool takes an object", t)
	}
	s, err := jsonschema.ForType(t, nil)
	if err != nil {
		return nil, err
	}
	if err := refine(t, s); err != nil {
		return nil, err
	}
	raw, ok := encodeInferred(s)
	if !ok {
		if raw, err = json.Marshal(s); err != nil {
			return nil, err
		}
	}
	inferredByEncoding.LoadOrStore(string(raw), s)
	return raw, nil
}

// inferredByEncoding holds each schema schemaFor inferred, by the bytes it
// encoded it to, for resolveSchema to resolve it without decoding those bytes back:
// decoding is most of what wiring a typed tool costs, in every process
// before its first model request. Decoding them would give the same schema
// (but for PropertyOrder, which only encoding reads): TestInferredSchemas
// checks it. The schemas are not changed once stored. One entry per
// distinct arguments type given to NewTool, so bounded by the program.
var inferredByEncoding sync.Map // string -> *jsonschema.Schema

// refine applies the `enum` and `default` tags of t's fields to s, the
// schema inferred for t, and drops the "null" alternative that jsonschema-go
// gives slices: a model asked for a list should send a list.
func refine(t reflect.Type, s *jsonschema.Schema) error {
	if s == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		if len(s.Types) == 2 && s.Types[0] == "null" && s.Types[1] == "array" {
			s.Types, s.Type = nil, "array"
		}
		return refine(t.Elem(), s.Items)
	case reflect.Map:
		return refine(t.Elem(), s.AdditionalProperties)
	case reflect.Struct:
	default:
		return nil
	}
	for _, f := range reflect.VisibleFields(t) {
		if f.Anonymous || !f.IsExported() {
			continue
		}
		name, skip := jsonName(f)
		if skip {
			continue
		}
		ps := s.Properties[name]
		if ps == nil {
			continue
		}
		if err := refine(f.Type, ps); err != nil {
			return err
		}
		// An enum on a list field constrains its items.
		target, ft := ps, f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if (ft.Kind() == reflect.Slice || ft.Kind() == reflect.Array) && ps.Items != nil {
			target, ft = ps.Items, ft.Elem()
		}
		if tag, ok := f.Tag.Lookup("enum"); ok {
			for _, word := range strings.Split(tag, ",") {
				v, err := tagValue(ft, strings.TrimSpace(word))
				if err != nil {
					return fmt.Errorf("field %s: enum: %w", f.Name, err)
				}
				target.Enum = append(target.Enum, v)
			}
		}
		if tag, ok := f.Tag.Lookup("default"); ok {
			v, err := tagValue(f.Type, tag)
			if err != nil {
				return fmt.Errorf("field %s: default: %w", f.Name, err)
			}
			b, _ := json.Marshal(v)
			ps.Default = b
			// A field with a default may be left out: the default fills it.
			s.Required = slices.DeleteFunc(s.Required, func(r string) bool { return r == name })
		}
	}
	return nil
}

// tagValue reads a value written in a struct tag: a bare word for a string
// field, JSON otherwise.
func tagValue(t reflect.Type, word string) (any, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.String {
		return word, nil
	}
	var v any
	if err := json.Unmarshal([]byte(word), &v); err != nil {
		return nil, fmt.Errorf("%q is not a JSON value", word)
	}
	return v, nil
}

func jsonName(f reflect.StructField) (name string, skip bool) {
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", true
	}
	name, _, _ = strings.Cut(tag, ",")
	if name == "" {
		name = f.Name
	}
	return name, false
}

// emptyObjectSchema is the schema of a tool without arguments.
var emptyObjectSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// Compiled schemas are kept by their bytes: the same schemas are wired
// again and again (a session's client tools at each of its runs, an MCP
// server's tools in each session), and compiling one costs far more than
// looking it up. A compiled schema is only read once built (validation
// and defaults), so toolsets share it. Bounded: at most maxCachedSchemas
// schemas of at most maxCachedSchema bytes each; when full, an arbitrary
// one makes room.
const (
	maxCachedSchemas = 512
	maxCachedSchema  = 64 << 10
)

var schemaCache struct {
	sync.Mutex
	m map[string]*jsonschema.Resolved
}

// compileSchema checks that raw is a JSON Schema for an object and resolves
// it for validation, or returns the schema it resolved for the same bytes
// before.
func compileSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	if len(raw) > maxCachedSchema {
		return resolveSchema(raw)
	}
	schemaCache.Lock()
	r, ok := schemaCache.m[string(raw)]
	schemaCache.Unlock()
	if ok {
		return r, nil
	}
	r, err := resolveSchema(raw)
	if err != nil {
		return nil, err
	}
	schemaCache.Lock()
	defer schemaCache.Unlock()
	if schemaCache.m == nil {
		schemaCache.m = make(map[string]*jsonschema.Resolved)
	}
	if len(schemaCache.m) >= maxCachedSchemas {
		for k := range schemaCache.m {
			delete(schemaCache.m, k)
			break
		}
	}
	schemaCache.m[string(raw)] = r
	return r, nil
}

// resolveSchema is compileSchema without the cache.
func resolveSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	s, ok := inferredSchema(raw)
	if !ok {
		if err := checkSchemaDepth(raw); err != nil {
			return nil, fmt.Errorf("input schema: %w", err)
		}
		s = new(jsonschema.Schema)
		if err := json.Unmarshal(raw, s); err != nil {
			return nil, fmt.Errorf("input schema is not a JSON Schema: %w", err)
		}
	}
	if s.Type != "object" && !(len(s.Types) > 0 && s.Types[0] == "object") {
		return nil, errors.New(`input schema must have "type": "object"`)
	}
	r, err := s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	return r, nil
}

// inferredSchema is the schema schemaFor inferred and encoded to raw, if it
// did.
func inferredSchema(raw json.RawMessage) (*jsonschema.Schema, bool) {
	v, ok := inferredByEncoding.Load(string(raw))
	if !ok {
		return nil, false
	}
	return v.(*jsonschema.Schema), true
}

// MaxSchemaDepth bounds the JSON nesting of a schema given as bytes (a
// tool's InputSchema, an [OutputSchema]): its objects and arrays, counted
// in brackets, 64 (about 32 levels of properties). Deeper is refused
// before it is decoded: jsonschema-go decodes a schema level by level,
// each level scanning again all it holds, so that the work grows with the
// square of the depth (a 150 KB schema 4,900 levels deep took tens of
// seconds of a core). Tools' schemas use a few levels.
const MaxSchemaDepth = 64

// checkSchemaDepth refuses a schema nested deeper than MaxSchemaDepth,
// in one pass over its bytes (brackets in strings are text).
func checkSchemaDepth(raw []byte) error {
	depth, inString, escaped := 0, false, false
	for _, c := range raw {
		switch {
		case escaped:
			escaped = false
		case inString:
			switch c {
			case '\\':
				escaped = true
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > MaxSchemaDepth {
				return fmt.Errorf("the schema nests deeper than %d levels of objects and arrays", MaxSchemaDepth)
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return nil
}
