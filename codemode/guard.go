package codemode

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// The guards: the operators, slices and method lookups a rewritten program
// goes through (see rewrite.go), and the built-ins that build values
// (str, list, sorted, ...) in place of Starlark's own. Each estimates,
// from above, what the operation will allocate, charges it to the
// program's meter, and only then runs Starlark's own implementation. An
// operation that does not fit stops the program with KindMemoryLimit
// before anything is allocated.

// wrapped are the built-ins of the Universe that code mode replaces with a
// guarded version.
var wrapped = []string{"str", "repr", "print", "fail", "list", "tuple", "sorted", "reversed", "enumerate", "zip", "dict", "set", "bytes", "getattr", "int"}

// isGuard reports whether name is predeclared by code mode itself.
func isGuard(name string) bool {
	switch {
	case name == sliceName, name == attrName, strings.HasPrefix(name, opName), strings.HasPrefix(name, inplaceName):
		return true
	}
	for _, w := range wrapped {
		if w == name {
			return true
		}
	}
	return false
}

// guards returns the predeclared guards of run x.
func (x *execution) guards() starlark.StringDict {
	d := starlark.StringDict{
		sliceName: starlark.NewBuiltin(sliceName, x.slice),
		attrName:  starlark.NewBuiltin(attrName, x.attr),
	}
	for op := range guardedOps {
		d[opName+op.String()] = starlark.NewBuiltin(opName, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
			return x.binary(thread, op, op, args[0], args[1])
		})
	}
	for aug, op := range augmented {
		d[inplaceName+aug.String()] = starlark.NewBuiltin(inplaceName, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
			return x.inplace(thread, aug, op, args[0], args[1])
		})
	}
	for _, name := range wrapped {
		real := starlark.Universe[name].(*starlark.Builtin)
		d[name] = starlark.NewBuiltin(name, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			if name == "int" && len(args) > 0 {
				// Reading a decimal integer of millions of digits is one
				// step that takes time quadratic in its length.
				if digits, ok := args[0].(starlark.String); ok && len(digits) > maxIntBits/3 {
					return nil, fmt.Errorf("int: a string of %d characters is longer than an integer of %d bits may be written", len(digits), maxIntBits)
				}
			}
			if name == "getattr" {
				v, err := real.CallInternal(thread, args, kwargs)
				if err != nil {
					return nil, err
				}
				return x.guardMethod(args[0], v), nil
			}
			if err := x.charge(thread, x.universeSize(name, args, kwargs), name); err != nil {
				return nil, err
			}
			return real.CallInternal(thread, args, kwargs)
		})
	}
	return d
}

// smallAlloc is the size below which an operation is not charged: what
// it allocates is like what any step does, which the samples of the heap
// see, and charging it would cost more than the operation.
const smallAlloc = 1 << 10

// charge charges n bytes for what, or halts the program.
func (x *execution) charge(thread *starlark.Thread, n int64, what string) error {
	if n < smallAlloc {
		return nil
	}
	if err := x.meter.charge(n); err != nil {
		x.halt(thread, KindMemoryLimit)
		return &memoryError{what: what, need: n}
	}
	return nil
}

// A memoryError is an operation refused for want of memory.
type memoryError struct {
	what string
	need int64
}

func (e *memoryError) Error() string {
	return fmt.Sprintf("%s would allocate about %d bytes", e.what, e.need)
}

