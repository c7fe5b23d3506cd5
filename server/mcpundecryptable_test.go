package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/platform/vault"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// undecryptableText is what a tenant reads of an MCP server whose stored
// values do not decrypt.
const undecryptableText = "its stored secrets could not be decrypted by this server; an operator must restore the key, or the definition must be saved again"

// mcpHealth is the operator's part of GET /healthz about MCP values.
type mcpHealth struct {
	MCPSecrets *struct {
		SessionsSinceStart *int `json:"undecryptable_sessions_since_start"`
		AtStart            *int `json:"undecryptable_definitions_at_start"`
	} `json:"mcp_secrets"`
}

// TestMCPUndecryptableTenantText: an MCP server's values sealed under key
// A, the server restarted with key B alone. The session's next run leaves
// the server out, and its error_event and the model's note say so in
// fixed words, without the key's id (an operator's detail), while the
// server's log has the full error with the session and the server; GET
// /healthz with an operator key counts the session, and says nothing more
// to a tenant or a load balancer. A start that re-encrypts (keys B and C)
// logs a warning with the count of what it cannot decrypt, and /healthz
// reports it. A new session of a registered environment of A's values
// is refused (422) in the same fixed words. Before, the error_event, the
// note and the 422 carried `key "opkey-A7" missing`, and /healthz had no
// count.
func TestMCPUndecryptableTenantText(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	model := openaitest.NewServer()
	t.Cleanup(model.Close)
	const keyA = "opkey-A7"
	ring := func(spec string) *vault.Keyring {
		k, err := vault.ParseKeys(spec)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	rec := &mcpRecorder{}
	logs := &syncBuffer{}
	serve := func(keys *vault.Keyring, reencrypt bool) (*env, func()) {
		m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, &session.Options{
			Environments: map[string]*loop.Toolset{"web": {}},
			MCPServers:   &session.MCPServerOptions{Mount: rec.mount, Secrets: keys},
			Logger:       slog.New(slog.NewTextHandler(logs, nil)),
		})
		if reencrypt {
			if _, err := m.ReencryptMCPSecrets(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if err := m.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(contractHandler(t, newServer(m, &server.Options{APIKeys: []string{keyAlice}, OperatorKeys: []string{keyOperator}})))
		var once sync.Once
		stop := func() {
			once.Do(func() {
				srv.Close()
				m.Stop(context.Background())
			})
		}
		t.Cleanup(stop)
		return &env{t: t, model: model, url: srv.URL, st: st}, stop
	}
	operatorHealth := func(e *env) mcpHealth {
		t.Helper()
		for _, key := range []string{"", keyAlice} {
			healthOf(e, key) // the status alone
		}
		var h mcpHealth
		r := e.do("GET", "/healthz", keyOperator, nil)
		r.json(&h)
		if r.status != http.StatusOK || h.MCPSecrets == nil || h.MCPSecrets.SessionsSinceStart == nil {
			t.Fatalf("GET /healthz with the operator key: %d %s", r.status, r.body)
		}
		if bytes.Contains(r.body, []byte(keyA)) || bytes.Contains(r.body, []byte("tok-secret")) {
			t.Errorf("GET /healthz names a key or a value: %s", r.body)
		}
		return h
	}

	e, stop := serve(ring(keyA+":"+testKey(1)), false)
	e.call("POST", "/api/v2/environments", keyAlice, `{"id":"tooled","kind":"web","mcp_servers":[`+remoteServer("envsrv", "X-Env", "env-secret")+`]}`, http.StatusCreated, "Environment")
	model.Push(openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c1", "ask", `{}`)}})
	id := e.create(keyAlice, `{"agent":`+askAgent("X-Token", "tok-secret")+`,"messages":"x"}`)
	e.follow(keyAlice, id).status(session.StatusAwaitingToolResults)
	stop()

	// Key A dropped too early: key B alone.
	e, stop = serve(ring("opkey-B9:"+testKey(2)), false)
	if h := operatorHealth(e); *h.MCPSecrets.SessionsSinceStart != 0 || h.MCPSecrets.AtStart != nil {
		t.Errorf("/healthz before any run: %+v", *h.MCPSecrets)
	}
	// A new session of a registered environment of A's values is
	// refused, without naming the key.
	r := e.call("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":["tooled"]},"messages":"x"}`, http.StatusUnprocessableEntity, "")
	if !bytes.Contains(r.body, []byte(undecryptableText)) || bytes.Contains(r.body, []byte(keyA)) {
		t.Errorf("a session of a registered environment of A's values: %s", r.body)
	}
	model.Push(openaitest.Reply{Text: "done"})
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/tool_results", keyAlice, askResult), http.StatusAccepted)
	f := e.follow(keyAlice, id)
	f.status(session.StatusCompleted)
	var errs []string
	for _, ev := range f.events {
		var d struct{ Kind, Origin, Error string }
		if json.Unmarshal(ev.Data, &d) == nil && d.Kind == "error_event" && d.Origin == "mcp" {
			errs = append(errs, d.Error)
		}
	}
	want := `MCP server "srv" is not available in this run, which goes on without its tools (srv__*): ` + undecryptableText
	if len(errs) != 1 || errs[0] != want {
		t.Errorf("the error_events of origin mcp: %q, want [%q]", errs, want)
	}
	if strings.Contains(f.dump(), keyA) {
		t.Errorf("the session's events name the key %s:\n%s", keyA, f.dump())
	}
	reqs := model.Requests()
	last := reqs[len(reqs)-1].Body
	if !bytes.Contains(last, []byte("srv (tools srv__*): "+undecryptableText)) || bytes.Contains(last, []byte(keyA)) {
		t.Errorf("the model's note: %s", last)
	}
	if r := e.call("GET", "/api/v2/sessions/"+id, keyAlice, nil, http.StatusOK, ""); bytes.Contains(r.body, []byte(keyA)) {
		t.Errorf("the session names the key: %s", r.body)
	}
	line := ""
	for l := range strings.SplitSeq(string(logs.Bytes()), "\n") {
		if strings.Contains(l, "left out of a run") {
			line = l
		}
	}
	if !strings.Contains(line, "session="+id) || !strings.Contains(line, "server=srv") || !strings.Contains(line, `key \"`+keyA+`\" missing`) || strings.Contains(line, "tok-secret") {
		t.Errorf("the server's log has no detail of the server left out: %q\n%s", line, logs.Bytes())
	}
	if h := operatorHealth(e); *h.MCPSecrets.SessionsSinceStart != 1 || h.MCPSecrets.AtStart != nil {
		t.Errorf("/healthz after the run: %+v", *h.MCPSecrets)
	}
	stop()

	// A rotation to C, B kept: the start's re-encryption meets the
	// values of A (the environment's, the session's request and state),
	// says how many, and /healthz counts the two definitions.
	e, _ = serve(ring("opkey-C3:"+testKey(3)+"\nopkey-B9:"+testKey(2)), true)
	if !strings.Contains(string(logs.Bytes()), `level=WARN msg="MCP secrets re-encryption: values cannot be decrypted with the configured keys; their servers are left out of runs" values=3 definitions=2`) {
		t.Errorf("no warning with the count at start:\n%s", logs.Bytes())
	}
	if h := operatorHealth(e); *h.MCPSecrets.SessionsSinceStart != 0 || h.MCPSecrets.AtStart == nil || *h.MCPSecrets.AtStart != 2 {
		t.Errorf("/healthz after a start that re-encrypted: %+v", *h.MCPSecrets)
	}
}
