package codemode_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hrns-dev/hrns/codemode"
	"github.com/hrns-dev/hrns/loop"
)

// TestLoopOverTwoCapabilities: one program lists items, fetches each, and
// computes over the results; each capability call is a real call.
func TestLoopOverTwoCapabilities(t *testing.T) {
	list, get := count(listTool()), count(getTool())
	r := newRunner(t, nil, list.def, get.def)
	res, err := r.Run(t.Context(), `
total = 0
heavy = []
for name in list_items():
    it = get_item(name=name)
    total += it["weight"]
    if it["weight"] > 100:
        heavy.append(name)
print("total weight:", total)
result = {"heavy": heavy, "total": total, "unit": get_item(name="cherry", unit="kg")["unit"]}
`)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := list.calls.Load(), int64(1); got != want {
		t.Errorf("list_items calls = %d, want %d", got, want)
	}
	if got, want := get.calls.Load(), int64(4); got != want {
		t.Errorf("get_item calls = %d, want %d", got, want)
	}
	want := &codemode.Result{
		Output: "total weight: 275\n",
		Value:  []byte(`{"heavy":["apple","banana"],"total":275,"unit":"kg"}`),
		Text:   "total weight: 275\nresult: {\"heavy\":[\"apple\",\"banana\"],\"total\":275,\"unit\":\"kg\"}",
	}
	if diff := cmp.Diff(want, res, cmpIgnoreSteps); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	if res.Steps == 0 {
		t.Error("Steps = 0")
	}
}

var cmpIgnoreSteps = cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Steps" }, cmp.Ignore())

// TestRunErrors: each way a running program fails is an *Error of its kind
// whose message gives the position, a traceback through the program's
// functions and what it printed first.
func TestRunErrors(t *testing.T) {
	failing := funcTool("explode", func(context.Context) (string, error) { return "", errors.New("disk on fire") })
	softFail := loop.NewTool("soft_fail", "Reports an error result.", func(context.Context, noArgs) (*loop.Output, error) {
		return loop.ErrorOutput("not today"), nil
	})
	panicking := funcTool("boom", func(context.Context) (string, error) { panic("kaboom") })
	pending := loop.NewClientTool("ask_user", "Asks the user.", nil)
	tests := []struct {
		name string
		opts codemode.Options
		code string
		kind codemode.ErrorKind
		msg  string
	}{{
		name: "runtime error with traceback",
		code: "def ratio(a, b):\n    return a // b\n\nprint('dividing')\nratio(1, 0)\n",
		kind: codemode.KindRuntime,
		msg: "the program failed at 2:14: floored division by zero\n" +
			"Traceback (most recent call last):\n  5:6: in <toplevel>\n  2:14: in ratio\n" +
			"Output before it stopped:\ndividing",
	}, {
		name: "missing key",
		code: "d = add(a=1, b=2)\nx = d['total']",
		kind: codemode.KindRuntime,
		msg:  `the program failed at 2:6: key "total" not in dict`,
	}, {
		name: "recursion",
		code: "def f(n):\n    return f(n - 1)\nf(3)",
		kind: codemode.KindRuntime,
		msg: "the program failed at 2:12: function f called recursively\n" +
			"Traceback (most recent call last):\n  3:2: in <toplevel>\n  2:13: in f\n  2:12: in f",
	}, {
		name: "capability error",
		code: "print('before')\nexplode()\nprint('after')",
		kind: codemode.KindCapability,
		msg:  "the program failed at 2:8: tool \"explode\" failed: disk on fire\nOutput before it stopped:\nbefore",
	}, {
		name: "capability error result",
		code: "soft_fail()",
		kind: codemode.KindCapability,
		msg:  "the program failed at 1:10: soft_fail failed: not today",
	}, {
		name: "capability panic",
		code: "boom()",
		kind: codemode.KindCapability,
		msg:  `the program failed at 1:5: tool "boom" panicked: kaboom`,
	}, {
		name: "client tool",
		code: "ask_user()",
		kind: codemode.KindCapability,
		msg:  "the program failed at 1:9: ask_user failed: its result would come later, and a program cannot wait for it",
	}, {
		name: "arguments checked at run time",
		code: "f = get_item\nf(name='apple', unit='lb')",
		kind: codemode.KindCapability,
		msg: "the program failed at 2:2: get_item: invalid arguments: validating /properties/unit: enum: lb does not equal any of: [g kg]; " +
			"it takes name: string, unit?: string",
	}, {
		name: "unknown capability failure",
		code: "get_item(name='durian')",
		kind: codemode.KindCapability,
		msg:  `the program failed at 1:9: tool "get_item" failed: no item named durian`,
	}, {
		name: "step limit",
		opts: codemode.Options{MaxSteps: 10_000},
		code: "n = 0\nfor i in range(1000000000):\n    n += i\n",
		kind: codemode.KindStepLimit,
		msg:  "the program was stopped at 2:1: it exceeded its limit of 10000 steps",
	}, {
		name: "while true",
		opts: codemode.Options{MaxSteps: 10_000},
		code: "while True:\n    pass\n",
		kind: codemode.KindStepLimit,
		msg:  "the program was stopped at 1:1: it exceeded its limit of 10000 steps",
	}, {
		name: "output limit",
		opts: codemode.Options{OutputLimit: 20},
		code: "for i in range(100):\n    print('line', i)\n",
		kind: codemode.KindOutputLimit,
		msg:  "the program was stopped at 2:10: it printed more than its limit of 20 bytes\nOutput before it stopped:\nline 0\nline 1\nline 2",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRunner(t, &tt.opts, addTool(), getTool(), failing, softFail, panicking, pending)
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
			if e.Line == 0 {
				t.Error("no line number")
			}
		})
	}
}

