package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/mcp"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/sandbox"
)

// mcpTestServer returns node and the script of the npm-installed MCP
// server pkg, or skips the test when they are missing.
func mcpTestServer(t *testing.T, pkg string) (node, dir, script string) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "..", "mcp", "testdata", "servers", "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	script = filepath.Join(dir, "@modelcontextprotocol", pkg, "dist", "index.js")
	if _, err := os.Stat(script); err != nil {
		t.Skipf("the MCP test servers are not installed (%s is missing): run .ci/setup-npm", script)
	}
	if node, err = exec.LookPath("node"); err != nil {
		t.Skip("node is not in PATH")
	}
	return node, dir, script
}

// testVaultKey is a vault key (HRNS_VAULT_KEY) of tests.
const testVaultKey = "test:AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="

// needSandbox skips a test where the kernel cannot confine commands.
func needSandbox(t *testing.T) {
	t.Helper()
	if _, err := sandbox.Supported(); err != nil {
		t.Skipf("the sandbox cannot confine commands here: %v", err)
	}
}

// apiClient calls a serve's API.
type apiClient struct {
	t   *testing.T
	url string
}

func (c *apiClient) do(method, path, body string) (int, []byte) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.url+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// create creates a session and returns its ID.
func (c *apiClient) create(body string) string {
	c.t.Helper()
	code, b := c.do("POST", "/api/v2/sessions", body)
	if code != http.StatusCreated {
		c.t.Fatalf("create: %d %s", code, b)
	}
	var v struct{ ID string }
	json.Unmarshal(b, &v)
	return v.ID
}

// wait waits for the session to end and returns its status and events.
func (c *apiClient) wait(id string) (string, string) {
	c.t.Helper()
	return c.waitFor(id, "completed", "failed", "timed_out", "interrupted", "idle")
}

// waitFor waits for the session to be in one of statuses and returns its
// status and events.
func (c *apiClient) waitFor(id string, statuses ...string) (string, string) {
	c.t.Helper()
	var events []string
	for range 300 {
		code, b := c.do("GET", "/api/v2/sessions/"+id+"/changes?wait_for_seconds=5&from_index="+strconv.Itoa(len(events)), "")
		if code == http.StatusNoContent {
			continue // nothing new within the wait
		}
		if code != http.StatusOK {
			c.t.Fatalf("changes: %d %s", code, b)
		}
		var ch struct {
			Status    string
			NewEvents []json.RawMessage `json:"new_events"`
		}
		json.Unmarshal(b, &ch)
		for _, e := range ch.NewEvents {
			events = append(events, string(e))
		}
		if slices.Contains(statuses, ch.Status) {
			return ch.Status, strings.Join(events, "\n")
		}
	}
	c.t.Fatalf("session %s did not end", id)
	return "", ""
}

