package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/platform/schedule"
	"github.com/hrns-dev/hrns/platform/vault"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/postgres"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// mcpRecorder is a Mount that records the servers it gets, gives each an
// echo tool, and reports the servers named in down as unreachable (twice,
// to show the session reports each once).
type mcpRecorder struct {
	mu   sync.Mutex
	got  []session.MCPServer
	down map[string]bool
}

func (r *mcpRecorder) mount(_ context.Context, p *session.MCPParams) (*loop.Toolset, func(), error) {
	r.mu.Lock()
	r.got = append(r.got, p.Servers...)
	r.mu.Unlock()
	ts := &loop.Toolset{}
	for _, s := range p.Servers {
		if r.down[s.Name] {
			// Whatever Mount says, the session leaves out the server's
			// secrets and its URL's query.
			p.Unreachable(s.Name, fmt.Errorf("dial tcp 127.0.0.1:9: connect: connection refused (headers %v, url %s)", s.Headers, *s.URL))
			p.Unreachable(s.Name, errors.New("again"))
			continue
		}
		ts.Add(&loop.ToolDef{Name: s.Name + "__echo", Description: "echo",
			Handler: func(context.Context, *loop.Call) (*loop.Output, error) { return loop.TextOutput("echo"), nil }})
	}
	return ts, func() {}, nil
}

// values returns the env and header values Mount got, by name.
func (r *mcpRecorder) values() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]string{}
	for _, s := range r.got {
		for k, v := range s.Env {
			out[k] = v
		}
		for k, v := range s.Headers {
			out[k] = v
		}
	}
	return out
}

// mcpServe serves a manager of st with opts (and schedules) until the
// returned func stops it.
func mcpServe(t *testing.T, st store.Store, model *openaitest.Server, opts *session.MCPServerOptions, workspaces ...string) (*env, func()) {
	t.Helper()
	return mcpServeAfter(t, st, model, opts, nil, workspaces...)
}

// mcpServeAfter is mcpServe that calls before with the manager before it
// starts (as hrns serve re-encrypts at start).
func mcpServeAfter(t *testing.T, st store.Store, model *openaitest.Server, opts *session.MCPServerOptions, before func(*session.Manager), workspaces ...string) (*env, func()) {
	t.Helper()
	so := &session.Options{
		Environments: map[string]*loop.Toolset{"web": {}},
		MCPServers:   opts,
	}
	if len(workspaces) > 0 {
		so.Workspaces = workspaces[0]
	}
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, so)
	if before != nil {
		before(m)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	sch := schedule.New(m, st, &schedule.Options{Owner: "replica-1"})
	srv := httptest.NewServer(contractHandler(t, newServer(m, &server.Options{APIKeys: []string{keyAlice, keyBob}, Schedules: sch})))
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

func testKey(b byte) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32)) }

