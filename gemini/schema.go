package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The Gemini API takes tool parameters and answer schemas as its Schema
// object, a subset of the OpenAPI 3.0 schema: upper-case types, nullable
// instead of a "null" type, string enums, anyOf, and no $ref, $defs,
// additionalProperties, const, oneOf or allOf. renderSchema translates a
// JSON Schema into that subset:
//
//   - type arrays: "null" becomes nullable: true; one other type is kept;
//     several become anyOf of one schema each;
//   - anyOf and oneOf become anyOf; a {"type":"null"} member becomes
//     nullable, and a single remaining member is inlined;
//   - allOf is merged into one schema (properties and required joined);
//   - $ref to "#/$defs/..." or "#/definitions/..." is inlined, and a
//     reference back into a definition being inlined (a recursive schema)
//     becomes an untyped schema saying so in its description;
//   - const becomes a one-value enum; enums of strings are kept; other
//     enums (numbers, booleans) cannot be expressed and are listed in the
//     description instead, so that the model still reads them;
//   - formats are kept where the API takes them (date-time and enum for
//     strings, int32 and int64 for integers, float and double for numbers);
//   - properties keep their order, sent as propertyOrdering (the API would
//     otherwise order them alphabetically); required lists only properties
//     that exist; an object without properties is sent without them (the
//     API refuses an empty properties map), the type of a map's values
//     (additionalProperties) said in its description;
//   - the keywords the subset has are kept (title, description, items,
//     minItems, maxItems, minLength, maxLength, pattern, minimum, maximum,
//     minProperties, maxProperties, default); every other keyword
//     ($schema, $id, additionalProperties, examples, exclusive bounds...) is
//     dropped.
//
// Inputs are bounded: nesting deeper than maxSchemaDepth or a rendering of
// more than maxSchemaNodes schemas (after inlining) is an error.

// Bounds of a schema rendering.
const (
	maxSchemaDepth = 32
	maxSchemaNodes = 4096
)

// A schemaObject is a JSON object whose fields keep their order.
type schemaObject []schemaField

type schemaField struct {
	key string
	val any
}

// MarshalJSON writes the fields in order.
func (o schemaObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.key)
		b.Write(k)
		b.WriteByte(':')
		v, err := marshalNoEscape(f.val)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// get returns the value of key, or nil.
func (o schemaObject) get(key string) any {
	for _, f := range o {
		if f.key == key {
			return f.val
		}
	}
	return nil
}

// marshalNoEscape encodes v as JSON without escaping HTML characters.
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// errSchemaTooLarge reports a schema beyond the bounds.
var errSchemaTooLarge = errors.New("schema too deep or too large to render")

// schemaRenderer holds the state of one rendering.
type schemaRenderer struct {
	defs  map[string]json.RawMessage // "#/$defs/x" and "#/definitions/x"
	nodes int
	path  []string // the definitions being inlined
}

// renderSchema translates a JSON Schema into the Gemini Schema subset.
func renderSchema(raw json.RawMessage) (schemaObject, error) {
	r := &schemaRenderer{defs: map[string]json.RawMessage{}}
	var root map[string]json.RawMessage
	if json.Unmarshal(raw, &root) == nil {
		for _, kw := range [...]string{"$defs", "definitions"} {
			var defs map[string]json.RawMessage
			if json.Unmarshal(root[kw], &defs) == nil {
				for name, d := range defs {
					r.defs["#/"+kw+"/"+name] = d
				}
			}
		}
	}
	return r.render(raw, 0)
}