// TestServeMCPStdio: a caller's environment names a real stdio MCP server
// (server-filesystem, from npm); hrns serve --mcp-stdio starts it in the
// sandbox, in the session's workspace, and the agent gets and calls its
// tools (fs__TOOL) through a scripted model speaking the OpenAI wire
// format. The server reads the workspace (a file of the caller's message)
// but not a folder outside it that it was told to serve: the sandbox
// hides it. The server's process ends with the run. Its env is redacted in the session's view, events
// and logs.
func TestServeMCPStdio(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	node, modules, script := mcpTestServer(t, "server-filesystem")
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("outside-the-workspace"), 0o600); err != nil {
		t.Fatal(err)
	}
	model := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c1", "fs__read_text_file", `{"path":"files/in.txt"}`)}},
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c2", "fs__read_text_file", `{"path":"`+filepath.Join(outside, "secret.txt")+`"}`)}},
		openaitest.Reply{Text: "done"},
	)
	defer model.Close()
	wd := t.TempDir()
	dbDir := t.TempDir()
	s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k", vaultKeyEnv: testVaultKey},
		"--model", "test-model", "--db", "sqlite:"+filepath.Join(dbDir, "hrns.db"), "--workdir", wd,
		"--mcp-stdio", "--mcp-command", node, "--mcp-read", modules)
	c := &apiClient{t: t, url: s.url}
	in := base64.StdEncoding.EncodeToString([]byte("inside-the-workspace"))
	server := `{"name":"fs","transport":"stdio","command":"` + node + `","args":["` + script + `",".","` + outside + `"],"env":{"FS_TOKEN":"s3cr3t-env-value"}}`
	id := c.create(`{"agent":{"name":"reader","environments":[{"kind":"web","mcp_servers":[` + server + `]}]},
		"messages":{"message":"Read.","files":[{"source":"` + in + `","name":"in.txt"}]}}`)
	status, events := c.wait(id)
	if status != "completed" {
		t.Fatalf("session %s\n%s", status, events)
	}
	// The server's env is encrypted at rest with the vault key.
	for _, f := range []string{"hrns.db", "hrns.db-wal"} {
		if b, _ := os.ReadFile(filepath.Join(dbDir, f)); strings.Contains(string(b), "s3cr3t-env-value") {
			t.Errorf("%s holds the server's env in clear", f)
		}
	}
	reqs := model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests", len(reqs))
	}
	if !strings.Contains(string(reqs[0].Body), `"name":"fs__read_text_file"`) {
		t.Errorf("the agent was not given the server's tools:\n%.3000s", reqs[0].Body)
	}
	if !strings.Contains(string(reqs[1].Body), "inside-the-workspace") {
		t.Errorf("the server did not read the workspace:\n%.3000s", reqs[1].Body)
	}
	if last := string(reqs[2].Body); strings.Contains(last, "outside-the-workspace") || !strings.Contains(last, "c2") {
		t.Errorf("the sandboxed server read outside the workspace:\n%.3000s", last)
	}
	// The server's process ended with the run.
	for i := 0; serverRunning(outside); i++ {
		if i == 500 {
			t.Fatal("the MCP server still runs after the session ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, view := c.do("GET", "/api/v2/sessions/"+id, "")
	if !strings.Contains(string(view), `"FS_TOKEN":"[redacted]"`) {
		t.Errorf("the view does not show the server, its env redacted: %s", view)
	}
	for what, text := range map[string]string{"view": string(view), "events": events, "logs": s.logs.String()} {
		if strings.Contains(text, "s3cr3t-env-value") {
			t.Errorf("the %s show the server's env", what)
		}
	}
}

// TestServeMCPStdioParked: a session waiting for its caller's tool holds
// no MCP server process; the run that resumes it starts the server again,
// whose tools work as before.
func TestServeMCPStdioParked(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	node, modules, script := mcpTestServer(t, "server-filesystem")
	marker := t.TempDir() // in the server's command line only
	read := openaitest.ToolCall("c1", "fs__read_text_file", `{"path":"files/in.txt"}`)
	model := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{read}},
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c2", "ask", `{}`)}},
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c3", "fs__read_text_file", `{"path":"files/in.txt"}`)}},
		openaitest.Reply{Text: "done"},
	)
	defer model.Close()
	s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k"},
		"--model", "test-model", "--db", "sqlite:"+filepath.Join(t.TempDir(), "hrns.db"), "--workdir", t.TempDir(),
		"--mcp-stdio", "--mcp-read", modules)
	c := &apiClient{t: t, url: s.url}
	in := base64.StdEncoding.EncodeToString([]byte("inside-the-workspace"))
	id := c.create(`{"agent":{"name":"reader","tools":[{"name":"ask","description":"Ask the user."}],"environments":[{"kind":"web","mcp_servers":[
		{"name":"fs","transport":"stdio","command":"` + node + `","args":["` + script + `",".","` + marker + `"]}]}]},
		"messages":{"message":"Read.","files":[{"source":"` + in + `","name":"in.txt"}]}}`)
	if status, events := c.waitFor(id, "awaiting_tool_results", "completed", "failed"); status != "awaiting_tool_results" {
		t.Fatalf("session %s\n%s", status, events)
	}
	for i := 0; serverRunning(marker); i++ {
		if i == 500 {
			t.Fatal("the MCP server runs while the session waits for its caller")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, b := c.do("POST", "/api/v2/sessions/"+id+"/tool_results", `{"kind":"tool_result","tool_req":{"tool_name":"ask","id":"c2"},"result":"go on"}`); code != http.StatusAccepted {
		t.Fatalf("tool result: %d %s", code, b)
	}
	if status, events := c.wait(id); status != "completed" {
		t.Fatalf("session %s\n%s", status, events)
	}
	reqs := model.Requests()
	if len(reqs) != 4 || !strings.Contains(string(reqs[3].Body), `"content":"inside-the-workspace","tool_call_id":"c3"`) {
		t.Errorf("the resumed run did not call the restarted server (%d requests):\n%.3000s", len(reqs), reqs[len(reqs)-1].Body)
	}
}

// serverRunning reports whether a process whose command line holds arg
// runs.
func serverRunning(arg string) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), arg) {
			return true
		}
	}
	return false
}

