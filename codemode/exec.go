package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.starlark.net/starlark"

	"github.com/hrns-dev/hrns/loop"
)

// grace is how long a stopped program's interpreter process is waited
// for before it is killed and the program reported stopped anyway.
// Starlark notices a cancellation at its next step, so only one long
// built-in operation (comparing or hashing values that share their
// elements, say) takes longer. Inside the interpreter, the program is
// waited for half as long: a stuck program is then reported by the
// interpreter itself, with what it printed, before the kill.
var grace = 2 * time.Second

// memoryTick is how often the heap is sampled while a program runs, in
// case one operation the guards do not weigh allocates a lot; checkStride
// is how many steps run between two samples taken by the interpreter.
const (
	memoryTick  = 10 * time.Millisecond
	checkStride = 4096
)

// An execution is one program running.
type execution struct {
	r      *Runner
	id     string
	ctx    context.Context // the program's: done at its time limit
	parent context.Context // the caller's
	calls  atomic.Int64    // capability calls so far
	steps  atomic.Uint64
	stop   atomic.Pointer[ErrorKind] // why the program was halted
	meter  *meter
	// invoke asks the parent for a capability call (in the
	// interpreter).
	invoke func(name string, args json.RawMessage) (*replyMsg, error)

	mu  sync.Mutex // guards out
	out strings.Builder
}

type outcome struct {
	globals starlark.StringDict
	err     error
}

// exec runs prog in this process: it is what the interpreter process
// does. It returns within the time limit and grace even if a built-in is
// stuck, leaving that goroutine behind: the process then exits.
func (x *execution) exec(parent context.Context, prog *starlark.Program) (*Result, error) {
	o := &x.r.opts
	ctx, cancel := context.WithTimeout(parent, o.Timeout)
	defer cancel()
	x.ctx, x.parent = ctx, parent
	x.meter = newMeter(o.MaxMemory)
	thread := &starlark.Thread{Name: x.id, Print: x.print}
	// The step limit is reached in stretches of checkStride steps, and
	// the heap is sampled at the end of each.
	thread.SetMaxExecutionSteps(min(o.MaxSteps, checkStride))
	thread.OnMaxSteps = func(t *starlark.Thread) {
		if t.Steps >= o.MaxSteps {
			x.halt(t, KindStepLimit)
			return
		}
		t.SetMaxExecutionSteps(min(o.MaxSteps, t.Steps+checkStride))
		if x.meter.over() {
			x.halt(t, KindMemoryLimit)
		}
	}
	predeclared := x.guards()
	for name, c := range x.r.caps {
		predeclared[name] = c.builtin(x)
	}

	done := make(chan outcome, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- outcome{err: fmt.Errorf("internal error: %v", v)}
			}
		}()
		globals, err := prog.Init(thread, predeclared)
		x.steps.Store(thread.Steps)
		done <- outcome{globals, err}
	}()

	var tick <-chan time.Time
	if o.MaxMemory > 0 {
		t := time.NewTicker(memoryTick)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case out := <-done:
			return x.finish(out)
		case <-tick:
			if x.meter.over() {
				x.halt(thread, KindMemoryLimit)
			}
		case <-ctx.Done():
			kind := x.endKind()
			x.halt(thread, kind)
			timer := time.NewTimer(grace)
			defer timer.Stop()
			select {
			case out := <-done:
				return x.finish(out)
			case <-timer.C:
				return nil, x.failure(kind, nil)
			}
		}
	}
}

// halt stops the program for the reason kind; the first reason wins.
func (x *execution) halt(t *starlark.Thread, kind ErrorKind) {
	x.stop.CompareAndSwap(nil, &kind)
	t.Cancel(string(kind))
}

// print is the program's print: output is kept up to OutputLimit, and a
// program that prints more is halted.
func (x *execution) print(t *starlark.Thread, msg string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	limit := x.r.opts.OutputLimit
	if x.out.Len()+len(msg)+1 > limit {
		x.out.WriteString(msg[:min(len(msg), max(0, limit-x.out.Len()))])
		x.halt(t, KindOutputLimit)
		return
	}
	x.out.WriteString(msg)
	x.out.WriteByte('\n')
}

func (x *execution) output() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.out.String()
}

