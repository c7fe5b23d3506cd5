package codemode

import (
	"fmt"

	"go.starlark.net/syntax"
)

// Starlark runs operators, slices and method lookups in its interpreter,
// with no hook where an allocation could be weighed before it is made. So
// the program is rewritten, once parsed and before it is resolved, to go
// through built-ins of code mode that weigh each one first (see guard.go):
//
//	x * y          op·*(x, y)
//	x += y         x = inplace·+=(x, y)
//	a[i] += y      t·1 = a; t·2 = i; t·1[t·2] = inplace·+=(t·1[t·2], y)
//	x[lo:hi:st]    slice·(x, lo, hi, st)
//	x.name         attr·(x, "name")
//
// The names carry a character a program cannot write, so they cannot clash
// with its own. Each call is placed at the position of the operator, so
// errors keep their line and column. Evaluation order is unchanged: an
// augmented assignment's target is evaluated once, into temporaries, as
// the interpreter does.

// Names of the guard built-ins the rewritten program calls; those of
// operators are followed by the operator, one built-in each.
const (
	opName      = "op·"
	inplaceName = "inplace·"
	sliceName   = "slice·"
	attrName    = "attr·"
)

// guardedOps are the binary operators whose result can be larger than
// their operands: concatenation, repetition, formatting, unions and
// integer arithmetic. Comparisons, "in", "and" and "or" (which must not
// evaluate both sides) and division are left alone.
var guardedOps = map[syntax.Token]bool{
	syntax.PLUS: true, syntax.MINUS: true, syntax.STAR: true, syntax.PERCENT: true,
	syntax.PIPE: true, syntax.AMP: true, syntax.CIRCUMFLEX: true, syntax.LTLT: true,
}

// augmented maps an augmented assignment to its binary operator.
var augmented = map[syntax.Token]syntax.Token{
	syntax.PLUS_EQ: syntax.PLUS, syntax.MINUS_EQ: syntax.MINUS, syntax.STAR_EQ: syntax.STAR,
	syntax.PERCENT_EQ: syntax.PERCENT, syntax.PIPE_EQ: syntax.PIPE, syntax.AMP_EQ: syntax.AMP,
	syntax.CIRCUMFLEX_EQ: syntax.CIRCUMFLEX, syntax.LTLT_EQ: syntax.LTLT,
	syntax.SLASH_EQ: syntax.SLASH, syntax.SLASHSLASH_EQ: syntax.SLASHSLASH, syntax.GTGT_EQ: syntax.GTGT,
}

type rewriter struct {
	temps int
}

// rewrite rewrites f in place.
func rewrite(f *syntax.File) {
	w := &rewriter{}
	f.Stmts = w.stmts(f.Stmts)
}

func (w *rewriter) stmts(list []syntax.Stmt) []syntax.Stmt {
	out := make([]syntax.Stmt, 0, len(list))
	for _, s := range list {
		out = append(out, w.stmt(s)...)
	}
	return out
}

func (w *rewriter) stmt(s syntax.Stmt) []syntax.Stmt {
	switch s := s.(type) {
	case *syntax.AssignStmt:
		if s.Op == syntax.EQ {
			s.LHS = w.target(s.LHS)
			s.RHS = w.expr(s.RHS)
			return []syntax.Stmt{s}
		}
		return w.augmented(s)
	case *syntax.DefStmt:
		w.params(s.Params)
		s.Body = w.stmts(s.Body)
	case *syntax.ExprStmt:
		s.X = w.expr(s.X)
	case *syntax.IfStmt:
		s.Cond = w.expr(s.Cond)
		s.True = w.stmts(s.True)
		s.False = w.stmts(s.False)
	case *syntax.ForStmt:
		s.Vars = w.target(s.Vars)
		s.X = w.expr(s.X)
		s.Body = w.stmts(s.Body)
	case *syntax.WhileStmt:
		s.Cond = w.expr(s.Cond)
		s.Body = w.stmts(s.Body)
	case *syntax.ReturnStmt:
		if s.Result != nil {
			s.Result = w.expr(s.Result)
		}
	}
	return []syntax.Stmt{s}
}

// augmented rewrites "lhs op= rhs".
func (w *rewriter) augmented(s *syntax.AssignStmt) []syntax.Stmt {
	var pre []syntax.Stmt
	lhs := s.LHS
	if p, ok := lhs.(*syntax.ParenExpr); ok {
		lhs = p.X
	}
	// hoist evaluates e once into a new temporary, unless reading it
	// twice is the same as reading it once.
	hoist := func(e syntax.Expr) syntax.Expr {
		e = w.expr(e)
		switch e.(type) {
		case *syntax.Ident, *syntax.Literal:
			return e
		}
		w.temps++
		t := &syntax.Ident{NamePos: s.OpPos, Name: fmt.Sprintf("t·%d", w.temps)}
		pre = append(pre, &syntax.AssignStmt{OpPos: s.OpPos, Op: syntax.EQ, LHS: t, RHS: e})
		return &syntax.Ident{NamePos: s.OpPos, Name: t.Name}
	}
	var target, read syntax.Expr
	switch l := lhs.(type) {
	case *syntax.IndexExpr:
		x, y := hoist(l.X), hoist(l.Y)
		target = &syntax.IndexExpr{X: x, Lbrack: l.Lbrack, Y: y, Rbrack: l.Rbrack}
		read = &syntax.IndexExpr{X: copyIdent(x), Lbrack: l.Lbrack, Y: copyIdent(y), Rbrack: l.Rbrack}
	case *syntax.DotExpr:
		x := hoist(l.X)
		target = &syntax.DotExpr{X: x, Dot: l.Dot, NamePos: l.NamePos, Name: l.Name}
		read = w.expr(&syntax.DotExpr{X: copyIdent(x), Dot: l.Dot, NamePos: l.NamePos, Name: &syntax.Ident{NamePos: l.NamePos, Name: l.Name.Name}})
	default: // an identifier
		target = lhs
		id, _ := lhs.(*syntax.Ident)
		if id == nil {
			return []syntax.Stmt{s} // the resolver reports it
		}
		read = &syntax.Ident{NamePos: id.NamePos, Name: id.Name}
	}
	call := guardCall(inplaceName+s.Op.String(), s.OpPos, read, w.expr(s.RHS))
	return append(pre, &syntax.AssignStmt{OpPos: s.OpPos, Op: syntax.EQ, LHS: target, RHS: call})
}