// TestServeMCPStdioOff: without --mcp-stdio a stdio server is refused
// (422 naming the switch, at the server's entry); --mcp-command limits the
// commands; --mcp-stdio needs --workdir. HTTP servers need no switch; the
// validation's errors are the API's (a missing command, a duplicate name).
func TestServeMCPStdioOff(t *testing.T) {
	t.Parallel()
	model := openaitest.NewServer()
	defer model.Close()
	env := map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k"}
	off := &apiClient{t: t, url: startServe(t, env, "--model", "m", "--db", "sqlite:"+filepath.Join(t.TempDir(), "h.db")).url}
	limited := &apiClient{t: t, url: startServe(t, env, "--model", "m", "--db", "sqlite:"+filepath.Join(t.TempDir(), "h.db"),
		"--workdir", t.TempDir(), "--mcp-stdio", "--mcp-command", "node").url}
	body := func(servers string) string {
		return `{"agent":{"name":"a","environments":[{"kind":"web","mcp_servers":[` + servers + `]}]},"messages":"x"}`
	}
	for _, tt := range []struct {
		c       *apiClient
		servers string
		loc     string
		msg     string
	}{
		{off, `{"name":"fs","transport":"stdio","command":"node"}`, `"loc":["body","agent","environments",0,"mcp_servers",0]`, "hrns serve --mcp-stdio"},
		{limited, `{"name":"fs","transport":"stdio","command":"bash"}`, `"loc":["body","agent","environments",0,"mcp_servers",0]`, `command \"bash\" is not one this server starts for MCP servers (its operator allows node with --mcp-command)`},
		{off, `{"name":"fs","transport":"stdio"}`, `"loc":["body","agent","environments",0,"mcp_servers",0,"command"]`, "Field required"},
		{off, `{"name":"a","transport":"sse","url":"https://a.example/sse"},{"name":"a","transport":"streamable_http","url":"https://b.example/mcp"}`, `"loc":["body","agent","environments",0,"mcp_servers",1,"name"]`, "must be unique"},
	} {
		code, b := tt.c.do("POST", "/api/v2/sessions", body(tt.servers))
		if code != http.StatusUnprocessableEntity || !strings.Contains(string(b), tt.loc) || !strings.Contains(string(b), tt.msg) {
			t.Errorf("%s: %d %s\nwant 422 at %s saying %s", tt.servers, code, b, tt.loc, tt.msg)
		}
	}
	// An HTTP server is accepted without the switch; without vault keys
	// (nor --mcp-plaintext-secrets), not with headers, which would be
	// stored in clear.
	off.create(body(`{"name":"remote","transport":"streamable_http","url":"https://mcp.example/mcp"}`))
	if code, b := off.do("POST", "/api/v2/sessions", body(`{"name":"remote","transport":"streamable_http","url":"https://mcp.example/mcp","headers":{"Authorization":"Bearer x"}}`)); code != http.StatusUnprocessableEntity || !strings.Contains(string(b), "--mcp-plaintext-secrets") {
		t.Errorf("headers without vault keys: %d %s", code, b)
	}

	var out, errb strings.Builder
	code := Run(t.Context(), []string{"serve", "--mcp-stdio", "--model", "m", "--db", "sqlite:" + filepath.Join(t.TempDir(), "h.db")},
		&IO{In: strings.NewReader(""), Out: &out, Err: &errb, Getenv: func(k string) string { return map[string]string{"OPENAI_API_KEY": "k", "HOME": t.TempDir()}[k] }})
	if code == 0 || !strings.Contains(errb.String(), "--mcp-stdio needs --workdir") {
		t.Errorf("--mcp-stdio without --workdir: exit %d: %s", code, errb.String())
	}
}

