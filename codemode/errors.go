package codemode

import (
	"fmt"
	"strings"
)

// ErrorKind classifies why a program was refused or failed.
type ErrorKind string

// Error kinds. The first three are found before the program runs: nothing
// of it has run.
const (
	// KindSyntax: the program does not parse.
	KindSyntax ErrorKind = "syntax"
	// KindCheck: the program parses but names something that is not
	// defined (a capability that was not granted, for example), calls a
	// capability with arguments its schema does not have or without
	// required ones, or uses a statement that code mode does not offer.
	KindCheck ErrorKind = "check"
	// KindRefused: approval was required and was refused, failed or did
	// not arrive by the deadline.
	KindRefused ErrorKind = "refused"

	// KindRuntime: the program failed while running (a Starlark error
	// such as a division by zero or a missing key).
	KindRuntime ErrorKind = "runtime"
	// KindCapability: a capability the program called failed, timed out,
	// was refused, or was given arguments that do not match its schema.
	KindCapability ErrorKind = "capability"
	// KindStepLimit: the program ran more steps than allowed.
	KindStepLimit ErrorKind = "step_limit"
	// KindTimeLimit: the program ran longer than allowed.
	KindTimeLimit ErrorKind = "time_limit"
	// KindOutputLimit: the program printed more than allowed.
	KindOutputLimit ErrorKind = "output_limit"
	// KindMemoryLimit: an operation of the program would have made the
	// heap grow past the limit, and was refused before it allocated; or
	// the heap was found to have grown past it (see [Options.MaxMemory]).
	KindMemoryLimit ErrorKind = "memory_limit"
	// KindCancelled: the caller's context ended before the program did.
	KindCancelled ErrorKind = "cancelled"
)

// A Diagnostic is one problem found in a program before it runs.
type Diagnostic struct {
	// Line and Col locate the problem (1-based).
	Line, Col int
	Msg       string
}

// String formats d as "line:col: message".
func (d Diagnostic) String() string { return fmt.Sprintf("%d:%d: %s", d.Line, d.Col, d.Msg) }

// An Error is a program that was refused or that failed. Its message is what
// the model reads, so it says where, what, and what to do.
//
// Every error of [Runner.Run] is an *Error except a nil-runner programming
// error; the tool built by [Runner.Tool] returns it to the loop, which
// reports it to the model as the call's (failed) result.
type Error struct {
	Kind ErrorKind
	// Line and Col locate the error in the program, 1-based; 0 when it
	// has no position (a refusal, or a limit hit outside any statement).
	Line, Col int
	// Diagnostics lists every problem found before the program ran
	// (KindSyntax and KindCheck); Line and Col are those of the first.
	Diagnostics []Diagnostic
	// Output is everything the program printed before it failed.
	Output string
	// Msg is the complete model-visible message.
	Msg string
	// Err is the underlying error, if any: a capability's error, the
	// approver's, or the context's.
	Err error
}

func (e *Error) Error() string { return e.Msg }

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// notRun returns the error of a program refused before it ran.
func notRun(kind ErrorKind, diags []Diagnostic) *Error {
	var b strings.Builder
	b.WriteString("the program was not run:")
	for _, d := range diags {
		b.WriteString("\n")
		b.WriteString(d.String())
	}
	e := &Error{Kind: kind, Diagnostics: diags, Msg: b.String()}
	if len(diags) > 0 {
		e.Line, e.Col = diags[0].Line, diags[0].Col
	}
	return e
}

// refused returns the error of a program whose approval was refused.
func refused(msg string, err error) *Error {
	return &Error{Kind: KindRefused, Msg: "the program was not run: " + msg, Err: err}
}
