package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// gatedClaims holds the dispatcher's claims, once armed, until the test
// lets them go.
type gatedClaims struct {
	store.Store
	mu       sync.Mutex
	armed    bool
	inFlight int // claims in the store, gated or not
	entered  chan struct{}
	gate     chan struct{}
}

func (g *gatedClaims) Claim(ctx context.Context, p *store.ClaimParams) ([]*store.Session, error) {
	g.mu.Lock()
	armed := g.armed
	g.armed = false
	g.inFlight++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}()
	if armed {
		close(g.entered)
		<-g.gate
	}
	return g.Store.Claim(ctx, p)
}

// armWhenIdle arms the gate once no claim is in flight, so that the next
// claim is the one held and no claim made before arming sees what the
// test does next.
func (g *gatedClaims) armWhenIdle() {
	for {
		g.mu.Lock()
		if g.inFlight == 0 {
			g.armed = true
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
}

// awaitingResults follows owner's session id until it waits for tool
// results.
func awaitingResults(t *testing.T, m *session.Manager, owner, id string) {
	t.Helper()
	for from := int64(0); ; {
		c, _, err := m.Changes(t.Context(), owner, id, &session.ChangesParams{From: from, Wait: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if c == nil {
			continue
		}
		if c.Status == session.StatusAwaitingToolResults {
			return
		}
		from += int64(len(c.NewEvents))
	}
}

// inputModel runs sessions whose first message names them: "a1" and "a2"
// call the client tool read_file each turn, "b" answers at once. a1's
// first turn waits for release1; a2's turns, and a1's after its first,
// wait for the test's end; each request is reported on started.
type inputModel struct {
	release1, end chan struct{}
	started       chan string
}

func (m *inputModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[llm.Chunk, error] {
	first := 0
	for first < len(req.Messages)-1 && req.Messages[first].Role != llm.RoleUser {
		first++
	}
	name := req.Messages[first].Text()
	turn := (len(req.Messages)-first-1)/2 + 1
	m.started <- fmt.Sprintf("%s#%d", name, turn)
	switch {
	case name == "b":
		return turnsModel{turns: 1}.Stream(ctx, req)
	case name == "a1" && turn == 1:
		<-m.release1
	case name == "a3":
		return turnsModel{turns: 1}.Stream(ctx, req)
	default:
		<-m.end
	}
	return turnsModel{turns: 100}.Stream(ctx, req)
}

// TestInputClaimsFairAcrossKeys: a caller's input claims its session in
// its commit only in its owner's turn. With two workers, key A's
// sessions a1 and a2 run and key B's session b, created then, waits for
// the dispatcher. a1 then waits for its client-side tool's result, which
// frees a worker, and its result is posted while the dispatcher's claim
// of that worker is on its way (held here, as a slow claim or a late
// dispatcher is). Before, the post claimed a1 in its commit for A, which
// held both workers again while b waited, and the dispatcher's claim then
// ran b beside them, on a third worker of two. Now A, holding a worker of
// two while b waits, leaves a1 to the dispatcher, whose fair claim runs b
// on the worker a1 freed, and a1 waits its turn.
//
// The same holds for a creation: A's new session a3, created then, waits
// for the dispatcher too.
func TestInputClaimsFairAcrossKeys(t *testing.T) {
	for _, create := range []bool{false, true} {
		name := "tool result"
		if create {
			name = "creation"
		}
		t.Run(name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, st store.Store) { testInputClaimsFairAcrossKeys(t, st, create) })
		})
	}
}

func testInputClaimsFairAcrossKeys(t *testing.T, st store.Store, create bool) {
	g := &gatedClaims{Store: st, entered: make(chan struct{}), gate: make(chan struct{})}
	model := &inputModel{release1: make(chan struct{}), end: make(chan struct{}), started: make(chan string, 16)}
	m, _ := newLogged(t, g, model, &session.Options{Workers: 2})
	defer close(model.end)
	start(t, m)
	ctx := t.Context()
	mk := func(key, name string) string {
		t.Helper()
		body := fmt.Sprintf(`{"agent":{"name":"a","tools":[{"name":"read_file","description":"Reads a file."}]},"max_steps":1000,"messages":%q}`, name)
		var req session.Request
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			t.Fatal(err)
		}
		v, _, err := m.Create(ctx, &session.CreateParams{Owner: key, Request: &req, Raw: json.RawMessage(body)})
		if err != nil {
			t.Fatal(err)
		}
		return v.ID
	}
	next := func() string {
		t.Helper()
		select {
		case s := <-model.started:
			return s
		case <-ctx.Done():
			t.Fatal("no model request")
			return ""
		}
	}
	a1 := mk("key-a", "a1")
	mk("key-a", "a2")
	got := []string{next(), next()}
	if !(strings.Contains(strings.Join(got, " "), "a1#1") && strings.Contains(strings.Join(got, " "), "a2#1")) {
		t.Fatalf("first requests %v; want a1's and a2's", got)
	}
	// Both workers run A's sessions: b waits for the dispatcher.
	mk("key-b", "b")
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
	close(model.release1)
	awaitingResults(t, m, "key-a", a1)
	<-g.entered // a1's worker is free, and the dispatcher claims it
	if create {
		if a3 := mk("key-a", "a3"); session.Workers(m, a3) != 0 {
			t.Errorf("a3, created while b waits and A holds a worker of two, was claimed for A in its creation: b waits behind A")
		}
	} else {
		if err := m.PostToolResults(ctx, "key-a", a1, []session.ToolResult{{Kind: "tool_result", ToolReq: session.ToolRequest{ID: "call_0"}, Result: json.RawMessage(`"ok"`)}}); err != nil {
			t.Fatal(err)
		}
		if n := session.Workers(m, a1); n != 0 {
			t.Errorf("a1's result, posted while b waits and A holds a worker of two, claimed a1 for A in its commit (%d worker): b waits behind A", n)
		}
	}
	close(g.gate)
	if s := next(); s != "b#1" {
		t.Errorf("the request after A's input: %s; want b's (b#1): the worker a1 freed goes to the key running none", s)
	}
	if n := session.Running(m); n > 2 {
		t.Errorf("%d workers run; Workers is 2", n)
	}
}

// TestInputClaimWithinWorkers: a caller's input claims its session in its
// commit only on a worker that the dispatcher's claim in flight does not
// take. With two workers, none running, the dispatcher claims (two
// sessions of key B wait, created by a manager that runs none) while the
// result of A's session a1 is posted (the claim is held here, as a slow
// claim is). Before, the claim was for both workers, and the post, which
// found both free, claimed a1 in its commit too: three sessions ran on
// two workers. Now a claim in a pool with room is for half the free
// workers, which it holds while in flight: a1 is claimed in its commit on
// the other (not left to the dispatcher's next claim, as it would be by a
// claim holding every free worker), and two sessions run.
func TestInputClaimWithinWorkers(t *testing.T) {
	eachStore(t, testInputClaimWithinWorkers)
}

func testInputClaimWithinWorkers(t *testing.T, st store.Store) {
	g := &gatedClaims{Store: st, entered: make(chan struct{}), gate: make(chan struct{})}
	model := &inputModel{release1: make(chan struct{}), end: make(chan struct{}), started: make(chan string, 16)}
	close(model.release1)
	m, _ := newLogged(t, g, model, &session.Options{Workers: 2})
	idle, _ := newLogged(t, g, model, &session.Options{Workers: 2}) // not started: its creations claim nothing
	defer close(model.end)
	start(t, m)
	ctx := t.Context()
	mk := func(m *session.Manager, key, name string) string {
		t.Helper()
		body := fmt.Sprintf(`{"agent":{"name":"a","tools":[{"name":"read_file","description":"Reads a file."}]},"max_steps":1000,"messages":%q}`, name)
		var req session.Request
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			t.Fatal(err)
		}
		v, _, err := m.Create(ctx, &session.CreateParams{Owner: key, Request: &req, Raw: json.RawMessage(body)})
		if err != nil {
			t.Fatal(err)
		}
		return v.ID
	}
	a1 := mk(m, "key-a", "a1")
	if s := <-model.started; s != "a1#1" {
		t.Fatalf("first request %s, want a1#1", s)
	}
	awaitingResults(t, m, "key-a", a1)
	for session.Running(m) != 0 {
		time.Sleep(time.Millisecond) // a1's worker leaves after its commit
	}
	// A claim made when a1's worker left, if still on its way, could
	// take b1 before the held claim does.
	g.armWhenIdle()
	mk(idle, "key-b", "b1")
	mk(idle, "key-b", "b2")
	<-g.entered // the dispatcher claims
	if err := m.PostToolResults(ctx, "key-a", a1, []session.ToolResult{{Kind: "tool_result", ToolReq: session.ToolRequest{ID: "call_0"}, Result: json.RawMessage(`"ok"`)}}); err != nil {
		t.Fatal(err)
	}
	// The result claims a1 in its commit: a1's next model request starts
	// while the dispatcher's claim is still held (nothing else could run
	// a1 then). A claim reserving every free worker would leave the
	// inputs committed meanwhile to its next claim. (Counting a1's
	// workers as PostToolResults returns raced with the worker's start.)
	select {
	case s := <-model.started:
		if s != "a1#2" {
			t.Errorf("request %s started while the dispatcher's claim was held, want a1#2", s)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("a1's result, posted in a pool with room while the dispatcher claims, did not claim a1 in its commit (no request in 10s)")
	}
	close(g.gate)
	// One of b1 and b2 starts, on the worker the claim took; the claim's
	// workers are launched together.
	select {
	case <-model.started:
	case <-ctx.Done():
		t.Fatal("no model request")
	}
	if n := session.Running(m); n > 2 {
		t.Errorf("%d workers run; Workers is 2", n)
	}
}
