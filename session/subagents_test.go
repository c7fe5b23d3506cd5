package session_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// TestChildEndLostIsFound: when the delivery of a child session's end to
// its parent is lost (a crash at that moment), the waiting parent finds
// the ended child itself at its next check, and runs on.
func TestChildEndLostIsFound(t *testing.T) {
	model := llmtest.NewModel(
		llmtest.Call("c1", "delegate", `{"agent":"helper","task":"say yes"}`),
		llmtest.Text("yes"),
		llmtest.Text("the helper said yes"),
	)
	m := session.New(openStore(t), model, &session.Options{Logger: slog.New(slog.NewTextHandler(tWriter{t}, nil))})
	session.SetLostDelivery(m, 20*time.Millisecond)
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(context.Background()) })
	v := create(t, m, `{"agent":{"name":"boss","subagents":[{"name":"helper","description":"Helps."}]},"messages":"ask the helper"}`)
	f := &follower{t: t, m: m, id: v.ID}
	c := f.status(session.StatusCompleted)
	if string(c.Answer) != `"the helper said yes"` {
		t.Errorf("answer = %s", c.Answer)
	}
	st, err := m.Status(t.Context(), owner, v.ID)
	if err != nil || len(st.SubagentSessionIDs) != 1 {
		t.Fatalf("status = %+v, %v", st, err)
	}
}

// childrenOf lists the child sessions of parent, with their statuses.
func childrenOf(t *testing.T, m *session.Manager, parent string) map[string]session.Status {
	t.Helper()
	page, err := m.List(t.Context(), owner, &session.ListParams{ParentSessionID: parent, Page: 1, Size: 100})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]session.Status{}
	for _, s := range page.Items {
		out[s.ID] = s.Status
	}
	return out
}