// TestCapabilityTimeout: a capability that outlives its timeout fails the
// program, and the program is not held by a handler that ignores its
// context.
func TestCapabilityTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		hang := funcTool("hang", func(context.Context) (string, error) {
			<-release // ignores its context
			return "late", nil
		})
		hang.Timeout = 3 * time.Second
		r := newRunner(t, nil, hang)
		_, err := r.Run(t.Context(), "print('start')\nhang()")
		e := asError(t, err)
		want := "the program failed at 2:5: tool \"hang\" timed out after 3s\nOutput before it stopped:\nstart"
		if e.Kind != codemode.KindCapability || e.Error() != want {
			t.Errorf("error = %q (%s), want %q", e, e.Kind, want)
		}
	})
}

// TestTimeLimit: the program's wall-time limit stops it, capability calls
// included.
func TestTimeLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ticks atomic.Int64
		wait := funcTool("wait", func(ctx context.Context) (string, error) {
			ticks.Add(1)
			select {
			case <-time.After(time.Second):
				return "ok", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		})
		r := newRunner(t, &codemode.Options{Timeout: 10*time.Second + 500*time.Millisecond}, wait)
		_, err := r.Run(t.Context(), "for i in range(100):\n    wait()\n")
		e := asError(t, err)
		want := "the program was stopped at 2:9: it exceeded its time limit of 10.5s"
		if e.Kind != codemode.KindTimeLimit || e.Error() != want {
			t.Errorf("error = %q (%s), want %q", e, e.Kind, want)
		}
		if got := ticks.Load(); got != 11 {
			t.Errorf("wait was called %d times, want 11 (the last one interrupted)", got)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Error("error does not wrap context.DeadlineExceeded")
		}
	})
}