// render translates one schema.
func (r *schemaRenderer) render(raw json.RawMessage, depth int) (schemaObject, error) {
	r.nodes++
	if depth > maxSchemaDepth || r.nodes > maxSchemaNodes {
		return nil, errSchemaTooLarge
	}
	raw = bytes.TrimSpace(raw)
	switch string(raw) {
	case "true", "false", "{}":
		// Any value (false, which matches nothing, cannot be said). A
		// schema needs a type: a string is a valid instance.
		return anyValue(""), nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("a schema is not a JSON object: %.60s", raw)
	}
	if ref, ok := m["$ref"]; ok {
		return r.renderRef(m, ref, depth)
	}
	if all, ok := m["allOf"]; ok {
		merged, err := r.mergeAllOf(m, all)
		if err != nil {
			return nil, err
		}
		return r.render(merged, depth+1)
	}

	var out schemaObject
	add := func(k string, v any) { out = append(out, schemaField{k, v}) }
	nullable := isTrue(m["nullable"])

	types, err := typeList(m["type"])
	if err != nil {
		return nil, err
	}
	if i := slices.Index(types, "null"); i >= 0 {
		types = slices.Delete(types, i, i+1)
		nullable = true
	}
	enum, other, hasNull, hasEnum := enumValues(m)
	nullable = nullable || hasNull
	if len(types) == 0 && hasEnum {
		types = []string{enumType(m, other)}
	}
	if len(types) > 1 {
		// Several types: one schema each, as anyOf.
		var alts []schemaObject
		for _, t := range types {
			one := cloneMap(m)
			one["type"], _ = json.Marshal(t)
			delete(one, "description")
			delete(one, "title")
			s, err := r.render(mapJSON(one), depth+1)
			if err != nil {
				return nil, err
			}
			alts = append(alts, s)
		}
		addString(&out, m, "title")
		addString(&out, m, "description")
		if nullable {
			add("nullable", true)
		}
		add("anyOf", alts)
		return out, nil
	}
	if len(types) == 0 && !hasEnum && m["anyOf"] == nil && m["oneOf"] == nil && m["properties"] == nil && m["items"] == nil {
		return anyValue(stringOf(m["description"])), nil
	}
	typ := ""
	if len(types) == 1 {
		typ = types[0]
		add("type", strings.ToUpper(typ))
	}
	if f := format(typ, m["format"]); f != "" {
		add("format", f)
	}
	addString(&out, m, "title")
	desc := stringOf(m["description"])
	if other != nil {
		desc = joinSentence(desc, "Allowed values: "+strings.Join(other, ", ")+".")
	}
	if ap, ok := m["additionalProperties"]; ok && m["properties"] == nil && typ == "object" {
		// A map: the subset cannot say what its values are, so say it.
		var apm map[string]json.RawMessage
		if json.Unmarshal(ap, &apm) == nil {
			if t := stringOf(apm["type"]); t != "" {
				desc = joinSentence(desc, "Any keys, with values of type "+t+".")
			}
		}
	}
	if desc != "" {
		add("description", desc)
	}
	if nullable {
		add("nullable", true)
	}
	if hasEnum && other == nil && len(enum) > 0 {
		add("enum", enum)
	}

	if props, ok := m["properties"]; ok {
		names, err := objectKeys(props)
		if err != nil {
			return nil, err
		}
		var pm map[string]json.RawMessage
		json.Unmarshal(props, &pm)
		if len(names) > 0 {
			var ps schemaObject
			for _, name := range names {
				s, err := r.render(pm[name], depth+1)
				if err != nil {
					return nil, err
				}
				ps = append(ps, schemaField{name, s})
			}
			add("properties", ps)
			var required []string
			if json.Unmarshal(m["required"], &required) == nil {
				required = slices.DeleteFunc(slices.Clone(required), func(n string) bool { return pm[n] == nil })
			}
			if len(required) > 0 {
				add("required", dedupe(required))
			}
			if len(names) > 1 {
				add("propertyOrdering", names)
			}
		}
	}
	if items, ok := m["items"]; ok {
		var tuple []json.RawMessage
		if json.Unmarshal(items, &tuple) == nil {
			// A tuple: each position's schema as an alternative.
			items = mapJSON(map[string]json.RawMessage{"anyOf": items})
		}
		s, err := r.render(items, depth+1)
		if err != nil {
			return nil, err
		}
		add("items", s)
	}
	for _, k := range [...]string{"minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties"} {
		if n, ok := count(m[k]); ok {
			add(k, n)
		}
	}
	if p := stringOf(m["pattern"]); p != "" {
		add("pattern", p)
	}
	for _, k := range [...]string{"minimum", "maximum"} {
		var n json.Number
		if json.Unmarshal(m[k], &n) == nil && n != "" {
			add(k, n)
		}
	}
	if d, ok := m["default"]; ok && string(d) != "null" && json.Valid(d) {
		add("default", json.RawMessage(d))
	}
	for _, k := range [...]string{"anyOf", "oneOf"} {
		if alts, ok := m[k]; ok {
			s, err := r.renderAnyOf(&out, alts, depth)
			if err != nil {
				return nil, err
			}
			if s != nil {
				out = s
			}
			break
		}
	}
	return typed(out), nil
}

// typed gives a schema without a type nor anyOf (which the subset needs)
// the type its keywords imply, or makes it a string of any value.
func typed(s schemaObject) schemaObject {
	if s.get("type") != nil || s.get("anyOf") != nil {
		return s
	}
	switch {
	case s.get("properties") != nil:
		return append(schemaObject{{"type", "OBJECT"}}, s...)
	case s.get("items") != nil:
		return append(schemaObject{{"type", "ARRAY"}}, s...)
	}
	desc, _ := s.get("description").(string)
	out := anyValue(desc)
	for _, f := range s {
		if out.get(f.key) == nil && f.key != "enum" && f.key != "format" {
			out = append(out, f)
		}
	}
	return out
}

