package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/platform/vault"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/postgres"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// keyring is the keyring of ids, in order: "new" is one key, any other
// id the other.
func keyring(t *testing.T, ids ...string) *vault.Keyring {
	t.Helper()
	var lines []string
	for _, id := range ids {
		b := byte(1)
		if id == "new" {
			b = 2
		}
		lines = append(lines, id+":"+testKey(b))
	}
	k, err := vault.ParseKeys(strings.Join(lines, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// rotationStores runs fn on a SQLite file and on PostgreSQL.
func rotationStores(t *testing.T, fn func(t *testing.T, st store.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		st, err := postgres.Open(t.Context(), postgrestest.DSN(t), &postgres.Options{MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
}

// reencrypt returns a before of mcpServeAfter that re-encrypts, as hrns
// serve does at start, into *out.
func reencrypt(t *testing.T, out **session.MCPReencryption) func(*session.Manager) {
	return func(m *session.Manager) {
		r, err := m.ReencryptMCPSecrets(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		*out = r
	}
}

// remoteServer is an MCP server entry whose header h is v.
func remoteServer(name, h, v string) string {
	return `{"name":"` + name + `","transport":"streamable_http","url":"https://` + name + `.example/mcp","headers":{"` + h + `":"` + v + `"}}`
}

// askAgent is an agent with a client tool and the MCP server of header
// h = v.
func askAgent(h, v string) string {
	return `{"name":"a","tools":[{"name":"ask","description":"asks the user"}],"environments":[{"kind":"web","mcp_servers":[` + remoteServer("srv", h, v) + `]}]}`
}

const askResult = `{"kind":"tool_result","tool_req":{"tool_name":"ask","id":"c1"},"result":"fine"}`

// TestMCPSecretsRotation follows the documented rotation: values sealed
// under old (a registered environment and agent, a schedule's template, a
// session waiting for a tool result and a completed one); new added as
// the primary: the start re-encrypts every one, and says so; a second
// start finds none left; old dropped: every one still reaches its MCP
// server with its value. Before, the values stayed under old, and with it
// dropped the environment's session was refused (key "old" missing) and
// the sessions ran without their servers.
func TestMCPSecretsRotation(t *testing.T) {
	rotationStores(t, mcpRotation)
}

func mcpRotation(t *testing.T, st store.Store) {
	secrets := map[string]string{
		"TOKEN": "env-secret-1", "Authorization": "Bearer hdr-secret-2", "X-Agent": "agent-secret-3",
		"X-Sched": "sched-secret-4", "X-Wait": "wait-secret-5", "X-Done": "done-secret-6", "X-Sub": "sub-secret-7",
	}
	model := openaitest.NewServer()
	t.Cleanup(model.Close)
	rec := &mcpRecorder{}
	e, stop := mcpServe(t, st, model, &session.MCPServerOptions{Mount: rec.mount, Secrets: keyring(t, "old")})
	e.call("POST", "/api/v2/environments", keyAlice, `{"id":"tooled","kind":"web","mcp_servers":[
		{"name":"fs","transport":"stdio","command":"mcp-fs","env":{"TOKEN":"`+secrets["TOKEN"]+`"}},`+remoteServer("remote", "Authorization", secrets["Authorization"])+`]}`, http.StatusCreated, "Environment")
	e.call("POST", "/api/v2/agents", keyAlice, `{"name":"ag","description":"d","environments":[{"id":"w","kind":"web","mcp_servers":[`+remoteServer("agent", "X-Agent", secrets["X-Agent"])+`]}]}`, http.StatusCreated, "Agent")
	var sc struct{ ID string }
	e.expect(e.do("POST", "/api/v2/schedules", keyAlice, `{"name":"nightly","timing":{"type":"cron","expression":"0 9 * * *","timezone":"UTC"},
		"session_request":{"agent":{"name":"a","environments":[{"kind":"web","mcp_servers":[`+remoteServer("sched", "X-Sched", secrets["X-Sched"])+`]}]},"messages":"x"}}`), http.StatusCreated).json(&sc)
	model.Push(openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c1", "ask", `{}`)}}, openaitest.Reply{Text: "done"})
	waiting := e.create(keyAlice, `{"agent":`+askAgent("X-Wait", secrets["X-Wait"])+`,"messages":"x"}`)
	e.follow(keyAlice, waiting).status(session.StatusAwaitingToolResults)
	done := e.create(keyAlice, `{"agent":{"name":"a","environments":[{"kind":"web","mcp_servers":[`+remoteServer("srv", "X-Done", secrets["X-Done"])+`]}]},"messages":"x"}`)
	e.follow(keyAlice, done).status(session.StatusCompleted)
	// A parent waiting, whose subagent's definition (in its request and
	// state, sealed for the owner) has a server: its child is made after
	// the rotation.
	model.Push(openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c1", "ask", `{}`)}})
	boss := e.create(keyAlice, `{"agent":{"name":"boss","tools":[{"name":"ask","description":"asks the user"}],"environments":[],
		"subagents":[{"name":"helper","description":"d","environments":[{"kind":"web","mcp_servers":[`+remoteServer("sub", "X-Sub", secrets["X-Sub"])+`]}]}]},"messages":"x"}`)
	e.follow(keyAlice, boss).status(session.StatusAwaitingToolResults)
	stop()

	// new first, old kept: the start re-encrypts every value.
	var r *session.MCPReencryption
	_, stop = mcpServeAfter(t, st, model, &session.MCPServerOptions{Mount: rec.mount, Secrets: keyring(t, "new", "old")}, reencrypt(t, &r))
	// The environment's two values, the agent's, the schedule's, and
	// each session's in its request and its state.
	want := session.MCPReencryption{KeyID: "new", Sessions: 3, Entries: 2, Schedules: 1, Values: 10}
	if *r != want {
		t.Errorf("the rotation's start re-encrypted %+v, want %+v", *r, want)
	}
	stop()
	// Once more (the rollout's last step): nothing is left.
	_, stop = mcpServeAfter(t, st, model, &session.MCPServerOptions{Mount: rec.mount, Secrets: keyring(t, "new", "old")}, reencrypt(t, &r))
	if *r != (session.MCPReencryption{KeyID: "new"}) {
		t.Errorf("a second start re-encrypted %+v", *r)
	}
	stop()

	// old dropped: each definition and session reaches its server with
	// its value.
	rec2 := &mcpRecorder{}
	e, _ = mcpServeAfter(t, st, model, &session.MCPServerOptions{Mount: rec2.mount, Secrets: keyring(t, "new")}, reencrypt(t, &r))
	if *r != (session.MCPReencryption{KeyID: "new"}) {
		t.Errorf("the start without old: %+v", *r)
	}
	model.Push(openaitest.Reply{Text: "one"}, openaitest.Reply{Text: "two"})
	for _, body := range []string{`{"agent":{"name":"a","environments":["tooled"]},"messages":"x"}`, `{"agent":"ag","messages":"x"}`} {
		e.follow(keyAlice, e.create(keyAlice, body)).status(session.StatusCompleted)
	}
	model.Push(openaitest.Reply{Text: "three"})
	var run runRecord
	e.expect(e.do("POST", "/api/v2/schedules/"+sc.ID+"/trigger", keyAlice, nil), http.StatusOK).json(&run)
	if run.SessionID == nil {
		t.Fatalf("the trigger made no session: %+v", run)
	}
	e.follow(keyAlice, *run.SessionID).status(session.StatusCompleted)
	model.Push(openaitest.Reply{Text: "four"})
	e.expect(e.do("POST", "/api/v2/sessions/"+waiting+"/tool_results", keyAlice, askResult), http.StatusAccepted)
	e.follow(keyAlice, waiting).status(session.StatusCompleted)
	model.Push(openaitest.Reply{Text: "again"})
	e.expect(e.do("POST", "/api/v2/sessions/"+done+"/messages", keyAlice, `{"message":"again"}`), http.StatusAccepted)
	e.follow(keyAlice, done).until(func(c *changes) bool { return c.Status == session.StatusCompleted && len(model.Requests()) == 8 })
	model.Push(openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("d1", "delegate", `{"agent":"helper","task":"t"}`)}},
		openaitest.Reply{Text: "child"}, openaitest.Reply{Text: "parent"})
	e.expect(e.do("POST", "/api/v2/sessions/"+boss+"/tool_results", keyAlice, askResult), http.StatusAccepted)
	e.follow(keyAlice, boss).status(session.StatusCompleted)
	got := rec2.values()
	for k, v := range secrets {
		if got[k] != v {
			t.Errorf("without the old key, Mount got %s = %q, want %q", k, got[k], v)
		}
	}
}

// hookStore calls hook once, when the session id has been read, before
// the read is returned: what the reader does next races with what hook
// commits. It counts the updates refused by the version check.
type hookStore struct {
	store.Store
	mu        sync.Mutex
	id        string
	hook      func()
	conflicts int
}

func (h *hookStore) conflicted() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conflicts
}

func (h *hookStore) UpdateSession(ctx context.Context, s *store.Session, events []store.Event, opts *store.UpdateOptions) error {
	err := h.Store.UpdateSession(ctx, s, events, opts)
	if errors.Is(err, store.ErrConflict) {
		h.mu.Lock()
		h.conflicts++
		h.mu.Unlock()
	}
	return err
}

func (h *hookStore) GetSession(ctx context.Context, id string) (*store.Session, error) {
	s, err := h.Store.GetSession(ctx, id)
	h.mu.Lock()
	f := h.hook
	if id != h.id {
		f = nil
	} else {
		h.hook = nil
	}
	h.mu.Unlock()
	if f != nil {
		f()
	}
	return s, err
}

// TestMCPSecretsRotationRace: a replica re-encrypts a session while
// another runs it. The re-encryption reads the session; the other replica
// then commits a caller's tool result and starts a step (its model call
// held), so the re-encryption's write is refused by the version check and
// made again on the session as committed; the step then commits over the
// re-encryption's write, refused in turn and made again. Nothing is lost:
// the session completes with the result and the answer, and its values
// are under the new key (it still reaches its server with the old key
// dropped).
func TestMCPSecretsRotationRace(t *testing.T) {
	rotationStores(t, mcpRotationRace)
}

func mcpRotationRace(t *testing.T, st store.Store) {
	const secret = "race-secret-7"
	model := openaitest.NewServer()
	t.Cleanup(model.Close)
	rec := &mcpRecorder{}
	e, stop := mcpServe(t, st, model, &session.MCPServerOptions{Mount: rec.mount, Secrets: keyring(t, "old")})
	model.Push(openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c1", "ask", `{}`)}})
	id := e.create(keyAlice, `{"agent":`+askAgent("X-Wait", secret)+`,"messages":"x"}`)
	e.follow(keyAlice, id).status(session.StatusAwaitingToolResults)
	stop()

	// The live replica, on the rotated keyring; its step waits for gate.
	live := &hookStore{Store: st}
	e, _ = mcpServe(t, live, model, &session.MCPServerOptions{Mount: rec.mount, Secrets: keyring(t, "new", "old")})
	gate, asked := make(chan struct{}), make(chan struct{})
	var closeGate sync.Once
	t.Cleanup(func() { closeGate.Do(func() { close(gate) }) })
	model.Push(openaitest.Reply{Func: func([]byte) openaitest.Reply {
		close(asked)
		<-gate
		return openaitest.Reply{Text: "answered"}
	}})
	hs := &hookStore{Store: st, id: id, hook: func() {
		e.expect(e.do("POST", "/api/v2/sessions/"+id+"/tool_results", keyAlice, askResult), http.StatusAccepted)
		<-asked
	}}
	// The re-encrypting replica.
	m := session.New(hs, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, &session.Options{
		MCPServers: &session.MCPServerOptions{Mount: rec.mount, Secrets: keyring(t, "new", "old")},
	})
	r, err := m.ReencryptMCPSecrets(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := (session.MCPReencryption{KeyID: "new", Sessions: 1, Values: 2}); *r != want {
		t.Errorf("re-encrypted %+v, want %+v", *r, want)
	}
	hs.mu.Lock()
	read := hs.hook == nil
	hs.mu.Unlock()
	if !read {
		t.Fatal("the re-encryption did not read the session")
	}
	closeGate.Do(func() { close(gate) })
	f := e.follow(keyAlice, id)
	c := f.status(session.StatusCompleted)
	if hs.conflicted() == 0 || live.conflicted() == 0 {
		t.Errorf("the writes did not race: %d conflicts of the re-encryption, %d of the live replica", hs.conflicted(), live.conflicted())
	}
	if !strings.Contains(string(c.Answer), "answered") {
		t.Errorf("the answer: %s", c.Answer)
	}
	var results int
	for _, ev := range f.events {
		var d struct{ Kind string }
		if json.Unmarshal(ev.Data, &d) == nil && d.Kind == "tool_result" {
			results++
		}
	}
	if results != 1 {
		t.Errorf("the session has %d tool results, want 1\n%s", results, f.dump())
	}
	if got := model.Requests(); len(got) != 2 || !strings.Contains(string(got[1].Body), "fine") {
		t.Errorf("the step's model request does not have the tool result")
	}

	// Every value of the session is under new: with old dropped, it
	// still reaches its server.
	rec2 := &mcpRecorder{}
	e, _ = mcpServe(t, st, model, &session.MCPServerOptions{Mount: rec2.mount, Secrets: keyring(t, "new")})
	model.Push(openaitest.Reply{Text: "again"})
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/messages", keyAlice, `{"message":"again"}`), http.StatusAccepted)
	e.follow(keyAlice, id).until(func(c *changes) bool { return c.Status == session.StatusCompleted && len(model.Requests()) == 3 })
	if got := rec2.values()["X-Wait"]; got != secret {
		t.Errorf("without the old key, Mount got %q", got)
	}
}

// TestMCPSecretsRotationMovedValue: a value copied in the database into
// another owner's definition, or another session's state, does not open
// there (its associated data names its owner or session), so the
// re-encryption does not seal it for its new place: it is left as it is,
// counted as failed, and still does not decrypt once the old key is gone,
// while the owner's own values were re-encrypted.
func TestMCPSecretsRotationMovedValue(t *testing.T) {
	rotationStores(t, mcpRotationMoved)
}

func mcpRotationMoved(t *testing.T, st store.Store) {
	const alices = "alice-secret-8"
	ctx := t.Context()
	model := openaitest.NewServer()
	t.Cleanup(model.Close)
	rec := &mcpRecorder{}
	e, stop := mcpServe(t, st, model, &session.MCPServerOptions{Mount: rec.mount, Secrets: keyring(t, "old")})
	env := `{"id":"tooled","kind":"web","mcp_servers":[` + remoteServer("remote", "Authorization", "%s") + `]}`
	e.call("POST", "/api/v2/environments", keyAlice, strings.Replace(env, "%s", alices, 1), http.StatusCreated, "Environment")
	e.call("POST", "/api/v2/environments", keyBob, strings.Replace(env, "%s", "bob-secret", 1), http.StatusCreated, "Environment")
	model.Push(openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c1", "ask", `{}`)}},
		openaitest.Reply{ToolCalls: []llm.ToolCall{openaitest.ToolCall("c1", "ask", `{}`)}})
	aliceSession := e.create(keyAlice, `{"agent":`+askAgent("X-Wait", alices)+`,"messages":"x"}`)
	e.follow(keyAlice, aliceSession).status(session.StatusAwaitingToolResults)
	bobSession := e.create(keyBob, `{"agent":`+askAgent("X-Wait", "bob-secret")+`,"messages":"x"}`)
	e.follow(keyBob, bobSession).status(session.StatusAwaitingToolResults)
	stop()

	// Someone with the database copies Alice's sealed values into Bob's
	// environment and session.
	var bobOwner string
	{
		a, _, err := st.ListEntries(ctx, &store.EntryListParams{Kind: store.KindEnvironment, Owner: ownerOf(t, st, aliceSession)})
		if err != nil || len(a) != 1 {
			t.Fatalf("Alice's environments: %v %v", a, err)
		}
		bobOwner = ownerOf(t, st, bobSession)
		b, err := st.GetEntry(ctx, store.KindEnvironment, bobOwner, "tooled")
		if err != nil {
			t.Fatal(err)
		}
		b.Spec = a[0].Spec
		if _, err := st.UpdateEntry(ctx, b); err != nil {
			t.Fatal(err)
		}
		as, err := st.GetSession(ctx, aliceSession)
		if err != nil {
			t.Fatal(err)
		}
		bs, err := st.GetSession(ctx, bobSession)
		if err != nil {
			t.Fatal(err)
		}
		bs.State = as.State
		if err := st.UpdateSession(ctx, bs, nil, nil); err != nil {
			t.Fatal(err)
		}
	}

	var r *session.MCPReencryption
	_, stop = mcpServeAfter(t, st, model, &session.MCPServerOptions{Mount: rec.mount, Secrets: keyring(t, "new", "old")}, reencrypt(t, &r))
	// Alice's environment and session (request and state), Bob's
	// request; Bob's environment's value and his state's are Alice's.
	if want := (session.MCPReencryption{KeyID: "new", Sessions: 2, Entries: 1, Values: 4, Failed: 2, Undecryptable: 2}); *r != want {
		t.Errorf("re-encrypted %+v, want %+v", *r, want)
	}
	stop()
	b, err := st.GetEntry(ctx, store.KindEnvironment, bobOwner, "tooled")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b.Spec), "hrns-sealed:v1:old:") {
		t.Errorf("Bob's copy of Alice's value was sealed again: %s", b.Spec)
	}

	rec2 := &mcpRecorder{}
	e, _ = mcpServe(t, st, model, &session.MCPServerOptions{Mount: rec2.mount, Secrets: keyring(t, "new")})
	r2 := e.call("POST", "/api/v2/sessions", keyBob, `{"agent":{"name":"a","environments":["tooled"]},"messages":"x"}`, http.StatusUnprocessableEntity, "")
	if !strings.Contains(string(r2.body), "stored secrets could not be decrypted") {
		t.Errorf("Bob's session of Alice's value: %s", r2.body)
	}
	model.Push(openaitest.Reply{Text: "bob"})
	e.expect(e.do("POST", "/api/v2/sessions/"+bobSession+"/tool_results", keyBob, askResult), http.StatusAccepted)
	e.follow(keyBob, bobSession).status(session.StatusCompleted)
	if got := rec2.values(); len(got) != 0 {
		t.Errorf("Bob's session reached a server with %v", got)
	}
	model.Push(openaitest.Reply{Text: "one"}, openaitest.Reply{Text: "alice"})
	e.follow(keyAlice, e.create(keyAlice, `{"agent":{"name":"a","environments":["tooled"]},"messages":"x"}`)).status(session.StatusCompleted)
	e.expect(e.do("POST", "/api/v2/sessions/"+aliceSession+"/tool_results", keyAlice, askResult), http.StatusAccepted)
	e.follow(keyAlice, aliceSession).status(session.StatusCompleted)
	if got := rec2.values(); got["Authorization"] != alices || got["X-Wait"] != alices {
		t.Errorf("Alice's definitions reached their servers with %v", got)
	}
}

// ownerOf is the store's owner of session id.
func ownerOf(t *testing.T, st store.Store, id string) string {
	t.Helper()
	s, err := st.GetSession(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return s.Owner
}

// TestMCPSecretsRotationLostState: an ended session whose state no longer
// decodes (its request still holding a sealed value) is left as it is by
// the re-encryption, counted as skipped: no empty state is written over
// it.
func TestMCPSecretsRotationLostState(t *testing.T) {
	rotationStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		model := openaitest.NewServer(openaitest.Reply{Text: "done"})
		t.Cleanup(model.Close)
		rec := &mcpRecorder{}
		e, stop := mcpServe(t, st, model, &session.MCPServerOptions{Mount: rec.mount, Secrets: keyring(t, "old")})
		id := e.create(keyAlice, `{"agent":{"name":"a","environments":[{"kind":"web","mcp_servers":[`+remoteServer("srv", "X-Lost", "lost-secret-9")+`]}]},"messages":"x"}`)
		e.follow(keyAlice, id).status(session.StatusCompleted)
		stop()
		s, err := st.GetSession(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		s.State = json.RawMessage(`{"spec":"not a spec"}`)
		if err := st.UpdateSession(ctx, s, nil, nil); err != nil {
			t.Fatal(err)
		}
		var r *session.MCPReencryption
		mcpServeAfter(t, st, model, &session.MCPServerOptions{Mount: rec.mount, Secrets: keyring(t, "new", "old")}, reencrypt(t, &r))
		if want := (session.MCPReencryption{KeyID: "new", Skipped: 1}); *r != want {
			t.Errorf("re-encrypted %+v, want %+v", *r, want)
		}
		got, err := st.GetSession(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if string(got.State) != `{"spec":"not a spec"}` || got.Version != s.Version || !strings.Contains(string(got.Request), "hrns-sealed:v1:old:") {
			t.Errorf("the session was written: version %d (was %d), state %s", got.Version, s.Version, got.State)
		}
	})
}

// pageStore records the pages of sessions the re-encryption reads.
type pageStore struct {
	store.Store
	pages []int
}

func (p *pageStore) SessionsSealed(ctx context.Context, sp *store.SealedParams) ([]string, error) {
	ids, err := p.Store.SessionsSealed(ctx, sp)
	p.pages = append(p.pages, len(ids))
	return ids, err
}

// TestMCPSecretsRotationPages: the re-encryption reads the sessions a
// page at a time, and goes through every page. 150 copies of a session
// (their requests' values are the owner's, so they are re-encrypted;
// their states' are bound to the session copied, so they fail) and the
// session make two pages of 100 and 51.
func TestMCPSecretsRotationPages(t *testing.T) {
	rotationStores(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		model := openaitest.NewServer(openaitest.Reply{Text: "done"})
		t.Cleanup(model.Close)
		rec := &mcpRecorder{}
		e, stop := mcpServe(t, st, model, &session.MCPServerOptions{Mount: rec.mount, Secrets: keyring(t, "old")})
		id := e.create(keyAlice, `{"agent":{"name":"a","environments":[{"kind":"web","mcp_servers":[`+remoteServer("srv", "X-Page", "page-secret-10")+`]}]},"messages":"x"}`)
		e.follow(keyAlice, id).status(session.StatusCompleted)
		stop()
		s, err := st.GetSession(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 150 {
			c := *s
			c.ID, c.IdempotencyKey = fmt.Sprintf("%s-copy-%03d", id, i), ""
			if _, _, err := st.CreateSession(ctx, &c, nil); err != nil {
				t.Fatal(err)
			}
		}
		ps := &pageStore{Store: st}
		var r *session.MCPReencryption
		mcpServeAfter(t, ps, model, &session.MCPServerOptions{Mount: rec.mount, Secrets: keyring(t, "new", "old")}, reencrypt(t, &r))
		if want := (session.MCPReencryption{KeyID: "new", Sessions: 151, Values: 152, Failed: 150, Undecryptable: 150}); *r != want {
			t.Errorf("re-encrypted %+v, want %+v", *r, want)
		}
		if want := []int{100, 51, 0}; !slices.Equal(ps.pages, want) {
			t.Errorf("pages %v, want %v", ps.pages, want)
		}
	})
}