// TestCancellation: cancelling the caller's context stops a running
// program at its next step.
func TestCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	stop := funcTool("stop", func(context.Context) (string, error) {
		cancel()
		return "stopping", nil
	})
	r := newRunner(t, nil, stop)
	_, err := r.Run(ctx, "stop()\nfor i in range(1000000000):\n    pass\n")
	e := asError(t, err)
	if e.Kind != codemode.KindCancelled {
		t.Errorf("kind = %q (%v), want %q", e.Kind, e, codemode.KindCancelled)
	}
	// Where the interpreter notices is a race with the watchdog: right
	// after stop() returns, or in the loop.
	if msg := e.Error(); !strings.HasPrefix(msg, "the program was cancelled at ") || !strings.HasSuffix(msg, ": context canceled") {
		t.Errorf("message = %q", msg)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error does not wrap context.Canceled")
	}
}

// TestMemoryLimit: a program that doubles a string until it is huge is
// stopped by the memory limit, at the concatenation that would pass it,
// instead of exhausting memory.
func TestMemoryLimit(t *testing.T) {
	r := newRunner(t, &codemode.Options{MaxMemory: 64 << 20})
	_, err := r.Run(t.Context(), "s = 'x'\nfor i in range(31):\n    s = s + s\nresult = len(s)")
	e := asError(t, err)
	if e.Kind != codemode.KindMemoryLimit {
		t.Fatalf("kind = %q (%v), want %q", e.Kind, e, codemode.KindMemoryLimit)
	}
	if want := "the program was stopped at 3:11: it exceeded its memory limit of 67108864 bytes (string + string would allocate about 67108864 bytes)"; e.Error() != want {
		t.Errorf("message = %q, want %q", e, want)
	}
}

// TestResultText: what the model reads is the output then the result,
// elided in the middle when long; a result without a JSON form is given as
// its repr.
func TestResultText(t *testing.T) {
	tests := []struct {
		name      string
		maxOutput int
		code      string
		text      string
	}{
		{"nothing", 0, "x = 1", "(the program printed nothing and set no result)"},
		{"print only", 0, "print('a', 1)\nprint([1, 2])", "a 1\n[1, 2]"},
		{"result only", 0, "result = {'b': [1, 2.5, None, True], 'a': 'é'}", `result: {"b":[1,2.5,null,true],"a":"é"}`},
		{"big int", 0, "result = 1 << 70", "result: 1180591620717411303424"},
		{"repr fallback", 0, "result = {1: len}", `result: "{1: <built-in function len>}"`},
		{"elided", 60, "for i in range(100):\n    print(i)\nresult = 'end'", "0\n1\n2\n3\n4\n5\n6\n7\n\n[... 273 bytes elided ...]\n\n9\nresult: \"end\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRunner(t, &codemode.Options{MaxOutput: tt.maxOutput})
			res, err := r.Run(t.Context(), tt.code)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.text, res.Text); diff != "" {
				t.Errorf("text (-want +got):\n%s", diff)
			}
		})
	}
}

// TestConcurrencyLimit: with MaxConcurrent 1, a second program waits until
// the first one is done.
func TestConcurrencyLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var entered []string
		hold := loop.NewTool("hold", "Holds.", func(ctx context.Context, in struct {
			Who string `json:"who"`
		}) (string, error) {
			entered = append(entered, in.Who)
			if in.Who == "first" {
				<-release
			}
			return in.Who, nil
		})
		r := newRunner(t, &codemode.Options{MaxConcurrent: 1}, hold)
		done := make(chan error, 2)
		go func() { _, err := r.Run(t.Context(), "hold(who='first')"); done <- err }()
		synctest.Wait()
		go func() { _, err := r.Run(t.Context(), "hold(who='second')"); done <- err }()
		synctest.Wait()
		if diff := cmp.Diff([]string{"first"}, entered); diff != "" {
			t.Errorf("before release (-want +got):\n%s", diff)
		}
		close(release)
		for range 2 {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
		if diff := cmp.Diff([]string{"first", "second"}, entered); diff != "" {
			t.Errorf("after release (-want +got):\n%s", diff)
		}
	})
}