// dbBytes is what the SQLite database in dir holds on disk: its file and
// its write-ahead log.
func dbBytes(t *testing.T, dir string) []byte {
	t.Helper()
	var all []byte
	for _, f := range []string{"hrns.db", "hrns.db-wal", "hrns.db-journal"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// TestMCPSecretsEncryptedAtRest: with a keyring, the env and headers
// values of MCP servers are in no byte of the SQLite database (sessions'
// requests and states, registered environments and agents, schedules'
// templates), yet Mount gets them; a sealed value is bound to its owner
// (another key giving it is refused) and, after a rotation, values the
// old key sealed still open while it is in the keyring.
func TestMCPSecretsEncryptedAtRest(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	mcpSecretsAtRest(t, st, func() []byte { return dbBytes(t, dir) })
}

// TestMCPSecretsEncryptedAtRestPostgres is TestMCPSecretsEncryptedAtRest
// on PostgreSQL, whose rows pg_dump reads.
func TestMCPSecretsEncryptedAtRestPostgres(t *testing.T) {
	dsn := postgrestest.DSN(t)
	pgDump, err := exec.LookPath("pg_dump")
	if err != nil {
		t.Skip("pg_dump is not installed")
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	schema := u.Query().Get("search_path")
	q := u.Query()
	q.Del("search_path")
	u.RawQuery = q.Encode()
	st, err := postgres.Open(t.Context(), dsn, &postgres.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	mcpSecretsAtRest(t, st, func() []byte {
		out, err := exec.CommandContext(t.Context(), pgDump, "--data-only", "--schema="+schema, u.String()).Output()
		if err != nil || !bytes.Contains(out, []byte("COPY")) {
			t.Fatalf("pg_dump: %v: %.500s", err, out)
		}
		// bytea columns (states, specs) are dumped in hex.
		for _, m := range regexp.MustCompile(`\\\\x([0-9a-f]+)`).FindAllSubmatch(out, -1) {
			b, err := hex.DecodeString(string(m[1]))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b...)
		}
		return out
	})
}

// mcpSecretsAtRest runs the secrets-at-rest scenario on st, whose bytes
// dump returns.
func mcpSecretsAtRest(t *testing.T, st store.Store, dump func() []byte) {
	const (
		envSecret    = "env-secret-Q7XK2"
		hdrSecret    = "Bearer hdr-secret-W9PL4"
		agentSecret  = "agent-secret-M3ZT8"
		schedSecret  = "sched-secret-R5VN1"
		inlineSecret = "inline-secret-J6HD3"
		subSecret    = "sub-secret-C8FB2"
	)
	secrets := []string{envSecret, "hdr-secret-W9PL4", agentSecret, schedSecret, inlineSecret, subSecret}
	model := openaitest.NewServer()
	t.Cleanup(model.Close)
	old, err := vault.ParseKeys("old:" + testKey(1))
	if err != nil {
		t.Fatal(err)
	}
	rec := &mcpRecorder{}
	e, stop := mcpServe(t, st, model, &session.MCPServerOptions{Mount: rec.mount, Secrets: old})

	stdio := `{"name":"fs","transport":"stdio","command":"mcp-fs","env":{"TOKEN":"` + envSecret + `"}}`
	remote := func(h, v string) string {
		return `{"name":"remote","transport":"streamable_http","url":"https://mcp.example/mcp","headers":{"` + h + `":"` + v + `"}}`
	}
	e.call("POST", "/api/v2/environments", keyAlice, `{"id":"tooled","kind":"web","mcp_servers":[`+stdio+`,`+remote("Authorization", hdrSecret)+`]}`, http.StatusCreated, "Environment")
	// Read back (redacted) and sent again: the sealed values are kept.
	shown := e.call("GET", "/api/v2/environments/tooled", keyAlice, nil, http.StatusOK, "Environment").body
	e.call("PUT", "/api/v2/environments/tooled", keyAlice, string(shown), http.StatusOK, "Environment")
	e.call("POST", "/api/v2/agents", keyAlice, `{"name":"ag","description":"d","environments":[{"id":"w","kind":"web","mcp_servers":[`+remote("X-Agent", agentSecret)+`]}]}`, http.StatusCreated, "Agent")
	e.expect(e.do("POST", "/api/v2/schedules", keyAlice, `{"name":"nightly","timing":{"type":"cron","expression":"0 9 * * *","timezone":"UTC"},
		"session_request":{"agent":{"name":"a","environments":[{"kind":"web","mcp_servers":[`+remote("X-Sched", schedSecret)+`]}]},"messages":"x"}}`), http.StatusCreated)

	model.Push(openaitest.Reply{Text: "one"}, openaitest.Reply{Text: "two"}, openaitest.Reply{Text: "three"})
	for _, body := range []string{
		`{"agent":{"name":"a","environments":["tooled"]},"messages":"x"}`,
		`{"agent":"ag","messages":"x"}`,
		`{"agent":{"name":"a","environments":[{"kind":"web","mcp_servers":[` + remote("X-Inline", inlineSecret) + `]}]},"messages":"x"}`,
	} {
		id := e.create(keyAlice, body)
		e.follow(keyAlice, id).status(session.StatusCompleted)
	}
	// A subagent's servers: its definition is kept in the parent's state,
	// sealed for the owner, and sealed again for the child session.
	model.Push(openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("d1", "delegate", `{"agent":"helper","task":"t"}`)}},
		openaitest.Reply{Text: "child"}, openaitest.Reply{Text: "parent"})
	id := e.create(keyAlice, `{"agent":{"name":"boss","environments":[],"subagents":[{"name":"helper","description":"d","environments":[{"kind":"web","mcp_servers":[`+remote("X-Sub", subSecret)+`]}]}]},"messages":"x"}`)
	e.follow(keyAlice, id).status(session.StatusCompleted)
	got := rec.values()
	for k, want := range map[string]string{"TOKEN": envSecret, "Authorization": hdrSecret, "X-Agent": agentSecret, "X-Inline": inlineSecret, "X-Sub": subSecret} {
		if got[k] != want {
			t.Errorf("Mount got %s = %q, want %q", k, got[k], want)
		}
	}
	db := dump()
	for _, s := range secrets {
		if bytes.Contains(db, []byte(s)) {
			t.Errorf("the database holds %q in clear", s)
		}
	}
	sealed := regexp.MustCompile(`hrns-sealed:v1:old:[A-Za-z0-9_-]+`).FindAll(db, -1)
	if len(sealed) < 5 {
		t.Fatalf("the database holds %d sealed values", len(sealed))
	}

	// Another key cannot use a ciphertext of Alice's.
	r := e.call("POST", "/api/v2/sessions", keyBob, `{"agent":{"name":"a","environments":[{"kind":"web","mcp_servers":[`+remote("Authorization", string(sealed[0]))+`]}]},"messages":"x"}`, http.StatusUnprocessableEntity, "")
	if !strings.Contains(string(r.body), "stored secrets could not be decrypted") {
		t.Errorf("Bob giving Alice's ciphertext: %s", r.body)
	}

	// A rotation: the new key first, the old one still there.
	stop()
	keys, err := vault.ParseKeys("new:" + testKey(2) + "\nold:" + testKey(1))
	if err != nil {
		t.Fatal(err)
	}
	rec2 := &mcpRecorder{}
	e, stop = mcpServe(t, st, model, &session.MCPServerOptions{Mount: rec2.mount, Secrets: keys})
	model.Push(openaitest.Reply{Text: "four"})
	id = e.create(keyAlice, `{"agent":{"name":"a","environments":["tooled"]},"messages":"x"}`)
	e.follow(keyAlice, id).status(session.StatusCompleted)
	if got := rec2.values(); got["TOKEN"] != envSecret || got["Authorization"] != hdrSecret {
		t.Errorf("after the rotation, Mount got %v", got)
	}
	if db := dump(); !regexp.MustCompile(`hrns-sealed:v1:new:`).Match(db) || bytes.Contains(db, []byte(envSecret)) {
		t.Errorf("the new session's secrets are not sealed with the new key")
	}
	stop()

	// Without the old key, what it sealed is refused, saying why.
	newOnly, err := vault.ParseKeys("new:" + testKey(2))
	if err != nil {
		t.Fatal(err)
	}
	e, _ = mcpServe(t, st, model, &session.MCPServerOptions{Mount: rec2.mount, Secrets: newOnly})
	r = e.call("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":["tooled"]},"messages":"x"}`, http.StatusUnprocessableEntity, "")
	if !strings.Contains(string(r.body), "stored secrets could not be decrypted") || strings.Contains(string(r.body), `\"old\"`) {
		t.Errorf("a session of values sealed by a key dropped: %s", r.body)
	}
}

