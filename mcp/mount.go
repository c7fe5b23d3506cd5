package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hrns-dev/hrns/internal/netpolicy"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// ErrClosed is the error of calls to the tools of a [Mounted] server after
// [Mounted.Close].
var ErrClosed = errors.New("mcp server closed")

// refreshTimeout bounds listing the tools after a list-changed
// notification.
const refreshTimeout = 30 * time.Second

// A Mounted is an MCP server whose tools are mounted as a [loop.Toolset].
// Its methods are safe for concurrent use.
type Mounted struct {
	// fixed at creation
	spec      Spec
	log       *slog.Logger
	bg        context.Context // background work: refreshes; done at Close
	stop      context.CancelFunc
	wg        sync.WaitGroup // refreshes and background closes; added to only while not closed
	connMu    sync.Mutex     // held while (re)connecting, so one call does it
	refreshMu sync.Mutex     // held while listing and replacing the tools

	mu         sync.Mutex
	conn       *conn // nil: the next call connects
	closed     bool
	tools      *loop.Toolset
	changed    chan struct{} // closed when tools is replaced
	refreshing bool          // a refresh goroutine runs
	again      bool          // refresh once more when it is done
}

// A conn is one connection to the server: one session, and for a stdio
// server one process.
type conn struct {
	session *sdk.ClientSession
	cmd     *exec.Cmd // nil for an HTTP server, or one Spec.Start started
	proc    Process   // the process Spec.Start started
	stderr  *tail
	done    chan struct{} // closed when the session has ended
	err     error         // why it ended; set before done is closed
}

// Mount connects to the MCP server of spec and lists its tools. For a stdio
// server it starts the server's process, which lives until [Mounted.Close].
// ctx bounds the connection and the listing only.
//
// Mount returns an error wrapping [ErrInvalidSpec] for an unusable spec,
// and an error that names the server (and for a stdio server, quotes the
// end of its stderr) when the server cannot be started, reached or
// listed. A tool whose name or schema cannot be wired into a
// [loop.Toolset] is left out and logged to spec.Logger, without failing
// the mount.
func Mount(ctx context.Context, spec *Spec) (*Mounted, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	m := &Mounted{spec: *spec, changed: make(chan struct{})}
	m.spec.Args = slices.Clone(spec.Args)
	m.spec.Env = maps.Clone(spec.Env)
	m.spec.Headers = maps.Clone(spec.Headers)
	m.spec.Tools = slices.Clone(spec.Tools)
	m.log = spec.Logger
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	m.log = m.log.With("mcp_server", spec.Name)
	m.bg, m.stop = context.WithCancel(context.Background())

	c, err := m.connect(ctx)
	if err != nil {
		m.stop()
		return nil, err
	}
	m.mu.Lock()
	m.conn = c
	m.mu.Unlock()
	if err := m.refresh(ctx, c); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// Name returns the server's name.
func (m *Mounted) Name() string { return m.spec.Name }

// Toolset returns the server's tools as they were last listed. The
// toolset is never changed: when the server's tools change, a new one
// replaces it, and the channel of [Mounted.Changed] is closed. The tools of
// an old toolset still call the server.
func (m *Mounted) Toolset() *loop.Toolset {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tools
}

// Changed returns a channel that is closed when the toolset that
// [Mounted.Toolset] returns now is replaced by a new one. Call Changed
// again after that to wait for the next change.
func (m *Mounted) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// Refresh lists the server's tools now, and replaces the toolset if they
// changed. Servers that announce their changes make it unnecessary.
func (m *Mounted) Refresh(ctx context.Context) error {
	c, err := m.session(ctx)
	if err != nil {
		return err
	}
	return m.refresh(ctx, c)
}

// Close stops the server: it closes the connection, and for a stdio server
// closes the process's stdin and waits for it to exit, terminating it if
// it does not within a few seconds. Close is idempotent; calls after it
// fail with [ErrClosed].
func (m *Mounted) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	c := m.conn
	m.conn = nil
	m.mu.Unlock()
	m.stop()
	var err error
	if c != nil {
		err = c.close()
	}
	m.wg.Wait()
	return err
}

