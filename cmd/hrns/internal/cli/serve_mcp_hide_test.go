package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/internal/netpolicy/netpolicytest"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/mcp"
	"github.com/hrns-dev/hrns/openai/openaitest"
)

// echoMCP is an MCP server's handler with one tool, echo.
func echoMCP(t *testing.T) http.Handler {
	t.Helper()
	ts := &loop.Toolset{}
	if err := ts.Add(&loop.ToolDef{Name: "echo", Description: "echo", Concurrent: true,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		Handler: func(_ context.Context, c *loop.Call) (*loop.Output, error) {
			return loop.TextOutput("echoed:" + c.Args["text"].(string)), nil
		}}); err != nil {
		t.Fatal(err)
	}
	return mcp.NewServer(ts, nil).Handler()
}

// TestServeMCPCallHidesAddresses: an HTTP MCP server named by a name
// (localhost) that the operator's --mcp-allow lets through is mounted;
// it is gone when the model calls its tool (as when the name leads
// elsewhere since the mount). The tool error the model reads, and the
// session's events, say the call failed without the address the name
// resolved to; hrns serve's log has the transport's error, with the
// session.
func TestServeMCPCallHidesAddresses(t *testing.T) {
	mcpSrv := httptest.NewServer(echoMCP(t))
	defer mcpSrv.Close()
	port := netip.MustParseAddrPort(mcpSrv.Listener.Addr().String()).Port()
	model := openaitest.NewServer(
		openaitest.Reply{Func: func([]byte) openaitest.Reply {
			// Mounted by now: the server goes away before the call.
			mcpSrv.CloseClientConnections()
			mcpSrv.Close()
			return openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c1", "remote__echo", `{"text":"hi"}`)}}
		}},
		openaitest.Reply{Text: "done"},
	)
	defer model.Close()
	s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k"},
		"--model", "m", "--db", "sqlite:"+filepath.Join(t.TempDir(), "h.db"), "--mcp-allow", "127.0.0.1,::1")
	c := &apiClient{t: t, url: s.url}
	server := fmt.Sprintf(`{"name":"remote","transport":"streamable_http","url":"http://localhost:%d/"}`, port)
	id := c.create(`{"agent":{"name":"a","environments":[{"kind":"web","mcp_servers":[` + server + `]}]},"messages":"Echo."}`)
	status, events := c.wait(id)
	reqs := model.Requests()
	if status != "completed" || len(reqs) != 2 {
		t.Fatalf("session %s after %d requests\n%s", status, len(reqs), events)
	}
	if !strings.Contains(string(reqs[0].Body), `"name":"remote__echo"`) {
		t.Fatalf("the server was not mounted:\n%s", s.logs.String())
	}
	result := string(reqs[1].Body)
	for what, shown := range map[string]string{"tool result": result, "events": events} {
		if !strings.Contains(shown, `mcp server \"remote\"`) || strings.Contains(shown, "127.0.0.1") || strings.Contains(shown, "::1") || strings.Contains(shown, "dial tcp") {
			t.Errorf("the %s should say the call failed, without the address:\n%s", what, shown)
		}
	}
	l := s.logs.String()
	if !strings.Contains(l, "session="+id) || !strings.Contains(l, "mcp_server=remote") || !strings.Contains(l, "127.0.0.1") && !strings.Contains(l, "::1") {
		t.Errorf("the log should have the transport's error, with the session:\n%s", l)
	}
}

// TestServeMCPCertificateNames: an HTTP MCP server at an address the
// operator allowed whose certificate is valid for other names (the
// deployment's hosts) is left out of the run; the session's events and
// the model's note say its certificate was not valid for the name, not
// the x509 error, which lists the certificate's names; the log has it.
// The test CA is among the system's roots (a child process), as a
// deployment's own CA is.
func TestServeMCPCertificateNames(t *testing.T) {
	if !netpolicytest.RunTrusted(t) {
		return
	}
	mcpSrv := netpolicytest.NewTLSServer(t, echoMCP(t))
	port := netip.MustParseAddrPort(mcpSrv.Listener.Addr().String()).Port()
	model := openaitest.NewServer(openaitest.Reply{Text: "done"})
	defer model.Close()
	s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k"},
		"--model", "m", "--db", "sqlite:"+filepath.Join(t.TempDir(), "h.db"), "--mcp-allow", "127.0.0.1,::1")
	c := &apiClient{t: t, url: s.url}
	server := fmt.Sprintf(`{"name":"remote","transport":"streamable_http","url":"https://localhost:%d/"}`, port)
	id := c.create(`{"agent":{"name":"a","environments":[{"kind":"web","mcp_servers":[` + server + `]}]},"messages":"Echo."}`)
	status, events := c.wait(id)
	reqs := model.Requests()
	if status != "completed" || len(reqs) != 1 {
		t.Fatalf("session %s after %d requests\n%s", status, len(reqs), events)
	}
	for what, shown := range map[string]string{"model's input": string(reqs[0].Body), "events": events} {
		if !strings.Contains(shown, "the server's certificate was not valid for this name") {
			t.Errorf("the %s should say the certificate was not valid for the name:\n%s", what, shown)
		}
		for _, secret := range netpolicytest.Secrets {
			if strings.Contains(shown, secret) {
				t.Errorf("the %s show %q:\n%s", what, secret, shown)
			}
		}
	}
	if l := s.logs.String(); !strings.Contains(l, netpolicytest.SecretName) {
		t.Errorf("the log lost the x509 error:\n%s", l)
	}
}