// TestNewRefusesBadNames: capabilities whose names cannot be Starlark names
// are wiring errors.
func TestNewRefusesBadNames(t *testing.T) {
	f := func(context.Context) (string, error) { return "", nil }
	tests := []struct {
		defs []*loop.ToolDef
		want string
	}{
		{[]*loop.ToolDef{funcTool("len", f)}, `codemode: capability "len": would hide the Starlark built-in of that name`},
		{[]*loop.ToolDef{funcTool("lambda", f)}, `codemode: capability "lambda": a Starlark keyword`},
		{[]*loop.ToolDef{funcTool("result", f)}, `codemode: capability "result": the name is the program's result variable`},
		{[]*loop.ToolDef{funcTool("9lives", f)}, `codemode: capability "9lives": not a valid Starlark name`},
		{[]*loop.ToolDef{funcTool("read-file", f), funcTool("read_file", f)}, `codemode: capabilities "read-file" and "read_file" have the same Starlark name "read_file"`},
	}
	for _, tt := range tests {
		_, err := codemode.New(&codemode.Options{Capabilities: loop.MustToolset(tt.defs...)})
		if err == nil || err.Error() != tt.want {
			t.Errorf("New(%s) = %v, want %q", tt.defs[0].Name, err, tt.want)
		}
	}
	r := newRunner(t, nil, funcTool("read-file", func(context.Context) (string, error) { return "contents", nil }))
	res, err := r.Run(t.Context(), "result = read_file()")
	if err != nil || res.Text != `result: "contents"` {
		t.Errorf("calling read-file as read_file: %v, %v", res, err)
	}
}

// TestLog: the full record of a program goes to Options.Log.
func TestLog(t *testing.T) {
	var log strings.Builder
	r := newRunner(t, &codemode.Options{Log: &log, MaxOutput: 10}, addTool())
	if _, err := r.Run(t.Context(), "for i in range(5):\n    print('line', i)\nresult = add(a=2, b=3)"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(t.Context(), "x = 1 // 0"); err == nil {
		t.Fatal("want an error")
	}
	if _, err := r.Run(t.Context(), "x = ("); err == nil {
		t.Fatal("want an error")
	}
	want := "=== run_code run-1\nfor i in range(5):\n    print('line', i)\nresult = add(a=2, b=3)\n" +
		"--- output\nline 0\nline 1\nline 2\nline 3\nline 4\n--- result\n{\"sum\":5}\n--- end: ok\n" +
		"=== run_code run-2\nx = 1 // 0\n--- output\n--- end: the program failed at 1:7: floored division by zero\n"
	if diff := cmp.Diff(want, log.String()); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}

// TestCapabilityCalls: a capability call follows the loop's rules
// (loop.Toolset.Invoke): schema defaults reach the handler, a timeout
// wraps context.DeadlineExceeded, and a result is not bounded like a tool
// result for the model: the program gets all of it.
func TestCapabilityCalls(t *testing.T) {
	big := loop.NewTool("big", "Returns many numbers.", func(context.Context, noArgs) ([]int, error) {
		return make([]int, 100_000), nil // 200 KB of JSON
	})
	r := newRunner(t, nil, getTool(), big)
	res, err := r.Run(t.Context(), "result = [get_item(name='apple')['unit'], len(big())]")
	if err != nil {
		t.Fatal(err)
	}
	if want := `result: ["g",100000]`; res.Text != want {
		t.Errorf("text = %q, want %q", res.Text, want)
	}

	synctest.Test(t, func(t *testing.T) {
		slow := funcTool("slow", func(ctx context.Context) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		})
		r := newRunner(t, &codemode.Options{CapabilityTimeout: 2 * time.Second}, slow)
		_, err := r.Run(t.Context(), "slow()")
		e := asError(t, err)
		if want := `the program failed at 1:5: tool "slow" timed out after 2s`; e.Kind != codemode.KindCapability || e.Error() != want {
			t.Errorf("error = %q (%s), want %q", e, e.Kind, want)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Error("error does not wrap context.DeadlineExceeded")
		}
	})
}
