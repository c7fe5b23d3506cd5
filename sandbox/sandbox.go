package sandbox

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Errors returned by [Run].
var (
	// ErrInvalidSpec: the spec is incomplete or contradictory.
	ErrInvalidSpec = errors.New("sandbox: invalid spec")
	// ErrNotConfined: RequireConfinement was set and the command could
	// not be confined; it was not run.
	ErrNotConfined = errors.New("sandbox: cannot confine the command")
	// ErrStart: the command could not be started (not found, not
	// executable, or the helper failed). It was not run.
	ErrStart = errors.New("sandbox: cannot start the command")
)

// A Spec describes one command to run.
type Spec struct {
	// Command is the program and its arguments. The program is looked up
	// in the PATH of Env unless it contains a slash. Exactly one of
	// Command and Shell is set.
	Command []string
	// Shell is a command line run by /bin/sh -c.
	Shell string

	// Dir is the working directory, readable and writable by the
	// command. It must exist.
	Dir string
	// Scratch, if set, is a directory created if missing, readable and
	// writable by the command; TMPDIR points to it unless Env sets
	// TMPDIR.
	Scratch string
	// ReadOnly lists more files and directories the command may read
	// (and execute). ReadWrite lists more it may also write.
	ReadOnly, ReadWrite []string
	// PrivateTmp gives the command a /tmp of its own: an empty tmpfs
	// (at most 256 MiB), writable, gone when the command ends; for
	// programs that insist on /tmp (an X server's sockets and keymaps).
	// Only where the command is isolated ([Confinement.Isolated]):
	// without the namespaces there is no private /tmp, and /tmp is then
	// granted only if listed.
	PrivateTmp bool
	// Terminals gives the command pseudo-terminals of its own (a new
	// devpts instance at /dev/pts, /dev/ptmx its multiplexer), for
	// terminal emulators: none of the host's terminals is reachable.
	// Only where the command is isolated, as PrivateTmp.
	Terminals bool

	// Env is the command's whole environment, as "KEY=value": nothing is
	// inherited from this process. PATH defaults to DefaultPath.
	Env []string
	// Stdin is the command's standard input; nil means /dev/null.
	Stdin io.Reader

	// AllowNetwork lets the command use the network. By default it is
	// denied.
	AllowNetwork bool
	// Limits bound the command's resources; the zero value bounds none.
	Limits Limits
	// Timeout bounds the wall time: the process group is sent SIGTERM,
	// then SIGKILL after Grace. 0 means 10 minutes. Cancelling the
	// context of Run does the same.
	Timeout time.Duration
	// Grace is how long a terminated command has to exit before it is
	// killed; 0 means 2 seconds.
	Grace time.Duration
	// MaxOutput bounds the combined output kept, in bytes: past it the
	// head and tail are kept, and the middle is elided. 0 means 64 KiB.
	MaxOutput int
	// Output, if set, receives the combined output as it comes, in place
	// of the capture: Result.Output is then empty and MaxOutput unused.
	// It is written from one goroutine, and not after Run returns; its
	// errors are ignored.
	Output io.Writer
	// WaitDelay is how long the output is still read after the command
	// exits, while processes it left in the background hold it open;
	// then they are killed and Result.OutputHeld is set. 0 means they
	// are killed at once (and OutputHeld is not reported).
	WaitDelay time.Duration

	// Unconfined runs the command without Landlock or namespaces (PID,
	// mount, network), on purpose. Limits, the scrubbed environment, the
	// session without a terminal, the timeout and the group kill still
	// apply.
	Unconfined bool
	// RequireConfinement makes Run fail with ErrNotConfined instead of
	// running a command it cannot confine with Landlock. It does not
	// require the namespaces: see [Confinement.Isolated].
	RequireConfinement bool
}

// DefaultPath is the PATH of a command whose Env sets none.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Limits bound a command's resources. A zero field sets no bound.
type Limits struct {
	// CPUTime bounds the processor time of each process (RLIMIT_CPU, in
	// whole seconds, rounded up): SIGXCPU at the limit, SIGKILL a second
	// later.
	CPUTime time.Duration
	// AddressSpace bounds the virtual memory of each process in bytes
	// (RLIMIT_AS): allocations past it fail.
	AddressSpace uint64
	// FileSize bounds the size of a file a process writes, in bytes
	// (RLIMIT_FSIZE): SIGXFSZ past it.
	FileSize uint64
	// Processes bounds the processes and threads the command may have
	// at once: with a pids cgroup when one can be made, else with
	// RLIMIT_NPROC for a user other than root (which counts all of the
	// user's processes); see [Confinement.Processes].
	Processes int
}

