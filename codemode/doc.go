// Package codemode offers a model one tool, run_code, that runs a program
// the model writes: a Starlark program that can call the capabilities the
// application granted, loop over their results and compute on them in one
// step, without a model round trip per call.
//
//	files := loop.MustToolset(readFile, listDir) // ordinary loop tools
//	runner, err := codemode.New(&codemode.Options{Capabilities: files})
//	if err != nil { ... }
//	agent := loop.NewAgent(model, runner.Toolset(), nil)
//
// # Tools and capabilities
//
// A tool is offered to the model; a capability is offered to the program
// the model writes. Any loop tool can be granted as a capability: it becomes
// a Starlark function of the same name ('-' written '_'), called with
// keyword arguments, whose JSON result arrives as dicts and lists and whose
// text result arrives as a str. A capability is not a tool unless the
// application also puts it in the agent's toolset.
//
// # Checked before it runs
//
// A program is parsed and resolved against the granted capabilities before
// anything runs. A name that is not defined (a capability that was not
// granted, say), a call of a capability with an argument its schema does
// not have, without a required one, with positional arguments, or with a
// literal of the wrong JSON type, is refused with "line:col: message"
// diagnostics ([KindSyntax], [KindCheck]). Calls the checker cannot see
// (through a variable, or with **kwargs) are validated when made, against
// the same schema the loop uses for model calls, with its defaults.
//
// # Running
//
// Programs are hermetic and deterministic: Starlark has no clock, no
// randomness and no I/O, so a program reaches the world only through its
// capabilities. A capability call is made by [loop.Toolset.Invoke], with
// the rules of a model's call: the arguments are validated against the
// schema (defaults applied), the [loop.Approver] is asked first if the tool
// requires approval, the handler runs with the tool's timeout (or
// [Options.CapabilityTimeout]) and its panics are recovered; a failure
// stops the program with the loop's message. Unlike a model's call, the
// result is not bounded: the program gets all of it. The program is
// bounded by steps, wall time, printed bytes and memory (every operation
// that builds a value is weighed before it runs; see [Options.MaxMemory]),
// and programs of one [Runner] run at most [Options.MaxConcurrent]
// at a time. With [Options.RequireApproval], each program waits for the
// approver, which sees its source, until [Options.ApprovalTimeout]; no
// decision by then is a refusal. That approval too is the loop's, of a
// call of run_code.
//
// What the program prints comes back to the model, followed by
// "result: " and the JSON of the global variable `result` if the program
// set one, elided in the middle past [Options.MaxOutput]. A failure or
// refusal is an *[Error] whose message gives the line and column, a
// traceback through the program's functions, and what it printed first.
//
// # The interpreter process
//
// Each program runs in a process of its own: the binary holding the
// runner, re-executed in a helper mode that this package's init enters
// (so any binary that imports codemode serves, with nothing to call). It
// gets the program, its limits and its capabilities' schemas, and an
// empty environment; capability calls come back over a pipe and run in
// the caller's process. At the time limit or a cancellation the program
// is stopped at its next step, or, if one built-in does not return (a
// comparison or hash of values that share their elements can take longer
// than any limit), its interpreter is killed: [Runner.Run] does not return
// before the process is gone, so no program outlives its call.
//
// # What it does not guarantee
//
// Memory is bounded by estimates, not exactly: an operation's allocation
// is estimated from above before it runs, and the small allocations of
// single steps are caught by sampling the interpreter's heap every few
// thousand steps. The interpreter is not sandboxed (it has no file or
// network access because Starlark has none); the capabilities granted do
// whatever their handlers do. See docs/codemode.md.
package codemode
