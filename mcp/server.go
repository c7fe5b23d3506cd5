package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
)

// ServerOptions configure a [Server]. The zero value of each field picks
// the documented default.
type ServerOptions struct {
	// Name and Version are what the server tells clients it is; "" means
	// "hrns" and the module's version.
	Name    string
	Version string
	// Instructions are given to clients, to tell their model how to use
	// the tools.
	Instructions string

	// Approver decides calls of tools that require approval, as an
	// agent's approver does. A Defer or Cancel verdict refuses the call:
	// an MCP call cannot wait for a decision given later.
	Approver loop.Approver
	// AskClient, when Approver is nil, asks the client's user to approve
	// each such call through an MCP elicitation. A client that does not
	// support elicitation has its calls refused. Note that the client
	// gives the answer: AskClient trusts the client to ask its user.
	AskClient bool
	// ApprovalTimeout bounds the wait for an approval; 0 means 5
	// minutes.
	ApprovalTimeout time.Duration

	// ToolTimeout bounds each call unless the tool sets its own
	// Timeout; 0 means 5 minutes.
	ToolTimeout time.Duration

	// Logger receives debug logs; nil discards them.
	Logger *slog.Logger
}

// A Server serves the tools of a [loop.Toolset] to MCP clients, over stdio
// ([Server.Run]) or Streamable HTTP ([Server.Handler]). Calls run as an
// agent would run them: arguments are validated against the tool's schema
// (with its defaults applied), tools that require approval ask the
// approver, tools not marked Concurrent run one at a time, and a call is
// cancelled at its timeout. A tool's failure is an error result for the
// client's model, never a protocol error.
type Server struct {
	// fixed at creation
	opts  ServerOptions
	log   *slog.Logger
	srv   *sdk.Server
	calls atomic.Int64 // numbers call IDs

	// run is held shared by concurrent tools, exclusively by the others.
	run sync.RWMutex

	mu    sync.Mutex
	names []string // the tools served now
}

// NewServer returns a server offering tools. A nil tools offers none until
// [Server.SetTools]; a nil opts means the defaults.
func NewServer(tools *loop.Toolset, opts *ServerOptions) *Server {
	s := &Server{}
	if opts != nil {
		s.opts = *opts
	}
	o := &s.opts
	if o.Name == "" {
		o.Name = "hrns"
	}
	if o.Version == "" {
		o.Version = version()
	}
	if o.ApprovalTimeout <= 0 {
		o.ApprovalTimeout = 5 * time.Minute
	}
	if o.ToolTimeout <= 0 {
		o.ToolTimeout = 5 * time.Minute
	}
	s.log = o.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.srv = sdk.NewServer(&sdk.Implementation{Name: o.Name, Version: o.Version}, &sdk.ServerOptions{
		Instructions: o.Instructions,
		Logger:       s.log,
		// Tools only, announced even when there are none yet, so that a
		// client listens for the list to change.
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{ListChanged: true}},
	})
	s.SetTools(tools)
	return s
}

// SetTools replaces the tools offered, and tells connected clients that
// the list changed. Calls already running finish with the tool they
// started with.
func (s *Server) SetTools(tools *loop.Toolset) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for def := range tools.All() {
		schema, err := resolveSchema(def.InputSchema)
		if err != nil {
			// A toolset has checked its schemas already.
			s.log.Warn("not serving a tool whose schema does not resolve", "tool", def.Name, "err", err)
			continue
		}
		t := &sdk.Tool{Name: def.Name, Description: def.Description, InputSchema: json.RawMessage(def.InputSchema)}
		s.srv.AddTool(t, s.handler(def, schema))
		names = append(names, def.Name)
	}
	var gone []string
	for _, n := range s.names {
		if !slices.Contains(names, n) {
			gone = append(gone, n)
		}
	}
	if len(gone) > 0 {
		s.srv.RemoveTools(gone...)
	}
	s.names = names
}

