package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"sync"
	"time"
)

// A Spec says how to reach one MCP server and how to mount its tools. Set
// either Command (a server run over stdio) or URL (a Streamable HTTP
// server).
type Spec struct {
	// Name names the server in tool names, errors and logs: 1 to 32
	// letters, digits, '_' or '-'.
	Name string

	// Command is the program to run, looked up in PATH, and Args its
	// arguments. The server talks MCP on the program's stdin and stdout.
	Command string
	Args    []string
	// Env is added to the program's environment. The program inherits
	// only a few variables of this process (PATH, HOME, USER, LOGNAME,
	// SHELL, TERM, TMPDIR, LANG, LC_ALL, TZ, and on Windows the system
	// ones), so that secrets meant for hrns, such as API keys, do not
	// reach a third-party server unless they are named here.
	Env map[string]string
	// Dir is the program's working directory; "" means this process's.
	Dir string
	// Stderr receives the program's stderr as it is written; nil
	// discards it. The last few kilobytes are kept either way, to explain
	// a server that exits.
	Stderr io.Writer

	// Start, when set, starts Command in place of os/exec, for example
	// in a sandbox: it is called with the spec for each start (the
	// first, and each restart after the server died), and returns the
	// running server. Env, Dir and Stderr are then Start's to apply; the
	// process inherits nothing of this process unless Start gives it.
	Start func(ctx context.Context, spec *Spec) (Process, error)
	// MaxMessageBytes bounds what is read of one message a stdio
	// server writes (the SDK's IOTransport.MaxLineLength); a longer one
	// is not delivered, and the call waiting for it ends at its
	// timeout. 0 means 16 MiB.
	MaxMessageBytes int

	// URL is the endpoint of a Streamable HTTP server, and Headers are
	// sent with every request to it (for example Authorization).
	URL     string
	Headers map[string]string
	// SSE reaches URL with the older HTTP+SSE transport (MCP's
	// 2024-11-05 version) in place of Streamable HTTP.
	SSE bool
	// HTTPClient makes the requests to URL; nil means
	// http.DefaultClient.
	HTTPClient *http.Client

	// Prefix is put before every tool name; "" means Name followed by
	// two underscores ("fs__read_file"). NoPrefix keeps the server's own
	// names.
	Prefix   string
	NoPrefix bool
	// Tools, when not empty, lists the only tools to mount, by the
	// server's names (not prefixed). Listed tools that the server does
	// not have are ignored.
	Tools []string
	// Approval decides which calls ask the agent's approver first; the
	// zero value is [AskUnlessReadOnly].
	Approval Approval
	// Timeout bounds each call; 0 means the agent's ToolTimeout.
	Timeout time.Duration

	// HideTransportErrors keeps the HTTP transport's errors out of what a
	// failed call tells the model, for a server reached on behalf of
	// someone who must not learn where its name leads (hrns serve's
	// tenants): such an error may carry the address the URL's name
	// resolved to (a connection refused by the address policy after a
	// DNS answer changed since Mount) or the names of a TLS certificate.
	// The call's error then says what happened in netpolicy.Describe's
	// words, and Logger gets the full error. Mount's own error is not
	// changed: its caller words it.
	HideTransportErrors bool

	// Logger receives debug logs of the connection and warnings about
	// tools that could not be mounted; nil discards them.
	Logger *slog.Logger
}

// A Process is a stdio server started by [Spec.Start]: reading it reads
// the server's stdout, writing it writes its stdin.
type Process interface {
	io.ReadWriteCloser
	// Close ends the process and waits for it; it may be called more
	// than once.
	//
	// Exited says how the process ended, with the end of its stderr
	// when it was kept: "" while it runs.
	Exited() string
}

// Approval is the policy that decides which calls of a mounted server's
// tools wait for the agent's [loop.Approver].
type Approval int

// The approval policies.
const (
	// AskUnlessReadOnly asks before calls of every tool that the server
	// does not mark read-only (readOnlyHint). Read-only tools are also
	// marked Concurrent.
	AskUnlessReadOnly Approval = iota
	// AskAlways asks before every call.
	AskAlways
	// AskNever runs every call without asking: the server is trusted.
	AskNever
)

// ErrInvalidSpec is returned by [Mount] for a [Spec] that cannot work: no
// name, a bad name, neither or both of Command and URL.
var ErrInvalidSpec = errors.New("invalid MCP server spec")

var serverNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9_-]{1,32}$`) })

// validate checks s and returns an error wrapping ErrInvalidSpec.
func (s *Spec) validate() error {
	switch {
	case s == nil:
		return fmt.Errorf("%w: nil Spec", ErrInvalidSpec)
	case !serverNameRE().MatchString(s.Name):
		return fmt.Errorf("%w: name %q must be 1 to 32 letters, digits, '_' or '-'", ErrInvalidSpec, s.Name)
	case s.Command == "" && s.URL == "":
		return fmt.Errorf("%w: server %q has neither a command nor a URL", ErrInvalidSpec, s.Name)
	case s.Command != "" && s.URL != "":
		return fmt.Errorf("%w: server %q has both a command and a URL", ErrInvalidSpec, s.Name)
	case s.SSE && s.URL == "":
		return fmt.Errorf("%w: server %q: SSE without a URL", ErrInvalidSpec, s.Name)
	case s.Approval < AskUnlessReadOnly || s.Approval > AskNever:
		return fmt.Errorf("%w: server %q: unknown approval policy %d", ErrInvalidSpec, s.Name, s.Approval)
	}
	if s.URL != "" {
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%w: server %q: URL %q is not an http or https URL", ErrInvalidSpec, s.Name, s.URL)
		}
	}
	return nil
}

// prefix returns what is put before the server's tool names.
func (s *Spec) prefix() string {
	switch {
	case s.NoPrefix:
		return ""
	case s.Prefix != "":
		return s.Prefix
	}
	return s.Name + "__"
}
