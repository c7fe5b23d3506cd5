package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/api"
	"github.com/hrns-dev/hrns/client"
	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/openai"
	"github.com/hrns-dev/hrns/openai/openaitest"
	"github.com/hrns-dev/hrns/server"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store/sqlite"
)

const apiKey = "sk-test"

// startServer runs the real API on loopback over SQLite, with the scripted
// model server, and returns its URL and the model.
func startServer(t *testing.T, opts *session.Options, replies ...openaitest.Reply) (string, *openaitest.Server) {
	t.Helper()
	model := openaitest.NewServer(replies...)
	t.Cleanup(model.Close)
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), &sqlite.Options{RelaxedSync: true})
	if err != nil {
		t.Fatal(err)
	}
	m := session.New(st, &openai.Client{BaseURL: model.URL(), Model: "test-model"}, opts)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(newServer(m, &server.Options{APIKeys: []string{apiKey}}))
	t.Cleanup(func() {
		srv.Close()
		m.Stop(context.Background())
		st.Close()
	})
	return srv.URL, model
}

type orderArgs struct {
	OrderID string `json:"order_id" jsonschema:"the order number"`
}

func calls(c ...string) openaitest.Reply {
	var r openaitest.Reply
	for i := 0; i+2 < len(c)+1; i += 3 {
		r.ToolCalls = append(r.ToolCalls, openaitest.ToolCall(c[i], c[i+1], c[i+2]))
	}
	return r
}

func inline(task string) *client.SessionRequest {
	return &client.SessionRequest{
		Agent:    client.AgentRef{Inline: &client.Agent{Name: "support-agent", Description: "Answers order questions."}},
		Messages: client.Text(task),
	}
}

func TestRunSession(t *testing.T) {
	url, model := startServer(t, nil,
		calls("call_1", "get_order_status", `{"order_id":"4242"}`),
		calls(
			"call_2", "get_order_status", `{"order_id":"4243"}`,
			"call_3", "refund", `{"order_id":"4243"}`,
			"call_4", "explode", `{}`,
			"call_5", "send_email", `{"to":"x"}`,
			"call_6", "get_order_status", `{"order":"wrong field"}`,
		),
		openaitest.Reply{Text: "4242 shipped; 4243 is processing."},
	)
	var runs atomic.Int32
	status := loop.NewTool("get_order_status", "Look up the status of an order.", func(_ context.Context, in orderArgs) (string, error) {
		runs.Add(1)
		return map[string]string{"4242": "shipped", "4243": "processing"}[in.OrderID], nil
	})
	refund := loop.NewTool("refund", "Refund an order.", func(context.Context, orderArgs) (string, error) {
		return "", errors.New("refunds are closed today")
	})
	explode := client.Tool("explode", loop.NewSimpleTool("Panics.", nil, func(map[string]any) string { panic("boom") }))
	c := client.New(url, apiKey, nil)
	res, err := c.RunSession(t.Context(), inline("Check orders 4242 and 4243."), status, refund, explode)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != session.StatusCompleted || res.Answer != "4242 shipped; 4243 is processing." || res.Steps != 3 {
		t.Errorf("result = %+v", res)
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("get_order_status ran %d times, want 2", n)
	}
	reqs := model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(reqs))
	}
	first := string(reqs[0].Body)
	if !strings.Contains(first, `"get_order_status"`) || !strings.Contains(first, "the order number") {
		t.Errorf("the tools were not declared to the model:\n%s", first)
	}
	last := string(reqs[2].Body)
	for _, want := range []string{"processing", "refunds are closed today", "panicked", `unknown tool \"send_email\"`, "invalid arguments"} {
		if !strings.Contains(last, want) {
			t.Errorf("the model did not read %q:\n%s", want, last)
		}
	}
}