// Run serves one client over the transport t until the client disconnects
// or ctx is done. For stdio, t is &sdkmcp.StdioTransport{} of the official
// SDK (github.com/modelcontextprotocol/go-sdk/mcp), or an IOTransport on
// other streams.
func (s *Server) Run(ctx context.Context, t sdk.Transport) error {
	return s.srv.Run(ctx, t)
}

// Handler returns an http.Handler serving the Streamable HTTP transport,
// one session per client.
func (s *Server) Handler() http.Handler {
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.srv }, &sdk.StreamableHTTPOptions{Logger: s.log})
}

var emptyObject = json.RawMessage(`{"type":"object"}`)

func resolveSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	if len(raw) == 0 {
		raw = emptyObject
	}
	var js jsonschema.Schema
	if err := json.Unmarshal(raw, &js); err != nil {
		return nil, err
	}
	return js.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
}

// approvalInput is the ID of the elicitation that asks for an approval.
const approvalInput = "hrns_approval"

// handler returns the MCP handler that runs def.
func (s *Server) handler(def loop.ToolDef, schema *jsonschema.Resolved) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		args, m, err := checkArgs(schema, def.InputSchema, req.Params.Arguments)
		if err != nil {
			return errorResult(fmt.Sprintf("invalid arguments for tool %q: %v", def.Name, err)), nil
		}
		call := &loop.Call{ID: "mcp-" + strconv.FormatInt(s.calls.Add(1), 10), Name: def.Name, Arguments: args, Args: m}
		if def.RequiresApproval {
			res, ok := s.approve(ctx, req, &def, call)
			if !ok {
				return res, nil
			}
		}
		if def.Concurrent {
			s.run.RLock()
			defer s.run.RUnlock()
		} else {
			s.run.Lock()
			defer s.run.Unlock()
		}
		return s.invoke(ctx, &def, call), nil
	}
}

// checkArgs validates raw against the schema, applying its defaults, as the
// loop does before a handler runs.
func checkArgs(schema *jsonschema.Resolved, rawSchema, raw json.RawMessage) (json.RawMessage, map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = json.RawMessage("{}")
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, nil, errors.New("arguments must be a JSON object")
	}
	if bytes.Contains(rawSchema, []byte(`"default"`)) {
		if err := schema.ApplyDefaults(&m); err != nil {
			return nil, nil, err
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, nil, err
		}
		raw = b
	}
	if err := schema.Validate(m); err != nil {
		msg := strings.TrimPrefix(err.Error(), "validating root: ")
		return nil, nil, errors.New(strings.TrimPrefix(msg, "validating /: "))
	}
	return raw, m, nil
}

// approve decides whether call may run. When it may not, it returns the
// result to send instead: a refusal, or a request for the client's input.
func (s *Server) approve(ctx context.Context, req *sdk.CallToolRequest, def *loop.ToolDef, call *loop.Call) (*sdk.CallToolResult, bool) {
	name := def.Name
	switch {
	case s.opts.Approver != nil:
		return s.askApprover(ctx, def, call)
	case s.opts.AskClient:
		return s.askClient(req, def, call)
	}
	return errorResult(fmt.Sprintf("tool %q requires approval and this MCP server has no approver; the call was not run", name)), false
}

