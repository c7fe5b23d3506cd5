package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
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
	// ErrNotIsolated: RequireIsolation was set and the command could
	// not be isolated (its namespaces or its root could not be made);
	// it was not run. The error says why.
	ErrNotIsolated = errors.New("sandbox: cannot isolate the command")
	// ErrStart: the command could not be started (not found, not
	// executable, or the helper failed). It was not run.
	ErrStart = errors.New("sandbox: cannot start the command")
	// ErrDestinationRefused is what a [Proxy]'s Dial wraps when its
	// policy refuses a destination: the proxy then answers the command
	// 403 (HTTP) or "not allowed by ruleset" (SOCKS5), and 502 or a
	// failure for any other error.
	ErrDestinationRefused = errors.New("sandbox: destination refused")
	// ErrLinkBelowWritable is what a granted path is refused with when
	// a component of it, at or below a path the command may write, is a
	// symbolic link (or "..", or not a directory where one is needed):
	// a command run before with the same spec may have put it there,
	// and following it would grant whatever it names. Run then fails
	// with [ErrInvalidSpec] (found on the caller's side) or [ErrStart]
	// (found by the helper) and an error that names the grant and
	// wraps this one (or, from the helper, holds its text); the command
	// is not run.
	ErrLinkBelowWritable = errors.New("a symbolic link below a writable path")
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
	//
	// A path named here, Dir, Scratch or an overlay's, that lies at or
	// below a path the command may write is reached without following
	// a symbolic link below that path: a link there (which a command
	// run before may have made) makes Run fail with an error naming the
	// grant and wrapping [ErrLinkBelowWritable]. Links above every
	// writable path are the operator's and are followed.
	ReadOnly, ReadWrite []string
	// Overlays are copy-on-write views of directories the command may
	// read but must not change, such as the user's Go build cache: see
	// [Overlay].
	Overlays []Overlay
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

	// AllowNetwork lets the command use the network, all of it: the
	// host's network as this process has it. By default it is denied.
	AllowNetwork bool
	// Proxy, when set (and AllowNetwork is not), gives the command the
	// network through the proxy alone, which decides every destination:
	// see [Proxy]. Without a network namespace the command gets no
	// network at all (Confinement.Network says so).
	Proxy *Proxy
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

	// Unconfined runs the command without Landlock, namespaces (PID,
	// mount, network) or the seccomp filter of the kernel's keyrings, on
	// purpose. Limits, the scrubbed environment, the
	// session without a terminal, the timeout and the group kill still
	// apply.
	Unconfined bool
	// RequireConfinement makes Run fail with ErrNotConfined instead of
	// running a command it cannot confine with Landlock. It does not
	// require the namespaces: see RequireIsolation.
	RequireConfinement bool
	// RequireIsolation makes Run fail with [ErrNotIsolated], without
	// running the command, where it cannot isolate it
	// ([Confinement.Isolated]: the namespaces could not be made, or
	// the command's root could not be built) instead of running it
	// with Landlock alone. Set it where isolation is expected: where
	// [Isolation] reports that this machine isolates commands, a
	// failure to isolate one is then an error, not a silent fall-back.
	// It does not require Landlock (see RequireConfinement), and
	// contradicts Unconfined. In a [Box], it is each command's own.
	RequireIsolation bool
}

// An Overlay shows the files of Lower at Target, where the command may
// also write: what it writes or deletes goes to Upper, and Lower stays as
// it was (an overlay file system, mounted in the command's mount
// namespace). It gives a command the use of a shared cache that it cannot
// poison for anyone else.
//
// Target and Upper must be inside paths the command may write (Dir,
// Scratch or ReadWrite), Work an empty directory beside Upper on the same
// file system; all four must exist and their names hold no ',', ':' or
// '\\'. Lower is read-only to the command at its own path too. Where the
// command runs without a mount namespace of its own (see
// [Confinement.Isolated]), or the kernel refuses the mount, Target is
// only what it is on disk: the command's writes go there and Lower's
// files are not shown ([Result.Confinement] says which).
type Overlay struct {
	Lower, Upper, Work, Target string
}

// A Proxy is a command's only way to the network ([Spec.Proxy]). The
// command runs in a network namespace of its own that holds only its
// loopback (up, so that it may serve itself there); in it, the sandbox's
// first stage listens on 127.0.0.1 and relays each connection to a proxy
// that [Run] serves in the calling process, over a Unix socket pair the
// namespace cannot otherwise reach. The proxy speaks HTTP (CONNECT tunnels,
// and plain requests with an absolute http:// URL) and SOCKS5 (CONNECT,
// without authentication, with names resolved by Dial), on the same port.
// The command's environment names it: HTTP_PROXY and HTTPS_PROXY
// (http://127.0.0.1:PORT), ALL_PROXY (socks5h://127.0.0.1:PORT), and their
// lower-case forms; NO_PROXY names the namespace's own loopback
// (localhost, 127.0.0.1, ::1). Programs that honour these variables (curl,
// git, pip, go, npm...) reach what Dial lets them; nothing else reaches
// anything beyond the namespace.
type Proxy struct {
	// Dial connects to address ("host:port" as the command asked: a
	// name or an IP address) over "tcp", or refuses. The address policy
	// is Dial's: it must judge the address it actually connects to, after
	// name resolution, and wrap [ErrDestinationRefused] in a refusal.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// MaxConns bounds the connections open through the proxy at once;
	// more are closed as they come. 0 means 256.
	MaxConns int
	// DialTimeout bounds one connection's Dial; 0 means 30 seconds.
	DialTimeout time.Duration
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
	// when it was denied but nothing could enforce it; "namespace+proxy"
	// when the command reached it only through the spec's [Proxy].
	Network string
	// Overlays is how many of the spec's Overlays were mounted.
	Overlays int
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
