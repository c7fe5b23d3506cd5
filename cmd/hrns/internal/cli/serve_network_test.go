package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/sandbox"
	"github.com/hrns-dev/hrns/session"
)

// TestServeCommandsHaveNoNetwork: the commands of hrns serve's sessions
// cannot connect to a listener on the server's loopback (where a
// PostgreSQL store trusting local connections would be), whether the
// operator lets the agent use the network or not: with network = true
// they reach the public internet through the proxy alone
// (TestServeCommandsNetworkPolicy) (issue 32, finding 9).
func TestServeCommandsHaveNoNetwork(t *testing.T) {
	if _, err := sandbox.Supported(); err != nil {
		t.Skipf("commands are not sandboxed here: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	probe, _ := json.Marshal(map[string]string{"command": fmt.Sprintf(`bash -c 'exec 3<>/dev/tcp/127.0.0.1/%s' && echo CONNECTED || echo REFUSED`, port)})
	call := openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c1", "run_command", string(probe))}}
	model := openaitest.NewServer(call, openaitest.Reply{Text: "done"}, call, openaitest.Reply{Text: "done"})
	defer model.Close()
	cfg := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(cfg, []byte("[agents.closed]\ntools = [\"run_command\"]\n\n[agents.open]\ntools = [\"run_command\"]\nnetwork = true\n"), 0o600)
	s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k", "HRNS_API_KEYS": "sk-a"},
		"--model", "test-model", "--config", cfg, "--workdir", t.TempDir(), "--yes", "--db", "sqlite:"+filepath.Join(t.TempDir(), "hrns.db"))
	c := client.New(s.url, "sk-a", nil)
	for i, tc := range []struct {
		agent    string
		want     string
		accepted int32
	}{
		{"closed", "REFUSED", 0},
		{"open", "REFUSED", 0},
	} {
		res, err := c.RunSession(t.Context(), &client.SessionRequest{Agent: client.AgentRef{Name: tc.agent}, Messages: client.Text("probe")})
		if err != nil || res.Status != session.StatusCompleted {
			t.Fatalf("%s: %v %+v", tc.agent, err, res)
		}
		reqs := model.Requests()
		result := string(reqs[2*i+1].Body)
		if !strings.Contains(result, tc.want) || accepted.Load() != tc.accepted {
			t.Errorf("agent %s: the listener accepted %d connections (want %d); the command's result:\n%s", tc.agent, accepted.Load(), tc.accepted, result)
		}
	}
}

// TestServeCommandsNetworkPolicy: the commands of an agent the operator
// gives the network (network = true) reach it only through hrns's proxy,
// under the address policy of web_fetch: not the server's loopback (where
// a PostgreSQL store trusting local connections would be), not a private
// address, directly or through the proxy, unless the operator lists the
// destination (network_allow), which then works through the proxy, as a
// plain HTTP request and as a CONNECT tunnel (issue 32, finding 9).
func TestServeCommandsNetworkPolicy(t *testing.T) {
	if _, err := sandbox.Supported(); err != nil {
		t.Skipf("commands are not sandboxed here: %v", err)
	}
	var conns, requests atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		io.WriteString(w, "the store's data")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	script := fmt.Sprintf(`P=%s
bash -c "exec 3<>/dev/tcp/127.0.0.1/$P" 2>/dev/null && echo DIRECT=yes || echo DIRECT=no
echo LOOP=$(curl -s --noproxy '' -o /dev/null -w '%%{http_code}' --max-time 20 http://127.0.0.1:$P/)
echo TUNNEL=$(curl -s --noproxy '' -p -o /dev/null -w '%%{http_code}/%%{http_connect}' --max-time 20 http://127.0.0.1:$P/)
echo PRIVATE=$(curl -s --max-time 5 http://10.255.255.1/ | head -c 10).
echo METADATA=$(curl -s --max-time 5 http://169.254.169.254/ | head -c 10).`, port)
	probe, _ := json.Marshal(map[string]string{"command": script})
	call := openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c1", "run_command", string(probe))}}
	// run_code's calls of run_command go through the same proxy.
	program, _ := json.Marshal(map[string]string{"code": "r = run_command(command=" + strconv.Quote(script) + ")\nprint(r)\n"})
	codeCall := openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c1", "run_code", string(program))}}
	model := openaitest.NewServer(call, openaitest.Reply{Text: "done"}, call, openaitest.Reply{Text: "done"}, call, openaitest.Reply{Text: "done"}, codeCall, openaitest.Reply{Text: "done"})
	defer model.Close()
	cfg := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(cfg, []byte(`[agents.closed]
tools = ["run_command"]

[agents.public]
tools = ["run_command"]
network = true

[agents.allowed]
tools = ["run_command"]
network = true
network_allow = ["127.0.0.1:`+port+`"]

[agents.code]
tools = ["run_code", "run_command"]
network = true
`), 0o600)
	s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k", "HRNS_API_KEYS": "sk-a"},
		"--model", "test-model", "--config", cfg, "--workdir", t.TempDir(), "--yes", "--db", "sqlite:"+filepath.Join(t.TempDir(), "hrns.db"))
	c := client.New(s.url, "sk-a", nil)
	for i, tc := range []struct {
		agent          string
		want           []string
		conns, request int32 // this agent's command's, at least (0: none)
	}{
		{"closed", []string{"DIRECT=no", "LOOP=000", "TUNNEL=000/000", "PRIVATE=.", "METADATA=."}, 0, 0},
		{"public", []string{"DIRECT=no", "LOOP=403", "TUNNEL=000/403", "PRIVATE=hrns proxy.", "METADATA=hrns proxy."}, 0, 0},
		{"allowed", []string{"DIRECT=no", "LOOP=200", "TUNNEL=200/200", "PRIVATE=hrns proxy.", "METADATA=hrns proxy."}, 2, 2},
		{"code", []string{"DIRECT=no", "LOOP=403", "TUNNEL=000/403", "PRIVATE=hrns proxy.", "METADATA=hrns proxy."}, 0, 0},
	} {
		conns0, requests0 := conns.Load(), requests.Load()
		res, err := c.RunSession(t.Context(), &client.SessionRequest{Agent: client.AgentRef{Name: tc.agent}, Messages: client.Text("probe")})
		if err != nil || res.Status != session.StatusCompleted {
			t.Fatalf("%s: %v %+v", tc.agent, err, res)
		}
		var result struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		json.Unmarshal(model.Requests()[2*i+1].Body, &result)
		out := result.Messages[len(result.Messages)-1].Content
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("agent %s: want %s in the command's output:\n%s", tc.agent, w, out)
			}
		}
		dc, dr := conns.Load()-conns0, requests.Load()-requests0
		if dc < tc.conns || dr < tc.request || (tc.conns == 0 && dc != 0) {
			t.Errorf("agent %s: the loopback server had %d connections and %d requests (want %d and %d)", tc.agent, dc, dr, tc.conns, tc.request)
		}
	}
}

