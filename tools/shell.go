package tools

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/loop/cmdline"
	"github.com/hrns-dev/hrns/sandbox"
)

// ShellOptions configure run_command, the tool of [Shell]. A nil
// *ShellOptions, and the zero value of each field, mean the documented
// defaults.
type ShellOptions struct {
	// Env is the whole environment of commands, as "KEY=value" strings.
	// Nil means a small environment taken from this process: PATH, HOME,
	// USER, LOGNAME, SHELL, LANG, LC_ALL, LC_CTYPE, TMPDIR and TZ where
	// set, and TERM=dumb; API keys and other secrets of this process are
	// not passed on. Give os.Environ() to pass everything. An empty,
	// non-nil slice means an empty environment. A sandboxed command's
	// TMPDIR is its scratch directory unless Env sets TMPDIR (the default
	// environment then leaves this process's out). With the default
	// environment, a sandboxed command's HOME is its own (see Home), with
	// a few variables pointing its toolchains at the user's shared caches,
	// read-only (see docs/tools.md).
	Env []string
	// DefaultTimeout bounds a command for which the model gives no
	// timeout_seconds. 0 means 120 seconds.
	DefaultTimeout time.Duration
	// MaxTimeout caps the timeout_seconds the model may ask for. 0 means
	// 10 minutes.
	MaxTimeout time.Duration
	// MaxOutput caps the combined stdout and stderr returned to the
	// model, in bytes: the head and the tail are kept, with a note of how
	// much was left out between them. 0 means 30 KiB.
	MaxOutput int
	// SkipApproval lets run_command run without asking the agent's
	// [loop.Approver]. By default it requires approval.
	SkipApproval bool

	// Unconfined runs commands without the sandbox, as a process of
	// this program's user that can reach everything the user can. By
	// default commands run through [sandbox.Run] where the kernel can
	// confine them (Linux with Landlock), and unconfined elsewhere, which
	// the first result of the toolset says.
	Unconfined bool
	// DenyNetwork denies confined commands the network. By default they
	// may use it.
	DenyNetwork bool
	// PublicNetwork gives confined commands the network only through a
	// proxy of this process ([sandbox.Proxy]: HTTP_PROXY, HTTPS_PROXY and
	// ALL_PROXY name it), which refuses what web_fetch refuses
	// (internal/netpolicy: loopback, private, link-local, metadata and
	// other non-public addresses, judged on the address connected to,
	// after name resolution) and this machine's own addresses, unless
	// NetworkAllow lets the destination through. Commands cannot reach
	// anything else; programs that ignore the proxy variables reach
	// nothing. DenyNetwork wins over it. Unconfined commands are not
	// held to it.
	PublicNetwork bool
	// NetworkAllow lets commands given PublicNetwork reach the
	// destinations it returns true for, beyond the public internet (as
	// browser.ParseAllowList makes them). Nil allows none.
	NetworkAllow func(netip.AddrPort) bool
	// Limits bound the resources of a confined command; nil means
	// [sandbox.DefaultLimits], and a zero Limits bounds none.
	Limits *sandbox.Limits
	// ReadOnly lists more files and directories a confined command may
	// read; ReadWrite, more it may also write. Besides these, it may
	// read the system's directories and write only the working directory,
	// its home (see Home) and a scratch directory, its TMPDIR, emptied
	// after each command.
	ReadOnly, ReadWrite []string
	// Home is the HOME of confined commands run with the default
	// environment (Env nil): a directory created if missing, where their
	// toolchains keep their caches and configuration, in place of the
	// user's home, which they cannot read. "" means a directory private
	// to the working directory under the user's cache directory
	// (os.UserCacheDir()/hrns/sandbox/<hash of the workdir>/home; where
	// there is none, .hrns/home in the working directory), kept from one
	// command to the next. See docs/tools.md for what else the
	// default environment offers: the user's Go module and npm caches
	// read-only, rustup's toolchains, git's user name and address.
	Home string
}

