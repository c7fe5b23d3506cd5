package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/llm"
	"github.com/hrns-dev/hrns/llm/llmtest"
	"github.com/hrns-dev/hrns/platform/quota"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/postgres"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
)

// fakeClock is a time that tests move.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// twoReplicas runs fn with two stores over one database, as two replicas
// see it: the same SQLite store (its file admits one process), and two
// connections to one PostgreSQL schema when the test server is reachable.
func twoReplicas(t *testing.T, fn func(t *testing.T, a, b store.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		st := openStore(t)
		fn(t, st, st)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := postgrestest.DSN(t)
		var sts [2]store.Store
		for i := range sts {
			st, err := postgres.Open(t.Context(), dsn, &postgres.Options{MaxConns: 4})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			sts[i] = st
		}
		fn(t, sts[0], sts[1])
	})
}

const getOrderTool = `{"name":"get_order_status","description":"Look up an order.","input_schema":{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}}`

// TestTokenQuota: a step's tokens count at once, on every replica; the
// step that crosses the limit ends its session before the next model
// request; new sessions and messages are refused until the window ends;
// other keys are not affected.
func TestTokenQuota(t *testing.T) {
	twoReplicas(t, func(t *testing.T, a, b store.Store) {
		clock := &fakeClock{now: time.Date(2026, 6, 1, 22, 30, 0, 0, time.UTC)}
		options := func() *session.Options {
			return &session.Options{TokenQuota: &quota.Tokens{Limit: 1000, Period: quota.PeriodDay, Now: clock.Now}}
		}
		model := llmtest.NewModel(
			llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "get_order_status", Arguments: llm.Arguments(`{"order_id":"1"}`)}},
				Usage: llm.Usage{InputTokens: 800, OutputTokens: 300}},
			llmtest.Text("never asked for"),
		)
		ma := startManager(t, a, model, options())
		mb := startManager(t, b, model, options()) // either replica may run the session
		ctx := t.Context()

		v := create(t, ma, `{"agent":{"name":"support-agent","tools":[`+getOrderTool+`]},"messages":"Check order 1."}`)
		f := &follower{t: t, m: ma, id: v.ID}
		f.status(session.StatusAwaitingToolResults)

		// The other replica reads the count.
		q, err := mb.TokenQuota(ctx, owner)
		if err != nil {
			t.Fatal(err)
		}
		day := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
		if *q.Limit != 1000 || *q.Used != 1100 || *q.Remaining != 0 || !q.WindowStart.Equal(day) || !q.WindowEnd.Equal(day.AddDate(0, 0, 1)) {
			t.Errorf("TokenQuota = limit %d used %d remaining %d window %v-%v", *q.Limit, *q.Used, *q.Remaining, q.WindowStart, *q.WindowEnd)
		}

		// The session goes on with its result, and stops before the
		// model's next step.
		if err := ma.PostToolResults(ctx, owner, v.ID, []session.ToolResult{{Kind: "tool_result",
			ToolReq: session.ToolRequest{ToolName: "get_order_status", ID: "call_1"}, Result: []byte(`"shipped"`)}}); err != nil {
			t.Fatal(err)
		}
		c := f.status(session.StatusFailed)
		if c.Error == nil || !strings.Contains(*c.Error, "token quota exceeded") || !strings.Contains(*c.Error, "1100 of its 1000 tokens") {
			t.Errorf("error = %v, want the token quota's", c.Error)
		}
		if c.ErrorCode != nil {
			t.Errorf("error_code = %v, want null", *c.ErrorCode)
		}
		if n := len(model.Requests()); n != 1 {
			t.Errorf("%d model requests, want 1: the quota stops the session before the second", n)
		}

		// New sessions and messages are refused, on either replica.
		for _, m := range []*session.Manager{ma, mb} {
			body := `{"agent":{"name":"support-agent"},"messages":"Hi."}`
			var req session.Request
			if err := json.Unmarshal([]byte(body), &req); err != nil {
				t.Fatal(err)
			}
			_, _, err := m.Create(ctx, &session.CreateParams{Owner: owner, Request: &req, Raw: []byte(body)})
			var qe *quota.Error
			if !errors.As(err, &qe) || !errors.Is(err, session.ErrTokenQuotaExceeded) {
				t.Fatalf("Create over the quota = %v, want a TokenQuotaError", err)
			}
			if !qe.WindowEnd.Equal(day.AddDate(0, 0, 1)) || qe.Used != 1100 || qe.Limit != 1000 {
				t.Errorf("TokenQuotaError = %+v", qe)
			}
			err = m.SendMessages(ctx, owner, v.ID, []session.UserMessage{{Message: "again"}})
			if !errors.Is(err, session.ErrTokenQuotaExceeded) {
				t.Errorf("SendMessages over the quota = %v, want ErrTokenQuotaExceeded", err)
			}
		}
		// Another key has its own count.
		if q, err := mb.TokenQuota(ctx, "bob"); err != nil || *q.Used != 0 {
			t.Errorf("bob's quota = %+v, %v; want nothing used", q, err)
		}

		// The next day is a new window.
		clock.Add(2 * time.Hour)
		q, err = ma.TokenQuota(ctx, owner)
		if err != nil {
			t.Fatal(err)
		}
		if *q.Used != 0 || *q.Remaining != 1000 || !q.WindowStart.Equal(day.AddDate(0, 0, 1)) {
			t.Errorf("the next day: used %d remaining %d from %v", *q.Used, *q.Remaining, q.WindowStart)
		}
		if err := ma.SendMessages(ctx, owner, v.ID, []session.UserMessage{{Message: "again"}}); err != nil {
			t.Errorf("SendMessages in a new window = %v", err)
		}
	})
}

