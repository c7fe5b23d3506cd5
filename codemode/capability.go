package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"go.starlark.net/starlark"
)

// A capability is a granted loop tool as programs call it.
type capability struct {
	name     string // the Starlark name: the tool's, with '-' as '_'
	def      loop.ToolDef
	props    map[string]*jsonschema.Schema
	names    []string // property names, in schema order where known
	required []string
	open     bool // the schema admits properties it does not list
}

var identRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// keywords are Starlark's keywords and reserved words: names a capability
// cannot take.
var keywords = []string{
	"and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else",
	"except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "load",
	"nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
}

// newCapability prepares def to be called from programs. Its schema is
// read for the static check and the tool's description; the toolset has
// already resolved it, and validates calls against it.
func newCapability(def loop.ToolDef) (*capability, error) {
	name := strings.ReplaceAll(def.Name, "-", "_")
	switch {
	case !identRE().MatchString(name):
		return nil, fmt.Errorf("capability %q: not a valid Starlark name", def.Name)
	case slices.Contains(keywords, name):
		return nil, fmt.Errorf("capability %q: a Starlark keyword", def.Name)
	case starlark.Universe.Has(name):
		return nil, fmt.Errorf("capability %q: would hide the Starlark built-in of that name", def.Name)
	case name == resultName:
		return nil, fmt.Errorf("capability %q: the name is the program's result variable", def.Name)
	}
	raw := def.InputSchema
	if len(raw) == 0 {
		raw = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("capability %q: input schema: %w", def.Name, err)
	}
	c := &capability{
		name:     name,
		def:      def,
		props:    s.Properties,
		required: s.Required,
		open:     s.AdditionalProperties == nil || s.AdditionalProperties.Not == nil,
	}
	c.names = propertyOrder(raw, s.Properties)
	return c, nil
}

// propertyOrder returns the property names in the order the schema lists
// them, so signatures read as the tool's author wrote them.
func propertyOrder(raw json.RawMessage, props map[string]*jsonschema.Schema) []string {
	var top struct {
		Properties json.RawMessage `json:"properties"`
	}
	var names []string
	if json.Unmarshal(raw, &top) == nil && len(top.Properties) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(top.Properties)))
		if t, err := dec.Token(); err == nil && t == json.Delim('{') {
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					break
				}
				names = append(names, k.(string))
				var skip json.RawMessage
				if dec.Decode(&skip) != nil {
					break
				}
			}
		}
	}
	if len(names) != len(props) {
		names = names[:0]
		for k := range props {
			names = append(names, k)
		}
		slices.Sort(names)
	}
	return names
}

func (c *capability) hasDefault(name string) bool {
	p := c.props[name]
	return p != nil && p.Default != nil
}

// signature describes the capability's arguments, for error messages.
func (c *capability) signature() string {
	if len(c.names) == 0 {
		return "it takes no arguments"
	}
	return "it takes " + c.params()
}

// params lists the arguments as "name: type" ("name?: type" if optional).
func (c *capability) params() string {
	parts := make([]string, len(c.names))
	for i, n := range c.names {
		opt := "?"
		if slices.Contains(c.required, n) && !c.hasDefault(n) {
			opt = ""
		}
		typ := strings.Join(schemaTypes(c.props[n]), "|")
		if typ == "" {
			typ = "any"
		}
		parts[i] = n + opt + ": " + typ
	}
	return strings.Join(parts, ", ")
}

// example shows a call with keyword arguments.
func (c *capability) example() string {
	if len(c.names) == 0 {
		return c.name + "()"
	}
	return c.name + "(" + c.names[0] + "=...)"
}

// capError is a capability's failure inside a program. err is the cause
// (the handler's error, the approver's, the context's), never the loop's
// *loop.ToolError itself: the run_code handler's error reaches the loop,
// which would report a ToolError found in its chain instead of the
// program's error.
type capError struct {
	name string
	msg  string
	err  error
}

func (e *capError) Error() string { return e.msg }
func (e *capError) Unwrap() error { return e.err }

// builtin returns the Starlark function that calls c within run x. The
// call itself is the loop's ([loop.Toolset.Invoke], made by the parent
// process: see [execution.serve]): arguments validated
// against the schema with its defaults, approval with its deadline, the
// handler's timeout, panic recovery. What is codemode's is the conversion
// of Starlark values to and from JSON, and the messages a program reads.
func (c *capability) builtin(x *execution) *starlark.Builtin {
	return starlark.NewBuiltin(c.name, func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if len(args) > 0 {
			return nil, &capError{name: c.name, msg: fmt.Sprintf("%s takes keyword arguments only, as in %s; %s", c.name, c.example(), c.signature())}
		}
		var size int64
		for _, kv := range kwargs {
			size = add(size, jsonSize(kv[1], x.meter.limit))
		}
		// The arguments are encoded, then copied into the call.
		if err := x.charge(thread, mul(size, 2), "encoding the arguments of "+c.name); err != nil {
			return nil, err
		}
		m := make(map[string]json.RawMessage, len(kwargs))
		for _, kv := range kwargs {
			k := string(kv[0].(starlark.String))
			raw, err := toJSON(kv[1])
			if err != nil {
				return nil, &capError{name: c.name, msg: fmt.Sprintf("%s: argument %q: %v", c.name, k, err)}
			}
			m[k] = raw
		}
		raw, err := json.Marshal(m)
		if err != nil {
			return nil, &capError{name: c.name, msg: fmt.Sprintf("%s: arguments: %v", c.name, err), err: err}
		}
		// The parent makes the call (see process.go).
		reply, err := x.invoke(c.def.Name, raw)
		switch {
		case err != nil:
			return nil, &capError{name: c.name, msg: fmt.Sprintf("%s was interrupted: %v", c.name, err), err: err}
		case reply.Stop != nil:
			x.halt(thread, reply.Stop.Kind)
			return nil, &capError{name: c.name, msg: c.name + " was interrupted", err: context.Cause(x.parent)}
		case reply.Err != "":
			return nil, &capError{name: c.name, msg: reply.Err}
		}
		return resultValue(reply.Text), nil
	})
}

// failure turns an error of Invoke into the program's error.
func (c *capability) failure(ctx context.Context, err error) *capError {
	if te, ok := errors.AsType[*loop.ToolError](err); ok {
		if te.Kind == loop.ToolBadArgs {
			// The signature helps a program that computed its
			// arguments, which the static check could not see.
			return &capError{name: c.name, msg: fmt.Sprintf("%s: invalid arguments: %v; %s", c.name, te.Err, c.signature()), err: te.Err}
		}
		return &capError{name: c.name, msg: te.Msg, err: te.Err}
	}
	switch {
	case ctx.Err() != nil:
		// The program's time is up or its caller left: the program
		// reports that, not this call.
		return &capError{name: c.name, msg: fmt.Sprintf("%s was interrupted: %v", c.name, err), err: err}
	case errors.Is(err, loop.ErrPending):
		return &capError{name: c.name, msg: c.name + " failed: its result would come later, and a program cannot wait for it", err: err}
	}
	return &capError{name: c.name, msg: fmt.Sprintf("%s failed: %v", c.name, err), err: err}
}

// outputText joins the text of an output; images and documents are not
// visible to programs.
func outputText(out *loop.Output) string {
	var b strings.Builder
	for _, p := range out.Content {
		if p.Kind == llm.PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}