func (o *ShellOptions) withDefaults() ShellOptions {
	var v ShellOptions
	if o != nil {
		v = *o
	}
	if v.DefaultTimeout <= 0 {
		v.DefaultTimeout = 120 * time.Second
	}
	if v.MaxTimeout <= 0 {
		v.MaxTimeout = 10 * time.Minute
	}
	if v.DefaultTimeout > v.MaxTimeout {
		v.DefaultTimeout = v.MaxTimeout
	}
	if v.MaxOutput <= 0 {
		v.MaxOutput = 30 << 10
	}
	if v.Env == nil {
		v.Env = minimalEnv()
	}
	return v
}

// minimalEnv is the default environment of commands.
func minimalEnv() []string {
	env := []string{}
	for _, k := range []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	if _, ok := os.LookupEnv("PATH"); !ok {
		env = append(env, "PATH=/usr/local/bin:/usr/bin:/bin")
	}
	return append(env, "TERM=dumb")
}

// waitDelay is how long a command's output is still read after its shell
// exits (for background processes that hold the output open) or after it
// is killed.
const waitDelay = 2 * time.Second

// Shell returns run_command, a tool that runs a command line with /bin/sh
// in the directory dir.
//
// Each command runs in its own process group, with the environment of
// opts.Env and no standard input. When it times out, or the run stops, the
// whole group is killed; processes the command leaves running in the
// background are killed when it ends, too. Its stdout and stderr are
// captured together, capped (head and tail kept), and returned with its exit
// code; a command that fails (non-zero exit, or killed) is returned the same
// way, marked as an error, so the model sees its output.
//
// Where the kernel can confine commands, they run through [sandbox.Run],
// or a [sandbox.Box] kept by the toolset where one can serve them:
// they may write only dir, their home (see [ShellOptions.Home]) and a
// scratch directory (their TMPDIR), read little besides the system's
// directories, see only their own processes, and are bounded by
// opts.Limits. Elsewhere, or with opts.Unconfined, they run unconfined, and
// the first result of the toolset says so in a line
// "note: commands are not sandboxed here: <reason>". Where the machine
// isolates commands ([sandbox.Isolation]: PID, mount and IPC namespaces,
// a root of their own paths), each is run with
// [sandbox.Spec.RequireIsolation]: one that cannot be isolated is not run
// with less isolation, and its result, an error, begins "The command was
// NOT run" and says why. Where the machine does not isolate them, they
// run with Landlock alone, and the first result says so in a line
// "note: commands are sandboxed but not isolated here: <reason>".
//
// run_command requires approval unless opts.SkipApproval is set. Shell
// fails if dir is not a directory.
func Shell(dir string, opts *ShellOptions) (*loop.Toolset, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("tools: shell directory: %w", err)
	}
	info, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("tools: shell directory: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("tools: shell directory %s is not a directory", abs)
	}
	s := &shell{dir: abs, o: opts.withDefaults()}
	s.confined, s.why = confinement(&s.o)
	if s.confined && (opts == nil || opts.Env == nil) {
		// The scratch directory is the default environment's TMPDIR:
		// this process's is not writable in the sandbox.
		s.o.Env = slices.DeleteFunc(s.o.Env, func(kv string) bool { return strings.HasPrefix(kv, "TMPDIR=") })
		// Copies: commandHome appends to them.
		s.o.ReadOnly, s.o.ReadWrite = slices.Clone(s.o.ReadOnly), slices.Clone(s.o.ReadWrite)
		overlays, err := commandHome(&s.o, abs)
		if err != nil {
			return nil, fmt.Errorf("tools: shell: %w", err)
		}
		s.overlays = overlays
	}
	return loop.MustToolset(s.tool()), nil
}

type shell struct {
	dir string
	o   ShellOptions
	// overlays are the shared caches commandHome offers copy-on-write.
	overlays []sandbox.Overlay
	// confined is set when commands go through the sandbox; why says
	// otherwise why not.
	confined bool
	why      string
	// noted is set once a result has said that commands are not
	// sandboxed; notedIsolation, that they are not isolated (no PID and
	// mount namespaces: other processes and sockets are in reach).
	noted, notedIsolation atomic.Bool

	// box runs the commands that need no proxy, in a sandbox helper
	// kept between them (see commandBox); made at the first, nil if it
	// could not be.
	boxMu sync.Mutex
	box   *sandbox.Box
	// boxScratch holds the box's scratch directories.
	boxScratch string
}

