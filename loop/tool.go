package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// Tool is the simple tool contract: string in, string out at the
// conversation boundary. The loop exposes it to the model as a function whose
// name is its key in the map given to [New], whose description is
// Description, and whose parameters are a flat object schema built from
// Arguments.
//
// A Tool may also implement [ContextTool] to receive the run's context and
// report failures as errors, and [ConcurrentTool] to run in parallel with
// other calls. For typed arguments, nested objects and typed results use
// [NewTool] instead.
type Tool interface {
	Description() string
	Arguments() []ToolArgument
	Call(args map[string]any) string
}

// ContextTool is implemented by a [Tool] that can be cancelled and can fail.
// When a tool implements it, the loop calls CallContext instead of Call: ctx
// is done when the call times out or the run is cancelled, and a non-nil
// error is reported to the model as a tool error.
type ContextTool interface {
	Tool
	CallContext(ctx context.Context, args map[string]any) (string, error)
}

// ConcurrentTool is implemented by a [Tool] that may run at the same time as
// other calls from the same model message. Tools are sequential unless they
// say otherwise.
type ConcurrentTool interface {
	Tool
	ConcurrencySafe() bool
}

// A ToolArgument declares one argument of a [Tool].
//
// Name and Type are all the simple contract needs; every argument is then
// required. The other fields are optional refinements that the simple form
// leaves at their zero values.
type ToolArgument struct {
	// Name is the argument's key in the arguments object.
	Name string
	// Type is a JSON Schema type: "string", "number", "integer",
	// "boolean", "object" or "array".
	Type string
	// Description tells the model what the argument is for.
	Description string
	// Optional arguments may be left out by the model.
	Optional bool
	// Enum, when set, lists the values the argument may take.
	Enum []any
}

// NewSimpleTool returns a [Tool] made of a description, its arguments and a
// function.
func NewSimpleTool(description string, arguments []ToolArgument, fn func(args map[string]any) string) Tool {
	return &simpleTool{description: description, arguments: slices.Clone(arguments), fn: fn}
}

type simpleTool struct {
	description string
	arguments   []ToolArgument
	fn          func(map[string]any) string
}

func (t *simpleTool) Description() string             { return t.description }
func (t *simpleTool) Arguments() []ToolArgument       { return t.arguments }
func (t *simpleTool) Call(args map[string]any) string { return t.fn(args) }

// argumentsSchema builds the flat object schema of a simple tool.
func argumentsSchema(args []ToolArgument) (json.RawMessage, error) {
	type property struct {
		Type        string `json:"type"`
		Description string `json:"description,omitempty"`
		Enum        []any  `json:"enum,omitempty"`
	}
	type object struct {
		Type       string              `json:"type"`
		Properties map[string]property `json:"properties"`
		Required   []string            `json:"required,omitempty"`
	}
	o := object{Type: "object", Properties: make(map[string]property, len(args))}
	for _, a := range args {
		switch a.Type {
		case "string", "number", "integer", "boolean", "object", "array":
		default:
			return nil, fmt.Errorf("argument %q: type %q is not a JSON Schema type", a.Name, a.Type)
		}
		if a.Name == "" {
			return nil, fmt.Errorf("an argument has no name")
		}
		if _, dup := o.Properties[a.Name]; dup {
			return nil, fmt.Errorf("argument %q is declared twice", a.Name)
		}
		o.Properties[a.Name] = property{Type: a.Type, Description: a.Description, Enum: a.Enum}
		if !a.Optional {
			o.Required = append(o.Required, a.Name)
		}
	}
	return json.Marshal(o) // map keys are sorted: the schema is stable
}

// FromTool wires a [Tool] under name into a [ToolDef].
func FromTool(name string, t Tool) (*ToolDef, error) {
	if t == nil {
		return nil, fmt.Errorf("%w: tool %q is nil", ErrInvalidTool, name)
	}
	schema, err := argumentsSchema(t.Arguments())
	if err != nil {
		return nil, fmt.Errorf("%w: tool %q: %w", ErrInvalidTool, name, err)
	}
	def := &ToolDef{Name: name, Description: t.Description(), InputSchema: schema}
	if ct, ok := t.(ConcurrentTool); ok {
		def.Concurrent = ct.ConcurrencySafe()
	}
	if ct, ok := t.(ContextTool); ok {
		def.Handler = func(ctx context.Context, call *Call) (*Output, error) {
			s, err := ct.CallContext(ctx, call.Args)
			if err != nil {
				return nil, err
			}
			return TextOutput(s), nil
		}
	} else {
		def.Handler = func(_ context.Context, call *Call) (*Output, error) {
			return TextOutput(t.Call(call.Args)), nil
		}
	}
	return def, nil
}

// ToolsetFromMap wires each tool of m under its key, in the order of the
// sorted keys.
func ToolsetFromMap(m map[string]Tool) (*Toolset, error) {
	ts := &Toolset{}
	for _, name := range slices.Sorted(maps.Keys(m)) {
		def, err := FromTool(name, m[name])
		if err != nil {
			return nil, err
		}
		if err := ts.Add(def); err != nil {
			return nil, err
		}
	}
	return ts, nil
}
