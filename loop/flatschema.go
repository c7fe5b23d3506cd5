package loop

import (
	"math"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
)

// A flatObject checks arguments against the simplest input schemas, those
// that typed tools mostly have: an object whose properties are strings,
// numbers, integers or booleans (strings perhaps from an enum), with
// required properties and perhaps no others. jsonschema-go's validation of
// such an object took about 16,000 instructions a call; this takes a few
// hundred. It only accepts: arguments it does not accept are validated by
// jsonschema-go, which decides and words the error. So it must never accept
// what jsonschema-go refuses (TestFlatObjectNeverAcceptsMore and
// FuzzFlatObject hold it to that); a schema with any other keyword has no
// flatObject.
type flatObject struct {
	props    map[string]flatProp
	required []string
	// closed: additionalProperties is false.
	closed bool
}

// A flatProp is the schema of one property: its type ("" for any value)
// and, for a string, the values of its enum (nil for any).
type flatProp struct {
	typ  string
	enum []string
}

// flatFor returns the flatObject of s, or nil if s is not that simple.
func flatFor(s *jsonschema.Schema) *flatObject {
	if s == nil || s.Type != "object" {
		return nil
	}
	f := &flatObject{props: make(map[string]flatProp, len(s.Properties)), required: s.Required}
	rest := *s
	rest.Type, rest.Properties, rest.Required, rest.AdditionalProperties = "", nil, nil, nil
	rest.Title, rest.Description, rest.Comment, rest.PropertyOrder = "", "", "", nil
	if !reflect.ValueOf(rest).IsZero() {
		return nil
	}
	switch a := s.AdditionalProperties; {
	case a == nil:
	case isFalseSchema(a):
		f.closed = true
	default:
		return nil
	}
	for name, p := range s.Properties {
		fp, ok := flatPropFor(p)
		if !ok {
			return nil
		}
		f.props[name] = fp
	}
	return f
}

// isFalseSchema reports whether s is jsonschema-go's false schema, {"not": {}}.
func isFalseSchema(s *jsonschema.Schema) bool {
	if s.Not == nil || !reflect.ValueOf(*s.Not).IsZero() {
		return false
	}
	rest := *s
	rest.Not = nil
	return reflect.ValueOf(rest).IsZero()
}

func flatPropFor(p *jsonschema.Schema) (flatProp, bool) {
	if p == nil {
		return flatProp{}, false
	}
	rest := *p
	rest.Type, rest.Enum = "", nil
	rest.Title, rest.Description, rest.Comment, rest.Default = "", "", "", nil
	if !reflect.ValueOf(rest).IsZero() {
		return flatProp{}, false
	}
	fp := flatProp{typ: p.Type}
	switch p.Type {
	case "", "number", "integer", "boolean":
		if p.Enum != nil {
			return flatProp{}, false
		}
	case "string":
		if p.Enum != nil {
			fp.enum = make([]string, 0, len(p.Enum))
			for _, e := range p.Enum {
				s, ok := e.(string)
				if !ok {
					return flatProp{}, false
				}
				fp.enum = append(fp.enum, s)
			}
		}
	default:
		return flatProp{}, false
	}
	return fp, true
}

// accepts reports whether args, decoded by encoding/json, surely fit the
// schema; false means that jsonschema-go must decide.
func (f *flatObject) accepts(args map[string]any) bool {
	for _, name := range f.required {
		if _, ok := args[name]; !ok {
			return false
		}
	}
	for name, v := range args {
		p, ok := f.props[name]
		if !ok {
			if f.closed {
				return false
			}
			continue
		}
		if !p.accepts(v) {
			return false
		}
	}
	return true
}

func (p flatProp) accepts(v any) bool {
	switch p.typ {
	case "":
		return true
	case "string":
		s, ok := v.(string)
		if !ok {
			return false
		}
		if p.enum == nil {
			return true
		}
		for _, e := range p.enum {
			if s == e {
				return true
			}
		}
		return false
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "number":
		_, ok := v.(float64)
		return ok
	case "integer":
		n, ok := v.(float64)
		if !ok {
			return false
		}
		_, frac := math.Modf(n)
		return frac == 0
	}
	return false
}
