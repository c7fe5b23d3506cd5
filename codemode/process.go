package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// A program runs in a process of its own: the interpreter. Starlark
// notices a cancellation only between steps, and one step can be a
// built-in whose work grows exponentially with what the program built
// (comparing, hashing or sorting lists that share their elements,
// say), so no in-process limit can stop it. The process is killed
// instead, and the call does not return before it is gone.
//
// The interpreter is this binary, re-executed with helperEnv set: the
// package's init enters helperMain, which never returns to main. Parent
// and interpreter speak JSON, one message a line, over the interpreter's
// standard input and output:
//
//	parent → interpreter: start, then a reply to each call, and stop
//	interpreter → parent: running, a call for each capability call, done
//
// Capabilities run in the parent, through loop.Toolset.Invoke as before:
// the interpreter holds no tool, no key and no file, only the program.

// helperEnv marks a process started as a program's interpreter.
const helperEnv = "HRNS_CODEMODE_INTERPRETER"

// startAllowance is how long an interpreter may take to start and report
// on top of the program's time limit and its grace before it is killed
// regardless.
var startAllowance = 10 * time.Second

// message is one message of the protocol; exactly one field is set.
type message struct {
	Start   *startMsg `json:"start,omitempty"`
	Reply   *replyMsg `json:"reply,omitempty"`
	Stop    *stopMsg  `json:"stop,omitempty"`
	Call    *callMsg  `json:"call,omitempty"`
	Running bool      `json:"running,omitempty"` // the program starts
	Done    *doneMsg  `json:"done,omitempty"`
}

// startMsg is the program and its limits.
type startMsg struct {
	ID           string          `json:"id"`
	Code         string          `json:"code"`
	MaxSteps     uint64          `json:"max_steps"`
	Timeout      time.Duration   `json:"timeout"`
	Grace        time.Duration   `json:"grace"`
	MaxOutput    int             `json:"max_output"`
	OutputLimit  int             `json:"output_limit"`
	MaxMemory    int64           `json:"max_memory"`
	Capabilities []capabilitySig `json:"capabilities"`
}

// capabilitySig is what the interpreter knows of a capability: its name
// and schema, for the checks and the messages of its calls.
type capabilitySig struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema,omitempty"`
}

// callMsg is a capability call of the program.
type callMsg struct {
	Name string          `json:"name"` // the tool's name
	Args json.RawMessage `json:"args"`
}

// replyMsg answers a call: its text, or the program's error, or why the
// program must stop.
type replyMsg struct {
	Text string   `json:"text,omitempty"`
	Err  string   `json:"err,omitempty"`
	Stop *stopMsg `json:"stop,omitempty"`
}

// stopMsg tells the interpreter to stop the program: its caller left or
// its time is up.
type stopMsg struct {
	Kind  ErrorKind `json:"kind"`
	Cause string    `json:"cause"`
}

// doneMsg is how the program ended.
type doneMsg struct {
	Output string          `json:"output"`
	Steps  uint64          `json:"steps"`
	Value  json.RawMessage `json:"value,omitempty"`
	Text   string          `json:"text,omitempty"`
	Err    *wireError      `json:"err,omitempty"`
}

// wireError is an *Error without its underlying error, which the parent
// supplies.
type wireError struct {
	Kind        ErrorKind    `json:"kind"`
	Line        int          `json:"line,omitempty"`
	Col         int          `json:"col,omitempty"`
	Diagnostics []Diagnostic `json:"diagnostics,omitempty"`
	Output      string       `json:"output,omitempty"`
	Msg         string       `json:"msg"`
}

// stopCause is the cause of a stop the parent asked for.
type stopCause struct {
	kind ErrorKind
	msg  string
}

func (c *stopCause) Error() string { return c.msg }

// Test hooks: called with each interpreter started, and with its state
// once it has been waited for.
var (
	interpreterStarted func(pid int)
	interpreterExited  func(pid int, state *os.ProcessState)
)

func init() {
	if os.Getenv(helperEnv) == "" {
		return
	}
	os.Exit(helperMain(os.Stdin, os.Stdout))
}

// An interpreter is a started interpreter process, seen from the parent.
type interpreter struct {
	cmd    *exec.Cmd
	in     *os.File // its standard input, our end
	out    *os.File // its standard output, our end
	stderr *os.File // an unlinked file holding what it wrote to stderr
	enc    *json.Encoder

	msgs   chan message  // messages read, one at a time
	resume chan struct{} // lets the reader read the next message
	quit   chan struct{}
	read   chan struct{} // closed when the reader is gone
}

