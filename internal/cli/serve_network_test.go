package cli

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
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
// PostgreSQL store trusting local connections would be) unless the
// operator lets the agent use the network (issue 32, finding 9).
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
		{"open", "CONNECTED", 1},
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