// finish turns the interpreter's outcome into the program's result.
func (x *execution) finish(out outcome) (*Result, error) {
	if out.err != nil {
		kind := KindRuntime
		if k := x.stop.Load(); k != nil {
			kind = *k
		} else if x.ctx.Err() != nil {
			// A capability call saw the context end before the watchdog
			// halted the program.
			kind = x.endKind()
		} else if _, ok := errors.AsType[*capError](out.err); ok {
			kind = KindCapability
		}
		return nil, x.failure(kind, out.err)
	}
	res := &Result{Output: x.output(), Steps: x.steps.Load()}
	if v, ok := out.globals[resultName]; ok {
		if n := jsonSize(v, x.meter.limit); x.meter.limit > 0 && n > x.meter.limit {
			return nil, x.failure(KindMemoryLimit, &memoryError{what: "encoding the result as JSON", need: n})
		}
		b, err := toJSON(v)
		if err != nil {
			b, _ = toJSON(starlark.String(v.String()))
		}
		res.Value = b
	}
	var text strings.Builder
	text.WriteString(res.Output)
	if res.Value != nil {
		text.WriteString("result: ")
		text.Write(res.Value)
	}
	if text.Len() == 0 {
		text.WriteString("(the program printed nothing and set no result)")
	}
	res.Text = loop.Elide(strings.TrimRight(text.String(), "\n"), x.r.opts.MaxOutput)
	return res, nil
}

// failure builds the error of a program that failed or was stopped.
func (x *execution) failure(kind ErrorKind, err error) *Error {
	o := &x.r.opts
	e := &Error{Kind: kind, Output: x.output(), Err: err}
	if kind == KindCancelled || kind == KindTimeLimit {
		e.Err = x.ctx.Err()
	}
	var stack starlark.CallStack
	if ee, ok := errors.AsType[*starlark.EvalError](err); ok {
		for _, fr := range ee.CallStack {
			if fr.Pos.Filename() == filename {
				stack = append(stack, fr)
			}
		}
		if n := len(stack); n > 0 {
			e.Line, e.Col = int(stack[n-1].Pos.Line), int(stack[n-1].Pos.Col)
		}
	}
	where := ""
	if e.Line > 0 {
		where = fmt.Sprintf(" at %d:%d", e.Line, e.Col)
	}
	var what string
	switch kind {
	case KindRuntime, KindCapability:
		what = "the program failed" + where + ": " + errMsg(err)
	case KindStepLimit:
		what = fmt.Sprintf("the program was stopped%s: it exceeded its limit of %d steps", where, o.MaxSteps)
	case KindTimeLimit:
		what = fmt.Sprintf("the program was stopped%s: it exceeded its time limit of %v", where, o.Timeout)
	case KindOutputLimit:
		what = fmt.Sprintf("the program was stopped%s: it printed more than its limit of %d bytes", where, o.OutputLimit)
	case KindMemoryLimit:
		if me, ok := errors.AsType[*memoryError](err); ok {
			what = fmt.Sprintf("the program was stopped%s: it exceeded its memory limit of %d bytes (%s)", where, o.MaxMemory, me)
		} else {
			what = fmt.Sprintf("the program was stopped%s: memory grew by more than its limit of %d bytes", where, o.MaxMemory)
		}
	case KindCancelled:
		what = "the program was cancelled" + where + ": " + context.Cause(x.parent).Error()
	}
	var b strings.Builder
	b.WriteString(what)
	if len(stack) > 1 {
		b.WriteString("\nTraceback (most recent call last):")
		for _, fr := range stack {
			fmt.Fprintf(&b, "\n  %d:%d: in %s", fr.Pos.Line, fr.Pos.Col, fr.Name)
		}
	}
	if e.Output != "" {
		b.WriteString("\nOutput before it stopped:\n")
		b.WriteString(loop.Elide(strings.TrimRight(e.Output, "\n"), o.MaxOutput))
	}
	e.Msg = b.String()
	return e
}

// errMsg is the message of an interpreter error without the interpreter's
// own wrapping.
func errMsg(err error) string {
	if ee, ok := errors.AsType[*starlark.EvalError](err); ok {
		return ee.Msg
	}
	return err.Error()
}