// TestServeMCPHTTP: an HTTP MCP server on loopback is refused by the
// address policy by default (the session runs without its tools, and the
// log says why, without the URL's query); with --mcp-allow 127.0.0.1 it
// is reached, with the caller's headers, which the session's view redacts.
func TestServeMCPHTTP(t *testing.T) {
	t.Parallel()
	ts := &loop.Toolset{}
	if err := ts.Add(&loop.ToolDef{Name: "echo", Description: "echo", Concurrent: true,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		Handler: func(_ context.Context, c *loop.Call) (*loop.Output, error) {
			return loop.TextOutput("echoed:" + c.Args["text"].(string)), nil
		}}); err != nil {
		t.Fatal(err)
	}
	var auth syncBuffer
	h := mcp.NewServer(ts, nil).Handler()
	mcpSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Write([]byte(r.Header.Get("Authorization") + "\n"))
		h.ServeHTTP(w, r)
	}))
	defer mcpSrv.Close()
	for _, allowed := range []bool{false, true} {
		// Refused, the server is named (localhost): the caller is not
		// told the address the name resolved to.
		srvURL := mcpSrv.URL
		if !allowed {
			srvURL = strings.Replace(srvURL, "127.0.0.1", "localhost", 1)
		}
		server := `{"name":"remote","transport":"streamable_http","url":"` + srvURL + `/?key=url-secret-value","headers":{"Authorization":"Bearer hdr-secret-value"}}`
		body := `{"agent":{"name":"a","environments":[{"kind":"web","mcp_servers":[` + server + `]}]},"messages":"Echo."}`
		model := openaitest.NewServer(
			openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c1", "remote__echo", `{"text":"hi"}`)}},
			openaitest.Reply{Text: "done"},
		)
		args := []string{"--model", "m", "--db", "sqlite:" + filepath.Join(t.TempDir(), "h.db")}
		env := map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k"}
		if allowed {
			args = append(args, "--mcp-allow", "127.0.0.1")
			env[vaultKeyEnv] = testVaultKey
		} else {
			args = append(args, "--mcp-plaintext-secrets") // and says so
		}
		s := startServe(t, env, args...)
		c := &apiClient{t: t, url: s.url}
		id := c.create(body)
		status, events := c.wait(id)
		reqs := model.Requests()
		model.Close()
		if status != "completed" || len(reqs) != 2 {
			t.Fatalf("allowed=%v: session %s after %d requests\n%s", allowed, status, len(reqs), events)
		}
		offered := strings.Contains(string(reqs[0].Body), `"name":"remote__echo"`)
		echoed := strings.Contains(string(reqs[1].Body), "echoed:hi")
		if offered != allowed || echoed != allowed {
			t.Errorf("allowed=%v: tool offered %v, called %v", allowed, offered, echoed)
		}
		if !allowed && (!strings.Contains(s.logs.String(), "could not be reached") || strings.Contains(s.logs.String(), "url-secret-value")) {
			t.Errorf("the refusal is not logged, or the URL's query is:\n%s", s.logs.String())
		}
		// The caller reads it in the session's events, the model in its
		// input; neither gets the URL's query.
		if reported := strings.Contains(events, `"origin":"mcp"`) && strings.Contains(events, `MCP server \"remote\" is not available in this run`); reported == allowed || strings.Contains(events, "url-secret-value") {
			t.Errorf("allowed=%v: the events report the server %v, or show the URL's query:\n%s", allowed, reported, events)
		}
		if noted := strings.Contains(string(reqs[0].Body), "could not be reached when this run started"); noted == allowed || strings.Contains(string(reqs[0].Body), "url-secret-value") {
			t.Errorf("allowed=%v: the model's note %v, or the URL's query in it", allowed, noted)
		}
		if !allowed {
			for _, shown := range []string{events, string(reqs[0].Body)} {
				if strings.Contains(shown, "127.0.0.1") || strings.Contains(shown, "::1") || !strings.Contains(shown, "not on the public internet") {
					t.Errorf("the refusal shows the address localhost resolved to, or not why:\n%s", shown)
				}
			}
			if l := s.logs.String(); !strings.Contains(l, "127.0.0.1") && !strings.Contains(l, "::1") {
				t.Errorf("the log lost the refused address:\n%s", l)
			}
		}
		if !allowed && !strings.Contains(s.logs.String(), "UNENCRYPTED") {
			t.Errorf("--mcp-plaintext-secrets is not warned of:\n%s", s.logs.String())
		}
		_, view := c.do("GET", "/api/v2/sessions/"+id, "")
		if !strings.Contains(string(view), `"Authorization":"[redacted]"`) {
			t.Errorf("the view does not show the server with its headers redacted: %s", view)
		}
		for what, text := range map[string]string{"view": string(view), "events": events, "logs": s.logs.String()} {
			if strings.Contains(text, "hdr-secret-value") {
				t.Errorf("allowed=%v: the %s show the server's headers", allowed, what)
			}
		}
	}
	if !strings.Contains(auth.String(), "Bearer hdr-secret-value") {
		t.Errorf("the server did not get the caller's header: %q", auth.String())
	}
}