// interpreterPath is the binary to re-execute: this one, even if it was
// replaced or removed since it started.
func interpreterPath() (string, error) {
	if runtime.GOOS == "linux" {
		return "/proc/self/exe", nil
	}
	return os.Executable()
}

// startInterpreter starts an interpreter process.
func startInterpreter() (_ *interpreter, err error) {
	path, err := interpreterPath()
	if err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	stderr, err := os.CreateTemp("", "hrns-code-*.stderr")
	if err == nil {
		os.Remove(stderr.Name())
	}
	cleanup := func() {
		inW.Close()
		outR.Close()
		if stderr != nil {
			stderr.Close()
		}
	}
	cmd := &exec.Cmd{
		Path: path,
		Args: []string{"hrns-code-interpreter"},
		// Nothing of this process's environment: no keys.
		Env:         []string{helperEnv + "=1"},
		Stdin:       inR,
		Stdout:      outW,
		SysProcAttr: interpreterAttr(),
	}
	if stderr != nil {
		cmd.Stderr = stderr
	}
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		cleanup()
		return nil, err
	}
	p := &interpreter{
		cmd: cmd, in: inW, out: outR, stderr: stderr,
		enc:    json.NewEncoder(inW),
		msgs:   make(chan message),
		resume: make(chan struct{}),
		quit:   make(chan struct{}),
		read:   make(chan struct{}),
	}
	if interpreterStarted != nil {
		interpreterStarted(cmd.Process.Pid)
	}
	go p.reader()
	return p, nil
}

// reader reads the interpreter's messages, one at a time: it reads the
// next only once the last was handled, so that it is not blocked on the
// pipe while a capability call runs (which lets synctest advance time).
func (p *interpreter) reader() {
	defer close(p.read)
	defer close(p.msgs)
	dec := json.NewDecoder(p.out)
	for {
		var m message
		if err := dec.Decode(&m); err != nil {
			return
		}
		select {
		case p.msgs <- m:
		case <-p.quit:
			return
		}
		select {
		case <-p.resume:
		case <-p.quit:
			return
		}
	}
}

// next lets the reader read the next message.
func (p *interpreter) next() {
	select {
	case p.resume <- struct{}{}:
	case <-p.read:
	}
}

func (p *interpreter) send(m message) error { return p.enc.Encode(m) }

// close kills the interpreter if it still runs, waits for it, and
// releases everything; once it returns, the process is gone. It returns
// the first 4 KiB of what the interpreter wrote to stderr: a Go runtime
// that dies says why first.
func (p *interpreter) close() (stderr string) {
	p.cmd.Process.Kill()
	p.cmd.Wait()
	if interpreterExited != nil {
		interpreterExited(p.cmd.Process.Pid, p.cmd.ProcessState)
	}
	close(p.quit)
	p.in.Close()
	p.out.Close()
	<-p.read
	if p.stderr != nil {
		defer p.stderr.Close()
		b := make([]byte, 4096)
		n, _ := p.stderr.ReadAt(b, 0)
		stderr = string(b[:n])
	}
	return stderr
}