// connect starts or reaches the server and opens a session.
func (m *Mounted) connect(ctx context.Context) (*conn, error) {
	client := sdk.NewClient(&sdk.Implementation{Name: "hrns", Title: "hrns agent harness", Version: version()}, &sdk.ClientOptions{
		Logger: m.log,
		// No roots: a server that takes its directories from the client's
		// roots (the filesystem server) keeps those of its command line.
		Capabilities:           &sdk.ClientCapabilities{},
		ToolListChangedHandler: m.onListChanged,
	})
	c := &conn{done: make(chan struct{})}
	var t sdk.Transport
	if m.spec.URL != "" {
		hc := m.spec.HTTPClient
		if hc == nil {
			hc = http.DefaultClient
		}
		if len(m.spec.Headers) > 0 {
			hc2 := *hc
			hc2.Transport = &headerTransport{base: hc.Transport, headers: m.spec.Headers}
			hc = &hc2
		}
		if m.spec.SSE {
			t = &sdk.SSEClientTransport{Endpoint: m.spec.URL, HTTPClient: hc}
		} else {
			t = &sdk.StreamableClientTransport{Endpoint: m.spec.URL, HTTPClient: hc}
		}
	} else if m.spec.Start != nil {
		spec := m.spec
		p, err := m.spec.Start(ctx, &spec)
		if err != nil {
			return nil, fmt.Errorf("mcp server %q: starting %s: %w", m.spec.Name, m.spec.Command, err)
		}
		c.proc = p
		t = &sdk.IOTransport{Reader: p, Writer: p, MaxLineLength: m.spec.MaxMessageBytes}
	} else {
		c.cmd = exec.Command(m.spec.Command, m.spec.Args...)
		c.cmd.Env = serverEnv(m.spec.Env)
		c.cmd.Dir = m.spec.Dir
		c.stderr = &tail{}
		c.cmd.Stderr = c.stderr
		if m.spec.Stderr != nil {
			c.cmd.Stderr = io.MultiWriter(c.stderr, m.spec.Stderr)
		}
		t = &sdk.CommandTransport{Command: c.cmd}
	}
	s, err := client.Connect(ctx, t, nil)
	if err != nil {
		if c.proc != nil {
			c.proc.Close()
		}
		return nil, m.connectError(c, err)
	}
	c.session = s
	// The watcher ends with the session, which conn.close waits for.
	go func() {
		err := s.Wait()
		c.err = m.endError(c, err)
		close(c.done)
	}()
	return c, nil
}

// connectError explains a failed connection.
func (m *Mounted) connectError(c *conn, err error) error {
	if c.proc != nil {
		msg := fmt.Sprintf("mcp server %q: starting %s", m.spec.Name, m.spec.Command)
		if why := c.proc.Exited(); why != "" {
			msg += " (" + why + ")"
		}
		return fmt.Errorf("%s: %w", msg, err)
	}
	if c.cmd == nil {
		return fmt.Errorf("mcp server %q: connecting to %s: %w", m.spec.Name, m.spec.URL, err)
	}
	msg := fmt.Sprintf("mcp server %q: starting %s", m.spec.Name, m.spec.Command)
	if st := c.cmd.ProcessState; st != nil {
		msg += " (" + st.String() + ")"
	}
	return fmt.Errorf("%s: %w%s", msg, err, c.stderr.quote())
}

// endError says why a session ended.
func (m *Mounted) endError(c *conn, err error) error {
	if c.proc != nil {
		if why := c.proc.Exited(); why != "" {
			return fmt.Errorf("exited (%s)", why)
		}
		if err == nil {
			err = errors.New("the connection was closed")
		}
		return fmt.Errorf("stopped answering: %w", err)
	}
	if c.cmd == nil {
		if err == nil {
			err = errors.New("the connection was closed")
		}
		return fmt.Errorf("lost the connection to %s: %w", m.spec.URL, err)
	}
	// The session ends once the process's pipes are closed and it has
	// been waited for, so its state is known here.
	if st := c.cmd.ProcessState; st != nil {
		return fmt.Errorf("exited (%s)%s", st, c.stderr.quote())
	}
	if err == nil {
		err = errors.New("the connection was closed")
	}
	return fmt.Errorf("stopped answering: %w%s", err, c.stderr.quote())
}

// codeRejected is the JSON-RPC error code by which the SDK reports a
// request that did not reach a Streamable HTTP server.
const codeRejected = -32005

// close closes the session and, for a stdio server, waits for the process.
// Its error is the process's: ending an HTTP session is best effort.
func (c *conn) close() error {
	ended := false
	select {
	case <-c.done:
		ended = true
	default:
	}
	err := c.session.Close()
	<-c.done
	if c.cmd == nil && c.proc == nil || ended {
		// Closing a process that had died reports how it died, which
		// is no failure of Close.
		return nil
	}
	return err
}

