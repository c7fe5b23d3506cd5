// Package cli implements the hrns command. main calls [Run]; tests call it
// in process or build the binary.
package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"strings"

	"github.com/hrns-dev/hrns/internal/safetext"
)

// Exit codes.
const (
	ExitOK          = 0   // the task is done
	ExitFailed      = 1   // the run failed
	ExitUsage       = 2   // the command line or configuration is wrong
	ExitInterrupted = 130 // Ctrl-C, as shells report SIGINT
)

// IO holds the command's standard streams and environment.
type IO struct {
	In       io.Reader
	Out, Err io.Writer
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
	// Interactive reports whether In is a terminal a person answers on;
	// nil means: In is an *os.File that is a terminal (not /dev/null, a
	// pipe or a file).
	Interactive func() bool
	// OutTerminal reports whether Out is a terminal a person reads; nil
	// means: Out is an *os.File that is a terminal. Redirected, stdout
	// gets the answer exactly, written once a model request succeeds.
	OutTerminal func() bool
}

func (s *IO) getenv(k string) string {
	if s.Getenv != nil {
		return s.Getenv(k)
	}
	return os.Getenv(k)
}

func (s *IO) interactive() bool {
	if s.Interactive != nil {
		return s.Interactive()
	}
	f, ok := s.In.(*os.File)
	return ok && isTerminal(f.Fd())
}

// inTerminal reports whether stdin is a terminal itself (not whatever
// Interactive says): where a person may type ahead of a question.
func (s *IO) inTerminal() bool {
	f, ok := s.In.(*os.File)
	return ok && isTerminal(f.Fd())
}

func (s *IO) outTerminal() bool {
	if s.OutTerminal != nil {
		return s.OutTerminal()
	}
	f, ok := s.Out.(*os.File)
	return ok && isTerminal(f.Fd())
}

// usageError is a mistake on the command line or in the configuration.
type usageError struct{ msg string }

// shownError is a mistake on the command line that the flag package has
// printed already, followed by the usage.
type shownError struct{ msg string }

func (e *shownError) Error() string { return e.msg }

// flagError is the command's error for an error of FlagSet.Parse: -h is
// no error (exit 0), and any other error the flag package printed already,
// followed by the usage, so it is not printed a second time.
func flagError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	return &shownError{msg: err.Error()}
}

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

const usage = `hrns gives an LLM tools and runs it until the job is done.

Usage:
  hrns                        on a terminal: the interactive chat
  hrns chat [flags]           the chat (--continue, --resume [ID])
  hrns run [flags] "PROMPT"   run one task and stream the answer
  hrns demo                   an offline tour: recorded answers, real tools
  hrns tools [--json]         list the built-in tools and their schemas
  hrns skills [--json]        list the skills hrns discovers
  hrns serve [flags]          serve the sessions API (/api/v2) over a SQLite file
  hrns mcp serve [flags]      serve hrns tools to MCP clients (stdio, or HTTP with --addr)
  hrns mcp tools [--mcp ...]  list the tools of the configured MCP servers
  hrns desktop connect --session ID
                              run a hrns serve session's computer actions on this display
  hrns version                print the version

Run "hrns run -h" for the flags of run.
`

// Version is the version the command reports; empty means the one Go
// recorded in the binary (see [version]). Builds may set it with
// -ldflags "-X github.com/hrns-dev/hrns/internal/cli.Version=v1.2.3".
var Version = ""

// version is Version, else the module's version that Go recorded in the
// binary: v1.2.3 for go install ...@v1.2.3, "(devel)" for a build of a
// checkout, with the commit when Go recorded it.
func version() string {
	if Version != "" {
		return Version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if rev != "" && v == "(devel)" {
		v += " " + rev[:min(12, len(rev))] + modified
	}
	return v + " " + bi.GoVersion
}

// Run runs the command with args (without the program name) and returns its
// exit code.
func Run(ctx context.Context, args []string, stdio *IO) int {
	if len(args) == 0 {
		if !stdio.interactive() || !stdio.outTerminal() {
			fmt.Fprint(stdio.Err, usage)
			return ExitUsage
		}
		args = []string{"chat"} // hrns on a terminal opens the chat
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "run":
		err = runCommand(ctx, rest, stdio)
	case "chat":
		err = chatCommand(ctx, rest, stdio)
	case "demo":
		err = demoCommand(ctx, rest, stdio)
	case "serve":
		err = serveCommand(ctx, rest, stdio)
	case "tools":
		err = toolsCommand(ctx, rest, stdio)
	case "skills":
		err = skillsCommand(ctx, rest, stdio)
	case "mcp":
		err = mcpCommand(ctx, rest, stdio)
	case "desktop":
		err = desktopCommand(ctx, rest, stdio)
	case "version", "--version":
		fmt.Fprintln(stdio.Out, "hrns", version())
	case "help", "-h", "--help":
		fmt.Fprint(stdio.Out, usage)
	default:
		err = usagef("unknown command %q\n\n%s", cmd, usage)
	}
	return exitCode(ctx, err, stdio)
}

func exitCode(ctx context.Context, err error, stdio *IO) int {
	var ue *usageError
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.As(err, new(*shownError)):
		return ExitUsage
	case errors.As(err, &ue):
		fmt.Fprintln(stdio.Err, "hrns:", strings.TrimRight(ue.msg, "\n"))
		return ExitUsage
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		if stdio.errTerminal() {
			// The terminal echoed ^C where the cursor was: start a line.
			fmt.Fprintln(stdio.Err)
		}
		fmt.Fprintln(stdio.Err, "hrns: interrupted")
		return ExitInterrupted
	default:
		// A run's error can quote a provider's or a tool's words.
		fmt.Fprintln(stdio.Err, "hrns:", safetext.EscapeText(err.Error()))
		return ExitFailed
	}
}

// parseInterspersed parses flags that may come before, between or after the
// positional arguments, which it returns.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// flag stops at "--": everything after it is positional.
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// commandFlags returns the flag set of a subcommand; usage heads its help.
func commandFlags(name, usage string, stdio *IO) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stdio.Err)
	fs.Usage = func() { printUsage(fs, stdio.Err, usage) }
	return fs
}

// printUsage writes a flag set's help, usage then its flags, to w in one
// write: flag.PrintDefaults writes each flag's lines by itself, forty
// writes to a pipe for hrns run's.
func printUsage(fs *flag.FlagSet, w io.Writer, usage string) {
	var b bytes.Buffer
	b.WriteString(usage + "\n\nFlags:\n")
	out := fs.Output()
	fs.SetOutput(&b)
	fs.PrintDefaults()
	fs.SetOutput(out)
	_, _ = w.Write(b.Bytes())
}

// parseFlagsOnly parses the flags of a subcommand that takes no other
// arguments.
func parseFlagsOnly(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if fs.NArg() > 0 {
		return usagef("%s takes no arguments, got %q", strings.TrimPrefix(fs.Name(), "hrns "), fs.Args())
	}
	return nil
}

// loopback reports whether addr (host:port) listens on loopback only.
func loopback(addr string) bool {
	host, _, _ := net.SplitHostPort(addr)
	return loopbackHost(host)
}

// loopbackHost reports whether host is a loopback name or address.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