// inplace is l aug r (aug is op=), where a list's += and a dict's |=
// change it in place, as the interpreter does.
func (x *execution) inplace(thread *starlark.Thread, aug, op syntax.Token, l, r starlark.Value) (starlark.Value, error) {
	what := func() string { return l.Type() + " " + aug.String() + " " + r.Type() }
	switch l := l.(type) {
	case *starlark.List:
		if op != syntax.PLUS {
			break
		}
		it, ok := r.(starlark.Iterable)
		if !ok {
			break
		}
		// Twice the slots: the list's array grows by doubling.
		if err := x.charge(thread, mul(x.count(r), elemSize(r, 2*valueSize)), what()); err != nil {
			return nil, err
		}
		if r == starlark.Value(l) {
			r = starlark.Tuple(slices.Collect(func(yield func(starlark.Value) bool) {
				for i := range l.Len() {
					if !yield(l.Index(i)) {
						return
					}
				}
			}))
			it = r.(starlark.Iterable)
		}
		iter := it.Iterate()
		defer iter.Done()
		var v starlark.Value
		for iter.Next(&v) {
			if err := l.Append(v); err != nil {
				return nil, fmt.Errorf("cannot apply += to %s", strings.TrimPrefix(err.Error(), "cannot append to "))
			}
		}
		return l, nil
	case *starlark.Dict:
		r, ok := r.(*starlark.Dict)
		if op != syntax.PIPE || !ok {
			break
		}
		if err := x.charge(thread, mul(int64(r.Len()), entrySize), what()); err != nil {
			return nil, err
		}
		for _, kv := range r.Items() {
			if err := l.SetKey(kv[0], kv[1]); err != nil {
				return nil, err
			}
		}
		return l, nil
	}
	return x.binary(thread, op, aug, l, r)
}

// binary charges l op r, then computes it. The operation is named in
// errors with shown, the operator as written (op, or op= for an
// augmented assignment).
func (x *execution) binary(thread *starlark.Thread, op, shown syntax.Token, l, r starlark.Value) (starlark.Value, error) {
	name := func() string { return l.Type() + " " + shown.String() + " " + r.Type() }
	if bits := intResultBits(op, l, r); bits > maxIntBits {
		return nil, fmt.Errorf("%s: the result would have about %d bits, more than the %d an integer may have", name(), bits, maxIntBits)
	}
	if n := x.binarySize(op, l, r); n >= smallAlloc {
		if err := x.charge(thread, n, name()); err != nil {
			return nil, err
		}
	}
	return starlark.Binary(op, l, r)
}

// intResultBits bounds the bits of l op r when both are integers.
func intResultBits(op syntax.Token, l, r starlark.Value) int64 {
	li, ok1 := l.(starlark.Int)
	ri, ok2 := r.(starlark.Int)
	if !ok1 || !ok2 {
		return 0
	}
	lb, rb := int64(intBits(li)), int64(intBits(ri))
	switch op {
	case syntax.STAR:
		return lb + rb
	case syntax.LTLT:
		n, _ := ri.Int64()
		return lb + max(0, min(n, 512))
	}
	return max(lb, rb) + 1
}

// binarySize estimates what l op r allocates.
func (x *execution) binarySize(op syntax.Token, l, r starlark.Value) int64 {
	li, lInt := l.(starlark.Int)
	ri, rInt := r.(starlark.Int)
	if lInt && rInt {
		return intResultBits(op, l, r)/8 + boxSize
	}
	switch op {
	case syntax.PLUS:
		if starlark.Len(l) >= 0 && starlark.Len(r) >= 0 {
			return add(footprint(l), footprint(r))
		}
	case syntax.STAR:
		if rInt {
			l, r, li = r, l, ri
		}
		if _, ok := r.(starlark.Int); ok || !(lInt || rInt) {
			return 0 // not a repetition
		}
		n, ok := li.Int64()
		if !ok {
			n = 1 << 62
		}
		return mul(footprint(r), n)
	case syntax.PERCENT:
		if f, ok := l.(starlark.String); ok {
			return x.formatSize(string(f), r, strings.Count(string(f), "%"))
		}
	case syntax.PIPE, syntax.AMP, syntax.CIRCUMFLEX, syntax.MINUS:
		return add(footprint(l), footprint(r))
	}
	return 0
}

// formatSize bounds the text of format f with up to fields fields taking
// their values from args (a tuple, a dict or one value).
func (x *execution) formatSize(f string, args starlark.Value, fields int) int64 {
	s := newSizer(x.meter.limit)
	size := func(v starlark.Value) int64 {
		if strings.Contains(f, "r") {
			return s.repr(v, 0)
		}
		return s.str(v)
	}
	var biggest, sum int64
	each := func(v starlark.Value) {
		n := size(v)
		biggest, sum = max(biggest, n), add(sum, n)
	}
	switch a := args.(type) {
	case starlark.Tuple:
		for _, v := range a {
			each(v)
		}
		// Fields take the elements in turn.
		return add(int64(len(f)), sum)
	case *starlark.Dict:
		for _, kv := range a.Items() {
			each(kv[1])
		}
	case *starlark.List:
		// "{}".format(*list) is not this; a list is one value here.
		each(a)
	default:
		each(a)
	}
	return add(int64(len(f)), mul(int64(fields), biggest))
}

