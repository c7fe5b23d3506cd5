package codemode

import (
	"errors"
	"strings"
	"testing"

	"go.starlark.net/starlark"
)

// runPlain runs src as Starlark does, or rewritten with the guards of a
// meter without limit, and returns what it printed, its result and its
// error message; stopped reports a program that ran out of steps.
func runPlain(t *testing.T, src string, guarded bool) (out, res, msg string, stopped bool) {
	f, err := fileOptions.Parse(filename, src, 0)
	if err != nil {
		t.Skip()
	}
	pre := starlark.StringDict{}
	isPre := func(string) bool { return false }
	var b strings.Builder
	thread := &starlark.Thread{Print: func(_ *starlark.Thread, msg string) { b.WriteString(msg + "\n") }}
	thread.SetMaxExecutionSteps(100_000)
	if guarded {
		rewrite(f)
		x := &execution{meter: &meter{}}
		pre = x.guards()
		isPre = isGuard
	}
	prog, err := starlark.FileProgram(f, isPre)
	if err != nil {
		return "", "", "resolve: " + err.Error(), false
	}
	g, err := prog.Init(thread, pre)
	if err != nil {
		if strings.Contains(err.Error(), "too many steps") {
			return "", "", "", true
		}
		var ee *starlark.EvalError
		if errors.As(err, &ee) {
			return b.String(), "", ee.Msg, false
		}
		return b.String(), "", err.Error(), false
	}
	if v, ok := g["result"]; ok {
		res = v.String()
	}
	return b.String(), res, "", false
}

// FuzzRewrite: a rewritten program prints and returns what the original
// does, and fails when it does.
func FuzzRewrite(f *testing.F) {
	for _, src := range []string{
		"x = [1, 2] * 3\nx += [4]\nprint(x[1:4], x[::-1], len(x))\nresult = x",
		"d = {'a': [1]}\nd['a'] += [2]\nd['a'][0] *= 5\nd |= {'b': 2}\nresult = d",
		"s = 'a,b'\nresult = [s.split(','), s.upper(), '%s-%d' % (s, 3), '{}{x}'.format(1, x=2), s.replace('a', 'z')]",
		"def f(l, n=2 * 3):\n    l += [n]\n    return l\na = []\nf(a)\nresult = a",
		"t = (1, 2)\nt += (3,)\nresult = [t, 1 << 70, -5 % 3, 7 - 2, {1, 2} | {3}, {1, 2} & {2}, {1} ^ {2}]",
		"l = [3, 1, 2]\nresult = [sorted(l), list(reversed(l)), enumerate(l), zip(l, l), str(l), repr('x'), getattr(l, 'index')(1)]",
		"x = 1\nx += 'a'",
		"x = 'abc'\nx.nope()",
		"l = [1]\nl += l\nl[0:1]\nresult = l",
		"result = [i * 2 for i in range(5) if i % 2] + [lambda y=1 + 1: y][0]()",
	} {
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src string) {
		out1, res1, msg1, stop1 := runPlain(t, src, false)
		out2, res2, msg2, stop2 := runPlain(t, src, true)
		if stop1 || stop2 {
			return // the guards take steps of their own
		}
		if out1 != out2 || res1 != res2 || (msg1 == "") != (msg2 == "") {
			t.Errorf("program %q:\nplain:   out %q result %q error %q\nguarded: out %q result %q error %q", src, out1, res1, msg1, out2, res2, msg2)
		}
	})
}
