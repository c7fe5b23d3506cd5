package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	wire "github.com/hrns-dev/hrns/api"
	"github.com/hrns-dev/hrns/internal/netpolicy"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/mcp"
	"github.com/hrns-dev/hrns/platform/vault"
	"github.com/hrns-dev/hrns/sandbox"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/tools"
)

// mcpFlags are hrns serve's flags for the MCP servers callers' environments
// name (mcp_servers): HTTP servers are reached under the address policy;
// stdio servers run only with --mcp-stdio, in the sandbox.
type mcpFlags struct {
	stdio    bool
	commands stringList
	read     stringList
	allow    string
	timeout  time.Duration
	// plaintext allows storing MCP servers' secrets unencrypted when
	// there are no vault keys.
	plaintext bool
}

func (f *mcpFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.stdio, "mcp-stdio", false, "start the stdio MCP servers callers' environments name (mcp_servers), each session's run its own, in the sandbox: the session's workspace, no network unless --command-network gives it (needs --workdir; default: refused)")
	fs.Var(&f.commands, "mcp-command", "a command stdio MCP servers may run, as callers give it (node, /usr/bin/uvx...): when given (repeatable), no other is started")
	fs.Var(&f.read, "mcp-read", "a file or directory stdio MCP servers may read (and run) besides the system's folders and the session's workspace (repeatable), for the servers' own code")
	fs.DurationVar(&f.timeout, "mcp-timeout", 2*time.Minute, "how long a call of a callers' MCP server's tool may take; past it the call fails with a tool error the model reads")
	fs.BoolVar(&f.plaintext, "mcp-plaintext-secrets", false, "without vault keys (HRNS_VAULT_KEY or --vault-key-file), store the env and headers values of callers' MCP servers unencrypted in the database (default: such servers are refused with 422); with vault keys they are always encrypted")
	fs.StringVar(&f.allow, "mcp-allow", "", "addresses the HTTP MCP servers of callers may be at beyond the public internet: comma-separated IPs, prefixes (10.0.0.0/8) or IP:port (loopback, private and metadata addresses are refused otherwise)")
}

// Bounds of the MCP servers of sessions.
const (
	mcpConnectTimeout  = 30 * time.Second
	mcpMaxMessageBytes = 8 << 20   // what is read of one message of a stdio server
	mcpMaxBodyBytes    = 16 << 20  // one HTTP response
	mcpMaxFileBytes    = 256 << 20 // a file a stdio server writes (its stderr too)
	mcpStderrTail      = 2 << 10
)

// addMCPServers connects sessions to the MCP servers their environments
// name (session.Options.MCPServers). The servers' env and headers values
// are stored encrypted with keys, the vault keys; without them they are
// refused, unless --mcp-plaintext-secrets lets them be stored as given.
func (o *serveOptions) addMCPServers(opts *session.Options, keys *vault.Keyring, log *slog.Logger) error {
	f := &o.mcp
	if f.stdio && o.workdir == "" {
		return usagef("--mcp-stdio needs --workdir DIR: a stdio MCP server runs in the session's workspace in DIR/sessions")
	}
	if f.timeout <= 0 {
		return usagef("--mcp-timeout must be positive")
	}
	if !f.stdio && (len(f.commands) > 0 || len(f.read) > 0) {
		return usagef("--mcp-command and --mcp-read need --mcp-stdio")
	}
	var read []string
	for _, p := range f.read {
		abs, err := filepath.Abs(p)
		if err != nil {
			return usagef("--mcp-read %s: %v", p, err)
		}
		if _, err := os.Stat(abs); err != nil {
			return usagef("--mcp-read: %v", err)
		}
		read = append(read, abs)
	}
	httpAllow, err := netpolicy.ParseAllowList(f.allow)
	if err != nil {
		return usagef("--mcp-allow: %v", err)
	}
	netOn, netAllow, err := o.commandNetworkOf(commandNet{})
	if err != nil {
		return usagef("%v", err)
	}
	c := &mcpConnector{
		stdio: f.stdio, commands: slices.Clone(f.commands), read: read, workspaces: o.workspaces(),
		network: netOn, netAllow: netAllow, log: log, timeout: f.timeout,
		http: mcpHTTPClient(func(ap netip.AddrPort) bool {
			return httpAllow != nil && httpAllow(ap) && !netpolicy.IsMetadata(ap.Addr())
		}),
	}
	opts.MCPServers = &session.MCPServerOptions{Check: c.check, Mount: c.mount, MountTimeout: mcpConnectTimeout + 5*time.Second}
	switch {
	case keys != nil:
		opts.MCPServers.Secrets = keys
	case f.plaintext:
		opts.MCPServers.PlaintextSecrets = true
		log.Warn("hrns serve: --mcp-plaintext-secrets: the env and headers values of callers' MCP servers (API tokens, passwords) are stored UNENCRYPTED in the database (sessions, registered environments and agents, schedules); set " + vaultKeyEnv + " or --vault-key-file to encrypt them")
	default:
		log.Info("hrns serve: MCP servers giving env or headers values are refused (422): there are no vault keys to encrypt them at rest (set " + vaultKeyEnv + " or --vault-key-file, or allow plaintext with --mcp-plaintext-secrets)")
	}
	return nil
}