// count returns the number of elements of an iterable, by iterating it if
// it does not know its length.
func (x *execution) count(v starlark.Value) int64 {
	if n := starlark.Len(v); n >= 0 {
		return int64(n)
	}
	it, ok := v.(starlark.Iterable)
	if !ok {
		return 0
	}
	iter := it.Iterate()
	defer iter.Done()
	var n int64
	var e starlark.Value
	for iter.Next(&e) {
		n++
	}
	return n
}

// slice is slice·(x, lo, hi, step).
func (x *execution) slice(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
	v := args[0]
	var size int64 // a string sliced with step 1 shares its bytes
	if _, ok := v.(starlark.String); !ok || args[3] != starlark.None {
		size = footprint(v) // never more than a copy
	}
	if err := x.charge(thread, size, "slicing a "+v.Type()); err != nil {
		return nil, err
	}
	return starlark.Call(thread, sliceFunc(), args, nil)
}

// sliceFunc slices as the interpreter does, with its errors. It is built at
// the first slicing, not when the package is initialised: every hrns
// command links codemode, few run a program that slices.
var sliceFunc = sync.OnceValue(func() starlark.Value {
	g, err := starlark.ExecFileOptions(&syntax.FileOptions{}, &starlark.Thread{}, "slice", "def slice(x, lo, hi, step):\n    return x[lo:hi:step]\n", nil)
	if err != nil {
		panic(err)
	}
	return g["slice"]
})

// attr is attr·(x, name): x.name, with the methods that build values
// guarded.
func (x *execution) attr(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
	v, name := args[0], string(args[1].(starlark.String))
	ha, ok := v.(starlark.HasAttrs)
	if !ok {
		return nil, fmt.Errorf("%s has no .%s field or method", v.Type(), name)
	}
	m, err := ha.Attr(name)
	if err != nil {
		return nil, err
	}
	if m == nil {
		msg := fmt.Sprintf("%s has no .%s field or method", v.Type(), name)
		best, bestD := "", 3
		for _, n := range ha.AttrNames() {
			if d := editDistance(name, n); d < bestD {
				best, bestD = n, d
			}
		}
		if best != "" {
			msg += fmt.Sprintf(" (did you mean .%s?)", best)
		}
		return nil, fmt.Errorf("%s", msg)
	}
	return x.guardMethod(v, m), nil
}

// guardMethod returns m, the method of recv, guarded if it builds values.
func (x *execution) guardMethod(recv, m starlark.Value) starlark.Value {
	b, ok := m.(*starlark.Builtin)
	if !ok || b.Receiver() != recv {
		return m
	}
	name := b.Name()
	return starlark.NewBuiltin(name, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if err := x.charge(thread, x.methodSize(recv, name, args, kwargs), recv.Type()+"."+name); err != nil {
			return nil, err
		}
		return b.CallInternal(thread, args, kwargs)
	}).BindReceiver(recv)
}