// runRemote runs code in an interpreter process, serving its capability
// calls. The caller holds a slot of r.sem; runRemote frees it
// once the process is gone, before it returns.
func (x *execution) runRemote(parent context.Context, code string) (*Result, error) {
	defer func() { <-x.r.sem }()
	o := &x.r.opts
	// The time limit starts when the interpreter does: starting a
	// process is not the program's time (startAllowance bounds it).
	x.ctx, x.parent = parent, parent

	p, err := startInterpreter()
	if err != nil {
		return nil, &Error{Kind: KindRuntime, Msg: "the program was not run: its interpreter could not be started: " + err.Error(), Err: err}
	}
	exited := false
	defer func() {
		if !exited {
			p.close()
		}
	}()
	// A write to an interpreter that stopped reading (wedged, not dead)
	// must not hold the call past the backstop either.
	kill := o.Timeout + 2*grace + startAllowance
	p.in.SetWriteDeadline(time.Now().Add(kill))
	start := &startMsg{
		ID: x.id, Code: code, MaxSteps: o.MaxSteps, Timeout: o.Timeout, Grace: grace / 2,
		MaxOutput: o.MaxOutput, OutputLimit: o.OutputLimit, MaxMemory: o.MaxMemory,
	}
	for _, name := range x.r.order {
		def := x.r.caps[name].def
		start.Capabilities = append(start.Capabilities, capabilitySig{Name: def.Name, Schema: def.InputSchema})
	}
	if err := p.send(message{Start: start}); err != nil {
		exited = true
		return nil, x.died(p.close(), err)
	}

	// The interpreter stops itself at its limits, and reports within its
	// grace even when a built-in is stuck. The backstop is for an
	// interpreter that does not: it is killed.
	backstop := time.NewTimer(kill)
	defer backstop.Stop()
	var graceC <-chan time.Time
	done := parent.Done()
	var stopKind ErrorKind
	var capErr error // the cause of the last failed capability call
	for {
		select {
		case m, ok := <-p.msgs:
			if !ok {
				exited = true
				return nil, x.died(p.close(), nil)
			}
			switch {
			case m.Call != nil:
				reply, err := x.serve(x.ctx, m.Call)
				if err != nil {
					capErr = err
				}
				if err := p.send(message{Reply: reply}); err != nil {
					exited = true
					return nil, x.died(p.close(), err)
				}
				p.next()
			case m.Running && done != nil:
				ctx, cancel := context.WithTimeout(parent, o.Timeout)
				defer cancel()
				x.ctx, done = ctx, ctx.Done()
				p.next()
			case m.Done != nil:
				exited = true
				p.close()
				return x.fromDone(m.Done, capErr)
			default:
				p.next()
			}
		case <-done:
			done = nil
			stop := x.stopMsg()
			stopKind = stop.Kind
			p.send(message{Stop: stop})
			t := time.NewTimer(grace)
			defer t.Stop()
			graceC = t.C
		case <-graceC:
			return nil, x.failure(stopKind, nil)
		case <-backstop.C:
			return nil, x.failure(KindTimeLimit, nil)
		}
	}
}

// serve makes a capability call of the program and returns its reply;
// the error is the cause of a failed call.
func (x *execution) serve(ctx context.Context, m *callMsg) (*replyMsg, error) {
	c := x.r.capabilityOf(m.Name)
	if c == nil {
		return &replyMsg{Err: fmt.Sprintf("no capability %q", m.Name)}, nil
	}
	call := llm.ToolCall{ID: fmt.Sprintf("%s/%d", x.id, x.calls.Add(1)), Name: c.def.Name, Arguments: llm.Arguments(m.Args)}
	out, err := x.r.opts.Capabilities.Invoke(ctx, call, x.r.invokeOpts)
	if ctx.Err() != nil {
		return &replyMsg{Stop: x.stopMsg()}, err
	}
	if err != nil {
		ce := c.failure(ctx, err)
		return &replyMsg{Err: ce.msg}, ce.err
	}
	text := outputText(out)
	if out.IsError {
		return &replyMsg{Err: fmt.Sprintf("%s failed: %s", c.name, text)}, nil
	}
	return &replyMsg{Text: text}, nil
}

// stopMsg says why the program must stop, once its context is done.
func (x *execution) stopMsg() *stopMsg {
	cause := ""
	if err := context.Cause(x.parent); err != nil {
		cause = err.Error()
	}
	return &stopMsg{Kind: x.endKind(), Cause: cause}
}

// endKind is why the program's context ended: its time limit, its
// caller's cancellation, or (in the interpreter) the parent's word.
func (x *execution) endKind() ErrorKind {
	if x.parent.Err() == nil {
		return KindTimeLimit
	}
	if sc, ok := errors.AsType[*stopCause](context.Cause(x.parent)); ok {
		return sc.kind
	}
	return KindCancelled
}

// capabilityOf returns the capability of the tool name.
func (r *Runner) capabilityOf(name string) *capability {
	for _, c := range r.caps {
		if c.def.Name == name {
			return c
		}
	}
	return nil
}

// fromDone turns the interpreter's report into the program's result.
func (x *execution) fromDone(d *doneMsg, capErr error) (*Result, error) {
	x.mu.Lock()
	x.out.Reset()
	x.out.WriteString(d.Output)
	x.mu.Unlock()
	x.steps.Store(d.Steps)
	if d.Err != nil {
		e := &Error{Kind: d.Err.Kind, Line: d.Err.Line, Col: d.Err.Col, Diagnostics: d.Err.Diagnostics, Output: d.Err.Output, Msg: d.Err.Msg}
		switch e.Kind {
		case KindTimeLimit, KindCancelled:
			e.Err = x.ctx.Err()
			if e.Err == nil {
				// The interpreter's clock ran out just before ours.
				e.Err = context.DeadlineExceeded
			}
		case KindCapability:
			e.Err = capErr
		}
		return nil, e
	}
	return &Result{Output: d.Output, Value: d.Value, Steps: d.Steps, Text: d.Text}, nil
}

