package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

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
	// agent's approver does, with ApprovalTimeout as its deadline. A
	// Defer or Cancel verdict refuses the call: an MCP call cannot wait
	// for a decision given later, and there is no run to cancel.
	Approver loop.Approver
	// AskClient, when Approver is nil, asks the client's user to approve
	// each such call through an MCP elicitation. A client that does not
	// support elicitation has its calls refused. Only the answer to a
	// question the server asked counts: a call that carries answers
	// (inputResponses) to no question the server is waiting on, about
	// another call, from another session, given twice or after
	// ApprovalTimeout, is refused.
	// Note that the client relays the answer: AskClient trusts the
	// client to ask its user.
	//
	// With neither Approver nor AskClient, calls of tools that require
	// approval are refused with an error result, never silently run.
	AskClient bool
	// ApprovalTimeout bounds the wait for an approval; 0 means 5
	// minutes.
	ApprovalTimeout time.Duration

	// ToolTimeout bounds each call unless the tool sets its own
	// Timeout; 0 means 5 minutes.
	ToolTimeout time.Duration
	// MaxOutput bounds the text of a result in bytes, as an agent's
	// MaxToolOutput does: a longer one keeps its head and tail and says
	// how much was elided. 0 means 64 KiB; negative means no bound.
	MaxOutput int

	// Logger receives debug logs, and the stack of a tool that panics;
	// nil discards them.
	Logger *slog.Logger
}

// A Server serves the tools of a [loop.Toolset] to MCP clients, over stdio
// ([Server.Run]) or Streamable HTTP ([Server.Handler]).
//
// Each call runs through [loop.Toolset.Invoke], exactly as an agent runs a
// model's call: arguments are validated against the tool's schema (with its
// defaults applied), tools that require approval ask the approver (see
// [ServerOptions.Approver] and [ServerOptions.AskClient]), a call is
// cancelled at its timeout, a panic is recovered and the output is bounded.
// Tools not marked Concurrent run one at a time. A tool's failure is an
// error result for the client's model, never a protocol error.
//
// Each tool is announced with the hints MCP clients read to decide whether
// to ask their user before a call (its annotations). The rule: a tool that
// is Concurrent and does not require approval is read-only (readOnlyHint);
// a tool that requires approval is destructive (destructiveHint); other
// tools carry no hint, which clients read as possibly destructive. It holds
// for the tools of hrns, where a tool that may run alongside others without
// asking is one that changes nothing (reading or listing files, fetching a
// page, showing an image, loading a skill, a mounted tool its server marks
// read-only). A served toolset with a Concurrent tool that does change
// things should mark it RequiresApproval.
type Server struct {
	// fixed at creation
	opts  ServerOptions
	log   *slog.Logger
	srv   *sdk.Server
	calls atomic.Int64 // numbers call IDs

	// asked holds the approvals asked of clients and not yet answered.
	asked questions

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
	// A copy of the list, so that the calls of the tools served now run
	// them, whatever is added to tools later. Joining one set cannot
	// clash.
	ts, _ := loop.Join(tools)
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for def := range ts.All() {
		t := &sdk.Tool{
			Name:        def.Name,
			Description: def.Description,
			InputSchema: json.RawMessage(def.InputSchema),
			Annotations: annotations(&def),
		}
		s.srv.AddTool(t, s.handler(ts, def.Name, def.Concurrent))
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

// annotations returns the hints announced with def (see [Server]).
func annotations(def *loop.ToolDef) *sdk.ToolAnnotations {
	switch {
	case def.RequiresApproval:
		destructive := true
		return &sdk.ToolAnnotations{DestructiveHint: &destructive}
	case def.Concurrent:
		return &sdk.ToolAnnotations{ReadOnlyHint: true}
	}
	return nil
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

// handler returns the MCP handler that runs the tool name of ts.
func (s *Server) handler(ts *loop.Toolset, name string, concurrent bool) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		// The lock is held for the whole call, approval included:
		// Invoke has no step between the approval and the handler.
		if concurrent {
			s.run.RLock()
			defer s.run.RUnlock()
		} else {
			s.run.Lock()
			defer s.run.Unlock()
		}
		var ap *callApproval
		opts := &loop.InvokeOptions{
			Timeout:         s.opts.ToolTimeout,
			ApprovalTimeout: s.opts.ApprovalTimeout,
			MaxOutput:       s.opts.MaxOutput,
			Logger:          s.log,
		}
		if s.opts.Approver != nil || s.opts.AskClient {
			ap = &callApproval{approver: s.opts.Approver, questions: &s.asked, ttl: s.opts.ApprovalTimeout, req: req}
			opts.Approver = ap
		}
		call := llm.ToolCall{ID: "mcp-" + strconv.FormatInt(s.calls.Add(1), 10), Name: name, Arguments: []byte(req.Params.Arguments)}
		out, err := ts.Invoke(ctx, call, opts)
		return result(name, out, err, ap), nil
	}
}

// result maps what Invoke returned to the MCP result: an output as
// content, a failure as an error result with the text a model would read,
// and, with AskClient, an approval to ask as the client's input request.
func result(name string, out *loop.Output, err error, ap *callApproval) *sdk.CallToolResult {
	if err == nil {
		return toResult(out)
	}
	if te, ok := errors.AsType[*loop.ToolError](err); ok {
		return errorResult(te.Msg)
	}
	switch {
	case errors.Is(err, loop.ErrPending):
		deferred, ask, state := ap.outcome()
		switch {
		case ask != nil:
			return &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{approvalInput: ask}, RequestState: state}
		case deferred:
			return errorResult(fmt.Sprintf("approval for tool %q was deferred, and an MCP call cannot wait for it; the call was not run", name))
		}
		return errorResult(fmt.Sprintf("tool %q is run by the application that embeds hrns and cannot be called over MCP", name))
	case errors.Is(err, loop.ErrCancelled):
		// callApproval turns a Cancel into a Reject; this is in case
		// Invoke cancels for another reason.
		return errorResult(fmt.Sprintf("the call to tool %q was cancelled; it was not run", name))
	}
	// The client went away or cancelled the call.
	return errorResult(fmt.Sprintf("tool %q was interrupted: %v", name, err))
}

func errorResult(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: msg}}, IsError: true}
}
