package codemode_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hrns-dev/hrns/codemode"
)

// TestRefusedBeforeRunning: programs with syntax errors, undefined names
// (capabilities not granted) or statically wrong capability calls are
// refused with line:col diagnostics, and no capability runs, not even one
// called correctly earlier in the program.
func TestRefusedBeforeRunning(t *testing.T) {
	tests := []struct {
		name string
		code string
		kind codemode.ErrorKind
		msg  string
	}{{
		name: "syntax",
		code: "x = add(a=1, b=2)\ny = (",
		kind: codemode.KindSyntax,
		msg:  "the program was not run:\n2:6: got end of file, want primary expression",
	}, {
		name: "capability not granted",
		code: "x = add(a=1, b=2)\ndelete_item(name='apple')",
		kind: codemode.KindCheck,
		msg:  "the program was not run:\n2:1: undefined: delete_item; granted capabilities: add, get_item",
	}, {
		name: "misspelt capability",
		code: "x = add(a=1, b=2)\nget_tem(name='apple')",
		kind: codemode.KindCheck,
		msg:  "the program was not run:\n2:1: undefined: get_tem (did you mean get_item?); granted capabilities: add, get_item",
	}, {
		name: "unknown argument",
		code: "x = add(a=1, b=2)\nget_item(nme='apple')",
		kind: codemode.KindCheck,
		msg: "the program was not run:\n" +
			`2:1: get_item is missing required argument "name"; it takes name: string, unit?: string` + "\n" +
			`2:10: get_item has no argument "nme"; it takes name: string, unit?: string`,
	}, {
		name: "missing required argument",
		code: "x = add(a=1)",
		kind: codemode.KindCheck,
		msg:  "the program was not run:\n" + `1:5: add is missing required argument "b"; it takes a: integer, b: integer`,
	}, {
		name: "positional arguments",
		code: "x = add(1, 2)",
		kind: codemode.KindCheck,
		msg:  "the program was not run:\n1:9: add takes keyword arguments only, as in add(a=...); it takes a: integer, b: integer",
	}, {
		name: "literal of the wrong type",
		code: "x = add(a='1', b=[2])",
		kind: codemode.KindCheck,
		msg: "the program was not run:\n" +
			`1:11: argument "a" of add must be integer, not str` + "\n" +
			`1:18: argument "b" of add must be integer, not list`,
	}, {
		name: "value outside the enum",
		code: "get_item(name='apple', unit='lb')",
		kind: codemode.KindCheck,
		msg:  "the program was not run:\n" + `1:29: argument "unit" of get_item must be one of "g", "kg"`,
	}, {
		name: "inside a function",
		code: "def f():\n    return add(a=1, b=2, c=3)\n",
		kind: codemode.KindCheck,
		msg:  "the program was not run:\n" + `2:26: add has no argument "c"; it takes a: integer, b: integer`,
	}, {
		name: "load",
		code: "load('lib.star', 'helper')\nresult = 1",
		kind: codemode.KindCheck,
		msg:  "the program was not run:\n1:1: load is not available: a program is one self-contained file",
	}, {
		name: "recursion is a runtime matter, but undefined names are not",
		code: "def f():\n    return g()\n",
		kind: codemode.KindCheck,
		msg:  "the program was not run:\n2:12: undefined: g; granted capabilities: add, get_item",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			add, get, del := count(addTool()), count(getTool()), count(funcTool("delete_item", nil))
			r := newRunner(t, nil, add.def, get.def)
			_ = del // wired in the application, not granted
			res, err := r.Run(t.Context(), tt.code)
			if err == nil {
				t.Fatalf("Run succeeded: %+v", res)
			}
			e := asError(t, err)
			if e.Kind != tt.kind {
				t.Errorf("kind = %q, want %q", e.Kind, tt.kind)
			}
			if diff := cmp.Diff(tt.msg, e.Error()); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
			if n := add.calls.Load() + get.calls.Load() + del.calls.Load(); n != 0 {
				t.Errorf("%d capability calls ran; a refused program must run nothing", n)
			}
			if e.Line == 0 || len(e.Diagnostics) == 0 {
				t.Errorf("no position: line %d, %d diagnostics", e.Line, len(e.Diagnostics))
			}
			if err := r.Check(tt.code); err == nil || err.Error() != e.Error() {
				t.Errorf("Check = %v, want the same error as Run", err)
			}
		})
	}
}

// TestCheckAcceptsWhatItCannotSee: calls through a variable or with
// **kwargs are left to the run-time validation, and a global that shadows
// a capability is the program's own.
func TestCheckAcceptsWhatItCannotSee(t *testing.T) {
	r := newRunner(t, nil, addTool(), getTool())
	for _, code := range []string{
		"f = add\nx = f(a=1)",
		"kw = {'a': 1}\nx = add(**kw)",
		"def add(x):\n    return x\ny = add(1)",
		"x = get_item(name='apple')", // unit has a default
		"x = add(a=1.5 if False else 1, b=2)",
	} {
		if err := r.Check(code); err != nil {
			t.Errorf("Check(%q) = %v, want nil", code, err)
		}
	}
}
