package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// DefaultName is the name of the tool when [Options.Name] is empty.
const DefaultName = "run_code"

// resultName is the global a program sets to return a value.
const resultName = "result"

// Options configure a [Runner]. The zero value of each field picks the
// documented default; a nil *Options means all defaults (and no
// capabilities).
type Options struct {
	// Name is the tool's name; empty means [DefaultName].
	Name string
	// Capabilities are the tools granted to programs: each becomes a
	// function of that name (with '-' written '_') that programs call
	// with keyword arguments. They are not offered to the model as tools
	// unless the application also adds them to the agent's toolset. Nil
	// grants nothing.
	Capabilities *loop.Toolset

	// MaxSteps bounds the Starlark computation steps of one program; 0
	// means 10,000,000.
	MaxSteps uint64
	// Timeout bounds the wall time of one program from when its
	// interpreter process starts it, its capability calls included
	// (approval, waiting for a free slot and starting the process are
	// not); 0 means 60 seconds. A program stuck in one built-in past it
	// is stopped by killing its interpreter, at most 2 seconds later.
	Timeout time.Duration
	// CapabilityTimeout bounds one capability call unless the tool sets
	// its own Timeout; 0 means 5 minutes, the loop's default. Each call is
	// also bounded by what is left of Timeout.
	CapabilityTimeout time.Duration
	// MaxOutput bounds the text returned to the model, in bytes: longer
	// text keeps its head and tail and says how much was elided. 0 means
	// 16 KiB.
	MaxOutput int
	// OutputLimit bounds what one program may print, in bytes; a program
	// that prints more is stopped. 0 means 1 MiB.
	OutputLimit int
	// MaxMemory bounds how much the Go heap may grow while a program
	// runs. Every operation of a program that builds a value in
	// proportion to its operands (repetition, concatenation, join,
	// formatting, slices, list and dict growth, str and repr, list of a
	// range, the result's JSON, a capability's arguments...) is
	// estimated from above and refused before it allocates if it would
	// not fit; the heap, measured after a garbage collection, decides
	// when the estimates add up to the limit. The small allocations of
	// single steps (under 1 KiB) are not weighed one by one: the heap is
	// sampled every 4096 steps and every 10 ms, so a program may pass the
	// limit by what a few thousand steps allocate before it is stopped.
	// The heap is that of the program's interpreter process, which holds
	// only the program's values. 0 means 512 MiB; negative disables the
	// check.
	MaxMemory int64
	// MaxConcurrent bounds the programs running at once across every
	// agent using this runner; further programs wait for a slot. 0
	// means 4.
	MaxConcurrent int

	// RequireApproval makes every program wait for Approver's decision
	// after it passed its checks and before it runs. Capabilities marked
	// RequiresApproval ask the Approver on each call either way.
	RequireApproval bool
	// Approver decides programs (when RequireApproval is set) and calls of
	// capabilities that require approval. With none, those are refused.
	// The program's request names the tool and carries the source as the
	// "code" argument (see [SourceOf]). A Defer verdict cannot suspend a
	// running program: it is a refusal, and so is Cancel.
	Approver loop.Approver
	// ApprovalTimeout is the approval deadline; 0 means 5 minutes. It is a
	// watchdog: an approver that never answers is refused at the
	// deadline, whether or not it honours its context.
	ApprovalTimeout time.Duration

	// Log, when set, receives a record of every program that passed its
	// checks: its source, everything it printed (up to OutputLimit,
	// unelided), its result and how it ended. Writes are serialized.
	Log io.Writer
	// Logger receives one debug record per program; nil discards them.
	Logger *slog.Logger
}

// A Runner runs the programs of the run_code tool. It is safe for
// concurrent use; its options are fixed at creation.
type Runner struct {
	opts   Options
	logger *slog.Logger
	caps   map[string]*capability
	order  []string // capability names, in grant order
	sem    chan struct{}
	ids    atomic.Int64
	// invokeOpts are the loop's rules for capability calls and for the
	// approval of programs.
	invokeOpts *loop.InvokeOptions
	// gate is a toolset holding only run_code with a handler that does
	// nothing: the approval of a program is asked through it, exactly
	// as the loop asks about a call of run_code. Nil unless
	// RequireApproval.
	gate *loop.Toolset

	logMu sync.Mutex // guards writes to opts.Log
}

