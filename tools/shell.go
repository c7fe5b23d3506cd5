package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/hrns-dev/hrns/loop"
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
	// non-nil slice means an empty environment.
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
	return loop.MustToolset(s.tool()), nil
}

type shell struct {
	dir string
	o   ShellOptions
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
	def := loop.NewTool("run_command", desc, func(ctx context.Context, in runCommandArgs) (*loop.Output, error) {
		return s.run(ctx, in)
	})
	def.RequiresApproval = !s.o.SkipApproval
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
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	out := newHeadTail(s.o.MaxOutput)
	cmd := exec.CommandContext(cctx, "/bin/sh", "-c", in.Command)
	cmd.Dir = s.dir
	cmd.Env = s.o.Env
	cmd.Stdin = nil // /dev/null
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.WaitDelay = waitDelay
	setProcessGroup(cmd)
	cmd.Cancel = func() error { return killProcessGroup(cmd) }

	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting /bin/sh: %w", err)
	}
	waitErr := cmd.Wait()
	// Whatever the command left behind in its group goes with it.
	_ = killProcessGroup(cmd)

	var b strings.Builder
	text := out.String()
	b.WriteString(text)
	if text != "" && !strings.HasSuffix(text, "\n") {
		b.WriteByte('\n')
	}
	if text == "" {
		b.WriteString("(no output)\n")
	}
	code := -1
	if cmd.ProcessState != nil {
		code = exitCode(cmd.ProcessState)
	}
	timedOut := errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	switch {
	case timedOut:
		fmt.Fprintf(&b, "[exit code: %d; the command timed out after %v and was killed with its process group]", code, timeout)
	case ctx.Err() != nil:
		fmt.Fprintf(&b, "[exit code: %d; the command was interrupted: the run stopped]", code)
	case errors.Is(waitErr, exec.ErrWaitDelay):
		fmt.Fprintf(&b, "[exit code: %d; background processes that kept the output open were killed]", code)
	default:
		fmt.Fprintf(&b, "[exit code: %d%s]", code, signalNote(cmd.ProcessState))
	}
	res := loop.TextOutput(b.String())
	res.IsError = code != 0 || timedOut
	return res, nil
}