// mcpConnector mounts the MCP servers of sessions' runs.
type mcpConnector struct {
	stdio      bool
	commands   []string
	read       []string
	workspaces string
	network    bool
	netAllow   func(netip.AddrPort) bool
	http       *http.Client
	log        *slog.Logger
	timeout    time.Duration
}

// check says why a server cannot be mounted here.
func (c *mcpConnector) check(s *session.MCPServer) error {
	if s.Transport != wire.MCPStdio {
		return nil
	}
	if !c.stdio {
		return errors.New("stdio MCP servers are not enabled on this server: they run a command on it, which its operator allows with hrns serve --mcp-stdio (sandboxed in the session's workspace); HTTP servers (transport streamable_http or sse) need no switch")
	}
	if len(c.commands) > 0 && !slices.Contains(c.commands, *s.Command) {
		return fmt.Errorf("command %q is not one this server starts for MCP servers (its operator allows %s with --mcp-command)", *s.Command, strings.Join(c.commands, ", "))
	}
	return nil
}

// mount connects one run of a session to its servers, all at once; a
// server that cannot be reached is left out, logged and reported to the
// session (MCPParams.Unreachable).
func (c *mcpConnector) mount(ctx context.Context, p *session.MCPParams) (*loop.Toolset, func(), error) {
	mounted := make([]*mcp.Mounted, len(p.Servers))
	var wg sync.WaitGroup
	for i := range p.Servers {
		s := p.Servers[i]
		wg.Go(func() {
			spec, err := c.spec(&s, p.Session, p.Workspace)
			if err == nil {
				cctx, cancel := context.WithTimeout(ctx, mcpConnectTimeout)
				mounted[i], err = mcp.Mount(cctx, spec)
				cancel()
			}
			if err != nil {
				// The error names the server and its command or URL,
				// never its env or headers; a URL's query, which may
				// hold a key, is left out.
				msg := err.Error()
				told := msg // what the session's caller and model read
				if s.URL != nil {
					msg = strings.ReplaceAll(msg, *s.URL, urlWithoutQuery(*s.URL))
					told = msg
					if text, ok := netpolicy.Describe(err); ok {
						// Not the address the URL's name resolved to: the
						// caller is an API key, who must not learn what
						// the deployment's names resolve to. The log has it.
						told = "connecting to " + urlWithoutQuery(*s.URL) + ": " + text
					}
				}
				c.log.Warn("hrns serve: an MCP server of a session could not be reached; the session runs without its tools", "session", p.Session, "server", s.Name, "err", msg)
				if p.Unreachable != nil {
					p.Unreachable(s.Name, errors.New(told)) // the session's log and model are told
				}
			}
		})
	}
	wg.Wait()
	closeAll := func() {
		for _, m := range mounted {
			if m != nil {
				m.Close()
			}
		}
	}
	var sets []*loop.Toolset
	for _, m := range mounted {
		if m != nil {
			sets = append(sets, m.Toolset())
		}
	}
	ts, err := loop.Join(sets...)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return ts, closeAll, nil
}