// New returns a runner granting opts.Capabilities to programs. It fails if a
// capability's name cannot be a Starlark name (a keyword, a built-in such as
// len or print, or "result"), if two names clash once '-' is written '_',
// if a schema cannot be read, or, with RequireApproval, if Name cannot be a
// tool's name.
func New(opts *Options) (*Runner, error) {
	r := &Runner{caps: map[string]*capability{}}
	if opts != nil {
		r.opts = *opts
	}
	o := &r.opts
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.MaxSteps == 0 {
		o.MaxSteps = 10_000_000
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Minute
	}
	if o.CapabilityTimeout <= 0 {
		o.CapabilityTimeout = 5 * time.Minute
	}
	if o.MaxOutput <= 0 {
		o.MaxOutput = 16 << 10
	}
	if o.OutputLimit <= 0 {
		o.OutputLimit = 1 << 20
	}
	if o.MaxMemory == 0 {
		o.MaxMemory = 512 << 20
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = 4
	}
	if o.ApprovalTimeout <= 0 {
		o.ApprovalTimeout = 5 * time.Minute
	}
	r.logger = o.Logger
	if r.logger == nil {
		r.logger = slog.New(slog.DiscardHandler)
	}
	r.sem = make(chan struct{}, o.MaxConcurrent)
	r.invokeOpts = &loop.InvokeOptions{
		Timeout:         o.CapabilityTimeout,
		Approver:        programApprover(o.Approver),
		ApprovalTimeout: o.ApprovalTimeout,
		// A program computes on whole results; what it returns to the
		// model is bounded by MaxOutput.
		MaxOutput: -1,
		Logger:    r.logger,
	}
	for def := range o.Capabilities.All() {
		c, err := newCapability(def)
		if err != nil {
			return nil, fmt.Errorf("codemode: %w", err)
		}
		if prev, dup := r.caps[c.name]; dup {
			return nil, fmt.Errorf("codemode: capabilities %q and %q have the same Starlark name %q", prev.def.Name, def.Name, c.name)
		}
		r.caps[c.name] = c
		r.order = append(r.order, c.name)
	}
	if o.RequireApproval {
		gate, err := loop.NewToolset(&loop.ToolDef{
			Name:             o.Name,
			Description:      "Runs this program: " + r.grantedList() + ".",
			InputSchema:      codeSchema,
			RequiresApproval: true,
			Handler:          func(context.Context, *loop.Call) (*loop.Output, error) { return nil, nil },
		})
		if err != nil {
			return nil, fmt.Errorf("codemode: %w", err)
		}
		r.gate = gate
	}
	return r, nil
}

// Capabilities returns the Starlark names of the granted capabilities, in
// the order they were granted.
func (r *Runner) Capabilities() []string { return append([]string(nil), r.order...) }

// Tool returns the run_code tool: one required string argument, "code",
// the program. Its description tells the model the dialect, the
// capabilities with their arguments, how to return a value, and the
// limits. A program that fails or is refused is a tool error whose message
// gives the line and column.
func (r *Runner) Tool() *loop.ToolDef {
	return &loop.ToolDef{
		Name:        r.opts.Name,
		Description: r.description(),
		InputSchema: codeSchema,
		Handler: func(ctx context.Context, call *loop.Call) (*loop.Output, error) {
			code, _ := call.Args["code"].(string)
			res, err := r.run(ctx, call.ID, code)
			if err != nil {
				return nil, err
			}
			return loop.TextOutput(res.Text), nil
		},
		// The loop's timeout must not fire before the runner's own
		// limits, which give the model a better message.
		Timeout: r.toolTimeout(),
		// A program runs code: asked for outside bypass mode, refused in
		// plan mode. Its capability calls are decided one by one too.
		Access: loop.AccessExecute,
	}
}

func (r *Runner) toolTimeout() time.Duration {
	d := r.opts.Timeout + time.Minute
	if r.opts.RequireApproval {
		d += r.opts.ApprovalTimeout
	}
	return d
}

// codeSchema is the input schema of run_code.
var codeSchema = json.RawMessage(`{"type":"object","properties":{"code":{"type":"string","description":"The Starlark program to run."}},"required":["code"],"additionalProperties":false}`)

// Toolset returns a toolset holding only [Runner.Tool].
func (r *Runner) Toolset() *loop.Toolset { return loop.MustToolset(r.Tool()) }

func (r *Runner) description() string {
	var b strings.Builder
	b.WriteString("Runs a program written in Starlark, a small deterministic dialect of Python: " +
		"def, for, while, if, comprehensions, lambda, and built-ins such as len, range, sorted, " +
		"enumerate, zip, min, max, str, int, float, dict and list work (there is no sum: add in a loop); " +
		"there are no imports, classes, exceptions (try) or recursion. " +
		"Use it to call several capabilities in one step, loop over their results and compute on them.\n\n")
	if len(r.order) == 0 {
		b.WriteString("No capabilities are granted: the program can only compute.\n")
	} else {
		b.WriteString("The program has no file, network or clock access except through these capabilities, " +
			"called with keyword arguments only. Each returns a dict or list (JSON results), or a str; " +
			"a failing capability stops the program with an error:\n")
		for _, name := range r.order {
			c := r.caps[name]
			desc := strings.TrimSpace(c.def.Description)
			if i := strings.IndexByte(desc, '\n'); i >= 0 {
				desc = desc[:i]
			}
			fmt.Fprintf(&b, "- %s(%s): %s\n", name, c.params(), desc)
		}
	}
	fmt.Fprintf(&b, "\nWhat the program prints comes back, and so does the value assigned to the global "+
		"variable `result` (as JSON). The program is checked before it runs: an unknown name or wrong "+
		"arguments to a capability are reported with line:col and nothing runs. "+
		"Limits: %d steps, %v, %d bytes of printed output.", r.opts.MaxSteps, r.opts.Timeout, r.opts.OutputLimit)
	return b.String()
}

