package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/session"
)

// The config's catalog gives configured agents more names; hrns serve lists
// them as read-only agents, and refuses a catalog naming no agent.
func TestServeCatalog(t *testing.T) {
	write := func(content string) string {
		p := filepath.Join(t.TempDir(), "config.toml")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const agent = "[agents.surfer]\ndescription = \"Browses.\"\ntools = [\"web\"]\n"
	for _, tt := range []struct{ name, config, want string }{
		{"unknown agent", agent + "[catalog]\n\"h/web-surfer-flash\" = \"nobody\"\n", `"h/web-surfer-flash" names agent "nobody", which is not defined (agents: h/web, h/web-surfer-holo3-1-35b, h/web-surfer-pro, surfer)`},
		{"an agent's own name", agent + "[catalog]\nsurfer = \"surfer\"\n", `"surfer" is already the name of an agent`},
		{"empty name", agent + "[catalog]\n\"\" = \"surfer\"\n", `"" is not a name`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stderr := runServe(t, nil, "--config", write(tt.config), "--db", "sqlite:"+filepath.Join(t.TempDir(), "h.db"))
			if code != ExitUsage || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, ExitUsage, tt.want)
			}
		})
	}

	s := startServe(t, map[string]string{"OPENAI_API_KEY": "k"}, "--model", "m", "--db", "sqlite:"+filepath.Join(t.TempDir(), "h.db"),
		"--config", write(agent+"[catalog]\n\"h/web-surfer-flash\" = \"surfer\"\n"))
	resp, err := http.Get(s.url + "/api/v2/agents/h/web-surfer-flash")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a struct {
		Name, Description string
		Environments      []string
		ReadOnly          bool `json:"read_only"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET the catalog agent: %d, %v", resp.StatusCode, err)
	}
	if a.Name != "h/web-surfer-flash" || a.Description != "Browses." || len(a.Environments) != 1 || a.Environments[0] != "web" || !a.ReadOnly {
		t.Errorf("catalog agent = %+v", a)
	}
}

// TestServeHCatalog: hrns serve offers H Company's published agent names
// out of the box, each a web surfer on the server's model with the
// browser; the config's catalog maps one to an agent of its own, or takes
// one away with "".
func TestServeHCatalog(t *testing.T) {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<html><body><h1>Order 4242 has shipped</h1></body></html>")
	}))
	defer site.Close()
	model := openaitest.NewServer(
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("call_1", "browser_navigate", fmt.Sprintf(`{"url":%q}`, site.URL))}},
		openaitest.Reply{Text: "It has shipped."},
	)
	defer model.Close()
	config := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(config, []byte("[agents.surfer]\ndescription = \"Browses.\"\ntools = [\"web\"]\n[catalog]\n\"h/web-surfer-pro\" = \"surfer\"\n\"h/web\" = \"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServe(t, map[string]string{"OPENAI_BASE_URL": model.URL(), "OPENAI_API_KEY": "k"},
		"--model", "test-model", "--db", "sqlite:"+filepath.Join(t.TempDir(), "hrns.db"), "--config", config,
		"--browser-allow", site.Listener.Addr().String(), "--browser-profiles", t.TempDir())
	do := func(method, path, body string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, s.url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}

	code, body := do("GET", "/api/v2/agents?size=50", "")
	var page struct {
		Items []struct {
			Name, Description string
			Environments      []string
			ReadOnly          bool `json:"read_only"`
		}
	}
	if err := json.Unmarshal(body, &page); err != nil || code != http.StatusOK {
		t.Fatalf("GET /api/v2/agents: %d %s", code, body)
	}
	got := map[string]string{}
	for _, a := range page.Items {
		if !a.ReadOnly || len(a.Environments) != 1 || a.Environments[0] != "web" {
			t.Errorf("agent %+v: want read-only, with the web environment", a)
		}
		got[a.Name] = a.Description
	}
	for _, name := range []string{"h/web-surfer-flash", "h/web-surfer-holo3-1-35b"} {
		if !strings.Contains(got[name], "hrns's stand-in for") {
			t.Errorf("%s: %q, want the built-in web surfer", name, got[name])
		}
	}
	if got["h/web-surfer-pro"] != "Browses." {
		t.Errorf("h/web-surfer-pro = %q, want the config's surfer", got["h/web-surfer-pro"])
	}
	if _, ok := got["h/web"]; ok {
		t.Error("h/web is listed; the config took it away")
	}

	c := client.New(s.url, "", nil)
	res, err := c.RunSession(t.Context(), &client.SessionRequest{Agent: client.AgentRef{Name: "h/web-surfer-flash"}, Messages: client.Text("Has order 4242 shipped?")})
	if err != nil || res.Status != session.StatusCompleted || res.Answer != "It has shipped." {
		t.Fatalf("%v %+v\n%s", err, res, s.logs.String())
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	first, second := string(reqs[0].Body), string(reqs[1].Body)
	for _, want := range []string{`"model":"test-model"`, "You are h/web-surfer-flash.", "You work on the web", `"name":"browser_navigate"`, `"name":"web_fetch"`} {
		if !strings.Contains(first, want) {
			t.Errorf("the first model request lacks %s:\n%s", want, first)
		}
	}
	if !strings.Contains(second, "Order 4242 has shipped") {
		t.Errorf("the browser's page did not reach the model:\n%s", second)
	}

	for _, tt := range []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/api/v2/sessions", `{"agent":"h/web","messages":"hi"}`, http.StatusUnprocessableEntity},
		{"POST", "/api/v2/agents", `{"name":"h/web-surfer-flash","description":"d","environments":[]}`, http.StatusConflict},
		{"POST", "/api/v2/agents", `{"name":"h/mine","description":"d","environments":[]}`, http.StatusForbidden},
		{"DELETE", "/api/v2/agents/h/web-surfer-flash", "", http.StatusForbidden},
	} {
		if code, body := do(tt.method, tt.path, tt.body); code != tt.status {
			t.Errorf("%s %s %s: %d %s, want %d", tt.method, tt.path, tt.body, code, body, tt.status)
		}
	}
}
