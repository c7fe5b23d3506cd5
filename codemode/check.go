package codemode

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// fileOptions are the dialect programs are written in: top-level for, if
// and while, reassignable globals (so `result` can be set more than once)
// and sets. Recursion stays off: the interpreter recurses on the Go stack,
// and a program could otherwise crash the process by overflowing it rather
// than fail with an error.
var fileOptions = &syntax.FileOptions{
	Set:             true,
	While:           true,
	TopLevelControl: true,
	GlobalReassign:  true,
}

// filename is the name programs are parsed under; it never reaches the
// model, which is given lines and columns only.
const filename = "code"

// compile parses and resolves src against the granted capabilities and
// checks, where they are visible, the arguments of each capability call.
// Nothing runs. Its errors are *Error of kind KindSyntax or KindCheck.
func (r *Runner) compile(src string) (*starlark.Program, error) {
	f, err := fileOptions.Parse(filename, src, 0)
	if err != nil {
		var se syntax.Error
		if errors.As(err, &se) {
			return nil, notRun(KindSyntax, []Diagnostic{{Line: int(se.Pos.Line), Col: int(se.Pos.Col), Msg: se.Msg}})
		}
		return nil, notRun(KindSyntax, []Diagnostic{{Line: 1, Col: 1, Msg: err.Error()}})
	}
	var diags []Diagnostic
	for _, stmt := range f.Stmts {
		if load, ok := stmt.(*syntax.LoadStmt); ok {
			pos := load.Load
			diags = append(diags, Diagnostic{Line: int(pos.Line), Col: int(pos.Col), Msg: "load is not available: a program is one self-contained file"})
		}
	}
	if len(diags) > 0 {
		return nil, notRun(KindCheck, diags)
	}
	rewrite(f)
	prog, err := starlark.FileProgram(f, func(name string) bool { return r.isCapability(name) || isGuard(name) })
	if err != nil {
		var list resolve.ErrorList
		if !errors.As(err, &list) {
			return nil, notRun(KindCheck, []Diagnostic{{Line: 1, Col: 1, Msg: err.Error()}})
		}
		// The resolver binds every name it can despite errors, so the
		// calls of granted capabilities can be checked too.
		for _, e := range list {
			msg := e.Msg
			if name, ok := strings.CutPrefix(msg, "undefined: "); ok {
				// A name with a space carries Starlark's own suggestion.
				if near := r.nearest(name); near != "" && !strings.Contains(name, " ") {
					msg += " (did you mean " + near + "?)"
				}
				msg += "; " + r.grantedList()
			}
			diags = append(diags, Diagnostic{Line: int(e.Pos.Line), Col: int(e.Pos.Col), Msg: msg})
		}
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		if call, ok := n.(*syntax.CallExpr); ok {
			diags = append(diags, r.checkCall(call)...)
		}
		return true
	})
	if len(diags) > 0 {
		slices.SortStableFunc(diags, func(a, b Diagnostic) int {
			return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
		})
		return nil, notRun(KindCheck, diags)
	}
	return prog, nil
}

func (r *Runner) isCapability(name string) bool {
	_, ok := r.caps[name]
	return ok
}

func (r *Runner) grantedList() string {
	if len(r.order) == 0 {
		return "no capabilities are granted to programs"
	}
	return "granted capabilities: " + strings.Join(r.order, ", ")
}

// checkCall checks a call of a granted capability, by name, against its
// schema: keyword arguments only, no unknown names, no missing required
// ones, and literal values of the right JSON type. A call that passes
// *args or **kwargs is checked only for what is visible.
func (r *Runner) checkCall(call *syntax.CallExpr) []Diagnostic {
	id, ok := call.Fn.(*syntax.Ident)
	if !ok {
		return nil
	}
	if b, ok := id.Binding.(*resolve.Binding); !ok || b.Scope != resolve.Predeclared {
		return nil // a local or global of the program, not the capability
	}
	c := r.caps[id.Name]
	if c == nil {
		return nil
	}
	var diags []Diagnostic
	at := func(n syntax.Node, format string, args ...any) {
		pos, _ := n.Span()
		diags = append(diags, Diagnostic{Line: int(pos.Line), Col: int(pos.Col), Msg: fmt.Sprintf(format, args...)})
	}
	given := map[string]bool{}
	spread := false
	for _, arg := range call.Args {
		switch arg := arg.(type) {
		case *syntax.BinaryExpr:
			if arg.Op != syntax.EQ {
				break
			}
			name := arg.X.(*syntax.Ident).Name
			given[name] = true
			prop, known := c.props[name]
			if !known {
				if !c.open {
					at(arg.X, "%s has no argument %q; %s", c.name, name, c.signature())
				}
				continue
			}
			if msg := checkLiteral(arg.Y, prop); msg != "" {
				at(arg.Y, "argument %q of %s %s", name, c.name, msg)
			}
			continue
		case *syntax.UnaryExpr:
			if arg.Op == syntax.STAR || arg.Op == syntax.STARSTAR {
				spread = true
				continue
			}
		}
		at(arg, "%s takes keyword arguments only, as in %s; %s", c.name, c.example(), c.signature())
		return diags
	}
	if !spread {
		for _, name := range c.required {
			if !given[name] && !c.hasDefault(name) {
				at(call.Fn, "%s is missing required argument %q; %s", c.name, name, c.signature())
			}
		}
	}
	return diags
}

// checkLiteral returns why a literal argument cannot match prop, or "".
func checkLiteral(e syntax.Expr, prop *jsonschema.Schema) string {
	var kind, starType string
	switch e := e.(type) {
	case *syntax.Literal:
		switch e.Token {
		case syntax.STRING:
			kind, starType = "string", "str"
			if len(prop.Enum) > 0 && !slices.Contains(prop.Enum, any(e.Value.(string))) {
				return "must be one of " + enumList(prop.Enum)
			}
		case syntax.INT:
			kind, starType = "integer", "int"
		case syntax.FLOAT:
			kind, starType = "number", "float"
		case syntax.BYTES:
			kind, starType = "string", "bytes"
		}
	case *syntax.Ident:
		b, ok := e.Binding.(*resolve.Binding)
		if !ok || b.Scope != resolve.Universal {
			return ""
		}
		switch e.Name {
		case "True", "False":
			kind, starType = "boolean", "bool"
		case "None":
			kind, starType = "null", "None"
		}
	case *syntax.ListExpr:
		kind, starType = "array", "list"
	case *syntax.TupleExpr:
		kind, starType = "array", "tuple"
	case *syntax.DictExpr:
		kind, starType = "object", "dict"
	case *syntax.Comprehension:
		if _, dict := e.Body.(*syntax.DictEntry); dict {
			kind, starType = "object", "dict"
		} else if !e.Curly {
			kind, starType = "array", "list"
		}
	}
	types := schemaTypes(prop)
	if kind == "" || len(types) == 0 {
		return ""
	}
	for _, t := range types {
		if t == kind || t == "number" && kind == "integer" {
			return ""
		}
	}
	return fmt.Sprintf("must be %s, not %s", strings.Join(types, " or "), starType)
}

func schemaTypes(s *jsonschema.Schema) []string {
	if s.Type != "" {
		return []string{s.Type}
	}
	return s.Types
}

func enumList(vals []any) string {
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = fmt.Sprintf("%q", fmt.Sprint(v))
	}
	return strings.Join(parts, ", ")
}

// nearest returns the granted capability closest to name, if one is within
// two edits of it.
func (r *Runner) nearest(name string) string {
	best, bestD := "", 3
	for _, c := range r.order {
		if d := editDistance(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, sub)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