// copyIdent returns a fresh node for an identifier or literal used twice:
// the resolver binds each identifier node once.
func copyIdent(e syntax.Expr) syntax.Expr {
	if id, ok := e.(*syntax.Ident); ok {
		return &syntax.Ident{NamePos: id.NamePos, Name: id.Name}
	}
	return e
}

// target rewrites the expressions inside an assignment target, leaving
// the target itself assignable.
func (w *rewriter) target(e syntax.Expr) syntax.Expr {
	switch t := e.(type) {
	case *syntax.IndexExpr:
		t.X = w.expr(t.X)
		t.Y = w.expr(t.Y)
	case *syntax.DotExpr:
		t.X = w.expr(t.X)
	case *syntax.ParenExpr:
		t.X = w.target(t.X)
	case *syntax.TupleExpr:
		for i := range t.List {
			t.List[i] = w.target(t.List[i])
		}
	case *syntax.ListExpr:
		for i := range t.List {
			t.List[i] = w.target(t.List[i])
		}
	}
	return e
}

func (w *rewriter) params(params []syntax.Expr) {
	for _, p := range params {
		if b, ok := p.(*syntax.BinaryExpr); ok && b.Op == syntax.EQ {
			b.Y = w.expr(b.Y) // a default value
		}
	}
}

func (w *rewriter) exprs(list []syntax.Expr) {
	for i := range list {
		list[i] = w.expr(list[i])
	}
}

func (w *rewriter) expr(e syntax.Expr) syntax.Expr {
	switch e := e.(type) {
	case *syntax.BinaryExpr:
		e.X = w.expr(e.X)
		e.Y = w.expr(e.Y)
		if guardedOps[e.Op] {
			return guardCall(opName+e.Op.String(), e.OpPos, e.X, e.Y)
		}
	case *syntax.UnaryExpr:
		if e.X != nil {
			e.X = w.expr(e.X)
		}
	case *syntax.CallExpr:
		e.Fn = w.expr(e.Fn)
		for i, a := range e.Args {
			if b, ok := a.(*syntax.BinaryExpr); ok && b.Op == syntax.EQ {
				b.Y = w.expr(b.Y) // name=value
				continue
			}
			e.Args[i] = w.expr(a)
		}
	case *syntax.DotExpr:
		x := w.expr(e.X)
		return guardCall(attrName, e.Dot, x, opLiteral(e.Name.Name, e.NamePos))
	case *syntax.SliceExpr:
		x := w.expr(e.X)
		arg := func(a syntax.Expr) syntax.Expr {
			if a == nil {
				return &syntax.Ident{NamePos: e.Lbrack, Name: "None"}
			}
			return w.expr(a)
		}
		return guardCall(sliceName, e.Lbrack, x, arg(e.Lo), arg(e.Hi), arg(e.Step))
	case *syntax.IndexExpr:
		e.X = w.expr(e.X)
		e.Y = w.expr(e.Y)
	case *syntax.ParenExpr:
		e.X = w.expr(e.X)
	case *syntax.CondExpr:
		e.Cond = w.expr(e.Cond)
		e.True = w.expr(e.True)
		e.False = w.expr(e.False)
	case *syntax.ListExpr:
		w.exprs(e.List)
	case *syntax.TupleExpr:
		w.exprs(e.List)
	case *syntax.DictExpr:
		for _, entry := range e.List {
			if de, ok := entry.(*syntax.DictEntry); ok {
				de.Key = w.expr(de.Key)
				de.Value = w.expr(de.Value)
			}
		}
	case *syntax.DictEntry:
		e.Key = w.expr(e.Key)
		e.Value = w.expr(e.Value)
	case *syntax.Comprehension:
		e.Body = w.expr(e.Body)
		for _, c := range e.Clauses {
			switch c := c.(type) {
			case *syntax.ForClause:
				c.Vars = w.target(c.Vars)
				c.X = w.expr(c.X)
			case *syntax.IfClause:
				c.Cond = w.expr(c.Cond)
			}
		}
	case *syntax.LambdaExpr:
		w.params(e.Params)
		e.Body = w.expr(e.Body)
	}
	return e
}

func guardCall(name string, pos syntax.Position, args ...syntax.Expr) *syntax.CallExpr {
	return &syntax.CallExpr{Fn: &syntax.Ident{NamePos: pos, Name: name}, Lparen: pos, Args: args, Rparen: pos}
}

func opLiteral(s string, pos syntax.Position) *syntax.Literal {
	return &syntax.Literal{Token: syntax.STRING, TokenPos: pos, Raw: fmt.Sprintf("%q", s), Value: s}
}