// TestServeMCPHostile: a stdio MCP server that dies in the middle of a
// call, writes a message larger than hrns reads, or writes garbage (and
// so never answers: the call ends at --mcp-timeout) fails only that call,
// with a tool error the model reads; the session goes on (the server is
// started again for the next call where it died) and completes. Without
// --command-network the server reaches no network (its own loopback
// only), given its target in its env.
func TestServeMCPHostile(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not in PATH")
	}
	script, _ := filepath.Abs(filepath.Join("testdata", "hostile-mcp.js"))
	call := func(id, name string) openaitest.Reply {
		return openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall(id, "bad__"+name, `{}`)}}
	}
	// A port of this machine's loopback, which the sandboxed server, without
	// the network, cannot reach.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var reached atomic.Bool
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			reached.Store(true)
			c.Close()
		}
	}()
	model := openaitest.NewServer(call("c1", "die"), call("c2", "flood"), call("c3", "ok"), call("c4", "garbage"), call("c5", "ok"), call("c6", "net"), openaitest.Reply{Text: "survived"})
	defer model.Close()
	s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k", vaultKeyEnv: testVaultKey},
		"--model", "test-model", "--db", "sqlite:"+filepath.Join(t.TempDir(), "hrns.db"), "--workdir", t.TempDir(),
		// 6s: the call after the server died starts it again (a
		// sandboxed node) within the call's time, which took over 3s
		// on a loaded machine (CI beside -race tests of other packages).
		"--mcp-stdio", "--mcp-read", script, "--mcp-timeout", "6s")
	c := &apiClient{t: t, url: s.url}
	id := c.create(`{"agent":{"name":"a","environments":[{"kind":"web","mcp_servers":[{"name":"bad","transport":"stdio","command":"node","args":["` + script + `"],"env":{"TARGET":"` + ln.Addr().String() + `"}}]}]},"messages":"Try."}`)
	status, events := c.wait(id)
	if status != "completed" {
		t.Fatalf("session %s\n%s", status, events)
	}
	reqs := model.Requests()
	if len(reqs) != 7 {
		t.Fatalf("%d model requests", len(reqs))
	}
	// The tool result each call gave the model.
	for i, want := range []string{"exited (exit status 3; its stderr ends with: hostile: dying on purpose)", `bad__flood\" timed out`, "still-alive", `bad__garbage\" failed: mcp server \"bad\" during the call`, "still-alive", "net: E"} {
		var r struct{ Messages []json.RawMessage }
		if err := json.Unmarshal(reqs[i+1].Body, &r); err != nil || len(r.Messages) == 0 {
			t.Fatalf("request %d: %v", i+1, err)
		}
		if last := string(r.Messages[len(r.Messages)-1]); !strings.Contains(last, want) || len(last) > 4096 {
			t.Errorf("call %d: the model read %.1000s, want %s", i+1, last, want)
		}
	}
	if reached.Load() {
		t.Error("the sandboxed server reached this machine's loopback")
	}
}