// spec is how a server of a session is mounted: its calls run without
// asking (the caller chose the server; its stdio process is confined),
// each bounded by --mcp-timeout.
func (c *mcpConnector) spec(s *session.MCPServer, sessionID, workspace string) (*mcp.Spec, error) {
	spec := &mcp.Spec{Name: s.Name, Approval: mcp.AskNever, MaxMessageBytes: mcpMaxMessageBytes, Timeout: c.timeout,
		Logger: c.log.With("session", sessionID, "mcp_server", s.Name)}
	switch s.Transport {
	case wire.MCPStdio:
		if err := c.check(s); err != nil {
			return nil, err // the operator changed the policy since
		}
		if c.workspaces == "" || workspace == "" {
			return nil, errors.New("no workspace to run it in")
		}
		dir := filepath.Join(c.workspaces, workspace)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		spec.Command, spec.Args, spec.Env = *s.Command, s.Args, s.Env
		spec.Start = func(ctx context.Context, sp *mcp.Spec) (mcp.Process, error) { return c.start(sp, dir) }
	case wire.MCPStreamableHTTP, wire.MCPSSE:
		spec.URL, spec.Headers, spec.SSE, spec.HTTPClient = *s.URL, s.Headers, s.Transport == wire.MCPSSE, c.http
		// The caller must not learn where the URL's name leads: after
		// the mount, the name may lead to an address the policy refuses
		// (DNS rebinding), and a certificate may name the deployment's
		// hosts. The log gets the transport's errors.
		spec.HideTransportErrors = true
	default:
		return nil, fmt.Errorf("unknown transport %q", s.Transport)
	}
	return spec, nil
}

// start runs a stdio server in the sandbox, in dir (the session's
// workspace), as run_command's commands run: the system's folders and
// --mcp-read readable, dir and a scratch directory (its HOME and TMPDIR)
// writable, the network only as --command-network gives it, through the
// proxy. Its stderr goes to a file in the scratch directory, whose end
// explains an exit.
func (c *mcpConnector) start(sp *mcp.Spec, dir string) (mcp.Process, error) {
	scratch, err := os.MkdirTemp("", "hrns-mcp-")
	if err != nil {
		return nil, err
	}
	stderr := filepath.Join(scratch, "stderr")
	home := filepath.Join(scratch, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		os.RemoveAll(scratch)
		return nil, err
	}
	env := []string{"PATH=" + sandbox.DefaultPath, "HOME=" + home, "LANG=C.UTF-8"}
	for _, k := range sortedStrings(sp.Env) {
		env = append(env, k+"="+sp.Env[k])
	}
	var proxy *sandbox.Proxy
	if c.network {
		proxy = tools.CommandProxy(c.netAllow)
	}
	limits := sandbox.DefaultLimits
	limits.FileSize = mcpMaxFileBytes
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	rctx, cancel := context.WithCancel(context.Background())
	p := &sandboxedServer{in: inW, out: outR, cancel: cancel, done: make(chan struct{}), stderr: stderr, scratch: scratch}
	go func() {
		defer close(p.done)
		res, err := sandbox.Run(rctx, &sandbox.Spec{
			// The server's stderr to a file: stdout is the protocol's.
			Command:            append([]string{"/bin/sh", "-c", `f=$1; shift; exec "$@" 2>>"$f"`, "sh", stderr, sp.Command}, sp.Args...),
			Dir:                dir,
			Scratch:            filepath.Join(scratch, "tmp"),
			ReadOnly:           c.read,
			ReadWrite:          []string{scratch},
			Env:                env,
			Stdin:              inR,
			Output:             outW,
			Proxy:              proxy,
			Limits:             limits,
			Timeout:            24 * time.Hour, // it ends with the run
			RequireConfinement: true,
			RequireIsolation:   sandbox.Isolation() == nil, // refused, not run less isolated than this machine isolates
		})
		p.ended(res, err)
		inR.Close()
		outW.Close()
	}()
	return p, nil
}

