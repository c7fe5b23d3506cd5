package server_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/api"
	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/platform/schedule"
	"github.com/hrns-dev/hrns/platform/vault"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// TestMCPServersNotEnabled: a server without Options.MCPServers refuses a
// session whose environment names MCP servers, at the server's entry,
// rather than keep them and ignore them; an empty list is accepted, and
// the registries keep environments and agents that name servers (those
// giving env or headers values only with a key to encrypt them: see
// TestMCPSecretsRefusedWithoutKeys).
func TestMCPServersNotEnabled(t *testing.T) {
	e := regEnv(t, openaitest.Reply{Text: "ok"})
	mcp := `"mcp_servers":[{"name":"fs","transport":"stdio","command":"mcp-fs","env":{"K":"secret-env"}}]`
	r := e.call("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":[{"kind":"web",`+mcp+`}]},"messages":"x"}`, http.StatusUnprocessableEntity, "")
	if !hasDetail(r.body, "body.agent.environments.0.mcp_servers.0", "this server does not connect sessions to MCP servers") {
		t.Errorf("%s", r.body)
	}
	e.create(keyAlice, `{"agent":{"name":"a","environments":[{"kind":"web","mcp_servers":[]}]},"messages":"x"}`)
	r = e.call("POST", "/api/v2/environments", keyAlice, `{"id":"tools","kind":"web",`+mcp+`}`, http.StatusUnprocessableEntity, "")
	if strings.Contains(string(r.body), "secret-env") || !hasDetail(r.body, "body.mcp_servers.fs.env.K", "no key to encrypt them at rest") {
		t.Errorf("an environment with a secret and no key: %s", r.body)
	}
	plain := strings.ReplaceAll(mcp, `,"env":{"K":"secret-env"}`, "")
	e.call("POST", "/api/v2/environments", keyAlice, `{"id":"tools","kind":"web",`+plain+`}`, http.StatusCreated, "Environment")
	e.call("POST", "/api/v2/agents", keyAlice, `{"name":"tooled","description":"d","environments":[{"id":"w","kind":"web",`+plain+`}]}`, http.StatusCreated, "Agent")
}

// TestMCPServerValidation: the shape of McpServer (H's SDK model), in the
// reference's 422 shape, where an environment is given: inline in a
// session's agent, registered, and inline in a registered agent.
func TestMCPServerValidation(t *testing.T) {
	e := regEnv(t)
	long := strings.Repeat("a", 5000)
	for _, tt := range []struct {
		servers, loc, msg string
	}{
		{`{"transport":"stdio","command":"x"}`, "0.name", "Field required"},
		{`{"name":"a b","transport":"stdio","command":"x"}`, "0.name", "1 to 32 letters"},
		{`{"name":"a__b","transport":"stdio","command":"x"}`, "0.name", "must not contain '__'"},
		{`{"name":"a"}`, "0.transport", "Field required"},
		{`{"name":"a","transport":"websocket","url":"wss://x"}`, "0.transport", "'stdio', 'streamable_http' or 'sse'"},
		{`{"name":"a","transport":"stdio"}`, "0.command", "Field required"},
		{`{"name":"a","transport":"stdio","command":"x","url":"https://x"}`, "0.url", "not a field of the stdio transport"},
		{`{"name":"a","transport":"stdio","command":"x","headers":{"A":"b"}}`, "0.headers", "not a field of the stdio transport"},
		{`{"name":"a","transport":"stdio","command":"` + long + `"}`, "0.command", "at most 4096 bytes"},
		{`{"name":"a","transport":"stdio","command":"x","env":{"1BAD":"v"}}`, "0.env", "a variable's name"},
		{`{"name":"a","transport":"stdio","command":"x","args":["` + strings.Repeat(`a","`, 70) + `a"]}`, "0.args", "at most 64 arguments"},
		{`{"name":"a","transport":"streamable_http"}`, "0.url", "Field required"},
		{`{"name":"a","transport":"sse","url":"ftp://x"}`, "0.url", "http or https URL"},
		{`{"name":"a","transport":"sse","url":"https://u:p@x"}`, "0.url", "must not carry credentials"},
		{`{"name":"a","transport":"streamable_http","url":"https://x","command":"y"}`, "0.command", "not a field of the streamable_http transport"},
		{`{"name":"a","transport":"streamable_http","url":"https://x","headers":{"Host":"y"}}`, "0.headers", "header Host is set by the MCP client"},
		{`{"name":"a","transport":"streamable_http","url":"https://x","headers":{"X":"a\r\nb"}}`, "0.headers", "without control characters"},
		{`{"name":"a","transport":"sse","url":"https://x"},{"name":"a","transport":"sse","url":"https://y"}`, "1.name", "must be unique"},
		{`{"name":"a","transport":"stdio","command":7}`, "0.command", "Input should be"},
		{strings.TrimSuffix(strings.Repeat(`{"name":"a","transport":"sse","url":"https://x"},`, 17), ","), "", "at most 16 MCP servers"},
	} {
		for _, place := range []struct{ method, path, body, loc string }{
			{"POST", "/api/v2/sessions", `{"agent":{"name":"a","environments":[{"kind":"web","mcp_servers":[` + tt.servers + `]}]},"messages":"x"}`, "body.agent.environments.0.mcp_servers"},
			{"POST", "/api/v2/environments", `{"id":"e","kind":"web","mcp_servers":[` + tt.servers + `]}`, "body.mcp_servers"},
			{"POST", "/api/v2/agents", `{"name":"g","description":"d","environments":[{"id":"w","kind":"workstation","mcp_servers":[` + tt.servers + `]}]}`, "body.environments.0.mcp_servers"},
		} {
			// The registries' decoding of a wrong type names the field
			// without the entry's index.
			if strings.Contains(tt.servers, `"command":7`) && place.path != "/api/v2/sessions" {
				continue
			}
			loc := place.loc
			if tt.loc != "" {
				loc += "." + tt.loc
			}
			r := e.call(place.method, place.path, keyAlice, place.body, http.StatusUnprocessableEntity, "")
			if !hasDetail(r.body, loc, tt.msg) {
				t.Errorf("%s %s with %.200s: %s\nwant %q at %s", place.method, place.path, tt.servers, r.body, tt.msg, loc)
			}
		}
	}
}

// TestMCPServersMounted: with Options.MCPServers, a session's run gets the
// tools Mount gives for the servers of its environments (inline or
// registered), Mount gets their env and headers while the session's view
// shows them redacted (a registered environment read back and PUT keeps
// them; a redacted value given anew is refused); the operator's Check
// refuses at creation; a client tool named like a server's tools is
// refused; the tools end with the run.
func TestMCPServersMounted(t *testing.T) {
	var (
		mu     sync.Mutex
		got    []session.MCPServer
		closed int
	)
	keys, err := vault.ParseKeys("k1:" + base64.StdEncoding.EncodeToString(make([]byte, 32)))
	if err != nil {
		t.Fatal(err)
	}
	opts := &session.MCPServerOptions{
		Secrets: keys,
		Check: func(s *session.MCPServer) error {
			if s.Transport == api.MCPStdio {
				return errors.New("stdio servers are off here")
			}
			return nil
		},
		Mount: func(_ context.Context, p *session.MCPParams) (*loop.Toolset, func(), error) {
			mu.Lock()
			got = append(got, p.Servers...)
			mu.Unlock()
			ts := &loop.Toolset{}
			for _, s := range p.Servers {
				ts.Add(&loop.ToolDef{Name: s.Name + "__echo", Description: "echo",
					Handler: func(context.Context, *loop.Call) (*loop.Output, error) {
						return loop.TextOutput("echo-from-" + s.Name), nil
					}})
			}
			return ts, func() { mu.Lock(); closed++; mu.Unlock() }, nil
		},
	}
	e := newEnv(t, &envOptions{session: &session.Options{Environments: map[string]*loop.Toolset{"web": {}}, MCPServers: opts}},
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c1", "remote__echo", `{}`)}},
		openaitest.Reply{Text: "done"})
	server := `{"name":"remote","transport":"streamable_http","url":"https://mcp.example/mcp","headers":{"Authorization":"Bearer hdr-secret"}}`
	e.call("POST", "/api/v2/environments", keyAlice, `{"id":"tooled","kind":"web","mcp_servers":[`+server+`]}`, http.StatusCreated, "Environment")
	// What GET shows (redacted), sent back to PUT, keeps the secrets.
	shown := e.call("GET", "/api/v2/environments/tooled", keyAlice, nil, http.StatusOK, "Environment").body
	if !strings.Contains(string(shown), `"Authorization":"[redacted]"`) {
		t.Fatalf("GET shows %s", shown)
	}
	e.call("PUT", "/api/v2/environments/tooled", keyAlice, string(shown), http.StatusOK, "Environment")
	r := e.call("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":["tooled"]},"messages":"x"}`, http.StatusCreated, "")
	var v struct{ ID string }
	r.json(&v)
	e.follow(keyAlice, v.ID).status(session.StatusCompleted)
	reqs := e.model.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[0].Body), `"name":"remote__echo"`) || !strings.Contains(string(reqs[1].Body), "echo-from-remote") {
		t.Fatalf("the run did not get and call the server's tools: %d requests", len(reqs))
	}
	// The run closes its servers when it stops, after the commit that
	// ends the session.
	for i := 0; ; i++ {
		mu.Lock()
		n := closed
		mu.Unlock()
		if n == 1 || i == 500 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	if len(got) != 1 || got[0].Headers["Authorization"] != "Bearer hdr-secret" || closed != 1 {
		t.Errorf("Mount got %+v, closed %d times", got, closed)
	}
	mu.Unlock()
	view := e.call("GET", "/api/v2/sessions/"+v.ID, keyAlice, nil, http.StatusOK, "")
	if strings.Contains(string(view.body), "hdr-secret") {
		t.Errorf("the session's view shows the headers: %s", view.body)
	}
	inline := e.call("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":[{"kind":"web","mcp_servers":[`+server+`]}]},"messages":"x"}`, http.StatusCreated, "")
	if strings.Contains(string(inline.body), "hdr-secret") || !strings.Contains(string(inline.body), `"Authorization":"[redacted]"`) {
		t.Errorf("the created session's view: %s", inline.body)
	}
	r = e.call("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":[{"kind":"web","mcp_servers":[{"name":"fs","transport":"stdio","command":"x"}]}]},"messages":"x"}`, http.StatusUnprocessableEntity, "")
	if !hasDetail(r.body, "body.agent.environments.0.mcp_servers.0", "stdio servers are off here") {
		t.Errorf("Check's refusal: %s", r.body)
	}
	r = e.call("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":[{"kind":"web","mcp_servers":[`+strings.ReplaceAll(server, "Bearer hdr-secret", "[redacted]")+`]}]},"messages":"x"}`, http.StatusUnprocessableEntity, "")
	if !hasDetail(r.body, "body.agent.environments.0.mcp_servers.0.headers", `give the value itself`) {
		t.Errorf("a redacted value given: %s", r.body)
	}
	r = e.call("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":["tooled"],"tools":[{"name":"remote__mine","description":"d"}]},"messages":"x"}`, http.StatusUnprocessableEntity, "")
	if !hasDetail(r.body, "body.agent.tools.0.name", `named like the tools of the environment's MCP server "remote"`) {
		t.Errorf("a client tool in the server's namespace: %s", r.body)
	}
}