// TestTokenQuotaUnlimited: without a limit, tokens are counted per month
// and reported with a null limit.
func TestTokenQuotaUnlimited(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 2, 14, 9, 0, 0, 0, time.UTC)}
	model := llmtest.NewModel(llmtest.Reply{Text: "done", Usage: llm.Usage{InputTokens: 40, OutputTokens: 2}})
	m := startManager(t, openStore(t), model, &session.Options{TokenQuota: &quota.Tokens{Now: clock.Now}})
	v := create(t, m, `{"agent":{"name":"support-agent"},"messages":"Hi."}`)
	(&follower{t: t, m: m, id: v.ID}).status(session.StatusCompleted)
	q, err := m.TokenQuota(t.Context(), owner)
	if err != nil {
		t.Fatal(err)
	}
	month := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	if q.Limit != nil || q.Remaining != nil || *q.Used != 42 || !q.WindowStart.Equal(month) || !q.WindowEnd.Equal(month.AddDate(0, 1, 0)) {
		t.Errorf("TokenQuota = %+v (used %d)", q, *q.Used)
	}
}

// tokenStore records how tokens reach the store, and answers ErrConflict,
// writing nothing, to the first update that carries tokens.
type tokenStore struct {
	store.Store
	mu        sync.Mutex
	added     int   // AddTokens calls
	carried   int64 // tokens of the updates written
	conflicts int
}

func (s *tokenStore) AddTokens(ctx context.Context, owner, period string, start time.Time, n int64) (int64, error) {
	s.mu.Lock()
	s.added++
	s.mu.Unlock()
	return s.Store.AddTokens(ctx, owner, period, start, n)
}

func (s *tokenStore) UpdateSession(ctx context.Context, sess *store.Session, events []store.Event, opts *store.UpdateOptions) error {
	if opts != nil && opts.Tokens != nil {
		s.mu.Lock()
		first := s.conflicts == 0
		s.conflicts++
		s.mu.Unlock()
		if first {
			return store.ErrConflict
		}
	}
	err := s.Store.UpdateSession(ctx, sess, events, opts)
	if err == nil && opts != nil && opts.Tokens != nil {
		s.mu.Lock()
		s.carried += opts.Tokens.N
		s.mu.Unlock()
	}
	return err
}

// TestTokensCountedWithStep: a step's tokens are counted by the commit of
// the step, in its transaction: no write of their own, and a commit
// retried after a conflict counts them once.
func TestTokensCountedWithStep(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 2, 14, 9, 0, 0, 0, time.UTC)}
	st := &tokenStore{Store: openStore(t)}
	model := llmtest.NewModel(
		llmtest.Reply{ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "get_order_status", Arguments: llm.Arguments(`{"order_id":"1"}`)}},
			Usage: llm.Usage{InputTokens: 100, OutputTokens: 10}},
		llmtest.Reply{Text: "done", Usage: llm.Usage{InputTokens: 40, OutputTokens: 2}})
	m := startManager(t, st, model, &session.Options{TokenQuota: &quota.Tokens{Now: clock.Now}})
	ctx := t.Context()
	v := create(t, m, `{"agent":{"name":"support-agent","tools":[`+getOrderTool+`]},"messages":"Check order 1."}`)
	f := &follower{t: t, m: m, id: v.ID}
	f.status(session.StatusAwaitingToolResults)
	if err := m.PostToolResults(ctx, owner, v.ID, []session.ToolResult{{Kind: "tool_result",
		ToolReq: session.ToolRequest{ToolName: "get_order_status", ID: "call_1"}, Result: []byte(`"shipped"`)}}); err != nil {
		t.Fatal(err)
	}
	f.status(session.StatusCompleted)
	// The end is seen as soon as it is committed, which may be before the
	// store's wrapper counted what the commit carried: the workers end
	// once their commits have returned.
	if err := m.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	q, err := m.TokenQuota(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if *q.Used != 152 || st.carried != 152 || st.added != 0 || st.conflicts < 3 {
		t.Errorf("used %d, carried by written updates %d, AddTokens calls %d, updates with tokens %d; want 152, 152, 0, at least 3",
			*q.Used, st.carried, st.added, st.conflicts)
	}
}