// TestEndingCancelsChildren: a parent session that ends (cancelled here)
// cancels its child sessions still running: nothing will read their
// answers, and they would run on, and spend, for nothing.
func TestEndingCancelsChildren(t *testing.T) {
	model := llmtest.NewModel(
		llmtest.Call("c1", "delegate", `{"agent":"helper","task":"ask"}`),
		llmtest.Call("c2", "ask", `{}`), // the child waits for its client
	)
	m := startManager(t, openStore(t), model, nil)
	v := create(t, m, `{"agent":{"name":"boss","subagents":[{"name":"helper","description":"Helps.","tools":[{"name":"ask","description":"Asks."}]}]},"messages":"ask the helper"}`)
	f := &follower{t: t, m: m, id: v.ID}
	untilStatus(t, f, session.StatusAwaitingToolResults)
	var child string
	for deadline := time.Now().Add(30 * time.Second); child == ""; {
		for id, st := range childrenOf(t, m, v.ID) {
			if st == session.StatusAwaitingToolResults {
				child = id
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child never waited: %v", childrenOf(t, m, v.ID))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := m.Cancel(t.Context(), owner, v.ID); err != nil {
		t.Fatal(err)
	}
	untilStatus(t, f, session.StatusInterrupted)
	if got := childrenOf(t, m, v.ID)[child]; got != session.StatusInterrupted {
		t.Errorf("the child of the cancelled parent is %s, want interrupted", got)
	}
}

// TestEndedRunMakesNoLiveChild: a run that was ended (Cancel) while it
// created a child session leaves no child running.
func TestEndedRunMakesNoLiveChild(t *testing.T) {
	model := llmtest.NewModel(
		llmtest.Call("c1", "delegate", `{"agent":"helper","task":"ask"}`),
		llmtest.Call("c2", "ask", `{}`),
	)
	m, _ := newLogged(t, openStore(t), model, nil)
	var once sync.Once
	session.SetAfterChild(m, func(parent string) {
		once.Do(func() {
			if err := m.Cancel(context.Background(), owner, parent); err != nil {
				t.Error(err)
			}
		})
	})
	v := create(t, m, `{"agent":{"name":"boss","subagents":[{"name":"helper","description":"Helps.","tools":[{"name":"ask","description":"Asks."}]}]},"messages":"ask the helper"}`)
	start(t, m)
	f := &follower{t: t, m: m, id: v.ID}
	untilStatus(t, f, session.StatusInterrupted)
	// The child, if one was made, ends: it must not wait for a client
	// that will never come, nor run on.
	deadline := time.Now().Add(30 * time.Second)
	for {
		live := 0
		children := childrenOf(t, m, v.ID)
		for _, st := range children {
			if !st.Terminal() {
				live++
			}
		}
		if live == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ended run left children running: %v", children)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cutDeliveryStore makes the race of TestChildEndBeforeWaitDeliveredAfterLeaseGone
// happen every time: the parent's commit of its wait for its child
// waits until the child has ended, and the parent worker's read of the
// ended child, after that commit, waits until the parent's watcher has
// found the lease given up (its renewal answered ErrLeaseLost, which
// cancels the worker's context) and that context is done.
type cutDeliveryStore struct {
	store.Store
	parent, child atomic.Pointer[string]
	armed         atomic.Bool
	lost          chan struct{}
	lostOnce      sync.Once
	readOnce      sync.Once
}

func (c *cutDeliveryStore) CreateSession(ctx context.Context, s *store.Session, events []store.Event) (*store.Session, bool, error) {
	got, created, err := c.Store.CreateSession(ctx, s, events)
	if err == nil && s.ParentID != "" {
		id := got.ID
		c.child.Store(&id)
	}
	return got, created, err
}

func (c *cutDeliveryStore) UpdateSession(ctx context.Context, s *store.Session, events []store.Event, opts *store.UpdateOptions) error {
	parent := c.parent.Load()
	waits := parent != nil && s.ID == *parent && opts != nil && opts.Release && c.child.Load() != nil
	if waits {
		for range 2000 { // the child ends first
			if got, err := c.Store.GetSession(ctx, *c.child.Load()); err == nil && session.Status(got.Status).Terminal() {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	err := c.Store.UpdateSession(ctx, s, events, opts)
	if waits && err == nil {
		c.armed.Store(true)
	}
	return err
}

func (c *cutDeliveryStore) Renew(ctx context.Context, id, owner string, until time.Time) error {
	err := c.Store.Renew(ctx, id, owner, until)
	if p := c.parent.Load(); p != nil && id == *p && errors.Is(err, store.ErrLeaseLost) {
		c.lostOnce.Do(func() { close(c.lost) })
	}
	return err
}

func (c *cutDeliveryStore) GetSession(ctx context.Context, id string) (*store.Session, error) {
	if child := c.child.Load(); child != nil && id == *child && c.armed.Load() {
		c.readOnce.Do(func() {
			select {
			case <-c.lost:
			case <-time.After(10 * time.Second):
			}
			if done := ctx.Done(); done != nil {
				select {
				case <-done:
				case <-time.After(10 * time.Second):
				}
			}
		})
	}
	return c.Store.GetSession(ctx, id)
}

// TestChildEndBeforeWaitDeliveredAfterLeaseGone: a child that ends before
// its parent's wait for it is committed finds no call to give its end to;
// the parent's worker gives it after that commit. That commit gave the
// lease up, so the worker's watcher, renewing it, finds it lost and
// cancels the worker's context, and the delivery, made on that context,
// failed ("giving a subagent's answer to its parent: get session: context
// canceled", TestModelBased/postgres under CPU load, seed 959796996815):
// the parent waited for its periodic check of its children, a minute
// later. Before the fix the parent was still awaiting_tool_results after
// 20 s here.
func TestChildEndBeforeWaitDeliveredAfterLeaseGone(t *testing.T) {
	eachStore(t, func(t *testing.T, base store.Store) {
		st := &cutDeliveryStore{Store: base, lost: make(chan struct{})}
		model := llmtest.NewModel(
			llmtest.Call("c1", "delegate", `{"agent":"helper","task":"say yes"}`),
			llmtest.Text("yes"),
			llmtest.Text("the helper said yes"),
		)
		var req session.Request
		body := `{"agent":{"name":"boss","subagents":[{"name":"helper","description":"Helps."}]},"messages":"ask the helper"}`
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			t.Fatal(err)
		}
		// Not claimed at creation: the parent's id is known before its
		// worker runs.
		idle := session.New(st, model, &session.Options{})
		v, _, err := idle.Create(t.Context(), &session.CreateParams{Owner: owner, Request: &req, Raw: json.RawMessage(body)})
		if err != nil {
			t.Fatal(err)
		}
		id := v.ID
		st.parent.Store(&id)
		m := startManager(t, st, model, &session.Options{LeaseTTL: 300 * time.Millisecond})
		var got *session.View
		for range 4000 {
			if got, err = m.Get(t.Context(), owner, v.ID); err != nil {
				t.Fatal(err)
			}
			if got.Status.Status.Terminal() {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if got.Status.Status != session.StatusCompleted || string(got.LatestAnswer) != `"the helper said yes"` {
			t.Fatalf("the parent is %s with the answer %s, want completed with the helper's answer read", got.Status.Status, got.LatestAnswer)
		}
	})
}

// childFailingStore fails the creation of child sessions as a store that
// cannot write would, with an error naming the operator's database.
type childFailingStore struct{ store.Store }

const storeSecret = "open /var/lib/hrns-secret/hrns.db: disk I/O error (10.9.8.7:5432)"

func (s *childFailingStore) CreateSession(ctx context.Context, ss *store.Session, events []store.Event) (*store.Session, bool, error) {
	if ss.ParentID != "" {
		return nil, false, errors.New(storeSecret)
	}
	return s.Store.CreateSession(ctx, ss, events)
}

// TestChildCreationErrorHidesTheStore: a delegate call whose child session
// cannot be created (the store failed) tells the model, and so the
// session's owner, that it failed, not the store's error, which names
// the operator's database; the log has it.
func TestChildCreationErrorHidesTheStore(t *testing.T) {
	model := llmtest.NewModel(
		llmtest.Call("c1", "delegate", `{"agent":"helper","task":"say yes"}`),
		llmtest.Text("no helper"),
	)
	m, log := newLogged(t, &childFailingStore{Store: openStore(t)}, model, nil)
	start(t, m)
	v := create(t, m, `{"agent":{"name":"boss","subagents":[{"name":"helper","description":"Helps."}]},"messages":"ask the helper"}`)
	f, c := ended(t, m, v.ID)
	if c.Status != session.StatusCompleted {
		t.Fatalf("ended %s (%v); events:\n%s", c.Status, c.Error, f.dump())
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests", len(reqs))
	}
	result, _ := json.Marshal(reqs[1].Messages[len(reqs[1].Messages)-1])
	for what, shown := range map[string]string{"model's tool result": string(result), "events": f.dump()} {
		if strings.Contains(shown, "hrns-secret") || strings.Contains(shown, "10.9.8.7") || strings.Contains(shown, "disk I/O") {
			t.Errorf("the %s show the store's error:\n%s", what, shown)
		}
	}
	if !strings.Contains(string(result), "the subagent's session could not be created") {
		t.Errorf("the model is not told the delegation failed: %s", result)
	}
	if !strings.Contains(log.String(), storeSecret) {
		t.Errorf("the log lost the store's error:\n%s", log.String())
	}
}

// deliveryFailingStore fails every commit that gives a child's end to its
// parent (the parent's tool_result event), as a store that cannot write
// that row would, and counts them.
type deliveryFailingStore struct {
	store.Store
	deliveries atomic.Int32
}

func (s *deliveryFailingStore) UpdateSession(ctx context.Context, ss *store.Session, events []store.Event, opts *store.UpdateOptions) error {
	for _, ev := range events {
		if bytes.Contains(ev.Data, []byte(`"tool_result"`)) {
			s.deliveries.Add(1)
			return errors.New("disk I/O error")
		}
	}
	return s.Store.UpdateSession(ctx, ss, events, opts)
}

// TestChildEndUndeliverableDoesNotSpin: a parent whose child has ended
// but whose store refuses the commit that delivers the end did not wait
// for anything before trying again: its worker read the parent as due,
// tried the delivery, failed, and went round, as fast as the store
// answered, for as long as it failed. A failed delivery is now a store
// error like any other commit's: the lease is left to expire and the
// attempts bound the retries, so the deliveries tried are about one per
// claim, and the parent ends failed once its attempts are spent.
func TestChildEndUndeliverableDoesNotSpin(t *testing.T) {
	st := &deliveryFailingStore{Store: openStore(t)}
	model := llmtest.NewModel(
		llmtest.Call("c1", "delegate", `{"agent":"helper","task":"say yes"}`),
		llmtest.Text("yes"),
		llmtest.Text("the helper said yes"),
	)
	m, _ := newLogged(t, st, model, &session.Options{LeaseTTL: 200 * time.Millisecond})
	session.SetChildCheck(m, 100*time.Millisecond) // the parent checks its children often
	start(t, m)
	v := create(t, m, `{"agent":{"name":"boss","subagents":[{"name":"helper","description":"Helps."}]},"messages":"ask the helper"}`)
	// The child's end is refused from the start: poll the parent, and the
	// deliveries tried, until it ends (without the fix it never did).
	for i := 0; ; i++ {
		if n := st.deliveries.Load(); n > 50 {
			t.Fatalf("%d deliveries of the child's end tried while the store refuses them: the parent's worker spins", n)
		}
		got, err := m.Get(t.Context(), owner, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Status.Terminal() {
			break
		}
		if i == 3000 {
			t.Fatalf("the parent is still %s", got.Status.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
	f, c := ended(t, m, v.ID)
	checkInternal(t, f, c, "failed 3 times in a row")
	// The child's own end tries once, then each of the parent's three
	// attempts once.
	if n := st.deliveries.Load(); n > 5 {
		t.Errorf("%d deliveries tried, want about one per attempt", n)
	}
}