func (s *Server) askApprover(ctx context.Context, def *loop.ToolDef, call *loop.Call) (*sdk.CallToolResult, bool) {
	actx, cancel := context.WithTimeout(ctx, s.opts.ApprovalTimeout)
	defer cancel()
	deadline, _ := actx.Deadline()
	ar := &loop.ApprovalRequest{
		Call:        llm.ToolCall{ID: call.ID, Name: call.Name, Arguments: call.Arguments},
		Description: def.Description,
		Deadline:    deadline,
	}
	type answer struct {
		d   loop.Decision
		err error
	}
	done := make(chan answer, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- answer{err: fmt.Errorf("approver panicked: %v", v)}
			}
		}()
		d, err := s.opts.Approver.Approve(actx, ar)
		done <- answer{d, err}
	}()
	var a answer
	select {
	case a = <-done:
	case <-actx.Done():
		// An approver that ignores its context does not hold the call.
		a = answer{err: actx.Err()}
	}
	switch {
	case errors.Is(a.err, context.DeadlineExceeded):
		return errorResult(fmt.Sprintf("approval for tool %q timed out after %v; the call was not run", def.Name, s.opts.ApprovalTimeout)), false
	case a.err != nil:
		return errorResult(fmt.Sprintf("approval for tool %q failed (%v); the call was not run", def.Name, a.err)), false
	case a.d.Verdict == loop.Approve:
		return nil, true
	case a.d.Verdict == loop.Defer:
		return errorResult(fmt.Sprintf("approval for tool %q was deferred, and an MCP call cannot wait for it; the call was not run", def.Name)), false
	}
	msg := fmt.Sprintf("the call to tool %q was rejected", def.Name)
	if a.d.Reason != "" {
		msg += ": " + a.d.Reason
	}
	return errorResult(msg), false
}

// askClient asks the client's user through an elicitation: the first
// invocation returns the request, and the SDK calls the handler again with
// the client's answer (multi round-trip requests, or a server-to-client
// request for clients of older protocol versions).
func (s *Server) askClient(req *sdk.CallToolRequest, def *loop.ToolDef, call *loop.Call) (*sdk.CallToolResult, bool) {
	if resp, ok := req.Params.InputResponses[approvalInput]; ok {
		er, _ := resp.(*sdk.ElicitResult)
		if er != nil && er.Action == "accept" && er.Content["approve"] == true {
			return nil, true
		}
		return errorResult(fmt.Sprintf("the user did not approve the call to tool %q; it was not run", def.Name)), false
	}
	if ss := req.Session; ss != nil {
		if ip := ss.InitializeParams(); ip != nil && ip.Capabilities != nil && ip.Capabilities.Elicitation == nil {
			return errorResult(fmt.Sprintf("tool %q requires approval, and this MCP client cannot ask its user (it does not support elicitation); the call was not run", def.Name)), false
		}
	}
	args := string(call.Arguments)
	if len(args) > 2000 {
		args = args[:2000] + "…"
	}
	return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{
		approvalInput: &sdk.ElicitParams{
			Message: fmt.Sprintf("Allow the tool %s to run with these arguments?\n%s", def.Name, args),
			RequestedSchema: map[string]any{
				"type": "object",
				"properties": map[string]any{
					"approve": map[string]any{"type": "boolean", "title": "Run " + def.Name},
				},
				"required": []string{"approve"},
			},
		},
	}}, false
}

// invoke runs the tool's handler with its timeout, turning panics and
// errors into error results. It returns when the handler does or when the
// call's context is done, whichever is first: a handler that ignores its
// context is abandoned.
func (s *Server) invoke(ctx context.Context, def *loop.ToolDef, call *loop.Call) *sdk.CallToolResult {
	timeout := def.Timeout
	if timeout <= 0 {
		timeout = s.opts.ToolTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type done struct {
		out *loop.Output
		err error
	}
	ch := make(chan done, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				ch <- done{err: fmt.Errorf("tool panicked: %v", v)}
			}
		}()
		out, err := def.Handler(cctx, call)
		ch <- done{out, err}
	}()
	var d done
	select {
	case d = <-ch:
	case <-cctx.Done():
		d = done{err: cctx.Err()}
	}
	switch {
	case errors.Is(d.err, loop.ErrPending):
		return errorResult(fmt.Sprintf("tool %q is run by the application that embeds hrns and cannot be called over MCP", def.Name))
	case cctx.Err() != nil && ctx.Err() == nil && errors.Is(d.err, context.DeadlineExceeded):
		return errorResult(fmt.Sprintf("tool %q timed out after %v", def.Name, timeout))
	case d.err != nil:
		return errorResult(d.err.Error())
	}
	return toResult(d.out)
}

func errorResult(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: msg}}, IsError: true}
}