// methodSize estimates what recv.name(args) allocates.
func (x *execution) methodSize(recv starlark.Value, name string, args starlark.Tuple, kwargs []starlark.Tuple) int64 {
	arg := func(i int) starlark.Value {
		if i < len(args) {
			return args[i]
		}
		return starlark.None
	}
	switch r := recv.(type) {
	case starlark.String:
		s := string(r)
		switch name {
		case "join":
			it, ok := arg(0).(starlark.Iterable)
			if !ok {
				return 0
			}
			iter := it.Iterate()
			defer iter.Done()
			var n, size int64
			var e starlark.Value
			for iter.Next(&e) {
				n++
				if es, ok := e.(starlark.String); ok {
					size = add(size, int64(len(es)))
				}
			}
			return add(size, mul(n, int64(len(s))))
		case "replace":
			old, _ := arg(0).(starlark.String)
			repl, _ := arg(1).(starlark.String)
			n := int64(strings.Count(s, string(old)))
			if c, ok := arg(2).(starlark.Int); ok {
				if c, ok := c.Int64(); ok && c >= 0 {
					n = min(n, c)
				}
			}
			return add(int64(len(s)), mul(n, int64(len(repl))))
		case "format":
			sz := newSizer(x.meter.limit)
			var biggest int64
			for _, a := range args {
				biggest = max(biggest, sz.repr(a, 0))
			}
			for _, kv := range kwargs {
				biggest = max(biggest, sz.repr(kv[1], 0))
			}
			return add(int64(len(s)), mul(int64(strings.Count(s, "{")), biggest))
		case "split", "rsplit", "splitlines":
			var pieces int64
			switch sep, _ := arg(0).(starlark.String); {
			case name == "splitlines":
				pieces = int64(strings.Count(s, "\n") + strings.Count(s, "\r") + 1)
			case sep != "":
				pieces = int64(strings.Count(s, string(sep)) + 1)
			default:
				pieces = int64(fields(s) + 1)
			}
			return mul(pieces, valueSize+boxSize)
		case "lower", "upper", "title", "capitalize":
			return 2 * int64(len(s))
		case "partition", "rpartition":
			return int64(len(s)) + 3*(valueSize+boxSize)
		}
	case *starlark.List:
		switch name {
		case "append", "insert":
			return 2 * valueSize
		case "extend":
			return mul(x.count(arg(0)), elemSize(arg(0), 2*valueSize))
		}
	case *starlark.Dict:
		switch name {
		case "update":
			n := int64(len(kwargs))
			if len(args) > 0 {
				n += x.count(args[0])
			}
			return mul(n, entrySize)
		case "setdefault":
			return entrySize
		case "items":
			return mul(int64(r.Len()), 3*valueSize+boxSize)
		case "keys", "values":
			return mul(int64(r.Len()), valueSize)
		}
	case *starlark.Set:
		switch name {
		case "add":
			return entrySize
		case "union", "difference", "intersection", "symmetric_difference", "update":
			n := int64(r.Len())
			for _, a := range args {
				n += x.count(a)
			}
			return mul(n, entrySize)
		}
	}
	return 0
}

// fields counts the words of s separated by white space.
func fields(s string) int {
	n, in := 0, false
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		i += w
		if unicode.IsSpace(r) {
			in = false
		} else if !in {
			in, n = true, n+1
		}
	}
	return n
}

// universeSize estimates what the built-in name allocates for args.
func (x *execution) universeSize(name string, args starlark.Tuple, kwargs []starlark.Tuple) int64 {
	if len(args) == 0 && name != "dict" && name != "print" && name != "fail" {
		return 0
	}
	s := newSizer(x.meter.limit)
	switch name {
	case "str":
		if _, ok := args[0].(starlark.String); ok {
			return 0
		}
		return s.str(args[0])
	case "repr":
		return s.repr(args[0], 0)
	case "print", "fail":
		var n int64
		for _, a := range args {
			n = add(n, s.str(a), 1)
		}
		for _, kv := range kwargs {
			n = add(n, s.str(kv[1]))
		}
		return n
	case "list", "tuple", "reversed":
		return mul(x.count(args[0]), elemSize(args[0], 2*valueSize))
	case "sorted":
		return mul(x.count(args[0]), elemSize(args[0], 3*valueSize))
	case "enumerate":
		return mul(x.count(args[0]), elemSize(args[0], 3*valueSize+2*boxSize))
	case "zip":
		n := int64(-1)
		for _, a := range args {
			if c := x.count(a); n < 0 || c < n {
				n = c
			}
		}
		return mul(n, int64(len(args)+1)*valueSize+boxSize)
	case "dict":
		n := int64(len(kwargs))
		if len(args) > 0 {
			n += x.count(args[0])
		}
		return mul(n, entrySize)
	case "set":
		return mul(x.count(args[0]), elemSize(args[0], entrySize))
	case "bytes":
		if str, ok := args[0].(starlark.String); ok {
			return int64(len(str))
		}
		return x.count(args[0])
	}
	return 0
}
