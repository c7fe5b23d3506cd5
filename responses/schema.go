package responses

import (
	"bytes"
	"encoding/json"
)

// emptySchema is sent for a tool without an input schema; it is strict.
var emptySchema = json.RawMessage(`{"type":"object","properties":{},"required":[],"additionalProperties":false}`)

// Bounds of a strict schema, from OpenAI's Structured Outputs guide.
const (
	strictMaxDepth      = 10   // nested object levels
	strictMaxProperties = 5000 // object properties in all
)

// unstrictKeywords are the JSON Schema keywords Structured Outputs does not
// support: a schema using any of them is sent non-strict.
var unstrictKeywords = [...]string{
	"allOf", "oneOf", "not", "if", "then", "else",
	"dependentRequired", "dependentSchemas", "dependencies",
	"patternProperties", "unevaluatedProperties", "propertyNames",
	"minProperties", "maxProperties", "unevaluatedItems", "contains",
}

// strictSchema returns the schema to send with "strict": true, and whether
// the tool can be strict at all.
//
// In strict mode the model's arguments are constrained to the schema, which
// must then be in the subset Structured Outputs supports: the root is an
// object (not anyOf), every object lists all its properties in "required"
// and sets "additionalProperties": false, and a few keywords are not used.
// A schema whose objects merely leave additionalProperties out is made
// strict by adding it: the tool never received other properties by design.
// A schema with an optional property is not made strict: making the
// property required and nullable, as the guide suggests, would change what
// the tool receives (null where the property was absent), so it is sent
// with "strict": false instead, as are schemas with unsupported keywords,
// open objects (additionalProperties true or a schema) and those beyond the
// guide's size limits. The schema is sent as given unless something was
// added.
func strictSchema(raw json.RawMessage) (json.RawMessage, bool) {
	// Numbers stay as written: a float64 would round large integers.
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, false
	}
	obj, ok := root.(map[string]any)
	if !ok || obj["type"] != "object" {
		return nil, false
	}
	c := strictChecker{}
	if !c.check(obj, 0) {
		return nil, false
	}
	if !c.changed {
		return raw, true
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep descriptions as written
	if err := enc.Encode(root); err != nil {
		return nil, false
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), true
}

// strictChecker walks a schema, checking it against the strict subset and
// adding the additionalProperties that objects leave out.
type strictChecker struct {
	properties int
	changed    bool
}

// check reports whether the schema node s is strict-compatible; depth is
// the number of objects around it.
func (c *strictChecker) check(s map[string]any, depth int) bool {
	for _, k := range unstrictKeywords {
		if _, ok := s[k]; ok {
			return false
		}
	}
	if isObject(s) {
		depth++
		if depth > strictMaxDepth {
			return false
		}
		props, _ := s["properties"].(map[string]any)
		if _, has := s["properties"]; has && props == nil {
			return false
		}
		c.properties += len(props)
		if c.properties > strictMaxProperties {
			return false
		}
		switch ap, has := s["additionalProperties"]; {
		case !has:
			s["additionalProperties"] = false
			c.changed = true
		case ap != false:
			return false
		}
		required := map[string]bool{}
		if req, has := s["required"]; has {
			list, ok := req.([]any)
			if !ok {
				return false
			}
			for _, r := range list {
				name, ok := r.(string)
				if !ok {
					return false
				}
				required[name] = true
			}
		} else {
			if len(props) > 0 {
				return false
			}
			s["required"] = []any{}
			c.changed = true
		}
		for name, p := range props {
			if !required[name] {
				return false
			}
			ps, ok := p.(map[string]any)
			if !ok || !c.check(ps, depth) {
				return false
			}
		}
	}
	if items, has := s["items"]; has {
		is, ok := items.(map[string]any)
		if !ok || !c.check(is, depth) {
			return false
		}
	}
	for _, key := range [...]string{"anyOf", "prefixItems"} {
		if v, has := s[key]; has {
			list, ok := v.([]any)
			if !ok {
				return false
			}
			for _, e := range list {
				es, ok := e.(map[string]any)
				if !ok || !c.check(es, depth) {
					return false
				}
			}
		}
	}
	for _, key := range [...]string{"$defs", "definitions"} {
		if v, has := s[key]; has {
			defs, ok := v.(map[string]any)
			if !ok {
				return false
			}
			for _, d := range defs {
				ds, ok := d.(map[string]any)
				if !ok || !c.check(ds, depth) {
					return false
				}
			}
		}
	}
	return true
}

// isObject reports whether s describes objects: its type is "object" (or
// a list holding it), or it has properties.
func isObject(s map[string]any) bool {
	if _, ok := s["properties"]; ok {
		return true
	}
	switch t := s["type"].(type) {
	case string:
		return t == "object"
	case []any:
		for _, e := range t {
			if e == "object" {
				return true
			}
		}
	}
	return false
}