// DefaultLimits are reasonable limits for commands an agent runs.
var DefaultLimits = Limits{
	CPUTime:      5 * time.Minute,
	AddressSpace: 8 << 30,
	FileSize:     1 << 30,
	Processes:    512,
}

// A Result is how a command ended.
type Result struct {
	// ExitCode is the exit status, or -1 if a signal ended the command.
	ExitCode int
	// Signal names the signal that ended the command ("killed", "CPU time
	// limit exceeded"...); empty if it exited.
	Signal string
	// SignalNumber is the number of that signal; 0 if it exited.
	SignalNumber int
	// TimedOut is set when the timeout or the context ended the command.
	TimedOut bool
	// Output is the combined standard output and error, capped at
	// MaxOutput: when longer, its head and tail around a marker.
	Output string
	// OutputBytes is how many bytes the command wrote in all.
	OutputBytes int64
	// OutputHeld is set when processes the command left in the
	// background still held its output open WaitDelay after it exited,
	// and were killed.
	OutputHeld bool
	// Confinement says what confined the command.
	Confinement Confinement
	// SetIDCleared lists the files under the paths the command may write
	// (Dir, Scratch, ReadWrite) that it left set-user-ID or
	// set-group-ID: their bits were cleared once it ended (a file of
	// several names lost the names it had there instead; see [Run]).
	SetIDCleared []string
	// Duration is the wall time from start to exit.
	Duration time.Duration
}

// Confinement describes what confined one command (or, from [Supported],
// what the kernel offers).
type Confinement struct {
	// Confined is set when Landlock restricts the command's filesystem
	// access (and more, per ABI).
	Confined bool
	// ABI is the Landlock ABI version the kernel supports; 0 if none.
	ABI int
	// Isolated is set when the command ran in PID, mount and IPC
	// namespaces of its own, under a root holding only the paths it may
	// access and a /proc of its own: it cannot see or read the host's
	// other processes, and cannot reach files or pathname Unix sockets
	// outside its paths, whatever Landlock offers.
	Isolated bool
	// Network is how the network was denied: "namespace", "landlock-tcp",
	// both joined by "+", "allowed" when the spec allowed it, or "none"
	// when it was denied but nothing could enforce it.
	Network string
	// Processes is how the process count is bounded: "cgroup",
	// "rlimit", "none" (asked for but not enforceable) or "" (not asked
	// for).
	Processes string
	// Notes explain each way the command is less confined than asked.
	Notes []string
}

// Summary is a one-line account of the confinement, for a tool result or
// a log: what was enforced and, when something was not, why.
func (c Confinement) Summary() string {
	var b strings.Builder
	if c.Confined {
		fmt.Fprintf(&b, "confined with Landlock ABI %d", c.ABI)
	} else {
		b.WriteString("NOT confined: the command could read and write anything its user can")
	}
	if c.Isolated {
		b.WriteString("; isolated: own root, /proc and PID namespace")
	}
	if c.Network != "" {
		fmt.Fprintf(&b, "; network: %s", c.Network)
	}
	if c.Processes != "" {
		fmt.Fprintf(&b, "; process limit: %s", c.Processes)
	}
	for _, n := range c.Notes {
		b.WriteString("; ")
		b.WriteString(n)
	}
	return b.String()
}

// environ is env with PATH and TMPDIR defaulted.
func environ(env []string, scratch string) []string {
	out := append([]string(nil), env...)
	has := func(k string) bool {
		for _, kv := range env {
			if strings.HasPrefix(kv, k+"=") {
				return true
			}
		}
		return false
	}
	if !has("PATH") {
		out = append(out, "PATH="+DefaultPath)
	}
	if scratch != "" && !has("TMPDIR") {
		out = append(out, "TMPDIR="+scratch)
	}
	return out
}