// died is the error of an interpreter that ended without a report.
func (x *execution) died(stderr string, err error) *Error {
	if x.ctx.Err() != nil {
		return x.failure(x.endKind(), nil)
	}
	if outOfMemory(stderr) {
		return x.failure(KindMemoryLimit, nil)
	}
	why, _, _ := strings.Cut(strings.TrimSpace(stderr), "\n")
	if why == "" && err != nil {
		why = err.Error()
	}
	return x.failure(KindRuntime, fmt.Errorf("internal error: the interpreter ended unexpectedly: %s", loop.Elide(why, 1024)))
}

// outOfMemory reports whether the interpreter died for want of memory: the
// Go runtime says "out of memory"; under the race detector, its runtime
// reports failed mappings in words of its own.
func outOfMemory(stderr string) bool {
	for _, s := range []string{"out of memory", "failed to allocate", "cannot allocate memory", "too many address space collisions"} {
		if strings.Contains(stderr, s) {
			return true
		}
	}
	return false
}

// helperMain is the interpreter: it runs one program as the parent's
// start message says, asks the parent for each capability call, reports
// how the program ended, and returns the exit code. It exits at once if
// the parent goes away.
func helperMain(in io.Reader, out io.Writer) int {
	// Anything printed by mistake must not reach the protocol.
	os.Stdout = os.Stderr
	runtime.GOMAXPROCS(min(2, runtime.NumCPU()))

	dec := json.NewDecoder(in)
	var m message
	if err := dec.Decode(&m); err != nil || m.Start == nil {
		fmt.Fprintln(os.Stderr, "hrns-code-interpreter: no start message:", err)
		return 2
	}
	s := m.Start
	var w sync.Mutex
	enc := json.NewEncoder(out)
	send := func(m message) {
		w.Lock()
		defer w.Unlock()
		if err := enc.Encode(m); err != nil {
			os.Exit(3) // the parent is gone
		}
	}

	r := &Runner{caps: map[string]*capability{}, opts: Options{
		MaxSteps: s.MaxSteps, Timeout: s.Timeout, MaxOutput: s.MaxOutput,
		OutputLimit: s.OutputLimit, MaxMemory: s.MaxMemory,
	}}
	for _, sig := range s.Capabilities {
		c, err := newCapability(loop.ToolDef{Name: sig.Name, InputSchema: sig.Schema})
		if err != nil {
			send(message{Done: &doneMsg{Err: &wireError{Kind: KindRuntime, Msg: "internal error: " + err.Error()}}})
			return 0
		}
		r.caps[c.name] = c
		r.order = append(r.order, c.name)
	}
	grace = s.Grace
	capAddressSpace(s.MaxMemory)

	parent, stop := context.WithCancelCause(context.Background())
	replies := make(chan *replyMsg, 1)
	go func() {
		for {
			var m message
			if err := dec.Decode(&m); err != nil {
				os.Exit(3) // the parent is gone
			}
			switch {
			case m.Reply != nil:
				replies <- m.Reply
			case m.Stop != nil:
				stop(&stopCause{kind: m.Stop.Kind, msg: m.Stop.Cause})
			}
		}
	}()

	x := &execution{r: r, id: s.ID}
	x.invoke = func(name string, args json.RawMessage) (*replyMsg, error) {
		send(message{Call: &callMsg{Name: name, Args: args}})
		select {
		case reply := <-replies:
			if reply.Stop != nil {
				stop(&stopCause{kind: reply.Stop.Kind, msg: reply.Stop.Cause})
			}
			return reply, nil
		case <-parent.Done():
			return nil, context.Cause(parent)
		}
	}
	d := &doneMsg{}
	prog, err := r.compile(s.Code)
	var res *Result
	if err == nil {
		send(message{Running: true})
		res, err = x.exec(parent, prog)
	}
	d.Output, d.Steps = x.output(), x.steps.Load()
	if err != nil {
		e, ok := errors.AsType[*Error](err)
		if !ok {
			e = &Error{Kind: KindRuntime, Msg: err.Error()}
		}
		d.Err = &wireError{Kind: e.Kind, Line: e.Line, Col: e.Col, Diagnostics: e.Diagnostics, Output: e.Output, Msg: e.Msg}
	} else {
		d.Value, d.Text = res.Value, res.Text
	}
	send(message{Done: d})
	return 0
}
