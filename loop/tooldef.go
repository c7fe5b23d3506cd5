package loop

import (
	"context"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/hrns-dev/hrns/llm"
)

// A ToolDef is a tool as the loop runs it: the spec the model sees, wired to
// the handler that answers it. Build one with [NewTool] (typed), [FromTool]
// (a simple [Tool]), [NewClientTool], or as a literal with a raw schema, then
// add it to a [Toolset]. A ToolDef is copied when it is added: changing it
// afterwards does not change the toolset.
type ToolDef struct {
	// Name is how the model calls the tool: 1 to 64 letters, digits, '_'
	// or '-'.
	Name string
	// Description is what the model reads to decide when to call it.
	Description string
	// InputSchema is the JSON Schema of the arguments object. Nil means
	// a tool without arguments. Arguments are validated against it
	// before the handler runs, and its defaults are applied.
	InputSchema json.RawMessage
	// Handler answers calls.
	Handler Handler
	// Concurrent marks a tool that is safe to run at the same time as
	// other calls of one model message. Tools are sequential by default.
	Concurrent bool
	// Timeout bounds one call; 0 means the agent's ToolTimeout.
	Timeout time.Duration
	// RequiresApproval makes every call wait for the agent's [Approver]
	// in the default permission mode (see [Permissions]).
	RequiresApproval bool
	// Access says what calls may change, for the permission modes: the
	// zero value, AccessUnknown, is taken to change anything (plan mode
	// refuses it).
	Access Access
	// Subject names the argument that permission rules match (the
	// command of a shell tool, the path of a file tool, the URL of a
	// fetch); the zero value means rules match the tool's name only.
	Subject Subject
	// Computer marks a computer-use tool (the desktop package's) on a
	// screen of this size, for providers with a native computer tool
	// ([llm.ToolSpec.Computer]); nil for every other tool.
	Computer *Computer
	// AskPerson, if set, is asked about each call with its validated
	// arguments; a reason it returns sends the call to the agent's
	// [Approver], a person, whatever the mode, the allow rules and the
	// pre_tool hooks say (deny rules and hooks still refuse it), and
	// without an approver the call is refused. For what only a person
	// may acknowledge: a provider's safety check on a computer action.
	AskPerson func(args json.RawMessage) string

	// decode, set by [NewTool] when its argument type decodes plainly
	// (see plainDecoding), decodes validated arguments into that type,
	// on the run's goroutine (see Call.decoded).
	decode func(json.RawMessage) (any, bool)
}

// Computer is the screen of a computer-use tool, as its screenshots show it.
type Computer = llm.ComputerSpec

// A Handler answers one call of a tool. ctx is done when the call times out
// or the run stops. A non-nil error is reported to the model as a tool error
// (the run goes on), except [ErrPending], which suspends the call.
type Handler func(ctx context.Context, call *Call) (*Output, error)

// A Call is one validated tool call, as a handler receives it.
type Call struct {
	// ID is the call's ID, unique within the run.
	ID string
	// Name is the tool's name.
	Name string
	// Arguments is the arguments object, validated and with schema
	// defaults applied.
	Arguments json.RawMessage
	// Args is Arguments decoded, for handlers that want a map.
	Args map[string]any

	// decoded is Arguments decoded by its tool's ToolDef.decode, and
	// decodedFrom the slice it was decoded from: a handler made by
	// [NewTool] uses it only while Arguments is still that slice.
	decoded     any
	decodedFrom json.RawMessage
}

// decodedArgs returns the arguments the executor decoded for this call, if
// it did and Arguments is still what they were decoded from.
func (c *Call) decodedArgs() (any, bool) {
	if c.decoded == nil || len(c.decodedFrom) != len(c.Arguments) || len(c.Arguments) == 0 || &c.decodedFrom[0] != &c.Arguments[0] {
		return nil, false
	}
	return c.decoded, true
}

// Output is what a tool returns to the model.
type Output struct {
	// Content is text, and images or documents where the provider
	// supports them.
	Content []llm.Part
	// IsError marks a failure the model should see as one.
	IsError bool
}

// TextOutput returns an output holding text.
func TextOutput(text string) *Output {
	return &Output{Content: []llm.Part{llm.TextPart(text)}}
}

// ErrorOutput returns an output that reports a failure to the model.
func ErrorOutput(text string) *Output {
	return &Output{Content: []llm.Part{llm.TextPart(text)}, IsError: true}
}