// anyValue is the schema of a value of any type, which the subset cannot
// say: a schema needs a type, and a string is a valid instance.
func anyValue(desc string) schemaObject {
	if desc != "" {
		desc += " "
	}
	return schemaObject{{"type", "STRING"}, {"description", desc + "Any value, given as a string."}}
}

// renderAnyOf adds the alternatives of anyOf (or oneOf) to out. A "null"
// alternative makes out nullable; when one alternative remains, it is
// returned merged with out instead.
func (r *schemaRenderer) renderAnyOf(out *schemaObject, raw json.RawMessage, depth int) (schemaObject, error) {
	var members []json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return nil, errors.New("anyOf is not an array")
	}
	var alts []schemaObject
	nullable := false
	for _, mem := range members {
		var m map[string]json.RawMessage
		if json.Unmarshal(mem, &m) == nil && len(m) == 1 && stringOf(m["type"]) == "null" {
			nullable = true
			continue
		}
		s, err := r.render(mem, depth+1)
		if err != nil {
			return nil, err
		}
		alts = append(alts, s)
	}
	if nullable && out.get("nullable") == nil {
		*out = append(*out, schemaField{"nullable", true})
	}
	if len(alts) == 1 && out.get("type") == nil {
		// Inline the one alternative: its type first, its other fields
		// after out's, which win.
		var merged schemaObject
		if t := alts[0].get("type"); t != nil {
			merged = schemaObject{{"type", t}}
		}
		merged = append(merged, *out...)
		for _, f := range alts[0] {
			if merged.get(f.key) == nil {
				merged = append(merged, f)
			}
		}
		return merged, nil
	}
	if len(alts) > 0 {
		*out = append(*out, schemaField{"anyOf", alts})
	}
	return nil, nil
}

// renderRef inlines the definition a $ref points to. Keywords beside the
// $ref (a description, say) win over the definition's.
func (r *schemaRenderer) renderRef(m map[string]json.RawMessage, ref json.RawMessage, depth int) (schemaObject, error) {
	name := stringOf(ref)
	def, ok := r.defs[name]
	if !ok {
		return nil, fmt.Errorf("$ref %q: only references to #/$defs or #/definitions of the same schema are supported", name)
	}
	var dm map[string]json.RawMessage
	if err := json.Unmarshal(def, &dm); err != nil {
		dm = map[string]json.RawMessage{}
	}
	if slices.Contains(r.path, name) {
		desc := "A recursive " + strings.TrimPrefix(strings.TrimPrefix(name, "#/$defs/"), "#/definitions/") + "."
		if d := stringOf(m["description"]); d != "" {
			desc = d + " " + desc
		}
		if t := strings.ToLower(stringOf(dm["type"])); jsonTypes[t] && t != "null" {
			return schemaObject{{"type", strings.ToUpper(t)}, {"description", desc}}, nil
		}
		return anyValue(desc), nil
	}
	for k, v := range m {
		if k != "$ref" {
			dm[k] = v
		}
	}
	r.path = append(r.path, name)
	defer func() { r.path = r.path[:len(r.path)-1] }()
	return r.render(mapJSON(dm), depth+1)
}

// mergeAllOf merges the members of allOf into m: properties and required
// are joined; any other keyword keeps its first value, m's own first.
func (r *schemaRenderer) mergeAllOf(m map[string]json.RawMessage, raw json.RawMessage) (json.RawMessage, error) {
	var members []json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return nil, errors.New("allOf is not an array")
	}
	out := cloneMap(m)
	delete(out, "allOf")
	var props schemaObject
	var required []string
	collect := func(mm map[string]json.RawMessage) {
		if p, ok := mm["properties"]; ok {
			names, _ := objectKeys(p)
			var pm map[string]json.RawMessage
			json.Unmarshal(p, &pm)
			for _, n := range names {
				if props.get(n) == nil {
					props = append(props, schemaField{n, json.RawMessage(pm[n])})
				}
			}
		}
		var req []string
		if json.Unmarshal(mm["required"], &req) == nil {
			required = append(required, req...)
		}
	}
	collect(m)
	for _, mem := range members {
		var mm map[string]json.RawMessage
		if json.Unmarshal(mem, &mm) != nil {
			continue
		}
		if ref := stringOf(mm["$ref"]); ref != "" && r.defs[ref] != nil && !slices.Contains(r.path, ref) {
			var dm map[string]json.RawMessage
			if json.Unmarshal(r.defs[ref], &dm) == nil {
				mm = dm
			}
		}
		r.nodes++
		if r.nodes > maxSchemaNodes {
			return nil, errSchemaTooLarge
		}
		collect(mm)
		for k, v := range mm {
			if _, ok := out[k]; !ok && k != "properties" && k != "required" && k != "allOf" {
				out[k] = v
			}
		}
	}
	if len(props) > 0 {
		out["properties"], _ = props.MarshalJSON()
	}
	if len(required) > 0 {
		out["required"], _ = json.Marshal(required)
	}
	return mapJSON(out), nil
}