// notIsolatedBecause picks the confinement's note on isolation.
func notIsolatedBecause(c *sandbox.Confinement) string {
	for _, n := range c.Notes {
		if strings.HasPrefix(n, "not isolated") {
			return n
		}
	}
	return "no PID and mount namespaces"
}

// confinement reports whether commands can be confined, and why not.
func confinement(o *ShellOptions) (bool, string) {
	if o.Unconfined {
		return false, "confinement was turned off (ShellOptions.Unconfined)"
	}
	if _, err := sandbox.Supported(); err != nil {
		return false, err.Error()
	}
	return true, ""
}

type runCommandArgs struct {
	Command        string `json:"command" jsonschema:"the command line, run with /bin/sh -c in the working directory"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"seconds after which the command and every process it started are killed (the tool's description gives the default and the maximum)"`
}

func (s *shell) tool() *loop.ToolDef {
	desc := fmt.Sprintf("Runs a shell command with /bin/sh -c in the working directory and returns its combined "+
		"stdout and stderr and its exit code. There is no standard input: do not run interactive commands. The command "+
		"is killed, with every process it started, after timeout_seconds (default %d, at most %d). Processes left "+
		"running in the background are killed when the command ends. Output longer than %s keeps its start "+
		"and its end.", int(s.o.DefaultTimeout/time.Second), int(s.o.MaxTimeout/time.Second), size(s.o.MaxOutput))
	if !s.o.Unconfined {
		// From the options only: the description does not depend on
		// the machine.
		desc += " Where the system allows it, the command runs in a sandbox: it can write only in the working " +
			"directory, in $HOME (a home of this working directory's own, where toolchain caches live) and in " +
			"$TMPDIR (emptied after each command), read little besides these and the system's directories, and " +
			"sees only its own processes"
		switch {
		case s.o.DenyNetwork:
			desc += "; it has no network access"
		case s.o.PublicNetwork:
			desc += "; it reaches the network only through the HTTP proxy that $HTTP_PROXY, $HTTPS_PROXY and " +
				"$ALL_PROXY name (the public internet only: not this machine nor private addresses, and no direct " +
				"connection or DNS lookup)"
		}
		desc += ". A result says when commands are not sandboxed, and when one was not run because it could " +
			"not be isolated as the others are."
	}
	def := loop.NewTool("run_command", desc, func(ctx context.Context, in runCommandArgs) (*loop.Output, error) {
		return s.run(ctx, in)
	})
	def.RequiresApproval = !s.o.SkipApproval
	// Permission rules match the command by prefix (run_command(git status:*)).
	def.Access, def.Subject = loop.AccessExecute, cmdline.Subject("command")
	// The command's own timeout fires first and reports its output; the
	// tool's timeout is only a backstop.
	def.Timeout = s.o.MaxTimeout + waitDelay + 30*time.Second
	return def
}