// session returns the live connection, connecting first if there is none.
func (m *Mounted) session(ctx context.Context) (*conn, error) {
	m.mu.Lock()
	c, closed := m.conn, m.closed
	m.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("%w: %q", ErrClosed, m.spec.Name)
	}
	if c != nil {
		return c, nil
	}
	m.connMu.Lock()
	defer m.connMu.Unlock()
	m.mu.Lock()
	c, closed = m.conn, m.closed
	m.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("%w: %q", ErrClosed, m.spec.Name)
	}
	if c != nil {
		return c, nil
	}
	m.log.Debug("restarting the MCP server")
	c, err := m.connect(ctx)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		c.close()
		return nil, fmt.Errorf("%w: %q", ErrClosed, m.spec.Name)
	}
	m.conn = c
	m.mu.Unlock()
	// A restarted server may offer other tools.
	if err := m.refresh(ctx, c); err != nil {
		m.log.Warn("listing tools after a restart failed", "err", err)
	}
	return c, nil
}

// drop forgets c, so that the next call connects again, and closes it in
// the background.
func (m *Mounted) drop(c *conn) {
	m.mu.Lock()
	if m.conn == c {
		m.conn = nil
	}
	if m.closed {
		// Close may be waiting for the goroutines already.
		m.mu.Unlock()
		c.close()
		return
	}
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		c.close()
	}()
}

// lostError is the tool error of a call that found the server gone.
func (m *Mounted) lostError(c *conn, during bool) error {
	when := "since the last call"
	if during {
		when = "during the call"
	}
	again := "started again"
	if c.cmd == nil && c.proc == nil {
		again = "reconnected"
	}
	if m.spec.HideTransportErrors && c.cmd == nil && c.proc == nil {
		m.log.Warn("an MCP server's connection was lost; the model is told less", "err", c.err)
		return fmt.Errorf("mcp server %q %s: the connection was lost (%s); it will be %s at the next call, and any state it held is lost", m.spec.Name, when, transportText(c.err), again)
	}
	return fmt.Errorf("mcp server %q %s: %w; it will be %s at the next call, and any state it held is lost", m.spec.Name, when, c.err, again)
}

// hide is err, a failed call's error from the transport, as the model
// reads it: itself, or with [Spec.HideTransportErrors] what happened,
// without the address dialled or the certificate's names, the full error
// logged.
func (m *Mounted) hide(ctx context.Context, err error, what string) error {
	if !m.spec.HideTransportErrors || m.spec.URL == "" {
		return err
	}
	text := transportText(err)
	m.log.WarnContext(ctx, "a call of an MCP server's tool failed; the model is told less", "err", err, "told", text)
	return fmt.Errorf("mcp server %q: %s: %s", m.spec.Name, what, text)
}

// transportText says what happened to an HTTP request to a server, in
// netpolicy.Describe's words.
func transportText(err error) string {
	if text, ok := netpolicy.Describe(err); ok {
		return text
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "the request timed out"
	}
	return "the request to the server failed"
}

// call calls the server's tool name with the arguments of call.
func (m *Mounted) call(ctx context.Context, name string, call *loop.Call) (*loop.Output, error) {
	c, err := m.session(ctx)
	if err != nil {
		if errors.Is(err, ErrClosed) {
			return nil, err
		}
		return nil, m.hide(ctx, err, "connecting again")
	}
	select {
	case <-c.done:
		m.drop(c)
		return nil, m.lostError(c, false)
	default:
	}
	args := call.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	res, err := c.session.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err == nil {
		return fromResult(res), nil
	}
	if ctx.Err() != nil {
		return nil, err
	}
	if werr, ok := errors.AsType[*jsonrpc.Error](err); ok {
		if werr.Code == codeRejected {
			// A Streamable HTTP request that failed, which the SDK
			// reports without ending the session: the next call may
			// go through.
			return nil, m.hide(ctx, fmt.Errorf("mcp server %q: %w", m.spec.Name, err), "the request failed")
		}
		// The server answered, with a protocol error rather than a
		// tool error: an unknown tool, or arguments it refuses.
		return nil, fmt.Errorf("mcp server %q: %s", m.spec.Name, werr.Message)
	}
	// The connection broke. Wait until the session is over, to say why.
	m.drop(c)
	select {
	case <-c.done:
	case <-ctx.Done():
		return nil, m.hide(ctx, fmt.Errorf("mcp server %q: %w", m.spec.Name, err), "the request failed")
	}
	return nil, m.lostError(c, true)
}

