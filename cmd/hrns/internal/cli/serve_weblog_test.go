package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// TestServeLogsWebFetchRefusals: a session's web_fetch of a name that
// resolves to loopback is refused; the model (and so the tenant) reads
// the refusal without the address, and hrns serve's log says which
// session's web_fetch was refused and why, with the address.
func TestServeLogsWebFetchRefusals(t *testing.T) {
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "internal") }))
	defer page.Close()
	port := netip.MustParseAddrPort(page.Listener.Addr().String()).Port()
	fetch, _ := json.Marshal(map[string]string{"url": fmt.Sprintf("http://localhost:%d/status", port)})
	model := openaitest.NewServer(openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c1", "web_fetch", string(fetch))}}, openaitest.Reply{Text: "refused"})
	defer model.Close()
	s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k", "HRNS_API_KEYS": "sk-a"},
		"--model", "test-model", "--db", "sqlite:"+filepath.Join(t.TempDir(), "hrns.db"))
	c := client.New(s.url, "sk-a", nil)
	var env client.Environment
	json.Unmarshal([]byte(`{"kind":"web"}`), &env)
	res, err := c.RunSession(t.Context(), &client.SessionRequest{Agent: client.AgentRef{Inline: &client.Agent{Name: "w", Environments: []client.Environment{env}}}, Messages: client.Text("check")})
	if err != nil || res.Status != session.StatusCompleted {
		t.Fatalf("%v %+v", err, res)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	told := string(reqs[1].Body)
	if !strings.Contains(told, "not on the public internet") || strings.Contains(told, "127.0.0.1") || strings.Contains(told, "::1") {
		t.Errorf("the model's tool result should be the refusal without the address:\n%s", told)
	}
	var line string
	for l := range strings.Lines(s.logs.String()) {
		if strings.Contains(l, "web_fetch: the address policy refused") {
			line = l
		}
	}
	if line == "" || !strings.Contains(line, "session="+res.SessionID) || !strings.Contains(line, "tool=web_fetch") ||
		!(strings.Contains(line, "connection to 127.0.0.1 refused") || strings.Contains(line, "connection to ::1 refused")) {
		t.Errorf("hrns serve's log does not say which session's web_fetch was refused, with the address: %q\n%s", line, s.logs.String())
	}
}
