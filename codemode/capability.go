package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"go.starlark.net/starlark"
)

// A capability is a granted loop tool as programs call it.
type capability struct {
	name     string // the Starlark name: the tool's, with '-' as '_'
	def      loop.ToolDef
	schema   *jsonschema.Resolved
	props    map[string]*jsonschema.Schema
	names    []string // property names, in schema order where known
	required []string
	open     bool // the schema admits properties it does not list
	defaults bool // some property has a default
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// keywords are Starlark's keywords and reserved words: names a capability
// cannot take.
var keywords = []string{
	"and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else",
	"except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "load",
	"nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
}

// newCapability prepares def to be called from programs.
func newCapability(def loop.ToolDef) (*capability, error) {
	name := strings.ReplaceAll(def.Name, "-", "_")
	switch {
	case !identRE.MatchString(name):
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
	resolved, err := s.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		return nil, fmt.Errorf("capability %q: input schema: %w", def.Name, err)
	}
	c := &capability{
		name:     name,
		def:      def,
		schema:   resolved,
		props:    s.Properties,
		required: s.Required,
		open:     s.AdditionalProperties == nil || s.AdditionalProperties.Not == nil,
	}
	c.names = propertyOrder(raw, s.Properties)
	for _, p := range s.Properties {
		if p.Default != nil {
			c.defaults = true
		}
	}
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

// capError is a capability's failure inside a program.
type capError struct {
	name string
	msg  string
	err  error
}

func (e *capError) Error() string { return e.msg }
func (e *capError) Unwrap() error { return e.err }

// builtin returns the Starlark function that calls c within run x.
func (c *capability) builtin(x *execution) *starlark.Builtin {
	return starlark.NewBuiltin(c.name, func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		fail := func(format string, a ...any) error {
			return &capError{name: c.name, msg: fmt.Sprintf(format, a...)}
		}
		if len(args) > 0 {
			return nil, fail("%s takes keyword arguments only, as in %s; %s", c.name, c.example(), c.signature())
		}
		m := make(map[string]any, len(kwargs))
		for _, kv := range kwargs {
			k := string(kv[0].(starlark.String))
			raw, err := toJSON(kv[1])
			if err != nil {
				return nil, fail("%s: argument %q: %v", c.name, k, err)
			}
			m[k] = json.RawMessage(raw)
		}
		rawArgs, parsed, err := c.parseArgs(m)
		if err != nil {
			return nil, fail("%s: invalid arguments: %v; %s", c.name, err, c.signature())
		}
		call := &loop.Call{ID: fmt.Sprintf("%s/%d", x.id, x.calls.Add(1)), Name: c.def.Name, Arguments: rawArgs, Args: parsed}
		if c.def.RequiresApproval {
			if err := x.r.approveCall(x.ctx, call, c.def.Description); err != nil {
				return nil, &capError{name: c.name, msg: fmt.Sprintf("%s was not run: %v", c.name, err), err: err}
			}
		}
		out, err := c.invoke(x.ctx, call, x.r)
		if err != nil {
			return nil, &capError{name: c.name, msg: fmt.Sprintf("%s failed: %v", c.name, err), err: err}
		}
		text := outputText(out)
		if out.IsError {
			return nil, &capError{name: c.name, msg: fmt.Sprintf("%s failed: %s", c.name, text)}
		}
		return resultValue(text), nil
	})
}

// parseArgs applies the schema's defaults to the arguments and validates
// them, as the loop does with a model's call.
func (c *capability) parseArgs(m map[string]any) (json.RawMessage, map[string]any, error) {
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, nil, err
	}
	var args map[string]any
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, nil, err
	}
	if c.defaults {
		if err := c.schema.ApplyDefaults(&args); err != nil {
			return nil, nil, err
		}
		if raw, err = json.Marshal(args); err != nil {
			return nil, nil, err
		}
	}
	if err := c.schema.Validate(args); err != nil {
		msg := strings.TrimPrefix(err.Error(), "validating root: ")
		return nil, nil, errors.New(strings.TrimPrefix(msg, "validating /: "))
	}
	return raw, args, nil
}

// invoke runs the handler with the call's timeout, turning panics into
// errors. Like the loop, it returns when the handler does or when its
// context is done, whichever is first: a handler that ignores its context
// is abandoned, not waited for.
func (c *capability) invoke(ctx context.Context, call *loop.Call, r *Runner) (*loop.Output, error) {
	timeout := c.def.Timeout
	if timeout <= 0 {
		timeout = r.opts.CapabilityTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type answer struct {
		out *loop.Output
		err error
	}
	done := make(chan answer, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				r.logger.Error("capability panicked", "capability", c.def.Name, "panic", v, "stack", string(debug.Stack()))
				done <- answer{err: &panicError{v}}
			}
		}()
		out, err := c.def.Handler(cctx, call)
		done <- answer{out, err}
	}()
	var a answer
	select {
	case a = <-done:
	case <-cctx.Done():
		select {
		case a = <-done: // it finished as time ran out: keep its answer
		default:
			a = answer{err: cctx.Err()}
		}
	}
	switch {
	case a.err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("interrupted: %w", ctx.Err())
	case a.err != nil && cctx.Err() != nil && errors.Is(a.err, context.DeadlineExceeded):
		return nil, fmt.Errorf("timed out after %v: %w", timeout, context.DeadlineExceeded)
	case errors.Is(a.err, loop.ErrPending):
		return nil, errors.New("its result would come later, and a program cannot wait for it")
	case a.err != nil:
		return nil, a.err
	case a.out == nil:
		return loop.TextOutput(""), nil
	}
	return a.out, nil
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

type panicError struct{ v any }

func (e *panicError) Error() string { return fmt.Sprintf("panicked: %v", e.v) }