func (s *shell) run(ctx context.Context, in runCommandArgs) (*loop.Output, error) {
	if strings.TrimSpace(in.Command) == "" {
		return nil, errors.New("command is empty")
	}
	if in.TimeoutSeconds < 0 {
		return nil, errors.New("timeout_seconds must not be negative")
	}
	timeout := s.o.DefaultTimeout
	if in.TimeoutSeconds > 0 {
		timeout = min(time.Duration(in.TimeoutSeconds)*time.Second, s.o.MaxTimeout)
	}
	var e *ended
	var err error
	if s.confined {
		e, err = s.runConfined(ctx, in.Command, timeout)
	} else {
		e, err = s.runUnconfined(ctx, in.Command, timeout)
	}
	if errors.Is(err, sandbox.ErrNotIsolated) {
		// Said to the model, and to whoever reads the call's result:
		// nothing ran, and why.
		return loop.ErrorOutput("The command was NOT run: this machine isolates commands (a root of their own paths, " +
			"their own processes and mounts), and this one could not be isolated, so it was refused rather than run " +
			"with less isolation. Why: " + strings.TrimPrefix(err.Error(), "running the command in the sandbox: ")), nil
	}
	if err != nil {
		return nil, err
	}

	var b strings.Builder
	b.WriteString(e.output)
	if e.output != "" && !strings.HasSuffix(e.output, "\n") {
		b.WriteByte('\n')
	}
	if e.output == "" {
		b.WriteString("(no output)\n")
	}
	timedOut := e.timedOut && ctx.Err() == nil
	switch {
	case timedOut:
		fmt.Fprintf(&b, "[exit code: %d; the command timed out after %v and was killed with its process group]", e.code, timeout)
	case ctx.Err() != nil:
		fmt.Fprintf(&b, "[exit code: %d; the command was interrupted: the run stopped]", e.code)
	case e.held:
		fmt.Fprintf(&b, "[exit code: %d; background processes that kept the output open were killed]", e.code)
	default:
		fmt.Fprintf(&b, "[exit code: %d%s]", e.code, e.signal)
	}
	if why := s.unconfinedBecause(e); why != "" && s.noted.CompareAndSwap(false, true) {
		b.WriteString("\nnote: commands are not sandboxed here: " + why)
	} else if why == "" && e.conf != nil && !e.conf.Isolated && s.notedIsolation.CompareAndSwap(false, true) {
		b.WriteString("\nnote: commands are sandboxed but not isolated here: " + notIsolatedBecause(e.conf))
	}
	res := loop.TextOutput(b.String())
	res.IsError = e.code != 0 || timedOut
	return res, nil
}

// ended is how a command ended.
type ended struct {
	output   string // capped: head and tail
	code     int    // the exit code; 128 plus the signal for a killed command
	signal   string // " (killed by signal N: name)", or ""
	timedOut bool   // the timeout or the end of the run stopped it
	held     bool   // background processes held the output open and were killed
	conf     *sandbox.Confinement
}

// unconfinedBecause says why the command of e was not sandboxed, or "" if
// it was.
func (s *shell) unconfinedBecause(e *ended) string {
	var why string
	switch {
	case !s.confined:
		why = s.why
	case !e.conf.Confined:
		why = strings.Join(e.conf.Notes, "; ")
		if why == "" {
			why = e.conf.Summary()
		}
	case (s.o.DenyNetwork || s.o.PublicNetwork) && e.conf.Network == "none":
		return "the network could not be denied"
	default:
		return ""
	}
	if s.o.DenyNetwork {
		why += "; the network is not denied either"
	} else if s.o.PublicNetwork {
		why += "; the network is not limited to the public internet either"
	}
	return why
}

// commandSpec is the sandbox of the shell's commands, without a command
// or a scratch directory.
func (s *shell) commandSpec() sandbox.Spec {
	limits := sandbox.DefaultLimits
	if s.o.Limits != nil {
		limits = *s.o.Limits
	}
	return sandbox.Spec{
		Dir:          s.dir,
		ReadOnly:     s.o.ReadOnly,
		ReadWrite:    s.o.ReadWrite,
		Overlays:     s.overlays,
		Env:          s.o.Env,
		AllowNetwork: !s.o.DenyNetwork && !s.o.PublicNetwork,
		Limits:       limits,
	}
}