func TestJoinMidway(t *testing.T) {
	url, _ := startServer(t, nil, calls("call_1", "get_order_status", `{"order_id":"1"}`), openaitest.Reply{Text: "done"})
	var runs atomic.Int32
	tool := loop.NewTool("get_order_status", "Look up the status of an order.", func(context.Context, orderArgs) (string, error) {
		runs.Add(1)
		return "ok", nil
	})
	c := client.New(url, apiKey, nil)
	ctx := t.Context()
	h, err := c.StartSession(ctx, inline("go"), tool)
	if err != nil {
		t.Fatal(err)
	}
	// Read the events up to the pending call without running it.
	for e, err := range h.Stream(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if e.Type == session.EventActiveState && strings.Contains(string(e.Data), "awaiting_tool_results") {
			break
		}
	}
	// Another process joins with the tools: it finds the pending call.
	res, err := client.New(url, apiKey, nil).Session(h.ID()).WaitForCompletion(ctx, tool)
	if err != nil || res.Status != session.StatusCompleted || res.Answer != "done" {
		t.Fatalf("WaitForCompletion = %+v, %v", res, err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("tool ran %d times, want 1", n)
	}
	var types []string
	for e, err := range h.Stream(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, e.Type)
	}
	if len(types) == 0 || types[len(types)-1] != session.EventAgentCompletion {
		t.Errorf("stream = %v", types)
	}
}

func TestFinishedWhileRunning(t *testing.T) {
	url, _ := startServer(t, nil, calls("call_1", "slow", `{}`))
	c := client.New(url, apiKey, nil)
	ctx := t.Context()
	started, release := make(chan struct{}), make(chan struct{})
	slow := loop.NewTool("slow", "Takes a while.", func(context.Context, struct{}) (string, error) {
		close(started)
		<-release
		return "late", nil
	})
	h, err := c.StartSession(ctx, inline("go"), slow)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *client.Result)
	go func() {
		res, err := h.WaitForCompletion(ctx, slow)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	<-started
	if err := c.Session(h.ID()).Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	close(release)
	// The post gets 409: the wait ends with the final status, no error.
	if res := <-done; res == nil || res.Status != session.StatusInterrupted {
		t.Errorf("result = %+v", res)
	}
	err = h.PostToolResults(ctx, client.ToolResult{Kind: "tool_result", ToolReq: client.ToolRequest{ID: "call_1"}})
	if !errors.Is(err, client.ErrConflict) {
		t.Errorf("post after the end = %v, want ErrConflict", err)
	}
	// A message restarts the session (as in the reference).
	if err := h.SendMessage(ctx, "hi"); err != nil {
		t.Errorf("message after the end = %v", err)
	}
}

