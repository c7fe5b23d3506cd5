package loop

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
)

// encodeInferred writes s as json.Marshal writes it, byte for byte, for
// the schemas schemaFor infers (types, properties in their order,
// descriptions, required, items, enum, default, minimum and maximum,
// additionalProperties), and
// reports false for a schema that uses anything else, which the caller
// then gives to json.Marshal. json.Marshal's first call on a Schema builds
// encoding/json's encoders for its sixty fields by reflection, most of
// what wiring a typed tool costs in a process before its first model
// request (docs/performance.md, target 4).
func encodeInferred(s *jsonschema.Schema) ([]byte, bool) {
	var b bytes.Buffer
	if !writeInferred(&b, s, 0) {
		return nil, false
	}
	return b.Bytes(), true
}

// inferredDepth bounds writeInferred's recursion: deeper schemas go to
// json.Marshal.
const inferredDepth = 32

// writeInferred writes s (not nil) to b as jsonschema-go's MarshalJSON
// does, or reports false.
func writeInferred(b *bytes.Buffer, s *jsonschema.Schema, depth int) bool {
	if s == nil || depth > inferredDepth || (s.Type != "" && s.Types != nil) {
		return false
	}
	// Only the fields written below may be set.
	rest := *s
	rest.Type, rest.Types, rest.Properties, rest.PropertyOrder = "", nil, nil, nil
	rest.Items, rest.Description, rest.Default, rest.Enum = nil, "", nil, nil
	rest.Minimum, rest.Maximum = nil, nil
	rest.Required, rest.AdditionalProperties, rest.Not = nil, nil, nil
	if !reflect.ValueOf(rest).IsZero() {
		return false
	}
	// MarshalJSON refuses a repeated name in PropertyOrder.
	for i, name := range s.PropertyOrder {
		if slices.Contains(s.PropertyOrder[:i], name) {
			return false
		}
	}
	// MarshalJSON writes {} as true and {"not":true} as false: the false
	// schema, jsonschema-go's additionalProperties of a struct.
	if s.Not != nil {
		t := *s
		t.Not = nil
		if !reflect.ValueOf(*s.Not).IsZero() || !reflect.ValueOf(t).IsZero() {
			return false
		}
		b.WriteString("false")
		return true
	}
	if isEmptySchema(s) {
		b.WriteString("true")
		return true
	}
	// The order of MarshalJSON's struct: type, properties, (dependencies),
	// items, then Schema's fields in their order: description, default,
	// enum, minimum, maximum, required, additionalProperties.
	b.WriteByte('{')
	first := true
	key := func(k string) {
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(k)
	}
	switch {
	case s.Type != "":
		key(`"type":`)
		if !writeJSON(b, s.Type) {
			return false
		}
	case s.Types != nil:
		key(`"type":`)
		if !writeJSON(b, s.Types) {
			return false
		}
	}
	if s.Properties != nil {
		key(`"properties":{`)
		n := 0
		entry := func(name string, p *jsonschema.Schema) bool {
			if n > 0 {
				b.WriteByte(',')
			}
			n++
			if !writeJSON(b, name) {
				return false
			}
			b.WriteByte(':')
			if p == nil {
				b.WriteString("null")
				return true
			}
			return writeInferred(b, p, depth+1)
		}
		done := make(map[string]bool, len(s.Properties))
		for _, name := range s.PropertyOrder {
			if p, ok := s.Properties[name]; ok {
				if !entry(name, p) {
					return false
				}
				done[name] = true
			}
		}
		var left []string
		for name := range s.Properties {
			if !done[name] {
				left = append(left, name)
			}
		}
		slices.Sort(left)
		for _, name := range left {
			if !entry(name, s.Properties[name]) {
				return false
			}
		}
		b.WriteByte('}')
	}
	if s.Items != nil {
		key(`"items":`)
		if !writeInferred(b, s.Items, depth+1) {
			return false
		}
	}
	if s.Description != "" {
		key(`"description":`)
		if !writeJSON(b, s.Description) {
			return false
		}
	}
	if len(s.Default) > 0 {
		key(`"default":`)
		if !writeJSON(b, s.Default) {
			return false
		}
	}
	if len(s.Enum) > 0 {
		key(`"enum":`)
		if !writeJSON(b, s.Enum) {
			return false
		}
	}
	if s.Minimum != nil {
		key(`"minimum":`)
		if !writeJSON(b, *s.Minimum) {
			return false
		}
	}
	if s.Maximum != nil {
		key(`"maximum":`)
		if !writeJSON(b, *s.Maximum) {
			return false
		}
	}
	if len(s.Required) > 0 {
		key(`"required":`)
		if !writeJSON(b, s.Required) {
			return false
		}
	}
	if s.AdditionalProperties != nil {
		key(`"additionalProperties":`)
		if !writeInferred(b, s.AdditionalProperties, depth+1) {
			return false
		}
	}
	b.WriteByte('}')
	return true
}

// isEmptySchema reports whether s sets nothing that MarshalJSON writes.
func isEmptySchema(s *jsonschema.Schema) bool {
	return s.Type == "" && s.Types == nil && s.Properties == nil && s.Items == nil && s.Description == "" &&
		len(s.Default) == 0 && len(s.Enum) == 0 && s.Minimum == nil && s.Maximum == nil && len(s.Required) == 0 &&
		s.AdditionalProperties == nil && s.Not == nil
}

// writeJSON writes v as json.Marshal does (strings, lists of strings, enum
// values, raw defaults: types whose encoders cost little to build).
func writeJSON(b *bytes.Buffer, v any) bool {
	raw, err := json.Marshal(v)
	if err != nil {
		return false
	}
	b.Write(raw)
	return true
}