// TestMCPServersRedactedElsewhere: a schedule's session template shows
// its servers' headers redacted, and an override cannot set an
// environment's mcp_servers (it would bypass their validation).
func TestMCPServersRedactedElsewhere(t *testing.T) {
	model := openaitest.NewServer()
	t.Cleanup(model.Close)
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	mount := func(context.Context, *session.MCPParams) (*loop.Toolset, func(), error) {
		return &loop.Toolset{}, func() {}, nil
	}
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, &session.Options{
		Environments: map[string]*loop.Toolset{"web": {}},
		MCPServers:   &session.MCPServerOptions{Mount: mount, PlaintextSecrets: true},
	})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	sch := schedule.New(m, st, &schedule.Options{Owner: "replica-1"})
	srv := httptest.NewServer(contractHandler(t, newServer(m, &server.Options{APIKeys: []string{keyAlice}, Schedules: sch})))
	t.Cleanup(func() {
		srv.Close()
		m.Stop(context.Background())
	})
	e := &env{t: t, model: model, url: srv.URL, st: st}
	server := `{"name":"remote","transport":"sse","url":"https://mcp.example/sse","headers":{"X-Key":"hdr-secret"}}`
	body := `{"name":"nightly","timing":{"type":"cron","expression":"0 9 * * *","timezone":"UTC"},
		"session_request":{"agent":{"name":"a","environments":[{"kind":"web","mcp_servers":[` + server + `]}]},"messages":"x"}}`
	r := e.expect(e.do("POST", "/api/v2/schedules", keyAlice, body), http.StatusCreated)
	var sc struct{ ID string }
	r.json(&sc)
	for _, b := range [][]byte{r.body, e.expect(e.do("GET", "/api/v2/schedules/"+sc.ID, keyAlice, nil), http.StatusOK).body} {
		if strings.Contains(string(b), "hdr-secret") || !strings.Contains(string(b), `"X-Key":"[redacted]"`) {
			t.Errorf("the schedule's template: %s", b)
		}
	}
	r = e.call("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":[{"kind":"web"}]},"messages":"x",
		"overrides":{"agent.environments[kind=web].mcp_servers":[`+server+`]}}`, http.StatusUnprocessableEntity, "")
	if !hasDetail(r.body, "body.overrides.agent.environments[kind=web].mcp_servers", "cannot be overridden") {
		t.Errorf("an override of mcp_servers: %s", r.body)
	}
}