// list lists the server's tools.
func (m *Mounted) list(ctx context.Context, c *conn) ([]*sdk.Tool, error) {
	var tools []*sdk.Tool
	for t, err := range c.session.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("mcp server %q: listing tools: %w", m.spec.Name, err)
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// refresh lists the tools and replaces the toolset if they changed.
// Refreshes run one at a time, so that a later listing always wins.
func (m *Mounted) refresh(ctx context.Context, c *conn) error {
	m.refreshMu.Lock()
	defer m.refreshMu.Unlock()
	tools, err := m.list(ctx, c)
	if err != nil {
		return err
	}
	ts := m.build(tools)
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.closed:
	case m.tools == nil:
		m.tools = ts
	case !sameTools(m.tools, ts):
		m.tools = ts
		close(m.changed)
		m.changed = make(chan struct{})
		m.log.Debug("tools changed", "tools", ts.Names())
	}
	return nil
}

// onListChanged refreshes the tools in the background. Notifications that
// come while a refresh runs cause one more refresh after it.
func (m *Mounted) onListChanged(context.Context, *sdk.ToolListChangedRequest) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	if m.refreshing {
		m.again = true
		return
	}
	m.refreshing = true
	m.wg.Go(func() {
		for {
			m.mu.Lock()
			c := m.conn
			m.mu.Unlock()
			if c != nil {
				ctx, cancel := context.WithTimeout(m.bg, refreshTimeout)
				if err := m.refresh(ctx, c); err != nil && m.bg.Err() == nil {
					m.log.Warn("listing changed tools failed", "err", err)
				}
				cancel()
			}
			m.mu.Lock()
			if !m.again || m.closed {
				m.refreshing = false
				m.mu.Unlock()
				return
			}
			m.again = false
			m.mu.Unlock()
		}
	})
}

// build wires the server's tools into a toolset, leaving out (and logging)
// the ones that cannot be wired.
func (m *Mounted) build(tools []*sdk.Tool) *loop.Toolset {
	ts := &loop.Toolset{}
	prefix := m.spec.prefix()
	for _, t := range tools {
		if len(m.spec.Tools) > 0 && !slices.Contains(m.spec.Tools, t.Name) {
			continue
		}
		def, err := m.toolDef(prefix, t)
		if err == nil {
			err = ts.Add(def)
		}
		if err != nil {
			m.log.Warn("left out a tool of the MCP server", "tool", t.Name, "err", err)
		}
	}
	return ts
}

// toolDef returns the ToolDef that calls the server's tool t.
func (m *Mounted) toolDef(prefix string, t *sdk.Tool) (*loop.ToolDef, error) {
	var schema json.RawMessage
	if t.InputSchema != nil {
		b, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("encoding its input schema: %w", err)
		}
		schema = b
	}
	readOnly := t.Annotations != nil && t.Annotations.ReadOnlyHint
	name := t.Name
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	return &loop.ToolDef{
		Name:             toolName(prefix, name),
		Description:      desc,
		InputSchema:      schema,
		Concurrent:       readOnly,
		Timeout:          m.spec.Timeout,
		RequiresApproval: m.spec.Approval == AskAlways || m.spec.Approval == AskUnlessReadOnly && !readOnly,
		Access:           mcpAccess(readOnly),
		Handler: func(ctx context.Context, call *loop.Call) (*loop.Output, error) {
			return m.call(ctx, name, call)
		},
	}, nil
}

// sameTools reports whether a and b offer the same tools.
func sameTools(a, b *loop.Toolset) bool {
	if a.Len() != b.Len() {
		return false
	}
	return slices.EqualFunc(a.Specs(), b.Specs(), func(x, y llm.ToolSpec) bool {
		return x.Name == y.Name && x.Description == y.Description && bytes.Equal(x.InputSchema, y.InputSchema)
	})
}

// inheritedEnv lists the variables a stdio server inherits.
var inheritedEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "LANG", "LC_ALL", "TZ"}

// windowsEnv lists the variables a stdio server inherits on Windows too.
var windowsEnv = []string{"APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATHEXT", "PROCESSOR_ARCHITECTURE",
	"SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "USERNAME", "USERPROFILE", "PROGRAMFILES", "COMSPEC", "WINDIR"}

// serverEnv returns the environment of a stdio server.
func serverEnv(extra map[string]string) []string {
	names := inheritedEnv
	if runtime.GOOS == "windows" {
		names = append(slices.Clone(names), windowsEnv...)
	}
	var env []string
	for _, k := range names {
		if _, set := extra[k]; set {
			continue
		}
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		env = append(env, k+"="+extra[k])
	}
	return env
}

// mcpAccess is what the permission modes take a tool to do: read only
// when its server says so (readOnlyHint), else anything.
func mcpAccess(readOnly bool) loop.Access {
	if readOnly {
		return loop.AccessRead
	}
	return loop.AccessUnknown
}
