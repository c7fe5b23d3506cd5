package mcp_test

// Tests of the server side with the official SDK's client, over an
// in-memory transport (as stdio) and over Streamable HTTP.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/mcp"
)

type echoArgs struct {
	Text  string `json:"text" jsonschema:"what to say"`
	Times int    `json:"times,omitempty" default:"1"`
}

// testTools returns a toolset covering what the server must map; writes
// counts the calls of write that ran.
func testTools(writes *atomic.Int64) *loop.Toolset {
	echo := loop.NewTool("echo", "Says text back", func(_ context.Context, in echoArgs) (string, error) {
		return strings.Repeat(in.Text, in.Times), nil
	})
	echo.Concurrent = true
	write := loop.NewTool("write", "Changes things", func(context.Context, struct{}) (string, error) {
		writes.Add(1)
		return "written", nil
	})
	write.RequiresApproval = true
	image := loop.NewTool("image", "Shows a picture", func(context.Context, struct{}) ([]llm.Part, error) {
		return []llm.Part{llm.TextPart("a dot:"), llm.ImagePart("image/png", []byte("PNGDATA"))}, nil
	})
	fail := loop.NewTool("fail", "Fails", func(context.Context, struct{}) (string, error) {
		return "", errors.New("boom")
	})
	panics := loop.NewTool("panics", "Panics", func(context.Context, struct{}) (string, error) {
		panic("oops")
	})
	slow := loop.NewTool("slow", "Never ends by itself", func(ctx context.Context, _ struct{}) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})
	slow.Timeout = 1 // it always times out, however fast the machine
	client := loop.NewClientTool("pick", "Run by the application", nil)
	return loop.MustToolset(echo, write, image, fail, panics, slow, client)
}

// connectInMemory serves srv to an SDK client over an in-memory transport.
func connectInMemory(t *testing.T, srv *mcp.Server, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	st, ct := sdk.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, st) }()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "1"}, opts).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		<-done
	})
	return cs
}

// connectHTTP serves srv to an SDK client over Streamable HTTP.
func connectHTTP(t *testing.T, srv *mcp.Server, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "1"}, opts).Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: hs.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

var transports = []struct {
	name    string
	connect func(*testing.T, *mcp.Server, *sdk.ClientOptions) *sdk.ClientSession
}{
	{"stdio", connectInMemory},
	{"http", connectHTTP},
}

// render describes a tool result in lines, for diffs.
func render(res *sdk.CallToolResult) []string {
	var out []string
	if res.IsError {
		out = append(out, "isError")
	}
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			out = append(out, "text: "+c.Text)
		case *sdk.ImageContent:
			out = append(out, fmt.Sprintf("image: %s %q", c.MIMEType, c.Data))
		default:
			out = append(out, fmt.Sprintf("%T", c))
		}
	}
	return out
}

func callTool(t *testing.T, cs *sdk.ClientSession, name, args string) *sdk.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("CallTool(%s): %v", name, err)
	}
	return res
}

func TestServerTools(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			var writes atomic.Int64
			srv := mcp.NewServer(testTools(&writes), nil)
			cs := tr.connect(t, srv, nil)

			var names []string
			var echoSchema any
			hints := map[string]string{}
			for tool, err := range cs.Tools(t.Context(), nil) {
				if err != nil {
					t.Fatal(err)
				}
				names = append(names, tool.Name)
				if tool.Name == "echo" {
					echoSchema = tool.InputSchema
				}
				if a := tool.Annotations; a != nil {
					switch {
					case a.ReadOnlyHint && a.DestructiveHint == nil:
						hints[tool.Name] = "read-only"
					case !a.ReadOnlyHint && a.DestructiveHint != nil && *a.DestructiveHint:
						hints[tool.Name] = "destructive"
					default:
						hints[tool.Name] = fmt.Sprintf("%+v", *a)
					}
				}
			}
			if diff := cmp.Diff([]string{"echo", "fail", "image", "panics", "pick", "slow", "write"}, names); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
			// Concurrent without approval is read-only; requiring approval
			// is destructive; the others have no hints.
			wantHints := map[string]string{"echo": "read-only", "pick": "read-only", "write": "destructive"}
			if diff := cmp.Diff(wantHints, hints); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
			wantSchema := map[string]any{
				"type":                 "object",
				"additionalProperties": false,
				"properties": map[string]any{
					"text":  map[string]any{"type": "string", "description": "what to say"},
					"times": map[string]any{"type": "integer", "default": float64(1)},
				},
				"required": []any{"text"},
			}
			if diff := cmp.Diff(wantSchema, echoSchema); diff != "" {
				t.Errorf("echo's schema (-want +got):\n%s", diff)
			}

			tests := []struct {
				tool, args string
				want       []string
			}{
				{"echo", `{"text":"hi"}`, []string{"text: hi"}},
				{"echo", `{"text":"hi","times":3}`, []string{"text: hihihi"}},
				{"echo", `{"times":3}`, []string{"isError", `text: invalid arguments for tool "echo": required: missing properties: ["text"]`}},
				{"echo", `{"text":"hi","color":"red"}`, []string{"isError", `text: invalid arguments for tool "echo": unexpected additional properties ["color"]`}},
				{"echo", `["hi"]`, []string{"isError", `text: invalid arguments for tool "echo": arguments must be a JSON object, not an array`}},
				{"image", `{}`, []string{"text: a dot:", `image: image/png "PNGDATA"`}},
				{"fail", `{}`, []string{"isError", `text: tool "fail" failed: boom`}},
				{"panics", `{}`, []string{"isError", `text: tool "panics" panicked: oops`}},
				{"slow", `{}`, []string{"isError", `text: tool "slow" timed out after 1ns`}},
				{"pick", `{}`, []string{"isError", `text: tool "pick" is run by the application that embeds hrns and cannot be called over MCP`}},
				{"write", `{}`, []string{"isError", `text: tool "write" requires approval and no approver is configured; the call was not run`}},
			}
			for _, tt := range tests {
				got := render(callTool(t, cs, tt.tool, tt.args))
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("%s %s (-want +got):\n%s", tt.tool, tt.args, diff)
				}
			}
			if n := writes.Load(); n != 0 {
				t.Errorf("write ran %d times without approval", n)
			}
		})
	}
}