// A Result is what a program printed and returned.
type Result struct {
	// Output is everything the program printed, unelided.
	Output string
	// Value is the program's `result` as JSON; nil if it set none. A
	// result that has no JSON form (a function, a dict with int keys) is
	// given as a JSON string holding its Starlark repr.
	Value json.RawMessage
	// Steps is the number of Starlark steps the program ran.
	Steps uint64
	// Text is what the model reads: the output, then "result: " and the
	// value, elided in the middle to MaxOutput bytes.
	Text string
}

// Check parses code and checks it against the granted capabilities, as
// run_code does before running a program, and runs nothing. Its error is an
// *[Error] of kind [KindSyntax] or [KindCheck].
func (r *Runner) Check(code string) error {
	_, err := r.compile(code)
	return err
}

// Run checks code, asks for approval if required, and runs it within the
// runner's limits. Its error is always an *[Error]. Run is what the
// run_code tool calls; applications may call it directly.
func (r *Runner) Run(ctx context.Context, code string) (*Result, error) {
	return r.run(ctx, fmt.Sprintf("run-%d", r.ids.Add(1)), code)
}

// SourceOf returns the program of an approval request for run_code.
func SourceOf(req *loop.ApprovalRequest) (string, bool) {
	var args struct {
		Code *string `json:"code"`
	}
	if req == nil || json.Unmarshal(req.Call.Arguments, &args) != nil || args.Code == nil {
		return "", false
	}
	return *args.Code, true
}

func (r *Runner) run(ctx context.Context, id, code string) (*Result, error) {
	if _, err := r.compile(code); err != nil {
		return nil, err
	}
	if r.gate != nil {
		if err := r.approveProgram(ctx, id, code); err != nil {
			return nil, err
		}
	}
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, cancelled(ctx, "")
	}
	x := &execution{r: r, id: id}
	res, err := x.runRemote(ctx, code)
	r.record(id, code, x, res, err)
	return res, err
}

func cancelled(ctx context.Context, output string) *Error {
	return &Error{Kind: KindCancelled, Msg: "the program was cancelled: " + context.Cause(ctx).Error(), Output: output, Err: ctx.Err()}
}

// approveProgram asks the approver about a program that passed its checks,
// through the loop's approval of a run_code call: the request carries the
// source as the "code" argument and the deadline is a watchdog. A nil error
// means approved; otherwise it is an *Error.
func (r *Runner) approveProgram(ctx context.Context, id, code string) error {
	args, _ := json.Marshal(map[string]string{"code": code})
	call := llm.ToolCall{ID: id, Name: r.opts.Name, Arguments: args}
	_, err := r.gate.Invoke(ctx, call, r.invokeOpts)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return cancelled(ctx, "")
	}
	if te, ok := errors.AsType[*loop.ToolError](err); ok {
		return refused(te.Msg, te.Err)
	}
	return refused(err.Error(), err)
}

// programApprover adapts the application's approver to programs, which
// cannot be suspended: a Defer is a rejection that says so, and a Cancel a
// rejection too (it ends a program's call, not the agent's run). Nil stays
// nil, so that the loop says no approver is configured.
func programApprover(a loop.Approver) loop.Approver {
	if a == nil {
		return nil
	}
	return loop.ApproverFunc(func(ctx context.Context, req *loop.ApprovalRequest) (loop.Decision, error) {
		d, err := a.Approve(ctx, req)
		switch {
		case err != nil:
		case d.Verdict == loop.Defer:
			d = loop.Decision{Verdict: loop.Reject, Reason: "approval was deferred, and a program cannot wait for a later decision"}
		case d.Verdict == loop.Cancel:
			d.Verdict = loop.Reject
		}
		return d, err
	})
}

// record logs a finished program.
func (r *Runner) record(id, code string, x *execution, res *Result, err error) {
	status := "ok"
	if err != nil {
		status = err.Error()
	}
	r.logger.Debug("program finished", "id", id, "steps", x.steps.Load(), "output_bytes", len(x.output()), "err", err)
	if r.opts.Log == nil {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "=== %s %s\n%s\n--- output\n%s", r.opts.Name, id, strings.TrimRight(code, "\n"), x.output())
	if res != nil && res.Value != nil {
		fmt.Fprintf(&b, "--- result\n%s\n", res.Value)
	}
	fmt.Fprintf(&b, "--- end: %s\n", status)
	r.logMu.Lock()
	defer r.logMu.Unlock()
	io.WriteString(r.opts.Log, b.String())
}

// heapBytes reads the bytes of live and not yet swept heap objects.
func heapBytes() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}