// commandBox returns the shell's Box, made at the first call: its
// commands then run in a sandbox helper kept between them (one per
// command running at once), instead of one started for each; each gets a
// scratch directory of its helper's, empty. It returns nil where the Box
// cannot be made (each command then runs as before). The Box and its
// scratch directories go when the shell is no longer referenced.
func (s *shell) commandBox() *sandbox.Box {
	s.boxMu.Lock()
	defer s.boxMu.Unlock()
	if s.box != nil {
		return s.box
	}
	sweepBoxScratches()
	scratch, err := os.MkdirTemp("", boxScratchPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return nil
	}
	spec := s.commandSpec()
	spec.Scratch = scratch
	box, err := sandbox.NewBox(&spec)
	if err != nil {
		os.RemoveAll(scratch)
		return nil
	}
	s.box, s.boxScratch = box, scratch
	runtime.AddCleanup(s, func(b boxCleanup) {
		b.box.Close()
		os.RemoveAll(b.scratch)
	}, boxCleanup{box, scratch})
	return box
}

// boxScratchPrefix begins the name of a shell's scratch parent, followed
// by the pid of its process.
const boxScratchPrefix = "hrns-commands-"

// boxCleanup is what goes with a shell: its Box and scratch directories.
type boxCleanup struct {
	box     *sandbox.Box
	scratch string
}

// runConfined runs command through the sandbox: in the shell's Box (see
// commandBox) unless its network goes through a proxy, which serves one
// command.
func (s *shell) runConfined(ctx context.Context, command string, timeout time.Duration) (*ended, error) {
	out := newHeadTail(s.o.MaxOutput)
	spec := s.commandSpec()
	spec.Shell = command
	spec.Timeout = timeout
	spec.WaitDelay = waitDelay
	spec.Output = liveWriter(ctx, command, out)
	// Where this machine isolates commands, one that cannot be is
	// refused, not run with Landlock alone (see sandbox.Isolation).
	spec.RequireIsolation = sandbox.Isolation() == nil
	var res *sandbox.Result
	var err error
	box := (*sandbox.Box)(nil)
	if !s.o.PublicNetwork || s.o.DenyNetwork {
		box = s.commandBox()
	}
	if box != nil {
		spec.Scratch = s.boxScratch
		res, err = box.Run(ctx, &spec)
	} else {
		scratch, merr := os.MkdirTemp("", "hrns-command-")
		if merr != nil {
			return nil, fmt.Errorf("making the command's scratch directory: %w", merr)
		}
		defer os.RemoveAll(scratch)
		spec.Scratch = scratch
		if s.o.PublicNetwork && !s.o.DenyNetwork {
			spec.Proxy = commandProxy(s.o.NetworkAllow)
		}
		res, err = sandbox.Run(ctx, &spec)
	}
	if err != nil {
		return nil, fmt.Errorf("running the command in the sandbox: %w", err)
	}
	e := &ended{output: out.String(), code: res.ExitCode, timedOut: res.TimedOut, held: res.OutputHeld, conf: &res.Confinement}
	if res.Signal != "" {
		e.code = 128 + res.SignalNumber
		e.signal = fmt.Sprintf(" (killed by signal %d: %s)", res.SignalNumber, res.Signal)
	}
	return e, nil
}

// runUnconfined runs command as a plain child process in its own process
// group.
func (s *shell) runUnconfined(ctx context.Context, command string, timeout time.Duration) (*ended, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	out := newHeadTail(s.o.MaxOutput)
	cmd := exec.CommandContext(cctx, "/bin/sh", "-c", command)
	cmd.Dir = s.dir
	cmd.Env = s.o.Env
	cmd.Stdin = nil // /dev/null
	live := liveWriter(ctx, command, out)
	cmd.Stdout = live
	cmd.Stderr = live
	cmd.WaitDelay = waitDelay
	setProcessGroup(cmd)
	cmd.Cancel = func() error { return killProcessGroup(cmd) }

	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting /bin/sh: %w", err)
	}
	waitErr := cmd.Wait()
	// Whatever the command left behind in its group goes with it.
	_ = killProcessGroup(cmd)

	e := &ended{
		output:   out.String(),
		code:     -1,
		timedOut: errors.Is(cctx.Err(), context.DeadlineExceeded),
		held:     errors.Is(waitErr, exec.ErrWaitDelay),
	}
	if cmd.ProcessState != nil {
		e.code = exitCode(cmd.ProcessState)
		e.signal = signalNote(cmd.ProcessState)
	}
	return e, nil
}