// TestMCPSecretsRefusedWithoutKeys: without a keyring, a definition
// giving env or headers values is refused wherever it would be stored,
// unless the operator allows plaintext; one without values is accepted.
func TestMCPSecretsRefusedWithoutKeys(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	model := openaitest.NewServer()
	t.Cleanup(model.Close)
	rec := &mcpRecorder{}
	workspaces := t.TempDir()
	e, stop := mcpServe(t, st, model, &session.MCPServerOptions{Mount: rec.mount}, workspaces)
	server := `{"name":"remote","transport":"sse","url":"https://mcp.example/sse","headers":{"X-Key":"plain-secret"}}`
	req := `{"agent":{"name":"a","environments":[{"kind":"web","mcp_servers":[` + server + `]}]},"messages":"x"}`
	withFile := strings.Replace(req, `"messages":"x"`, `"messages":{"message":"x","files":[{"source":"aGVsbG8=","name":"in.txt"}]}`, 1)
	for _, c := range []struct{ path, body string }{
		{"/api/v2/sessions", req},
		{"/api/v2/sessions", withFile},
		{"/api/v2/environments", `{"id":"e","kind":"web","mcp_servers":[` + server + `]}`},
		{"/api/v2/agents", `{"name":"ag","description":"d","environments":[{"id":"w","kind":"web","mcp_servers":[` + server + `]}]}`},
		{"/api/v2/schedules", `{"name":"n","timing":{"type":"cron","expression":"0 9 * * *","timezone":"UTC"},"session_request":` + req + `}`},
	} {
		r := e.expect(e.do("POST", c.path, keyAlice, c.body), http.StatusUnprocessableEntity)
		if !strings.Contains(string(r.body), "no key to encrypt them at rest") || strings.Contains(string(r.body), "plain-secret") {
			t.Errorf("POST %s: %s", c.path, r.body)
		}
	}
	if bytes.Contains(dbBytes(t, dir), []byte("plain-secret")) {
		t.Errorf("a refused secret was stored")
	}
	if left, _ := os.ReadDir(workspaces); len(left) > 0 {
		t.Errorf("a refused session left its files: %v", left)
	}
	model.Push(openaitest.Reply{Text: "ok"})
	id := e.create(keyAlice, `{"agent":{"name":"a","environments":[{"kind":"web","mcp_servers":[{"name":"open","transport":"sse","url":"https://mcp.example/sse"}]}]},"messages":"x"}`)
	e.follow(keyAlice, id).status(session.StatusCompleted)
	stop()

	e, _ = mcpServe(t, st, model, &session.MCPServerOptions{Mount: rec.mount, PlaintextSecrets: true})
	model.Push(openaitest.Reply{Text: "ok"})
	id = e.create(keyAlice, req)
	e.follow(keyAlice, id).status(session.StatusCompleted)
	if rec.values()["X-Key"] != "plain-secret" {
		t.Errorf("Mount got %v", rec.values())
	}
}

