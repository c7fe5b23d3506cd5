package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/sqlite"
)

const (
	keyAlice = "sk-alice"
	keyBob   = "sk-bob"
)

// env is a real server on loopback: SQLite in a temporary file, the
// scripted OpenAI-compatible model server, the sessions API over HTTP.
type env struct {
	t     testing.TB
	model *openaitest.Server
	url   string
	st    store.Store
	m     *session.Manager
	work  string // the file tools' directory, if any
}

type envOptions struct {
	session *session.Options
	wrap    func(store.Store) store.Store
	// server are the server's options but its keys (keyAlice, keyBob).
	server *server.Options
	// keys are API keys besides keyAlice and keyBob.
	keys []string
	// connState, when set, is told the HTTP server's connections' states.
	connState func(net.Conn, http.ConnState)
}

func newEnv(t *testing.T, o *envOptions, replies ...openaitest.Reply) *env {
	t.Helper()
	if o == nil {
		o = &envOptions{}
	}
	model := openaitest.NewServer(replies...)
	t.Cleanup(model.Close)
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var wrapped store.Store = st
	if o.wrap != nil {
		wrapped = o.wrap(st)
	}
	m := session.New(wrapped, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, o.session)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	so := server.Options{}
	if o.server != nil {
		so = *o.server
	}
	so.APIKeys = append([]string{keyAlice, keyBob}, o.keys...)
	srv := httptest.NewUnstartedServer(contractHandler(t, newServer(m, &so)))
	srv.Config.ConnState = o.connState
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		m.Stop(context.Background())
	})
	return &env{t: t, model: model, url: srv.URL, st: st, m: m}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r *response) json(v any) {
	if err := json.Unmarshal(r.body, v); err != nil {
		panic(fmt.Sprintf("decoding %s: %v", r.body, err))
	}
}

// do sends a request with the key; body is JSON text or a value.
func (e *env) do(method, path, key string, body any, header ...string) *response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return &response{status: resp.StatusCode, header: resp.Header, body: b}
}