// jsonTypes are the types of JSON Schema.
var jsonTypes = map[string]bool{"string": true, "number": true, "integer": true, "boolean": true, "array": true, "object": true, "null": true}

// typeList reads "type": a string or an array of strings, lower-cased.
// Names that are not JSON Schema types are left out, as if absent.
func typeList(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var many []string
	var one string
	if json.Unmarshal(raw, &one) == nil {
		many = []string{one}
	} else if err := json.Unmarshal(raw, &many); err != nil {
		return nil, fmt.Errorf("type %.60s is neither a string nor an array of strings", raw)
	}
	out := many[:0]
	for _, t := range many {
		if t = strings.ToLower(t); jsonTypes[t] {
			out = append(out, t)
		}
	}
	return dedupe(out), nil
}

// enumValues reads enum (or const): the string values; the text of other
// values (nil when there are none); whether null is one; whether there is
// an enum at all.
func enumValues(m map[string]json.RawMessage) (strs, other []string, hasNull, ok bool) {
	var vals []json.RawMessage
	if c, isConst := m["const"]; isConst {
		vals = []json.RawMessage{c}
	} else if json.Unmarshal(m["enum"], &vals) != nil {
		return nil, nil, false, false
	}
	var texts []string
	for _, v := range vals {
		v = bytes.TrimSpace(v)
		if string(v) == "null" {
			hasNull = true
			continue
		}
		var s string
		if json.Unmarshal(v, &s) == nil {
			strs = append(strs, s)
			texts = append(texts, string(v))
			continue
		}
		var b bytes.Buffer
		json.Compact(&b, v)
		texts = append(texts, b.String())
		other = texts // non-strings: every value goes in the description
	}
	if other != nil {
		other = texts
	}
	return strs, other, hasNull, true
}

// enumType guesses the type of an enum without one from its values:
// "string" unless they are all numbers (integers or not) or all booleans.
func enumType(m map[string]json.RawMessage, other []string) string {
	if other == nil {
		return "string"
	}
	kind := ""
	for _, v := range other {
		k := "string"
		switch {
		case v == "true" || v == "false":
			k = "boolean"
		case json.Valid([]byte(v)) && (v[0] == '-' || v[0] >= '0' && v[0] <= '9'):
			k = "integer"
			if strings.ContainsAny(v, ".eE") {
				k = "number"
			}
		}
		switch {
		case kind == "":
			kind = k
		case kind == k:
		case kind == "integer" && k == "number", kind == "number" && k == "integer":
			kind = "number"
		default:
			return "string"
		}
	}
	return kind
}

// format returns the format of a schema of type typ when the API takes it.
func format(typ string, raw json.RawMessage) string {
	f := stringOf(raw)
	ok := false
	switch typ {
	case "string":
		ok = f == "date-time" || f == "enum"
	case "integer":
		ok = f == "int32" || f == "int64"
	case "number":
		ok = f == "float" || f == "double"
	}
	if !ok {
		return ""
	}
	return f
}

// objectKeys returns the keys of a JSON object in their order.
func objectKeys(raw json.RawMessage) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("properties is not an object")
	}
	var keys []string
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// count reads a non-negative integer keyword.
func count(raw json.RawMessage) (int64, bool) {
	var f float64
	if json.Unmarshal(raw, &f) != nil || f < 0 || f != float64(int64(f)) {
		return 0, false
	}
	return int64(f), true
}

func isTrue(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "true" }

// stringOf returns raw as a string, or "" when it is not one.
func stringOf(raw json.RawMessage) string {
	var s string
	json.Unmarshal(raw, &s)
	return s
}

// addString adds m[key] to out when it is a non-empty string.
func addString(out *schemaObject, m map[string]json.RawMessage, key string) {
	if s := stringOf(m[key]); s != "" {
		*out = append(*out, schemaField{key, s})
	}
}

func cloneMap(m map[string]json.RawMessage) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func mapJSON(m map[string]json.RawMessage) json.RawMessage {
	b, _ := json.Marshal(m)
	return b
}

// dedupe returns s without repeated values, in the order of first use.
func dedupe(s []string) []string {
	seen := make(map[string]bool, len(s))
	var out []string
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// joinSentence appends sentence to text, with a space between them.
func joinSentence(text, sentence string) string {
	if text == "" {
		return sentence
	}
	return text + " " + sentence
}
