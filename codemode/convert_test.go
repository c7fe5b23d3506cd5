package codemode_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hrns-dev/hrns/loop"
)

// TestCapabilityResults: a JSON object or array result becomes Starlark
// values (key order, ints, floats and big ints kept); other text is a str.
func TestCapabilityResults(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"object", `{"z": 1, "a": [1.5, 2e3, 12345678901234567890, true, null], "m": {"k": "v"}}`,
			"dict z int a list float float int bool NoneType m dict\n" +
				`result: {"z":1,"a":[1.5,2000,12345678901234567890,true,null],"m":{"k":"v"}}`},
		{"array", `["x", 2]`, "list\nresult: [\"x\",2]"},
		{"text", "hello", "string\nresult: \"hello\""},
		{"number text", "42", "string\nresult: \"42\""},
		{"broken JSON", `{"a": `, "string\nresult: \"{\\\"a\\\": \""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			echo := &loop.ToolDef{Name: "fetch", Handler: func(context.Context, *loop.Call) (*loop.Output, error) {
				return loop.TextOutput(tt.text), nil
			}}
			r := newRunner(t, nil, echo)
			res, err := r.Run(t.Context(), `
r = fetch()
kinds = [type(r)]
if type(r) == "dict":
    for k, v in r.items():
        kinds.append(k)
        kinds.append(type(v))
        if type(v) == "list":
            kinds.extend([type(x) for x in v])
print(" ".join(kinds))
result = r
`)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, res.Text); diff != "" {
				t.Errorf("text (-want +got):\n%s", diff)
			}
		})
	}
}

// TestArgumentConversion: Starlark values passed to a capability arrive
// as the JSON the tool's schema expects.
func TestArgumentConversion(t *testing.T) {
	var got json.RawMessage
	capture := &loop.ToolDef{Name: "take", Handler: func(_ context.Context, call *loop.Call) (*loop.Output, error) {
		got = call.Arguments
		return loop.TextOutput("ok"), nil
	}}
	r := newRunner(t, nil, capture)
	_, err := r.Run(t.Context(), `take(s="é<", i=1 << 64, f=0.5, b=False, n=None, l=[1, (2, 3)], d={"k": {"x": set([1])}}, by=b"raw")`)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"s": "é<", "i": 18446744073709551616.0, "f": 0.5, "b": false, "n": nil,
		"l": []any{1.0, []any{2.0, 3.0}}, "d": map[string]any{"k": map[string]any{"x": []any{1.0}}}, "by": "raw",
	}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("arguments (-want +got):\n%s", diff)
	}
}

// TestSelfReferentialResult: a result that contains itself has no JSON
// form and comes back as its repr.
func TestSelfReferentialResult(t *testing.T) {
	r := newRunner(t, nil)
	res, err := r.Run(t.Context(), "l = [1]\nl.append(l)\nresult = l")
	if err != nil {
		t.Fatal(err)
	}
	if want := `result: "[1, [...]]"`; res.Text != want {
		t.Errorf("text = %q, want %q", res.Text, want)
	}
}

// TestArgumentConversionErrors: values without a JSON form cannot be
// passed to a capability, and the error says which argument.
func TestArgumentConversionErrors(t *testing.T) {
	take := &loop.ToolDef{Name: "take", Handler: func(context.Context, *loop.Call) (*loop.Output, error) { return loop.TextOutput("ok"), nil }}
	r := newRunner(t, nil, take)
	tests := []struct{ code, msg string }{
		{"take(x=len)", `the program failed at 1:5: take: argument "x": cannot convert builtin_function_or_method to JSON`},
		{"l = []\nl.append(l)\ntake(x=l)", `the program failed at 3:5: take: argument "x": value nested too deeply (or contains itself)`},
		{"take(x={1: 2})", `the program failed at 1:5: take: argument "x": cannot convert a dict with int keys to JSON: keys must be strings`},
		{"take(x=float('nan'))", `the program failed at 1:5: take: argument "x": cannot convert float nan to JSON`},
	}
	for _, tt := range tests {
		_, err := r.Run(t.Context(), tt.code)
		if err == nil || err.Error() != tt.msg {
			t.Errorf("%q: error = %v, want %q", tt.code, err, tt.msg)
		}
	}
}