// sandboxedServer is a stdio MCP server running in the sandbox.
type sandboxedServer struct {
	in      *io.PipeWriter
	out     *io.PipeReader
	cancel  context.CancelFunc
	done    chan struct{}
	stderr  string
	scratch string

	mu     sync.Mutex
	exited string
	once   sync.Once
}

func (p *sandboxedServer) Read(b []byte) (int, error)  { return p.out.Read(b) }
func (p *sandboxedServer) Write(b []byte) (int, error) { return p.in.Write(b) }

// Close closes the server's stdin, gives it a moment to exit, then ends
// its processes, and removes its scratch directory.
func (p *sandboxedServer) Close() error {
	p.once.Do(func() {
		p.in.Close()
		select {
		case <-p.done:
		case <-time.After(2 * time.Second):
			p.cancel()
			<-p.done
		}
		p.cancel()
		p.out.Close()
		os.RemoveAll(p.scratch)
	})
	return nil
}

// Exited says how the server ended, with the end of its stderr.
func (p *sandboxedServer) Exited() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// ended records how the sandbox ended the server.
func (p *sandboxedServer) ended(res *sandbox.Result, err error) {
	var why string
	switch {
	case err != nil:
		why = err.Error()
	case res.Signal != "":
		why = "killed by signal: " + res.Signal
	default:
		why = fmt.Sprintf("exit status %d", res.ExitCode)
	}
	if t := fileTail(p.stderr, mcpStderrTail); t != "" {
		why += "; its stderr ends with: " + t
	}
	p.mu.Lock()
	p.exited = why
	p.mu.Unlock()
}

// fileTail returns the last n bytes of a file, trimmed.
func fileTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, n))
	return strings.ToValidUTF8(strings.TrimSpace(string(b)), "?")
}

// urlWithoutQuery is u without its query and fragment, for logs.
func urlWithoutQuery(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(an unparsable URL)"
	}
	if p.RawQuery != "" || p.Fragment != "" {
		p.RawQuery, p.Fragment = "", ""
		return p.String() + "?…"
	}
	return p.String()
}

func sortedStrings(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// mcpHTTPClient is the client of HTTP MCP servers: every address it
// dials is judged by internal/netpolicy (loopback, private, link-local,
// metadata and other non-public addresses refused unless allow lets them
// through), it follows no redirect (the headers, which may be secrets,
// go to the URL the caller gave only), no proxy of this process's
// environment, and each response is bounded in time to its headers and
// in bytes.
func mcpHTTPClient(allow func(netip.AddrPort) bool) *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, Control: netpolicy.Control(allow)}
	t := &http.Transport{
		DialContext:            d.DialContext,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  mcpConnectTimeout,
		MaxResponseHeaderBytes: 64 << 10,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        30 * time.Second,
		ForceAttemptHTTP2:      true,
	}
	return &http.Client{
		Transport: &boundedBodies{base: t, max: mcpMaxBodyBytes},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return errors.New("the MCP server answered with a redirect, which hrns does not follow")
		},
	}
}

// boundedBodies bounds the bytes of each response body.
type boundedBodies struct {
	base http.RoundTripper
	max  int64
}

func (b *boundedBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := b.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &boundedBody{rc: resp.Body, left: b.max}
	return resp, nil
}

type boundedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("the MCP server's response is longer than %d bytes", mcpMaxBodyBytes)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }
