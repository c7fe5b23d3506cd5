package codemode_test

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/codemode"
	"github.com/hrns-dev/hrns/loop"
)

// TestMemoryBombs (issue 13): each program would allocate far more than
// its limit, most in one operation. Each is stopped with KindMemoryLimit,
// at the line of the operation, before the memory is allocated: the
// interpreter process never grows much past the limit. Before the guards, the first killed
// the process (16 GiB at once) and the second was reported as a time
// limit while it went on allocating.
func TestMemoryBombs(t *testing.T) {
	const limit = 64 << 20
	const big = "s = 'x' * 1000000\n" // 1 MB, under the limit
	echo := loop.NewTool("echo", "Says it back.", func(_ context.Context, in struct {
		Text any `json:"text"`
	}) (string, error) {
		return "ok", nil
	})
	tests := []struct {
		name, code string
		line       int
	}{
		{"list repetition", "x = [0] * ((1 << 30) - 1)", 1},
		{"join of a repeated list", big + "x = ''.join([s] * 8192)", 2},
		{"join of a large list", "parts = ['y' * 1000] * 200000\nx = ''.join(parts)", 2},
		{"nested repetition", "x = [[0] * 100000 for i in range(100000)]", 1},
		{"shared nested repetition printed", big + "x = str([[[s] * 100] * 100] * 100)", 2},
		{"string doubling", "s = 'x'\nfor i in range(40):\n    s = s + s", 3},
		{"string doubling in place", "s = 'x'\nfor i in range(40):\n    s += s", 3},
		{"string repetition", "x = 'x' * 900000000", 1},
		{"string repetition, huge count", "x = 'x' * (1 << 40)", 1},
		{"bytes repetition", "x = b'xy' * 300000000", 1},
		{"repeated += of large strings", big + "t = ''\nfor i in range(1000):\n    t += s", 4},
		{"list += growth", "l = []\nfor i in range(1000):\n    l += range(1000000)", 3},
		{"list extend growth", "l = []\nfor i in range(1000):\n    l.extend(range(1000000))", 3},
		{"dict comprehension", "d = {i: i for i in range(100000000)}", 1},
		{"dict update growth", "d = {}\nfor i in range(1000):\n    d.update([(j + i * 1000000, j) for j in range(1000000)])", 3},
		{"range materialised", "x = list(range(1 << 40))", 1},
		{"sorted range", "x = sorted(range(1 << 30))", 1},
		{"enumerate range", "x = enumerate(range(1 << 30))", 1},
		{"zip ranges", "x = zip(range(1 << 30), range(1 << 30))", 1},
		{"percent formatting", big + "x = ('%s' * 1000) % tuple([s] * 1000)", 2},
		{"percent formatting with a dict", big + "x = ('%(a)s' * 1000) % {'a': s}", 2},
		{"str.format", big + "x = ('{0}' * 1000).format(s)", 2},
		{"str.replace", big + "x = s.replace('x', 'yy' * 1000)", 2},
		{"str.replace of the empty string", big + "x = s.replace('', 'yy' * 1000)", 2},
		{"method through getattr", big + "x = getattr('', 'join')([s] * 8192)", 2},
		{"method kept in a variable", big + "j = ''.join\nx = j([s] * 8192)", 3},
		{"repr", big + "x = repr([s] * 1000)", 2},
		{"print", big + "print([s] * 1000)", 2},
		{"slices", "l = [0] * 1000000\nx = [l[:] for i in range(1000)]", 2},
		{"set union", "a = set(range(100000))\nx = [a | a for i in range(1000)]", 2},
		{"the result's JSON", big + "result = [s] * 1000", 0},
		{"a capability's arguments", big + "echo(text=[s] * 1000)", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRunner(t, &codemode.Options{MaxMemory: limit, MaxSteps: 100_000_000, Timeout: 5 * time.Minute}, echo)
			var err error
			grew := interpreterGrowth(t, func() { _, err = r.Run(t.Context(), tt.code) })
			e := asError(t, err)
			if e.Kind != codemode.KindMemoryLimit {
				t.Fatalf("kind = %q (%v), want %q", e.Kind, e, codemode.KindMemoryLimit)
			}
			if e.Line != tt.line {
				t.Errorf("line = %d, want %d (%v)", e.Line, tt.line, e)
			}
			// Refused before allocating, or, for the small allocations
			// of each step, stopped once the heap has grown.
			if !strings.Contains(e.Error(), "memory limit of 67108864 bytes (") && !strings.Contains(e.Error(), "memory grew by more than its limit of 67108864 bytes") {
				t.Errorf("message = %q", e)
			}
			// The limit, what the last step may have added, and room for
			// the garbage collector's pace (and for the race detector's
			// shadow memory).
			if grew > 3*limit*residentFactor {
				t.Errorf("the interpreter grew by %d MiB, limit %d MiB", grew>>20, limit>>20)
			}
			t.Logf("%v; the interpreter grew by at most %d MiB", e, grew>>20)
		})
	}
}

// TestMemoryOrdinaryPrograms: programs that allocate in total far more than
// the limit, but never hold much at once, run to the end.
func TestMemoryOrdinaryPrograms(t *testing.T) {
	tests := []struct {
		name, code, want string
	}{
		{"garbage", "n = 0\nfor i in range(50):\n    s = 'x' * 10000000\n    n += len(s)\nresult = n", "500000000"},
		{"string built with +=", "s = ''\nfor i in range(2000):\n    s += 'line %d\\n' % i\nresult = len(s)", "18890"},
		{"list built with append", "l = []\nfor i in range(100000):\n    l.append(i * i)\nresult = l[-1]", "9999800001"},
		{"in-place += keeps the list", "a = [1]\nb = a\na += [2]\nresult = b", "[1,2]"},
		{"dict |=", "a = {'x': 1}\nb = a\na |= {'y': 2}\nresult = b", `{"x":1,"y":2}`},
		{"augmented index", "d = {'k': [1]}\nkeys = ['k']\nd[keys[0]] += [2]\nd['k'][0] += 10\nresult = d", `{"k":[11,2]}`},
		{"methods and slices", "s = 'a,b,c'\nresult = [s.split(','), s.upper(), s[::-1], s[1:], '-'.join(['x', 'y']), 'ab'.replace('b', 'c')]", `[["a","b","c"],"A,B,C","c,b,a",",b,c","x-y","ac"]`},
		{"format", "result = '{} {x}'.format(1, x=2) + ' %s/%d' % ('a', 3)", `"1 2 a/3"`},
		{"sets and big integers", "result = [len(set([1, 2]) | set([3])), str((1 << 100) * 3 - 1)]", `[3,"3802951800684688204490109616127"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Not a test of time: the limit is far above what these take
			// on a loaded machine with the race detector.
			r := newRunner(t, &codemode.Options{MaxMemory: 64 << 20, Timeout: 10 * time.Minute})
			res, err := r.Run(t.Context(), tt.code)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(res.Value); got != tt.want {
				t.Errorf("result = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestMemoryErrorsKeepTheirPosition: errors of guarded operations read as
// the interpreter's own, at the operator.
func TestMemoryErrorsKeepTheirPosition(t *testing.T) {
	tests := []struct{ code, msg string }{
		{"x = 1\ny = x + 'a'", `the program failed at 2:7: unknown binary op: int + string`},
		{"x = 'abc'\nx.nope()", `the program failed at 2:2: string has no .nope field or method`},
		{"x = 'abc'\nx.jion(['a'])", `the program failed at 2:2: string has no .jion field or method (did you mean .join?)`},
		{"x = [1]\ny = x[::0]", `the program failed at 2:6: zero is not a valid slice step`},
		{"x = 1\nx += 'a'", `the program failed at 2:3: unknown binary op: int + string`},
		// Multiplying integers of millions of bits is one step that
		// could take minutes.
		{"n = 3\nfor i in range(40):\n    n = n * n", `the program failed at 3:11: int * int: the result would have about 1661954 bits, more than the 1048576 an integer may have`},
		{"n = int('9' * 1000000)", `the program failed at 1:8: int: a string of 1000000 characters is longer than an integer of 1048576 bits may be written`},
	}
	for _, tt := range tests {
		r := newRunner(t, nil)
		_, err := r.Run(t.Context(), tt.code)
		if e := asError(t, err); e.Error() != tt.msg {
			t.Errorf("%q: message = %q, want %q", tt.code, e, tt.msg)
		}
	}
}

// TestUnweighedMemoryCapped: what the guards do not weigh is bounded by
// the interpreter's address space. The message of a missing dict key
// quotes the key, here a tuple that repeats a 1 MB string 600 times: 600
// MB of text that no guard sees. The interpreter runs out of memory
// instead, and never grows much past its bound. Without the bound it grew
// by 1.8 GiB (with a limit of 16 MiB) before the heap's sample stopped it.
func TestUnweighedMemoryCapped(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the interpreter's address space is bounded on Linux only")
	}
	const limit = 16 << 20
	r := newRunner(t, &codemode.Options{MaxMemory: limit})
	var err error
	grew := interpreterGrowth(t, func() {
		_, err = r.Run(t.Context(), "s = 'x' * 1000000\nk = (s,) * 600\nd = {}\nx = d[k]")
	})
	e := asError(t, err)
	if want := "the program was stopped: memory grew by more than its limit of 16777216 bytes"; e.Kind != codemode.KindMemoryLimit || e.Msg != want {
		t.Errorf("error = %.200q (%s), want %q", e, e.Kind, want)
	}
	if bound := int64(4*limit+512<<20) * residentFactor; grew > bound {
		t.Errorf("the interpreter grew by %d MiB, more than %d MiB", grew>>20, bound>>20)
	}
	t.Logf("%v; the interpreter grew by at most %d MiB", e, grew>>20)
}