// ErrPending is returned by a handler whose result will be supplied later,
// by the caller ([Agent.Resume]): a client-side tool, or work done out of
// band. The run stops with a [Suspension] once the other calls of the same
// message are done.
var ErrPending = errors.New("tool call pending")

// NewClientTool returns a tool that the caller runs: every call suspends the
// run until its result is given to [Agent.Resume]. schema is the JSON Schema
// of its arguments (nil for none).
func NewClientTool(name, description string, schema json.RawMessage) *ToolDef {
	return &ToolDef{
		Name:        name,
		Description: description,
		InputSchema: schema,
		Concurrent:  true,
		Handler: func(context.Context, *Call) (*Output, error) {
			return nil, ErrPending
		},
	}
}

// NewTool returns a tool that calls fn with its arguments decoded into In.
//
// The JSON Schema of the arguments is inferred from In, which must be a
// struct (or a pointer to one):
//   - properties are the exported fields, named by their json tags;
//   - a field is optional when its json tag has omitempty or omitzero, and
//     required otherwise;
//   - the `jsonschema` tag is the field's description;
//   - the `enum` tag lists allowed values separated by commas, and the
//     `default` tag gives a default value (both written as JSON values, or
//     bare words for strings), applied before fn sees the arguments; a
//     field with a default is optional;
//   - nested structs, slices, maps with string keys and pointers become
//     nested object, array and nullable schemas.
//
// fn's result becomes the tool's output: a string or []byte as text, an
// *[Output] or [llm.Part] or []llm.Part as it is, anything else as JSON. An
// error from fn is reported to the model as a tool error.
//
// NewTool panics if In's schema cannot be inferred: that is a programming
// error, found the first time the code runs.
func NewTool[In, Out any](name, description string, fn func(ctx context.Context, in In) (Out, error)) *ToolDef {
	schema, err := schemaFor[In]()
	if err != nil {
		panic(fmt.Sprintf("loop.NewTool(%q): %v", name, err))
	}
	def := &ToolDef{
		Name:        name,
		Description: description,
		InputSchema: schema,
		Handler: func(ctx context.Context, call *Call) (*Output, error) {
			var in In
			if v, ok := call.decodedArgs(); ok {
				in = v.(In)
			} else if err := json.Unmarshal(call.Arguments, &in); err != nil {
				return nil, fmt.Errorf("arguments do not fit the tool: %w", err)
			}
			out, err := fn(ctx, in)
			if err != nil {
				return nil, err
			}
			return toOutput(out)
		},
	}
	if plainDecoding(reflect.TypeFor[In]()) {
		// Decoding runs none of the tool's code (it cannot block or
		// panic) and the value shares no memory, so the executor
		// decodes on the run's goroutine, whose stack has grown
		// already, before the handler's goroutine starts: that
		// goroutine's stack then need not grow for the decoding. On an
		// error the handler decodes again, and fails as always.
		def.decode = func(raw json.RawMessage) (any, bool) {
			var in In
			if json.Unmarshal(raw, &in) != nil {
				return nil, false
			}
			return in, true
		}
	}
	return def
}

// plainDecoding reports whether In is decoded by encoding/json without
// calling a method of a type within it, and holds no reference to shared
// memory, so that a decoded value handed to a handler twice is as fresh as
// a new decoding: t is a struct, an array, a string, a number or a boolean,
// of such types, and no type within it implements json.Unmarshaler or
// encoding.TextUnmarshaler (on its value or its pointer).
func plainDecoding(t reflect.Type) bool {
	for _, u := range []reflect.Type{t, reflect.PointerTo(t)} {
		if u.Implements(jsonUnmarshalerType) || u.Implements(textUnmarshalerType) {
			return false
		}
	}
	switch t.Kind() {
	case reflect.Array:
		return plainDecoding(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !plainDecoding(t.Field(i).Type) {
				return false
			}
		}
		return true
	case reflect.String, reflect.Bool, reflect.Float32, reflect.Float64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	}
	return false
}

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func toOutput(v any) (*Output, error) {
	switch v := v.(type) {
	case string:
		return TextOutput(v), nil
	case []byte:
		return TextOutput(string(v)), nil
	case *Output:
		if v == nil {
			return TextOutput(""), nil
		}
		return v, nil
	case Output:
		return &v, nil
	case llm.Part:
		return &Output{Content: []llm.Part{v}}, nil
	case []llm.Part:
		return &Output{Content: v}, nil
	case nil:
		return TextOutput(""), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding the result: %w", err)
	}
	return TextOutput(string(b)), nil
}