func TestServerApprover(t *testing.T) {
	tests := []struct {
		name      string
		decision  loop.Decision
		err       error
		want      []string
		wantWrite int64
	}{
		{"approve", loop.Decision{Verdict: loop.Approve}, nil, []string{"text: written"}, 1},
		{"reject", loop.Decision{Verdict: loop.Reject, Reason: "not today"}, nil, []string{"isError", `text: the call to tool "write" was rejected: not today`}, 0},
		{"defer", loop.Decision{Verdict: loop.Defer}, nil, []string{"isError", `text: approval for tool "write" was deferred, and an MCP call cannot wait for it; the call was not run`}, 0},
		{"error", loop.Decision{}, errors.New("no terminal"), []string{"isError", `text: approval for tool "write" failed (no terminal); the call was not run`}, 0},
		// There is no run to end: Cancel refuses the call as Reject does.
		{"cancel", loop.Decision{Verdict: loop.Cancel, Reason: "stop"}, nil, []string{"isError", `text: the call to tool "write" was rejected: stop`}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var writes atomic.Int64
			var asked []string
			approver := loop.ApproverFunc(func(_ context.Context, req *loop.ApprovalRequest) (loop.Decision, error) {
				asked = append(asked, req.Call.Name+" "+string(req.Call.Arguments))
				return tt.decision, tt.err
			})
			srv := mcp.NewServer(testTools(&writes), &mcp.ServerOptions{Approver: approver})
			cs := connectInMemory(t, srv, nil)
			if diff := cmp.Diff(tt.want, render(callTool(t, cs, "write", `{}`))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"write {}"}, asked); diff != "" {
				t.Errorf("approvals asked (-want +got):\n%s", diff)
			}
			if n := writes.Load(); n != tt.wantWrite {
				t.Errorf("write ran %d times, want %d", n, tt.wantWrite)
			}
			// Tools that do not require approval are not asked about.
			callTool(t, cs, "echo", `{"text":"x"}`)
			if len(asked) != 1 {
				t.Errorf("asked %d times after a call of echo", len(asked))
			}
		})
	}
}

// A call that cannot finish now is refused, and the result says why: an
// approval deferred, or a handler that suspends (after its approval).
func TestServerPending(t *testing.T) {
	later := loop.NewClientTool("later", "Run by the application, once approved", nil)
	later.RequiresApproval = true
	tests := []struct {
		verdict loop.Verdict
		want    []string
	}{
		{loop.Defer, []string{"isError", `text: approval for tool "later" was deferred, and an MCP call cannot wait for it; the call was not run`}},
		{loop.Approve, []string{"isError", `text: tool "later" is run by the application that embeds hrns and cannot be called over MCP`}},
	}
	for _, tt := range tests {
		approver := loop.ApproverFunc(func(context.Context, *loop.ApprovalRequest) (loop.Decision, error) {
			return loop.Decision{Verdict: tt.verdict}, nil
		})
		srv := mcp.NewServer(loop.MustToolset(later), &mcp.ServerOptions{Approver: approver})
		cs := connectInMemory(t, srv, nil)
		if diff := cmp.Diff(tt.want, render(callTool(t, cs, "later", `{}`))); diff != "" {
			t.Errorf("verdict %v (-want +got):\n%s", tt.verdict, diff)
		}
	}
}