// flaky answers 503 to the first requests of each kind, then proxies.
type flaky struct {
	next     http.Handler
	mu       sync.Mutex
	failures map[string]int
	failed   int
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	kind := r.Method + " " + r.URL.Path[strings.LastIndex(r.URL.Path, "/"):]
	f.mu.Lock()
	fail := f.failures[kind] < 2
	f.failures[kind]++
	if fail {
		f.failed++
	}
	f.mu.Unlock()
	if fail {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"detail":"try again"}`)
		return
	}
	f.next.ServeHTTP(w, r)
}

func TestRetries(t *testing.T) {
	target, _ := startServer(t, nil, calls("call_1", "get_order_status", `{"order_id":"1"}`), openaitest.Reply{Text: "done"})
	u, _ := url.Parse(target)
	proxy := &flaky{next: httputil.NewSingleHostReverseProxy(u), failures: map[string]int{}}
	srv := httptest.NewServer(proxy)
	defer srv.Close()
	var runs atomic.Int32
	tool := loop.NewTool("get_order_status", "Look up the status of an order.", func(context.Context, orderArgs) (string, error) {
		runs.Add(1)
		return "ok", nil
	})
	c := client.New(srv.URL, apiKey, &client.Options{RetryDelay: time.Millisecond})
	res, err := c.RunSession(t.Context(), inline("go"), tool)
	if err != nil || res.Status != session.StatusCompleted {
		t.Fatalf("RunSession = %+v, %v", res, err)
	}
	if runs.Load() != 1 || proxy.failed < 6 {
		t.Errorf("tool ran %d times, %d requests failed", runs.Load(), proxy.failed)
	}
	// Non-retryable errors come back at once.
	_, err = client.New(target, "sk-wrong", nil).CreateSession(t.Context(), inline("x"), nil)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized {
		t.Errorf("bad key = %v", err)
	}
	_, err = client.New(target, apiKey, nil).CreateSession(t.Context(), &client.SessionRequest{Agent: client.AgentRef{Name: "nobody"}, Messages: client.Text("x")}, nil)
	if !errors.Is(err, client.ErrInvalid) || !strings.Contains(err.Error(), "nobody") {
		t.Errorf("unknown agent = %v", err)
	}
}

func TestNamedAgentToolsAndControls(t *testing.T) {
	url, model := startServer(t, &session.Options{Agents: map[string]*session.AgentConfig{"support": {Description: "Support."}}},
		calls("call_1", "get_order_status", `{"order_id":"1"}`), openaitest.Reply{Text: "first"}, openaitest.Reply{Text: "second"})
	tool := loop.NewTool("get_order_status", "Look up the status of an order.", func(context.Context, orderArgs) (string, error) { return "ok", nil })
	c := client.New(url, apiKey, nil)
	ctx := t.Context()
	idle := 60
	h, err := c.StartSession(ctx, &client.SessionRequest{Agent: client.AgentRef{Name: "support"}, Messages: client.Text("go"), IdleTimeoutS: &idle}, tool)
	if err != nil {
		t.Fatal(err)
	}
	// Tools reach a named agent through the agent.tools override.
	waitStatus := func(want session.Status) {
		t.Helper()
		for range 100 {
			ch, err := h.Changes(ctx, &client.ChangesOptions{ExcludeEvents: true})
			if err != nil {
				t.Fatal(err)
			}
			if ch != nil && ch.Status == want {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("status never became %s", want)
	}
	waitStatus(session.StatusAwaitingToolResults)
	if !strings.Contains(string(model.Requests()[0].Body), "get_order_status") {
		t.Error("the override did not declare the tool")
	}
	// WaitForCompletion runs the tool; the session then idles, so cancel
	// it from another handle once it does.
	go func() {
		waitStatus(session.StatusIdle)
		if err := h.SendMessage(ctx, "again"); err != nil {
			t.Error(err)
		}
		for range 100 {
			if s, _ := h.Get(ctx); s != nil && string(s.LatestAnswer) == `"second"` {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		h.Pause(ctx)
		h.Resume(ctx)
		h.ForceAnswer(ctx)
		h.Cancel(ctx)
	}()
	res, err := h.WaitForCompletion(ctx, tool)
	if err != nil || res.Status != session.StatusInterrupted || res.Answer != "second" {
		t.Errorf("WaitForCompletion = %+v, %v", res, err)
	}
	st, err := h.Status(ctx)
	if err != nil || st.Steps != 3 {
		t.Errorf("status = %+v, %v", st, err)
	}
	page, err := c.ListSessions(ctx, &client.ListOptions{Statuses: []client.Status{session.StatusInterrupted}})
	if err != nil || page.Total != 1 || page.Items[0].ID != h.ID() {
		t.Errorf("list = %+v, %v", page, err)
	}
}

// TestRunTyped: a session created with answer_format returns its answer
// typed, for an inline agent and for a named one (through the override).
func TestRunTyped(t *testing.T) {
	type shipment struct {
		OrderID string `json:"order_id"`
		Shipped bool   `json:"shipped"`
	}
	url, model := startServer(t, &session.Options{Agents: map[string]*session.AgentConfig{"named": {Description: "named"}}},
		openaitest.Reply{Text: `{"order_id":"4242","shipped":true}`},
		openaitest.Reply{Text: `{"order_id":"7","shipped":false}`},
	)
	c := client.New(url, apiKey, nil)
	got, res, err := client.RunTyped[shipment](t.Context(), c, inline("Check order 4242."))
	if err != nil {
		t.Fatal(err)
	}
	if got != (shipment{OrderID: "4242", Shipped: true}) || res.Status != session.StatusCompleted {
		t.Errorf("answer = %+v, result %+v", got, res)
	}
	if !strings.Contains(string(model.Requests()[0].Body), `"response_format"`) {
		t.Errorf("the model was not asked for the format: %s", model.Requests()[0].Body)
	}
	got, _, err = client.RunTyped[shipment](t.Context(), c, &client.SessionRequest{Agent: client.AgentRef{Name: "named"}, Messages: client.Text("Check 7.")})
	if err != nil || got != (shipment{OrderID: "7"}) {
		t.Errorf("named agent: %+v, %v", got, err)
	}
}

// TestNewOperations: the quota, list filters, feedback and sharing.
func TestNewOperations(t *testing.T) {
	url, _ := startServer(t, nil, openaitest.Reply{Text: "done"})
	c := client.New(url, apiKey, nil)
	ctx := t.Context()
	req := inline("hi")
	group := "g1"
	req.GroupID = &group
	res, err := c.RunSession(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	q, err := c.Quota(ctx)
	if err != nil || q.Scope != "user" || q.Active != 0 {
		t.Errorf("Quota = %+v, %v", q, err)
	}
	page, err := c.ListSessions(ctx, &client.ListOptions{GroupID: "g1", Search: "HI", CreatedAfter: time.Now().Add(-time.Hour)})
	if err != nil || page.Total != 1 || page.Items[0].ID != res.SessionID {
		t.Errorf("ListSessions = %+v, %v", page, err)
	}
	page, err = c.ListSessions(ctx, &client.ListOptions{GroupID: "other"})
	if err != nil || page.Total != 0 {
		t.Errorf("ListSessions of another group = %+v, %v", page, err)
	}
	h := c.Session(res.SessionID)
	if err := h.Feedback(ctx, client.Feedback{Success: true}); err != nil {
		t.Error(err)
	}
	if err := h.EventFeedback(ctx, 0, client.Feedback{Success: false}); err != nil {
		t.Error(err)
	}
	if err := h.EventFeedback(ctx, 99, client.Feedback{}); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("EventFeedback of a missing event = %v", err)
	}
	link, err := h.Share(ctx)
	if err != nil || !strings.HasPrefix(link, url+"/api/v2/shared/") {
		t.Errorf("Share = %q, %v", link, err)
	}
	if err := h.Unshare(ctx); err != nil {
		t.Error(err)
	}
}

// recorder records the cursors of long-polls and the event ranges posts
// say they appended.
type recorder struct {
	mu      sync.Mutex
	polls   []int64    // from_index of each GET changes
	appends [][2]int64 // Hrns-Events of each POST tool_results
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case req.Method == "GET" && strings.HasSuffix(req.URL.Path, "/changes"):
		from, _ := strconv.ParseInt(req.URL.Query().Get("from_index"), 10, 64)
		r.polls = append(r.polls, from)
	case req.Method == "POST" && strings.HasSuffix(req.URL.Path, "/tool_results"):
		from, to, ok := api.ParseEventRange(resp.Header.Get(api.HeaderEvents))
		if !ok {
			return nil, fmt.Errorf("POST tool_results answered %s: %q", api.HeaderEvents, resp.Header.Get(api.HeaderEvents))
		}
		r.appends = append(r.appends, [2]int64{from, to})
	}
	return resp, nil
}

// TestNoPollForOwnResults: after posting results, WaitForCompletion goes
// on from the events the post appended (the server's Hrns-Events), so no
// long-poll returns only its own results: one long-poll a turn.
func TestNoPollForOwnResults(t *testing.T) {
	url, _ := startServer(t, nil,
		calls("call_1", "get_order_status", `{"order_id":"4242"}`),
		calls("call_2", "get_order_status", `{"order_id":"4243"}`, "call_3", "get_order_status", `{"order_id":"4244"}`),
		openaitest.Reply{Text: "done"},
	)
	status := loop.NewTool("get_order_status", "Look up the status of an order.", func(_ context.Context, in orderArgs) (string, error) {
		return "shipped", nil
	})
	rec := &recorder{}
	c := client.New(url, apiKey, &client.Options{HTTPClient: &http.Client{Transport: rec}})
	res, err := c.RunSession(t.Context(), inline("Check orders."), status)
	if err != nil || res.Status != session.StatusCompleted || res.Answer != "done" {
		t.Fatalf("RunSession = %+v, %v", res, err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.appends) != 2 {
		t.Fatalf("%d posts of results, want 2", len(rec.appends))
	}
	for _, a := range rec.appends {
		if a[1] <= a[0] {
			t.Errorf("a post of new results appended no events: %v", a)
		}
		if slices.Contains(rec.polls, a[0]) {
			t.Errorf("a long-poll read from %d, where the client's own post began (%v); polls %v", a[0], a, rec.polls)
		}
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
