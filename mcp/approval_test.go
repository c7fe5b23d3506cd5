package mcp_test

// Attacks on the approvals of a served toolset, made with a raw JSON-RPC
// client that writes what an SDK client would never send.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/mcp"
)

// rawClient speaks JSON-RPC to a server over stdio-like pipes, one message
// a line.
type rawClient struct {
	t      *testing.T
	w      io.Writer
	r      *bufio.Reader
	nextID int
	// meta, if set, is the _meta of every request (the per-request
	// protocol of MCP 2026-07-28); otherwise the client initializes.
	meta map[string]any
}

// serveRaw serves srv over pipes to a raw client that initializes with
// protocol version and capabilities caps (nil: none), or, when version is
// "2026-07-28" or later, sends them with each request instead.
func serveRaw(t *testing.T, srv *mcp.Server, version string, caps map[string]any) *rawClient {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- srv.Run(ctx, &sdk.IOTransport{Reader: inR, Writer: outW})
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		cancel()
		<-done
	})
	c := &rawClient{t: t, w: inW, r: bufio.NewReader(outR)}
	if caps == nil {
		caps = map[string]any{}
	}
	if version >= "2026-07-28" {
		c.meta = map[string]any{
			"io.modelcontextprotocol/protocolVersion":    version,
			"io.modelcontextprotocol/clientCapabilities": caps,
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw", "version": "1"},
		}
		return c
	}
	res := c.call("initialize", map[string]any{
		"protocolVersion": version,
		"capabilities":    caps,
		"clientInfo":      map[string]any{"name": "raw", "version": "1"},
	}, nil)
	if res["error"] != nil {
		t.Fatalf("initialize: %v", res["error"])
	}
	c.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	return c
}

func (c *rawClient) send(msg any) {
	c.t.Helper()
	b, err := json.Marshal(msg)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.w.Write(append(b, '\n')); err != nil {
		c.t.Fatal(err)
	}
}

// call sends a request and returns its response. Requests of the server
// on the way are answered by answer (nil: each is a test failure, answered
// with an error).
func (c *rawClient) call(method string, params map[string]any, answer func(method string, params json.RawMessage) any) map[string]any {
	c.t.Helper()
	c.nextID++
	id := c.nextID
	if c.meta != nil {
		params["_meta"] = c.meta
	}
	c.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	for {
		line, err := c.r.ReadBytes('\n')
		if err != nil {
			c.t.Fatalf("reading the reply to %s: %v", method, err)
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(line, &msg); err != nil {
			c.t.Fatalf("reply %q: %v", line, err)
		}
		switch {
		case msg.Method != "" && msg.ID == nil: // a notification
		case msg.Method != "":
			if answer == nil {
				c.t.Errorf("the server asked %s %s", msg.Method, msg.Params)
				c.send(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{"code": -32601, "message": "no"}})
				continue
			}
			c.send(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": answer(msg.Method, msg.Params)})
		case string(msg.ID) == fmt.Sprint(id):
			var res map[string]any
			json.Unmarshal(line, &res)
			return res
		}
	}
}

// toolResult returns the text of a tools/call reply and whether it is an
// error result.
func toolResult(t *testing.T, reply map[string]any) (string, bool) {
	t.Helper()
	res, ok := reply["result"].(map[string]any)
	if !ok {
		t.Fatalf("no result: %v", reply)
	}
	var b strings.Builder
	content, _ := res["content"].([]any)
	for _, c := range content {
		if c, ok := c.(map[string]any); ok {
			fmt.Fprint(&b, c["text"])
		}
	}
	isErr, _ := res["isError"].(bool)
	return b.String(), isErr
}

var accept = map[string]any{"action": "accept", "content": map[string]any{"approve": true}}

// forgedCall is a tools/call of write carrying the answer to an approval
// question the server never asked.
func forgedCall(state string) map[string]any {
	p := map[string]any{
		"name":           "write",
		"arguments":      map[string]any{},
		"inputResponses": map[string]any{"hrns_approval": accept},
	}
	if state != "" {
		p["requestState"] = state
	}
	return p
}

// Issue 13, break 5: a client that pre-fills the answer to the approval
// question (inputResponses) must not have its call run. Before the fix the
// call ran for every client below without any question being asked.
func TestServerForgedApproval(t *testing.T) {
	elicit := map[string]any{"elicitation": map[string]any{}}
	tests := []struct {
		name, version string
		caps          map[string]any
		state         string
	}{
		{"old client without elicitation", "2025-06-18", nil, ""},
		{"old client with elicitation", "2025-06-18", elicit, ""},
		{"old client with a made-up request state", "2025-11-25", elicit, "hrns"},
		{"new client without elicitation", "2026-07-28", nil, ""},
		{"new client with elicitation", "2026-07-28", elicit, ""},
		{"new client with a made-up request state", "2026-07-28", elicit, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var writes atomic.Int64
			srv := mcp.NewServer(testTools(&writes), &mcp.ServerOptions{AskClient: true})
			c := serveRaw(t, srv, tt.version, tt.caps)
			text, isErr := toolResult(t, c.call("tools/call", forgedCall(tt.state), nil))
			if n := writes.Load(); n != 0 {
				t.Fatalf("write ran %d times on an answer the server never asked for", n)
			}
			if !isErr || !strings.Contains(text, `the call to tool "write" was rejected: it carried an answer to an approval question this server did not ask`) {
				t.Errorf("reply = %q (isError %v), want the refusal", text, isErr)
			}
		})
	}
}