// An approver that does not answer by the deadline does not hold the call.
func TestServerApprovalTimeout(t *testing.T) {
	var writes atomic.Int64
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	approver := loop.ApproverFunc(func(context.Context, *loop.ApprovalRequest) (loop.Decision, error) {
		<-release // ignores its context
		return loop.Decision{Verdict: loop.Approve}, nil
	})
	srv := mcp.NewServer(testTools(&writes), &mcp.ServerOptions{Approver: approver, ApprovalTimeout: 10 * time.Millisecond})
	cs := connectInMemory(t, srv, nil)
	want := []string{"isError", `text: approval for tool "write" timed out after 10ms; the call was not run`}
	if diff := cmp.Diff(want, render(callTool(t, cs, "write", `{}`))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if n := writes.Load(); n != 0 {
		t.Errorf("write ran %d times", n)
	}
}

func TestServerMaxOutput(t *testing.T) {
	long := loop.NewTool("long", "Says a lot", func(context.Context, struct{}) (string, error) {
		return strings.Repeat("a", 500) + strings.Repeat("z", 500), nil
	})
	for _, tt := range []struct {
		max     int
		wantLen int // 0: shorter than the output
	}{{0, 1000}, {-1, 1000}, {100, 0}} {
		srv := mcp.NewServer(loop.MustToolset(long), &mcp.ServerOptions{MaxOutput: tt.max})
		cs := connectInMemory(t, srv, nil)
		res := callTool(t, cs, "long", `{}`)
		text := res.Content[0].(*sdk.TextContent).Text
		switch {
		case tt.wantLen > 0 && len(text) != tt.wantLen:
			t.Errorf("MaxOutput %d: %d bytes, want %d", tt.max, len(text), tt.wantLen)
		case tt.wantLen == 0 && (len(text) > tt.max || !strings.Contains(text, "elided") || !strings.HasPrefix(text, "a") || !strings.HasSuffix(text, "z")):
			t.Errorf("MaxOutput %d: got %q", tt.max, text)
		}
	}
}

// Tools not marked Concurrent run one at a time, whatever the client
// sends at once.
func TestServerSequential(t *testing.T) {
	var running, most atomic.Int64
	step := loop.NewTool("step", "Changes things", func(context.Context, struct{}) (string, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		return "done", nil
	})
	srv := mcp.NewServer(loop.MustToolset(step), nil)
	cs := connectInMemory(t, srv, nil)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { callTool(t, cs, "step", `{}`) })
	}
	wg.Wait()
	if n := most.Load(); n != 1 {
		t.Errorf("%d calls of a sequential tool ran at once", n)
	}
}

func TestServerAskClient(t *testing.T) {
	tests := []struct {
		name      string
		answer    *sdk.ElicitResult // nil: the client does not support elicitation
		want      []string
		wantWrite int64
	}{
		{"accept", &sdk.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, []string{"text: written"}, 1},
		{"unticked", &sdk.ElicitResult{Action: "accept", Content: map[string]any{"approve": false}}, []string{"isError", `text: the call to tool "write" was rejected: the user did not approve it`}, 0},
		{"decline", &sdk.ElicitResult{Action: "decline"}, []string{"isError", `text: the call to tool "write" was rejected: the user did not approve it`}, 0},
		{"no elicitation", nil, []string{"isError", `text: approval for tool "write" failed (this MCP client cannot ask its user: it does not support elicitation); the call was not run`}, 0},
	}
	for _, tr := range transports {
		for _, tt := range tests {
			t.Run(tr.name+"/"+tt.name, func(t *testing.T) {
				var writes atomic.Int64
				var asked atomic.Int64
				var opts sdk.ClientOptions
				if tt.answer != nil {
					opts.ElicitationHandler = func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
						asked.Add(1)
						if !strings.Contains(req.Params.Message, "write") {
							t.Errorf("the question does not name the tool: %q", req.Params.Message)
						}
						return tt.answer, nil
					}
				}
				srv := mcp.NewServer(testTools(&writes), &mcp.ServerOptions{AskClient: true})
				cs := tr.connect(t, srv, &opts)
				if diff := cmp.Diff(tt.want, render(callTool(t, cs, "write", `{}`))); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
				if n := writes.Load(); n != tt.wantWrite {
					t.Errorf("write ran %d times, want %d", n, tt.wantWrite)
				}
				if tt.answer != nil && asked.Load() != 1 {
					t.Errorf("the client was asked %d times", asked.Load())
				}
			})
		}
	}
}

func TestServerSetTools(t *testing.T) {
	var writes atomic.Int64
	srv := mcp.NewServer(nil, nil)
	changed := make(chan struct{}, 10)
	cs := connectInMemory(t, srv, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { changed <- struct{}{} },
	})
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != 0 {
		t.Fatalf("tools before SetTools: %v", res.Tools)
	}
	srv.SetTools(testTools(&writes))
	<-changed
	if got := render(callTool(t, cs, "echo", `{"text":"back"}`)); !cmp.Equal(got, []string{"text: back"}) {
		t.Errorf("echo after SetTools: %v", got)
	}
	srv.SetTools(loop.MustToolset(loop.NewTool("only", "The only one", func(context.Context, struct{}) (string, error) { return "", nil })))
	var names []string
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	if diff := cmp.Diff([]string{"only"}, names); diff != "" {
		t.Errorf("tools after the second SetTools (-want +got):\n%s", diff)
	}
}
