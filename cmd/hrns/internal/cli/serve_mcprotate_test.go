package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/mcp"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
)

// TestServeMCPSecretsRotation follows the documented rotation for the
// MCP servers' secrets: a registered environment whose server's header
// is sealed under k1; k2 added as primary: the start re-encrypts it and
// says so; k1 dropped: a session of the environment reaches the MCP
// server (over loopback) with the header; k1 and k3, without k2: the
// start says how many values cannot be decrypted. On SQLite and
// PostgreSQL.
func TestServeMCPSecretsRotation(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			dsn := "sqlite:" + filepath.Join(t.TempDir(), "h.db")
			if db == "postgres" {
				dsn = postgrestest.DSN(t)
			}
			serveMCPRotation(t, dsn)
		})
	}
}

func serveMCPRotation(t *testing.T, db string) {
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
	model := openaitest.NewServer()
	defer model.Close()
	env := func(keys string) map[string]string {
		return map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k", vaultKeyEnv: keys}
	}
	args := []string{"--model", "m", "--db", db, "--mcp-allow", "127.0.0.1"}

	// Each step in a subtest: its server stops at the subtest's end.
	t.Run("k1", func(t *testing.T) {
		s := startServe(t, env(testVaultKey1), args...)
		c := &apiClient{t: t, url: s.url}
		if code, b := c.do("POST", "/api/v2/environments", `{"id":"tooled","kind":"web","mcp_servers":[
			{"name":"remote","transport":"streamable_http","url":"`+mcpSrv.URL+`/","headers":{"Authorization":"Bearer rotated-secret"}}]}`); code != http.StatusCreated {
			t.Fatalf("register: %d %s", code, b)
		}
	})
	t.Run("k2 added", func(t *testing.T) {
		s := startServe(t, env(testVaultKey2+","+testVaultKey1), args...)
		if want := "1 MCP server values re-encrypted under key k2 (0 sessions, 1 registered agents and environments, 0 schedules)"; !strings.Contains(s.logs.String(), want) {
			t.Errorf("the rotation's start does not say %q:\n%s", want, s.logs.String())
		}
	})
	t.Run("k1 dropped", func(t *testing.T) {
		s := startServe(t, env(testVaultKey2), args...)
		if strings.Contains(s.logs.String(), "MCP server values") {
			t.Errorf("the start without k1 re-encrypted or failed some:\n%s", s.logs.String())
		}
		model.Push(openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c1", "remote__echo", `{"text":"hi"}`)}}, openaitest.Reply{Text: "done"})
		c := &apiClient{t: t, url: s.url}
		id := c.create(`{"agent":{"name":"a","environments":["tooled"]},"messages":"Echo."}`)
		if status, events := c.wait(id); status != "completed" {
			t.Fatalf("session %s\n%s", status, events)
		}
		if reqs := model.Requests(); len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), "echoed:hi") {
			t.Errorf("the MCP tool was not called")
		}
		if !strings.Contains(auth.String(), "Bearer rotated-secret") {
			t.Errorf("the MCP server did not get the header: %q", auth.String())
		}
	})
	t.Run("k1 alone again", func(t *testing.T) {
		// With a single key, the start does not look for values of
		// others: none could be re-encrypted.
		s := startServe(t, env(testVaultKey1), args...)
		if strings.Contains(s.logs.String(), "MCP server values") {
			t.Errorf("the start with a single key looked for values of others:\n%s", s.logs.String())
		}
	})
	t.Run("k1 and k3", func(t *testing.T) {
		// The environment's value and the session's (in its state),
		// under k2, which neither key is.
		s := startServe(t, env(testVaultKey1+",k3:Y2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2M="), args...)
		if want := "2 MCP server values (in 2 sessions, registered agents and environments or schedules) cannot be decrypted with the configured keys"; !strings.Contains(s.logs.String(), want) {
			t.Errorf("the start with k1 alone does not say %q:\n%s", want, s.logs.String())
		}
	})
}