func (e *env) expect(r *response, status int) *response {
	e.t.Helper()
	if r.status != status {
		e.t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	return r
}

func (e *env) create(key, body string, header ...string) string {
	e.t.Helper()
	r := e.expect(e.do("POST", "/api/v2/sessions", key, body, header...), http.StatusCreated)
	var v struct{ ID string }
	r.json(&v)
	return v.ID
}

type changes struct {
	Status    session.Status  `json:"status"`
	NewEvents []session.Event `json:"new_events"`
	Answer    json.RawMessage `json:"answer"`
	Error     *string         `json:"error"`
	ErrorCode *string         `json:"error_code"`
	Metrics   session.Metrics `json:"metrics"`
}

// follower long-polls a session's changes.
type follower struct {
	e      *env
	id     string
	key    string
	events []session.Event
	last   changes
}

func (e *env) follow(key, id string) *follower { return &follower{e: e, id: id, key: key} }

// poll makes one long-poll; it reports whether events came.
func (f *follower) poll(wait int) bool {
	f.e.t.Helper()
	r := f.e.do("GET", fmt.Sprintf("/api/v2/sessions/%s/changes?from_index=%d&wait_for_seconds=%d", f.id, len(f.events), wait), f.key, nil)
	switch r.status {
	case http.StatusNoContent:
		return false
	case http.StatusOK:
	default:
		f.e.t.Fatalf("changes: %d %s", r.status, r.body)
	}
	var c changes
	r.json(&c)
	f.events = append(f.events, c.NewEvents...)
	f.last = c
	return true
}

func (f *follower) until(cond func(c *changes) bool) *changes {
	f.e.t.Helper()
	for range 200 {
		if f.poll(10) && cond(&f.last) {
			return &f.last
		}
		if f.last.Status.Terminal() && !cond(&f.last) && !f.poll(0) {
			f.e.t.Fatalf("session ended %s; events:\n%s", f.last.Status, f.dump())
		}
	}
	f.e.t.Fatalf("condition never held; events:\n%s", f.dump())
	return nil
}

func (f *follower) status(s session.Status) *changes {
	f.e.t.Helper()
	return f.until(func(c *changes) bool { return c.Status == s })
}

func (f *follower) dump() string {
	var b strings.Builder
	for _, e := range f.events {
		fmt.Fprintf(&b, "%d %s %s\n", e.Index, e.Type, e.Data)
	}
	return b.String()
}

// pending returns the calls of the latest ActiveStateChangeEvent.
func (f *follower) pending() []session.ToolRequest {
	for i := len(f.events) - 1; i >= 0; i-- {
		if f.events[i].Type == session.EventActiveState {
			var as session.ActiveState
			json.Unmarshal(f.events[i].Data, &as)
			return as.PendingToolCalls
		}
	}
	return nil
}

func kinds(events []session.Event) []string {
	var out []string
	for _, e := range events {
		k := e.Type
		var d struct{ Kind, State string }
		json.Unmarshal(e.Data, &d)
		if d.Kind != "" {
			k += "/" + d.Kind
		}
		if d.State != "" {
			k += "/" + d.State
		}
		out = append(out, k)
	}
	return out
}

const orderAgent = `{"agent":{"name":"support-agent","description":"Answers order questions.","environments":[],"tools":[{"name":"get_order_status","description":"Look up the status of an order in our system.","input_schema":{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}}]},"messages":"Check order 4242 and 4243."}`

func calls(c ...llm.ToolCall) openaitest.Reply { return openaitest.Reply{ToolCalls: c} }

func TestCustomToolRoundTrip(t *testing.T) {
	e := newEnv(t, nil,
		calls(openaitest.ToolCall("call_1", "get_order_status", `{"order_id":"4242"}`)),
		calls(openaitest.ToolCall("call_2", "get_order_status", `{"order_id":"4243"}`), openaitest.ToolCall("call_3", "get_order_status", `{"order_id":"4244"}`)),
		openaitest.Reply{Text: "4242 shipped, 4243 unknown, 4244 pending."},
	)
	id := e.create(keyAlice, orderAgent)
	f := e.follow(keyAlice, id)
	f.status(session.StatusAwaitingToolResults)
	want := []session.ToolRequest{{ToolName: "get_order_status", Args: json.RawMessage(`{"order_id":"4242"}`), ID: "call_1"}}
	if diff := cmp.Diff(want, f.pending()); diff != "" {
		t.Fatalf("pending (-want +got):\n%s", diff)
	}
	path := "/api/v2/sessions/" + id + "/tool_results"
	// Single result, as in the guide's curl example.
	e.expect(e.do("POST", path, keyAlice, `{"kind": "tool_result", "tool_req": {"tool_name": "get_order_status", "args": {"order_id": "4242"}, "id": "call_1"}, "result": "shipped"}`), http.StatusAccepted)
	f.until(func(c *changes) bool { return c.Status == session.StatusAwaitingToolResults && len(f.pending()) == 2 })
	// Posting it again is harmless.
	e.expect(e.do("POST", path, keyAlice, `{"kind": "tool_result", "tool_req": {"tool_name": "get_order_status", "args": {"order_id": "4242"}, "id": "call_1"}, "result": "shipped"}`), http.StatusAccepted)
	// Unknown call id: 422 and nothing recorded.
	r := e.expect(e.do("POST", path, keyAlice, `{"type":"batch","results":[{"kind":"tool_result","tool_req":{"tool_name":"get_order_status","id":"call_2"},"result":"x"},{"kind":"tool_result","tool_req":{"tool_name":"get_order_status","id":"call_99"},"result":"x"}]}`), http.StatusUnprocessableEntity)
	var detail struct{ Detail []session.FieldError }
	r.json(&detail)
	if len(detail.Detail) != 1 || !strings.Contains(detail.Detail[0].Msg, "call_99") || fmt.Sprint(detail.Detail[0].Loc) != "[body results 1 tool_req id]" {
		t.Errorf("422 detail = %+v", detail.Detail)
	}
	// Batch: a result and an error_event.
	e.expect(e.do("POST", path, keyAlice, `{"type":"batch","results":[
		{"kind":"error_event","error":"Order not found","origin":"custom_tools","tool_req":{"tool_name":"get_order_status","args":{"order_id":"4243"},"id":"call_2"}},
		{"kind":"tool_result","tool_req":{"tool_name":"get_order_status","args":{"order_id":"4244"},"id":"call_3"},"result":{"state":"pending"}}]}`), http.StatusAccepted)
	c := f.status(session.StatusCompleted)
	if string(c.Answer) != `"4242 shipped, 4243 unknown, 4244 pending."` {
		t.Errorf("answer = %s", c.Answer)
	}
	if c.Metrics.Steps != 3 || len(c.Metrics.CostPerModel) != 1 || c.Metrics.CostPerModel[0].Name != "test-model" || c.Metrics.CostPerModel[0].InputTokens != 60 {
		t.Errorf("metrics = %+v", c.Metrics)
	}
	// The model read the results on the wire.
	reqs := e.model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	last := string(reqs[2].Body)
	for _, s := range []string{`"tool_call_id":"call_2"`, `Order not found`, `"tool_call_id":"call_3"`, `{\"state\":\"pending\"}`} {
		if !strings.Contains(last, s) {
			t.Errorf("third model request lacks %s:\n%s", s, last)
		}
	}
	// After the end: 409.
	e.expect(e.do("POST", path, keyAlice, `{"kind":"tool_result","tool_req":{"tool_name":"get_order_status","id":"call_1"},"result":"again"}`), http.StatusConflict)
	// The history holds every event once, indexed in order.
	var page session.Page[session.Event]
	e.expect(e.do("GET", "/api/v2/sessions/"+id+"/events?size=200", keyAlice, nil), http.StatusOK).json(&page)
	if diff := cmp.Diff(f.events, page.Items); diff != "" || page.Total != len(f.events) {
		t.Errorf("history differs from the long-polled events (total %d) (-polled +history):\n%s", page.Total, diff)
	}
	wantKinds := []string{
		"AgentEvent/message_event", "AgentStartedEvent", "ActiveStateChangeEvent/running",
		"AgentEvent/policy_event", "MetricsUpdateEvent", "ActiveStateChangeEvent/awaiting_tool_results",
		"AgentEvent/tool_result", "ActiveStateChangeEvent/running",
		"AgentEvent/policy_event", "MetricsUpdateEvent", "ActiveStateChangeEvent/awaiting_tool_results",
		"AgentEvent/error_event", "AgentEvent/tool_result", "ActiveStateChangeEvent/running",
		"AgentEvent/policy_event", "MetricsUpdateEvent", "AgentEvent/answer_event", "AgentCompletionEvent",
	}
	if diff := cmp.Diff(wantKinds, kinds(page.Items)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// blockingStore holds CreateSession until released, so that a second
// request with the same key finds the first in flight.
type blockingStore struct {
	store.Store
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (b *blockingStore) CreateSession(ctx context.Context, s *store.Session, events []store.Event) (*store.Session, bool, error) {
	if s.IdempotencyKey == "slow" {
		b.once.Do(func() {
			close(b.entered)
			<-b.release
		})
	}
	return b.Store.CreateSession(ctx, s, events)
}

func TestIdempotencyKey(t *testing.T) {
	bs := &blockingStore{entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, &envOptions{wrap: func(st store.Store) store.Store { bs.Store = st; return bs }},
		openaitest.Reply{Text: "a"}, openaitest.Reply{Text: "b"}, openaitest.Reply{Text: "c"})
	body := `{"agent":{"name":"a"},"messages":"hi"}`
	first := e.do("POST", "/api/v2/sessions", keyAlice, body, "Idempotency-Key", "k1")
	e.expect(first, http.StatusCreated)
	replay := e.expect(e.do("POST", "/api/v2/sessions", keyAlice, `{"messages": "hi", "agent": {"name": "a"}}`, "Idempotency-Key", "k1"), http.StatusCreated)
	var a, b session.View
	first.json(&a)
	replay.json(&b)
	if a.ID != b.ID || replay.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay returned %s (replayed header %q), want %s", b.ID, replay.header.Get("Idempotent-Replayed"), a.ID)
	}
	// The same key with another body: 422.
	r := e.expect(e.do("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a"},"messages":"bye"}`, "Idempotency-Key", "k1"), http.StatusUnprocessableEntity)
	if !strings.Contains(string(r.body), "Idempotency-Key") {
		t.Errorf("422 body = %s", r.body)
	}
	// Keys are per API key.
	other := e.create(keyBob, body, "Idempotency-Key", "k1")
	if other == a.ID {
		t.Error("another API key's request replayed alice's session")
	}
	// In flight: 409 with Retry-After.
	done := make(chan *response)
	go func() { done <- e.do("POST", "/api/v2/sessions", keyAlice, body, "Idempotency-Key", "slow") }()
	<-bs.entered
	r = e.expect(e.do("POST", "/api/v2/sessions", keyAlice, body, "Idempotency-Key", "slow"), http.StatusConflict)
	var inFlight struct{ Detail string }
	r.json(&inFlight)
	if r.header.Get("Retry-After") != "1" || !strings.HasPrefix(inFlight.Detail, "A request with the same Idempotency-Key for the same operation is being processed or is outstanding") {
		t.Errorf("in flight: Retry-After %q, %s", r.header.Get("Retry-After"), r.body)
	}
	close(bs.release)
	e.expect(<-done, http.StatusCreated)
	e.expect(e.do("POST", "/api/v2/sessions", keyAlice, body, "Idempotency-Key", ""), http.StatusUnprocessableEntity)
}

func TestLongPoll(t *testing.T) {
	e := newEnv(t, nil, calls(openaitest.ToolCall("call_1", "get_order_status", `{"order_id":"1"}`)), openaitest.Reply{Text: "done"})
	id := e.create(keyAlice, orderAgent)
	f := e.follow(keyAlice, id)
	f.status(session.StatusAwaitingToolResults)
	// Nothing new: 204 with an ETag naming the cursor, bare as the
	// reference gives it; also for a cursor past the end.
	for _, from := range []int{len(f.events), 9999} {
		r := e.expect(e.do("GET", fmt.Sprintf("/api/v2/sessions/%s/changes?from_index=%d&wait_for_seconds=1", id, from), keyAlice, nil), http.StatusNoContent)
		if r.header.Get("ETag") != fmt.Sprint(len(f.events)) {
			t.Errorf("from_index=%d: ETag = %q, want the event count %d", from, r.header.Get("ETag"), len(f.events))
		}
	}
	// A waiting poll wakes when the result lands. If no wake-up came it
	// would end in a 204 after 25 s.
	got := make(chan *response)
	go func() {
		got <- e.do("GET", fmt.Sprintf("/api/v2/sessions/%s/changes?from_index=%d&wait_for_seconds=25", id, len(f.events)), keyAlice, nil)
	}()
	time.Sleep(50 * time.Millisecond) // let the poll start waiting (not required for correctness)
	e.expect(e.do("POST", "/api/v2/sessions/"+id+"/tool_results", keyAlice, `{"kind":"tool_result","tool_req":{"tool_name":"get_order_status","id":"call_1"},"result":"ok"}`), http.StatusAccepted)
	var c changes
	e.expect(<-got, http.StatusOK).json(&c)
	if len(c.NewEvents) == 0 || c.NewEvents[0].Index != int64(len(f.events)) {
		t.Errorf("woken poll returned %v", kinds(c.NewEvents))
	}
	// Status only, and limits.
	e.expect(e.do("GET", "/api/v2/sessions/"+id+"/changes?include_events=false", keyAlice, nil), http.StatusOK).json(&c)
	if len(c.NewEvents) != 0 || c.Status == "" {
		t.Errorf("include_events=false: %d events, status %q", len(c.NewEvents), c.Status)
	}
	e.expect(e.do("GET", "/api/v2/sessions/"+id+"/changes?limit=2", keyAlice, nil), http.StatusOK).json(&c)
	if len(c.NewEvents) != 2 {
		t.Errorf("limit=2 returned %d events", len(c.NewEvents))
	}
	// limit=0 means none, as the reference's minimum 0 allows.
	c = changes{}
	e.expect(e.do("GET", "/api/v2/sessions/"+id+"/changes?limit=0", keyAlice, nil), http.StatusOK).json(&c)
	if len(c.NewEvents) != 0 || c.Status == "" {
		t.Errorf("limit=0: %d events, status %q", len(c.NewEvents), c.Status)
	}
	for _, q := range []string{"wait_for_seconds=26", "include_events=maybe", "limit=x", "limit=-1"} {
		e.expect(e.do("GET", "/api/v2/sessions/"+id+"/changes?"+q, keyAlice, nil), http.StatusUnprocessableEntity)
	}
}

func TestAuthIsolation(t *testing.T) {
	e := newEnv(t, nil, calls(openaitest.ToolCall("call_1", "get_order_status", `{"order_id":"1"}`)))
	id := e.create(keyAlice, orderAgent)
	e.follow(keyAlice, id).status(session.StatusAwaitingToolResults)
	for _, key := range []string{"", "sk-wrong"} {
		r := e.expect(e.do("GET", "/api/v2/sessions/"+id, key, nil), http.StatusUnauthorized)
		if !strings.Contains(string(r.body), `"detail"`) {
			t.Errorf("401 body = %s", r.body)
		}
	}
	for _, req := range []struct{ method, path, body string }{
		{"GET", "", ""},
		{"GET", "/status", ""},
		{"GET", "/changes", ""},
		{"GET", "/events", ""},
		{"POST", "/tool_results", `{"kind":"tool_result","tool_req":{"tool_name":"get_order_status","id":"call_1"},"result":"x"}`},
		{"POST", "/messages", `{"message":"hi"}`},
		{"POST", "/pause", ""},
		{"POST", "/force_answer", ""},
		{"DELETE", "", ""},
	} {
		var body any
		if req.body != "" {
			body = req.body
		}
		r := e.do(req.method, "/api/v2/sessions/"+id+req.path, keyBob, body)
		if r.status != http.StatusNotFound {
			t.Errorf("%s %s with another key: %d %s, want 404", req.method, req.path, r.status, r.body)
		}
	}
	var page session.Page[session.Summary]
	e.expect(e.do("GET", "/api/v2/sessions", keyBob, nil), http.StatusOK).json(&page)
	if page.Total != 0 || len(page.Items) != 0 {
		t.Errorf("bob lists %d sessions", page.Total)
	}
	e.expect(e.do("GET", "/api/v2/sessions?status=awaiting_tool_results", keyAlice, nil), http.StatusOK).json(&page)
	if page.Total != 1 || page.Items[0].ID != id || page.Items[0].FirstMessage == nil {
		t.Errorf("alice lists %+v", page)
	}
	e.expect(e.do("GET", "/api/v2/sessions?status=bogus", keyAlice, nil), http.StatusUnprocessableEntity)
	// Still alice's, still waiting.
	var st session.StatusView
	e.expect(e.do("GET", "/api/v2/sessions/"+id+"/status", keyAlice, nil), http.StatusOK).json(&st)
	if st.Status != session.StatusAwaitingToolResults {
		t.Errorf("status after bob's attempts = %s", st.Status)
	}
	e.expect(e.do("GET", "/healthz", "", nil), http.StatusOK)
}

func TestErrors(t *testing.T) {
	e := newEnv(t, nil)
	big := `{"agent":{"name":"a"},"messages":"` + strings.Repeat("x", 12<<20) + `"}`
	r := e.expect(e.do("POST", "/api/v2/sessions", keyAlice, big), http.StatusRequestEntityTooLarge)
	if !strings.Contains(string(r.body), `"detail"`) {
		t.Errorf("413 body = %s", r.body)
	}
	r = e.expect(e.do("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a","environments":[{"kind":"moon"}]},"messages":"hi","max_steps":0}`), http.StatusUnprocessableEntity)
	var detail struct{ Detail []session.FieldError }
	r.json(&detail)
	var locs []string
	for _, f := range detail.Detail {
		locs = append(locs, fmt.Sprint(f.Loc))
	}
	if diff := cmp.Diff([]string{"[body agent environments 0]", "[body max_steps]"}, locs); diff != "" || !strings.Contains(detail.Detail[0].Msg, `"moon"`) {
		t.Errorf("422 fields (-want +got):\n%s\n%+v", diff, detail.Detail)
	}
	e.expect(e.do("POST", "/api/v2/sessions", keyAlice, `{"agent":`), http.StatusUnprocessableEntity)
	e.expect(e.do("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"a"},"messages":"hi","max_steps":"ten"}`), http.StatusUnprocessableEntity)
	e.expect(e.do("GET", "/api/v2/sessions/not-a-uuid", keyAlice, nil), http.StatusUnprocessableEntity)
	e.expect(e.do("GET", "/api/v2/sessions/00000000-0000-4000-8000-000000000000", keyAlice, nil), http.StatusNotFound)
	r = e.expect(e.do("GET", "/api/v2/nothing", keyAlice, nil), http.StatusNotFound)
	if !strings.Contains(string(r.body), `"detail"`) {
		t.Errorf("404 body = %s", r.body)
	}
	r = e.expect(e.do("PUT", "/api/v2/sessions", keyAlice, nil), http.StatusMethodNotAllowed)
	if !strings.Contains(string(r.body), `"detail"`) || r.header.Get("Allow") == "" {
		t.Errorf("405 = %s, Allow %q", r.body, r.header.Get("Allow"))
	}
}

func TestSteeringOverHTTP(t *testing.T) {
	e := newEnv(t, nil,
		openaitest.Reply{Text: "first"},
		openaitest.Reply{Text: "second"},
		calls(openaitest.ToolCall("call_9", "get_order_status", `{"order_id":"9"}`)),
		openaitest.Reply{Text: "forced"},
	)
	body := strings.Replace(orderAgent, `"messages"`, `"idle_timeout_s":60,"messages"`, 1)
	id := e.create(keyAlice, body)
	f := e.follow(keyAlice, id)
	f.status(session.StatusIdle)
	base := "/api/v2/sessions/" + id
	e.expect(e.do("POST", base+"/messages", keyAlice, `{"type":"user_message","message":"and now?"}`), http.StatusAccepted)
	f.until(func(c *changes) bool { return c.Status == session.StatusIdle && string(c.Answer) == `"second"` })
	e.expect(e.do("POST", base+"/pause", keyAlice, nil), http.StatusAccepted)
	f.status(session.StatusPaused)
	e.expect(e.do("POST", base+"/messages", keyAlice, `{"type":"batch","messages":[{"message":"check 9"}]}`), http.StatusAccepted)
	e.expect(e.do("POST", base+"/resume", keyAlice, nil), http.StatusAccepted)
	f.status(session.StatusAwaitingToolResults)
	e.expect(e.do("POST", base+"/force_answer", keyAlice, nil), http.StatusAccepted)
	f.until(func(c *changes) bool { return string(c.Answer) == `"forced"` })
	e.expect(e.do("DELETE", base, keyAlice, nil), http.StatusNoContent)
	f.status(session.StatusInterrupted)
	e.expect(e.do("POST", base+"/pause", keyAlice, nil), http.StatusConflict)
	e.expect(e.do("DELETE", base, keyAlice, nil), http.StatusNoContent)
	got := kinds(f.events)
	for _, want := range []string{"AgentEvent/flow_event", "AgentRunStatusChangeEvent", "AgentEvent/error_event", "AgentCompletionEvent"} {
		if !slices.Contains(got, want) {
			t.Errorf("events lack %s: %v", want, got)
		}
	}
}

func TestMaxTimeOverHTTP(t *testing.T) {
	e := newEnv(t, nil, calls(openaitest.ToolCall("call_1", "get_order_status", `{"order_id":"1"}`)), openaitest.Reply{Text: "time is up"})
	id := e.create(keyAlice, strings.Replace(orderAgent, `"messages"`, `"max_time_s":0.3,"messages"`, 1))
	f := e.follow(keyAlice, id)
	c := f.status(session.StatusTimedOut)
	if string(c.Answer) != `"time is up"` || c.ErrorCode == nil || *c.ErrorCode != "timeout" {
		t.Errorf("answer %s, code %v", c.Answer, c.ErrorCode)
	}
	reqs := e.model.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), "max_time_s") {
		t.Errorf("the model was not told of the unresolved call: %d requests", len(reqs))
	}
}

func TestServerStreamSSE(t *testing.T) {
	e := newEnv(t, nil, openaitest.Reply{Text: "streamed"})
	id := e.create(keyAlice, `{"agent":{"name":"a"},"messages":"hi"}`)
	r := e.do("GET", "/api/v2/sessions/"+id+"/events", keyAlice, nil, "Accept", "text/event-stream")
	if ct := r.header.Get("Content-Type"); r.status != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("stream: %d %s", r.status, ct)
	}
	var types []string
	for _, block := range strings.Split(string(r.body), "\n\n") {
		for _, line := range strings.Split(block, "\n") {
			if typ, ok := strings.CutPrefix(line, "event: "); ok {
				types = append(types, typ)
			}
		}
	}
	want := []string{"AgentEvent", "AgentStartedEvent", "ActiveStateChangeEvent", "AgentEvent", "MetricsUpdateEvent", "AgentEvent", "AgentCompletionEvent", "end"}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("SSE event types (-want +got):\n%s\n%s", diff, r.body)
	}
	// Reconnecting after event 5 sends the rest.
	r = e.do("GET", "/api/v2/sessions/"+id+"/events", keyAlice, nil, "Accept", "text/event-stream", "Last-Event-ID", "5")
	if !strings.HasPrefix(string(r.body), "id: 6\n") {
		t.Errorf("resumed stream starts with %q", strings.SplitN(string(r.body), "\n", 2)[0])
	}
}