// TestServeCommandNetworkConfig: what an agent's network settings give
// its commands, and the settings refused.
func TestServeCommandNetworkConfig(t *testing.T) {
	pg := netip.MustParseAddrPort("127.0.0.1:5432")
	for _, tc := range []struct {
		name    string
		global  bool
		allowed string
		agent   commandNet
		on      bool
		reaches bool // pg through the proxy
		err     string
	}{
		{name: "none"},
		{name: "agent", agent: commandNet{on: true}, on: true},
		{name: "global", global: true, on: true},
		{name: "agent allows", agent: commandNet{on: true, allow: []string{"127.0.0.1:5432"}}, on: true, reaches: true},
		{name: "global allows", global: true, allowed: "127.0.0.0/8", on: true, reaches: true},
		{name: "allow without network", agent: commandNet{allow: []string{"127.0.0.1:5432"}}, err: "network_allow without network = true"},
		{name: "not an address", agent: commandNet{on: true, allow: []string{"db.internal"}}, err: "not an address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &serveOptions{commandNetwork: tc.global, commandNetAllow: tc.allowed}
			on, allow, err := o.commandNetworkOf(tc.agent)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || on != tc.on || (allow != nil && allow(pg)) != tc.reaches {
				t.Errorf("on %v, reaches %v, err %v", on, allow != nil && allow(pg), err)
			}
		})
	}
}

// TestServeWorkstationNetworkPolicy (issue 32, finding 9): the workstation
// environment's commands have no network unless the operator gives it to
// that environment (--workstation-network) or to every agent
// (--command-network), and then only the public internet, through the
// proxy: not this machine's loopback (with --command-network they had the
// host's whole network, a loopback server included).
func TestServeWorkstationNetworkPolicy(t *testing.T) {
	if _, err := sandbox.Supported(); err != nil {
		t.Skipf("commands are not sandboxed here: %v", err)
	}
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		io.WriteString(w, "the store's data")
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	script := fmt.Sprintf(`P=%s
bash -c "exec 3<>/dev/tcp/127.0.0.1/$P" 2>/dev/null && echo DIRECT=yes || echo DIRECT=no
echo LOOP=$(curl -s --noproxy '' -o /dev/null -w '%%{http_code}' --max-time 20 http://127.0.0.1:$P/)`, port)
	probe, _ := json.Marshal(map[string]string{"command": script})
	for _, tc := range []struct {
		flags []string
		want  []string
	}{
		{nil, []string{"DIRECT=no", "LOOP=000"}},
		{[]string{"--workstation-network"}, []string{"DIRECT=no", "LOOP=403"}},
		{[]string{"--command-network"}, []string{"DIRECT=no", "LOOP=403"}},
	} {
		t.Run(strings.Join(append([]string{"flags"}, tc.flags...), " "), func(t *testing.T) {
			model := openaitest.NewServer(openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c1", "run_command", string(probe))}}, openaitest.Reply{Text: "done"})
			defer model.Close()
			args := append([]string{"--model", "test-model", "--workstation", "--workdir", t.TempDir(), "--yes", "--db", "sqlite:" + filepath.Join(t.TempDir(), "hrns.db")}, tc.flags...)
			s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k", "HRNS_API_KEYS": "sk-a"}, args...)
			c := client.New(s.url, "sk-a", nil)
			var env client.Environment
			json.Unmarshal([]byte(`{"kind":"workstation"}`), &env)
			before := requests.Load()
			res, err := c.RunSession(t.Context(), &client.SessionRequest{Agent: client.AgentRef{Inline: &client.Agent{Name: "w", Environments: []client.Environment{env}}}, Messages: client.Text("probe")})
			if err != nil || res.Status != session.StatusCompleted {
				t.Fatalf("%v %+v\n%s", err, res, s.logs.String())
			}
			reqs := model.Requests()
			var result struct {
				Messages []struct {
					Content string `json:"content"`
				} `json:"messages"`
			}
			json.Unmarshal(reqs[len(reqs)-1].Body, &result)
			out := result.Messages[len(result.Messages)-1].Content
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("want %s in the command's output:\n%s", w, out)
				}
			}
			if n := requests.Load() - before; n != 0 {
				t.Errorf("the loopback server was reached %d times", n)
			}
		})
	}
}