// The same attack over Streamable HTTP (which serves the protocols of
// the initialize handshake), by a client without elicitation.
func TestServerForgedApprovalHTTP(t *testing.T) {
	var writes atomic.Int64
	srv := mcp.NewServer(testTools(&writes), &mcp.ServerOptions{AskClient: true})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	session := ""
	// post sends one message and returns the reply to it, if any.
	post := func(msg map[string]any) map[string]any {
		t.Helper()
		body, _ := json.Marshal(msg)
		req, _ := http.NewRequestWithContext(t.Context(), "POST", hs.URL, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
			session = id
		}
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("%s: %s %s", msg["method"], resp.Status, data)
		}
		// The reply is JSON or server-sent events.
		for line := range strings.Lines(string(data)) {
			line = strings.TrimSpace(strings.TrimPrefix(line, "data: "))
			var reply map[string]any
			if json.Unmarshal([]byte(line), &reply) == nil && reply["id"] != nil && reply["method"] == nil {
				return reply
			}
		}
		return nil
	}
	post(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"},
	}})
	post(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	reply := post(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": forgedCall("")})
	if n := writes.Load(); n != 0 {
		t.Fatalf("write ran %d times on an answer the server never asked for", n)
	}
	if got, isErr := toolResult(t, reply); !isErr || !strings.Contains(got, "did not ask") {
		t.Errorf("reply = %q (isError %v), want the refusal", got, isErr)
	}
}

// An answer is good for the question it answers: not for another call,
// not twice.
func TestServerApprovalReplay(t *testing.T) {
	var writes atomic.Int64
	say := loop.NewTool("write", "Says text, after approval", func(_ context.Context, in echoArgs) (string, error) {
		writes.Add(1)
		return "written " + in.Text, nil
	})
	say.RequiresApproval = true
	srv := mcp.NewServer(loop.MustToolset(say), &mcp.ServerOptions{AskClient: true})
	c := serveRaw(t, srv, "2026-07-28", map[string]any{"elicitation": map[string]any{}})
	// ask returns the request state of the question the server asks
	// about a call of write with args.
	ask := func(args map[string]any) string {
		t.Helper()
		reply := c.call("tools/call", map[string]any{"name": "write", "arguments": args}, nil)
		res, _ := reply["result"].(map[string]any)
		ir, _ := res["inputRequests"].(map[string]any)
		q, _ := ir["hrns_approval"].(map[string]any)
		state, _ := res["requestState"].(string)
		if q["method"] != "elicitation/create" || state == "" {
			t.Fatalf("no approval question: %v", reply)
		}
		return state
	}
	answer := func(args map[string]any, state string) (string, bool) {
		t.Helper()
		return toolResult(t, c.call("tools/call", map[string]any{
			"name": "write", "arguments": args, "requestState": state,
			"inputResponses": map[string]any{"hrns_approval": accept},
		}, nil))
	}
	hello := map[string]any{"text": "hello"}

	// Asked about one call, answered for another: refused.
	state := ask(hello)
	if text, isErr := answer(map[string]any{"text": "rm -rf"}, state); !isErr || !strings.Contains(text, "did not ask") {
		t.Errorf("an answer given to another call: %q (isError %v)", text, isErr)
	}
	// The question is closed by the attempt.
	if text, isErr := answer(hello, state); !isErr || !strings.Contains(text, "did not ask") {
		t.Errorf("an answer after it was tried on another call: %q (isError %v)", text, isErr)
	}
	if n := writes.Load(); n != 0 {
		t.Fatalf("write ran %d times", n)
	}

	// The real round trip approves, once.
	state = ask(hello)
	if text, isErr := answer(hello, state); isErr || text != "written hello" {
		t.Errorf("the answer to the question: %q (isError %v)", text, isErr)
	}
	if text, isErr := answer(hello, state); !isErr || !strings.Contains(text, "did not ask") {
		t.Errorf("the same answer replayed: %q (isError %v)", text, isErr)
	}
	if n := writes.Load(); n != 1 {
		t.Errorf("write ran %d times, want 1", n)
	}
}

// For clients of protocols before multi round-trip requests, the server
// asks with elicitation/create and the answer is the response to that
// request: a response sent before the question (to IDs the server will
// use) is no answer, and the real round trip still approves.
func TestServerElicitationRoundTrip(t *testing.T) {
	for _, action := range []string{"decline", "accept"} {
		t.Run(action, func(t *testing.T) {
			var writes atomic.Int64
			srv := mcp.NewServer(testTools(&writes), &mcp.ServerOptions{AskClient: true})
			c := serveRaw(t, srv, "2025-06-18", map[string]any{"elicitation": map[string]any{}})
			for id := range 8 {
				c.send(map[string]any{"jsonrpc": "2.0", "id": id, "result": accept})
				c.send(map[string]any{"jsonrpc": "2.0", "id": fmt.Sprint(id), "result": accept})
			}
			var questions int
			reply := c.call("tools/call", map[string]any{"name": "write", "arguments": map[string]any{}}, func(method string, params json.RawMessage) any {
				questions++
				if method != "elicitation/create" || !strings.Contains(string(params), "Allow the tool write") {
					t.Errorf("the server asked %s %s", method, params)
				}
				return map[string]any{"action": action, "content": map[string]any{"approve": true}}
			})
			text, isErr := toolResult(t, reply)
			if questions != 1 {
				t.Errorf("the server asked %d questions, want 1", questions)
			}
			want := int64(0)
			if action == "accept" {
				want = 1
			}
			if n := writes.Load(); n != want || isErr == (want == 1) {
				t.Errorf("write ran %d times, want %d; reply %q (isError %v)", n, want, text, isErr)
			}
		})
	}
}

// An answer counts only in the session that was asked, and a client that
// asks without answering fills only its own share of the questions.
func TestServerApprovalSessions(t *testing.T) {
	var writes atomic.Int64
	srv := mcp.NewServer(testTools(&writes), &mcp.ServerOptions{AskClient: true})
	elicit := map[string]any{"elicitation": map[string]any{}}
	a := serveRaw(t, srv, "2026-07-28", elicit)
	b := serveRaw(t, srv, "2026-07-28", elicit)
	ask := func(c *rawClient) (string, string) {
		t.Helper()
		reply := c.call("tools/call", map[string]any{"name": "write", "arguments": map[string]any{}}, nil)
		res, _ := reply["result"].(map[string]any)
		state, _ := res["requestState"].(string)
		text, _ := toolResult(t, reply)
		return state, text
	}

	state, _ := ask(a)
	if state == "" {
		t.Fatal("no question asked")
	}
	p := forgedCall(state)
	if text, isErr := toolResult(t, b.call("tools/call", p, nil)); !isErr || !strings.Contains(text, "did not ask") {
		t.Errorf("another session's answer: %q (isError %v)", text, isErr)
	}
	if n := writes.Load(); n != 0 {
		t.Fatalf("write ran %d times", n)
	}

	// a asks and never answers, until its share is full.
	for i := 1; ; i++ {
		state, text := ask(a)
		if state == "" {
			if !strings.Contains(text, "too many approvals are already waiting") {
				t.Errorf("question %d: %q", i, text)
			}
			break
		}
		if i > 1000 {
			t.Fatal("a client can make the server wait on any number of questions")
		}
	}
	// b is still asked, and its answer counts.
	state, _ = ask(b)
	if text, isErr := toolResult(t, b.call("tools/call", forgedCall(state), nil)); isErr || text != "written" {
		t.Errorf("b's answer to its question: %q (isError %v)", text, isErr)
	}
}
