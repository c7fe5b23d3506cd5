package loop

import (
	"errors"
	"fmt"
	"iter"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/hrns-dev/hrns/llm"
)

// Errors returned while wiring a [Toolset].
var (
	// ErrDuplicateTool: a tool of the same name is already wired. The
	// toolset keeps the first one and refuses the second.
	ErrDuplicateTool = errors.New("duplicate tool name")
	// ErrInvalidTool: the tool's name, schema or handler is unusable.
	ErrInvalidTool = errors.New("invalid tool")
)

// A Toolset is the set of tools an agent may call: each spec wired to its
// handler, in a stable order (the order they were added), under unique names.
//
// There is no default toolset: an application names every tool its agent
// can use. A Toolset is built once, then read by any number of runs; Add and
// Join must not be called while a run uses it.
type Toolset struct {
	tools []*wiredTool
	index map[string]*wiredTool
}

// wiredTool is a ToolDef as added, with its schema resolved for validation.
type wiredTool struct {
	def    ToolDef
	schema *jsonschema.Resolved
	// flat, when the schema is simple enough, accepts most arguments
	// without schema (see flatObject).
	flat *flatObject
}

// NewToolset returns a toolset holding defs, or the first wiring error.
func NewToolset(defs ...*ToolDef) (*Toolset, error) {
	ts := &Toolset{}
	for _, d := range defs {
		if err := ts.Add(d); err != nil {
			return nil, err
		}
	}
	return ts, nil
}

// MustToolset is like [NewToolset] but panics on a wiring error; use it for
// toolsets fixed in code.
func MustToolset(defs ...*ToolDef) *Toolset {
	ts, err := NewToolset(defs...)
	if err != nil {
		panic(err)
	}
	return ts
}

// validToolName reports whether name is 1 to 64 ASCII letters, digits,
// '_' or '-' (what `^[a-zA-Z0-9_-]{1,64}$` matches; a regular expression
// with a counted repetition compiles to 64 copies of its class, which
// every process linking the loop paid for at start).
func validToolName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Add wires def into the toolset. It returns an error wrapping
// [ErrDuplicateTool] if a tool of that name is already wired, and
// [ErrInvalidTool] if def has no valid name, no handler, an input schema
// that is not a JSON Schema for an object, or a command subject without a
// parser ([ErrNoCommandParser]).
func (ts *Toolset) Add(def *ToolDef) error {
	if def == nil {
		return fmt.Errorf("%w: nil ToolDef", ErrInvalidTool)
	}
	if !validToolName(def.Name) {
		return fmt.Errorf("%w: name %q must be 1 to 64 letters, digits, '_' or '-'", ErrInvalidTool, def.Name)
	}
	if def.Handler == nil {
		return fmt.Errorf("%w: tool %q has no handler", ErrInvalidTool, def.Name)
	}
	if def.Subject.Kind == SubjectCommand && def.Subject.Parser == nil {
		return fmt.Errorf("%w: tool %q: %w", ErrInvalidTool, def.Name, ErrNoCommandParser)
	}
	if _, dup := ts.index[def.Name]; dup {
		return fmt.Errorf("%w: %q is already wired", ErrDuplicateTool, def.Name)
	}
	w := &wiredTool{def: *def}
	if len(w.def.InputSchema) == 0 {
		w.def.InputSchema = emptyObjectSchema
	}
	w.def.InputSchema = append([]byte(nil), w.def.InputSchema...)
	schema, err := compileSchema(w.def.InputSchema)
	if err != nil {
		return fmt.Errorf("%w: tool %q: %w", ErrInvalidTool, def.Name, err)
	}
	w.schema = schema
	w.flat = flatFor(schema.Schema())
	if ts.index == nil {
		ts.index = make(map[string]*wiredTool)
	}
	ts.tools = append(ts.tools, w)
	ts.index[def.Name] = w
	return nil
}

// AddTool wires a simple [Tool] under name; see [FromTool].
func (ts *Toolset) AddTool(name string, t Tool) error {
	def, err := FromTool(name, t)
	if err != nil {
		return err
	}
	return ts.Add(def)
}

// Join returns a new toolset holding the tools of every set, in order. A
// name wired in two sets is an error wrapping [ErrDuplicateTool]; nil sets
// are skipped.
func Join(sets ...*Toolset) (*Toolset, error) {
	out := &Toolset{}
	for _, s := range sets {
		if s == nil {
			continue
		}
		for _, w := range s.tools {
			if _, dup := out.index[w.def.Name]; dup {
				return nil, fmt.Errorf("%w: %q is wired in two toolsets", ErrDuplicateTool, w.def.Name)
			}
			if out.index == nil {
				out.index = make(map[string]*wiredTool)
			}
			out.tools = append(out.tools, w)
			out.index[w.def.Name] = w
		}
	}
	return out, nil
}

// Len returns the number of tools.
func (ts *Toolset) Len() int {
	if ts == nil {
		return 0
	}
	return len(ts.tools)
}

// Names returns the tool names in order.
func (ts *Toolset) Names() []string {
	if ts == nil {
		return nil
	}
	names := make([]string, len(ts.tools))
	for i, w := range ts.tools {
		names[i] = w.def.Name
	}
	return names
}

// Lookup returns a copy of the tool wired under name.
func (ts *Toolset) Lookup(name string) (ToolDef, bool) {
	if ts == nil {
		return ToolDef{}, false
	}
	w, ok := ts.index[name]
	if !ok {
		return ToolDef{}, false
	}
	return w.def, true
}

// All yields copies of the tools in order.
func (ts *Toolset) All() iter.Seq[ToolDef] {
	return func(yield func(ToolDef) bool) {
		if ts == nil {
			return
		}
		for _, w := range ts.tools {
			if !yield(w.def) {
				return
			}
		}
	}
}

// Specs returns what the model is told about the tools, in order.
func (ts *Toolset) Specs() []llm.ToolSpec {
	if ts.Len() == 0 {
		return nil
	}
	specs := make([]llm.ToolSpec, len(ts.tools))
	for i, w := range ts.tools {
		specs[i] = llm.ToolSpec{Name: w.def.Name, Description: w.def.Description, InputSchema: w.def.InputSchema, Computer: w.def.Computer}
	}
	return specs
}

func (ts *Toolset) lookup(name string) *wiredTool {
	if ts == nil {
		return nil
	}
	return ts.index[name]
}