// TestMCPServerUnreachableReported: a server Mount leaves out, or whose
// secrets no longer decrypt, is told to the caller (one error_event with
// origin "mcp" per server and run, naming it and why, without its
// secrets) and to the model (a note in the run's input), and the run goes
// on with the other servers' tools.
func TestMCPServerUnreachableReported(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	model := openaitest.NewServer()
	t.Cleanup(model.Close)
	keys, err := vault.ParseKeys("k1:" + testKey(3))
	if err != nil {
		t.Fatal(err)
	}
	rec := &mcpRecorder{down: map[string]bool{"down": true}}
	e, stop := mcpServe(t, st, model, &session.MCPServerOptions{Mount: rec.mount, Secrets: keys})
	body := `{"agent":{"name":"a","tools":[{"name":"ask","description":"asks the user"}],"environments":[{"kind":"web","mcp_servers":[
		{"name":"up","transport":"streamable_http","url":"https://up.example/mcp","headers":{"X-Up":"up-secret"}},
		{"name":"down","transport":"streamable_http","url":"https://down.example/mcp?token=query-secret","headers":{"X-Down":"down-secret"}}]}]},"messages":"x"}`
	model.Push(openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c1", "ask", `{}`)}})
	id := e.create(keyAlice, body)
	f := e.follow(keyAlice, id)
	f.status(session.StatusAwaitingToolResults)
	mcpErrors := func(f *follower) []string {
		var out []string
		for _, ev := range f.events {
			var d struct{ Kind, Origin, Error string }
			if json.Unmarshal(ev.Data, &d) == nil && d.Kind == "error_event" && d.Origin == "mcp" {
				out = append(out, d.Error)
			}
		}
		return out
	}
	errs := mcpErrors(f)
	if len(errs) != 1 || !strings.Contains(errs[0], `MCP server "down"`) || !strings.Contains(errs[0], "connection refused") || strings.Contains(errs[0], "secret") || !strings.Contains(errs[0], "[redacted]") {
		t.Fatalf("the error_events of the first run: %q\n%s", errs, f.dump())
	}
	reqs := model.Requests()
	if len(reqs) == 1 && bytes.Contains(reqs[0].Body, []byte("-secret")) {
		t.Errorf("the model's request holds a secret: %s", reqs[0].Body)
	}
	if len(reqs) != 1 || !bytes.Contains(reqs[0].Body, []byte("could not be reached")) || !bytes.Contains(reqs[0].Body, []byte("down (tools down__*)")) ||
		!bytes.Contains(reqs[0].Body, []byte(`"name":"up__echo"`)) || bytes.Contains(reqs[0].Body, []byte(`"name":"down__echo"`)) {
		t.Fatalf("the model's request does not say which server is missing, or has its tools")
	}
	stop()

	// The server restarts with another key: the session's values no
	// longer decrypt; its next run says so, and goes on without them.
	other, err := vault.ParseKeys("k2:" + testKey(4))
	if err != nil {
		t.Fatal(err)
	}
	rec2 := &mcpRecorder{}
	e, _ = mcpServe(t, st, model, &session.MCPServerOptions{Mount: rec2.mount, Secrets: other})
	model.Push(openaitest.Reply{Text: "done"})
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/tool_results", keyAlice, `{"kind":"tool_result","tool_req":{"tool_name":"ask","id":"c1"},"result":"fine"}`), http.StatusAccepted)
	f = e.follow(keyAlice, id)
	f.status(session.StatusCompleted)
	errs = mcpErrors(f)
	if len(errs) != 3 || !strings.Contains(errs[1]+errs[2], `MCP server "up"`) || !strings.Contains(errs[1]+errs[2], `MCP server "down"`) ||
		!strings.Contains(errs[1], "stored secrets could not be decrypted") || strings.Contains(strings.Join(errs, ""), "secret\"") {
		t.Errorf("the error_events: %q", errs)
	}
	if len(rec2.got) != 0 {
		t.Errorf("Mount got servers whose secrets did not decrypt: %v", rec2.got)
	}
	reqs = model.Requests()
	if len(reqs) != 2 || !bytes.Contains(reqs[1].Body, []byte("up (tools up__*)")) {
		t.Errorf("the second run's model request does not name the missing servers")
	}
}