func TestApprovals(t *testing.T) {
	ran := make(chan string, 1)
	deploy := loop.NewTool("deploy", "Deploys a service.", func(_ context.Context, in struct {
		Service string `json:"service"`
	}) (string, error) {
		ran <- in.Service
		return "deployed " + in.Service, nil
	})
	deploy.RequiresApproval = true
	e := newEnv(t, &envOptions{session: &session.Options{
		Agents:   map[string]*session.AgentConfig{"ops": {Description: "Deploys.", Toolsets: []string{"deploy"}}},
		Toolsets: map[string]*loop.Toolset{"deploy": loop.MustToolset(deploy)},
	}},
		calls(openaitest.ToolCall("call_1", "deploy", `{"service":"api"}`), openaitest.ToolCall("call_2", "deploy", `{"service":"db"}`)),
		openaitest.Reply{Text: "api deployed, db refused"},
	)
	// Callers cannot grant themselves the operator's toolsets.
	e.expect(e.do("POST", "/api/v2/sessions", keyAlice, `{"agent":{"name":"x","environments":["deploy"]},"messages":"hi"}`), http.StatusUnprocessableEntity)
	id := e.create(keyAlice, `{"agent":"ops","messages":"deploy api and db"}`)
	f := e.follow(keyAlice, id)
	f.status(session.StatusAwaitingToolResults)
	var as session.ActiveState
	json.Unmarshal(f.events[len(f.events)-1].Data, &as)
	if len(as.PendingToolCalls) != 0 || len(as.PendingApprovals) != 2 {
		t.Fatalf("pending = %+v", as)
	}
	base := "/api/v2/sessions/" + id
	// A tool result cannot answer a server tool's call.
	e.expect(e.do("POST", base+"/tool_results", keyAlice, `{"kind":"tool_result","tool_req":{"tool_name":"deploy","id":"call_1"},"result":"fake"}`), http.StatusUnprocessableEntity)
	e.expect(e.do("POST", base+"/approvals", keyAlice, `{"id":"call_1","approved":true}`), http.StatusAccepted)
	e.expect(e.do("POST", base+"/approvals", keyAlice, `{"type":"batch","decisions":[{"id":"call_2","approved":false,"reason":"not today"}]}`), http.StatusAccepted)
	f.status(session.StatusCompleted)
	if got := <-ran; got != "api" {
		t.Errorf("ran deploy for %q", got)
	}
	last := string(e.model.Requests()[1].Body)
	if !strings.Contains(last, "deployed api") || !strings.Contains(last, "not today") {
		t.Errorf("the model did not read the approval outcomes:\n%s", last)
	}
}

// newServer is server.New for a test's Options, which are valid.
func newServer(m *session.Manager, opts *server.Options) *server.Server {
	s, err := server.New(m, opts)
	if err != nil {
		panic(err)
	}
	return s
}
