package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hrns-dev/hrns/loop"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// The seams test of long-polls: random sequences of a caller's actions
// (messages, results, decisions, pause, resume, force answer, cancel) on
// a few sessions served by two replicas on one store, with restarts of a
// replica and failed worker writes, while followers long-poll every
// session through either replica, from their own cursor and from random
// ones (stale, future, negative), with random limits. Checked:
//
//   - every answer's events are the store's, at their indexes, contiguous
//     from the cursor; a nil answer never hides events it counted;
//
//   - an answer's status is one the session had with that many events;
//
//   - a follower that goes on from each answer's cursor gets the log
//     exactly once, in order, without gaps;
//
//   - an answer from a replica's commit records is the one a read of the
//     same version gives, for every cursor and limit;
//
//   - a replica's session cache never holds a version older than one it
//     committed, nor newer than the store's.
//
//     go test -race -run TestSeamsLongPolls ./session/ -seams.duration=1m
var seamsDuration = flag.Duration("seams.duration", 0, "how long TestSeamsLongPolls runs random sequences (default 2s)")

// seamsStore records, for each session, the statuses it had at each
// event count, and each replica's last committed version.
type seamsStore struct {
	store.Store
	mu       sync.Mutex
	statuses map[string]map[int64][]string // id -> event count -> statuses
}

func (s *seamsStore) note(sess *store.Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.statuses == nil {
		s.statuses = map[string]map[int64][]string{}
	}
	m := s.statuses[sess.ID]
	if m == nil {
		m = map[int64][]string{}
		s.statuses[sess.ID] = m
	}
	if !slices.Contains(m[sess.EventCount], sess.Status) {
		m[sess.EventCount] = append(m[sess.EventCount], sess.Status)
	}
}

func (s *seamsStore) had(id string, count int64, status string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.statuses[id][count], status)
}

func (s *seamsStore) CreateSession(ctx context.Context, sess *store.Session, events []store.Event) (*store.Session, bool, error) {
	got, created, err := s.Store.CreateSession(ctx, sess, events)
	if err == nil && got != nil {
		s.note(got)
	}
	return got, created, err
}

func (s *seamsStore) UpdateSession(ctx context.Context, sess *store.Session, events []store.Event, opts *store.UpdateOptions) error {
	err := s.Store.UpdateSession(ctx, sess, events, opts)
	if err == nil {
		s.note(sess)
	}
	return err
}

// replicaStore is one replica's view of the store: it records the last
// version the replica committed of each session.
type replicaStore struct {
	store.Store
	mu        sync.Mutex
	committed map[string]int64
}

func (s *replicaStore) UpdateSession(ctx context.Context, sess *store.Session, events []store.Event, opts *store.UpdateOptions) error {
	err := s.Store.UpdateSession(ctx, sess, events, opts)
	if err == nil {
		s.mu.Lock()
		if s.committed == nil {
			s.committed = map[string]int64{}
		}
		s.committed[sess.ID] = max(s.committed[sess.ID], sess.Version)
		s.mu.Unlock()
	}
	return err
}

func (s *replicaStore) last(id string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.committed[id]
}

// ambiguousStore, once armed, writes the next update and answers an
// error all the same, without its Committed callback: a store whose
// connection broke after the commit, before its answer.
type ambiguousStore struct {
	store.Store
	armed atomic.Int32
}

func (s *ambiguousStore) UpdateSession(ctx context.Context, sess *store.Session, events []store.Event, opts *store.UpdateOptions) error {
	if s.armed.Load() <= 0 || s.armed.Add(-1) < 0 {
		return s.Store.UpdateSession(ctx, sess, events, opts)
	}
	var o store.UpdateOptions
	if opts != nil {
		o = *opts
	}
	o.Committed = nil
	if err := s.Store.UpdateSession(ctx, sess, events, &o); err != nil {
		return err
	}
	return errors.New("seams: the connection broke after the commit")
}

type seamsSeq struct {
	t      *testing.T
	seed   uint64
	rng    *rand.Rand
	base   store.Store
	rec    *seamsStore
	w      *mtWorld
	owner  string
	n      int64
	reps   [2]*replicaStore
	fails  [2]*failingStore
	ambig  [2]*ambiguousStore
	ms     [2]atomic.Pointer[session.Manager]
	mu     sync.Mutex // guards what follows
	errs   []string
	seen   []seamsSeen
	acked  map[string]int // the session of each message acknowledged, by its tag
	ids    []string
	keys   []string
	next   []int
	polls  atomic.Int64
	log    mtLog
	stats  map[string]int
	action []string
}

// seamsSeen is an answer's count and status, checked at the end against
// what the session had (the store's record of it may come after the
// answer: a long-poll is woken before UpdateSession returns).
type seamsSeen struct {
	id     string
	count  int64
	status string
	what   string
}

func (q *seamsSeq) errorf(format string, args ...any) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.errs) < 10 {
		q.errs = append(q.errs, fmt.Sprintf(format, args...))
	}
}

func (q *seamsSeq) logf(format string, args ...any) {
	q.mu.Lock()
	q.action = append(q.action, fmt.Sprintf(format, args...))
	q.mu.Unlock()
}

func (q *seamsSeq) newManager(i int) {
	m := session.New(q.fails[i], q.w, &session.Options{
		Environments: map[string]*loop.Toolset{"lab": q.w.tools()},
		Permissions:  mtPermissions,
		LeaseTTL:     400 * time.Millisecond,
		MaxReadBytes: 1 << (8 + q.rng.IntN(6)), // small: answers cut by the read budget too
		Logger:       slog.New(slog.NewTextHandler(&q.log, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err := m.Start(context.Background()); err != nil {
		q.t.Fatal(err)
	}
	q.ms[i].Store(m)
}

func (q *seamsSeq) stop(i int) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := q.ms[i].Load().Stop(ctx); err != nil {
		q.t.Fatalf("seed %d: Stop: %v", q.seed, err)
	}
}

func (q *seamsSeq) m() *session.Manager { return q.ms[q.rng.IntN(2)].Load() }

// storeEvents reads the session's events from..from+n from the store.
func (q *seamsSeq) storeEvents(id string, from int64, n int) []store.Event {
	if n <= 0 {
		return nil
	}
	events, err := q.base.Events(context.Background(), id, from, n)
	if err != nil {
		q.errorf("reading the events: %v", err)
	}
	return events
}

// checkAnswer checks one long-poll's answer against the store.
func (q *seamsSeq) checkAnswer(id, what string, p *session.ChangesParams, c *session.Changes, count int64, err error) {
	q.polls.Add(1)
	if err != nil {
		q.errorf("%s: long-poll of %s from %d: %v", what, id, p.From, err)
		return
	}
	from := max(p.From, 0)
	if c == nil {
		if count > from {
			// Was there an event at the cursor? The answer hid it.
			if evs := q.storeEvents(id, from, 1); len(evs) > 0 && p.Wait > 0 {
				q.errorf("%s: long-poll of %s from %d (wait %v) answered nothing with count %d", what, id, p.From, p.Wait, count)
			}
		}
		return
	}
	n := int64(len(c.NewEvents))
	if !p.NoEvents && (p.Limit == nil || *p.Limit > 0) && n == 0 {
		q.errorf("%s: long-poll of %s from %d answered no events (count %d, limit %v)", what, id, p.From, count, p.Limit)
	}
	if from+n > count {
		q.errorf("%s: long-poll of %s from %d: %d events but count %d", what, id, p.From, n, count)
	}
	want := q.storeEvents(id, from, int(n))
	if len(want) != int(n) {
		q.errorf("%s: long-poll of %s from %d: %d events answered, the store has %d there", what, id, p.From, n, len(want))
		return
	}
	for i, e := range c.NewEvents {
		s := want[i]
		if e.Index != from+int64(i) || e.Index != s.Index || e.Type != s.Type || string(e.Data) != string(s.Data) || !e.Timestamp.Equal(s.Time) {
			q.errorf("%s: long-poll of %s from %d: event %d is %d %s %s %v, the store's %d %s %s %v", what, id, p.From, i, e.Index, e.Type, e.Data, e.Timestamp, s.Index, s.Type, s.Data, s.Time)
			return
		}
	}
	q.mu.Lock()
	q.seen = append(q.seen, seamsSeen{id: id, count: count, status: string(c.Status), what: fmt.Sprintf("%s from %d", what, p.From)})
	q.mu.Unlock()
}

// params picks random long-poll parameters.
func (q *seamsSeq) params(rng *rand.Rand, from int64) *session.ChangesParams {
	p := &session.ChangesParams{From: from, Wait: time.Duration(rng.IntN(60)) * time.Millisecond}
	switch rng.IntN(6) {
	case 0:
		l := rng.IntN(3)
		p.Limit = &l
	case 1:
		p.NoEvents = true
	}
	return p
}

// follow long-polls the session from its own cursor until done, then
// to the end of the log, and checks it got the log exactly.
func (q *seamsSeq) follow(id string, seed uint64, done <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	rng := rand.New(rand.NewPCG(seed, 7))
	ctx := context.Background()
	var got []session.Event
	cursor := int64(0)
	quiet := 0
	for {
		select {
		case <-done:
			// The end: follow up to the store's count.
			_, total, err := q.base.EventCount(ctx, id)
			if err != nil {
				q.errorf("count: %v", err)
				return
			}
			if cursor >= total {
				if quiet++; quiet > 1 {
					q.checkLog(id, got)
					return
				}
			}
		default:
		}
		p := q.params(rng, cursor)
		p.NoEvents = false
		if p.Limit != nil && *p.Limit == 0 {
			p.Limit = nil
		}
		m := q.ms[rng.IntN(2)].Load()
		c, count, err := m.Changes(ctx, q.owner, id, p)
		q.checkAnswer(id, "follower", p, c, count, err)
		if err != nil {
			return
		}
		if c != nil {
			got = append(got, c.NewEvents...)
			cursor += int64(len(c.NewEvents))
		}
	}
}

// probe long-polls the session from random cursors until done.
func (q *seamsSeq) probe(id string, seed uint64, done <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	rng := rand.New(rand.NewPCG(seed, 11))
	ctx := context.Background()
	for {
		select {
		case <-done:
			return
		default:
		}
		_, total, err := q.base.EventCount(ctx, id)
		if err != nil {
			q.errorf("count: %v", err)
			return
		}
		from := rng.Int64N(total+5) - 2 // stale, current, future, negative
		p := q.params(rng, from)
		m := q.ms[rng.IntN(2)].Load()
		c, count, err := m.Changes(ctx, q.owner, id, p)
		q.checkAnswer(id, "probe", p, c, count, err)
		if err != nil {
			return
		}
	}
}

// checkLog checks a follower's events against the store's log.
func (q *seamsSeq) checkLog(id string, got []session.Event) {
	all, err := q.base.Events(context.Background(), id, 0, 0)
	if err != nil {
		q.errorf("events: %v", err)
		return
	}
	if len(got) != len(all) {
		q.errorf("follower of %s got %d events, the log has %d", id, len(got), len(all))
		return
	}
	for i := range all {
		if got[i].Index != all[i].Index || string(got[i].Data) != string(all[i].Data) {
			q.errorf("follower of %s: event %d is %d %s, the log's %d %s", id, i, got[i].Index, got[i].Data, all[i].Index, all[i].Data)
			return
		}
	}
}

// compareRecords checks, for each replica and session, that what its
// records answer is what a read of the same version gives.
func (q *seamsSeq) compareRecords() {
	ctx := context.Background()
	zero, one, two := 0, 1, 2
	for i := range q.ms {
		m := q.ms[i].Load()
		for _, id := range q.ids {
			s, err := q.base.GetSession(ctx, id)
			if err != nil {
				q.t.Fatal(err)
			}
			for from := int64(-1); from <= s.EventCount+1; from++ {
				for _, p := range []session.ChangesParams{{From: from}, {From: from, Limit: &zero}, {From: from, Limit: &one}, {From: from, Limit: &two}, {From: from, NoEvents: true}} {
					got, gotCount, version, ok := session.SeamsRecorded(m, q.owner, id, &p)
					if !ok {
						continue
					}
					q.stats["records compared"]++
					if version != s.Version {
						q.stats["records older than the store"]++
						continue
					}
					want, wantCount, err := session.SeamsRead(ctx, m, s, &p)
					if err != nil {
						q.t.Fatal(err)
					}
					if d := cmp.Diff(want, got); d != "" || wantCount != gotCount {
						q.errorf("replica %d, %s version %d, from %d, limit %v, no events %v: count %d, want %d; (-read +record):\n%s", i, id, version, from, p.Limit, p.NoEvents, gotCount, wantCount, d)
					}
				}
			}
		}
	}
}

// checkCaches checks the replicas' session caches against what each
// committed and the store holds (when nothing runs).
func (q *seamsSeq) checkCaches() {
	for i := range q.ms {
		m := q.ms[i].Load()
		for _, id := range q.ids {
			s, err := q.base.GetSession(context.Background(), id)
			if err != nil {
				q.t.Fatal(err)
			}
			v := session.SeamsCachedVersion(m, id)
			if v > s.Version {
				q.errorf("replica %d caches %s at version %d, the store holds %d", i, id, v, s.Version)
			}
			if last := q.reps[i].last(id); v >= 0 && v < last {
				q.errorf("replica %d caches %s at version %d, older than the %d it committed", i, id, v, last)
			}
		}
	}
}

func (q *seamsSeq) pending(id string) (clients, approvals []session.ToolRequest) {
	p, err := q.m().Events(context.Background(), q.owner, id, &session.EventsParams{Page: 1, Size: 1 << 20})
	if err != nil {
		q.t.Fatal(err)
	}
	for i := len(p.Items) - 1; i >= 0; i-- {
		if p.Items[i].Type == session.EventActiveState {
			var a session.ActiveState
			json.Unmarshal(p.Items[i].Data, &a)
			return a.PendingToolCalls, a.PendingApprovals
		}
	}
	return nil, nil
}

var seamsDirectives = []string{"answer", "client", "client", "client2", "server", "approve", "deny"}

func (q *seamsSeq) message(k int) string {
	d := seamsDirectives[q.rng.IntN(len(seamsDirectives))]
	t := fmt.Sprintf("%s.m%d %s", q.keys[k], q.next[k], d)
	q.next[k]++
	return t
}

func (q *seamsSeq) create() {
	k := len(q.ids)
	q.keys = append(q.keys, fmt.Sprintf("q%ds%d", q.n, k))
	q.next = append(q.next, 0)
	agent := map[string]any{"name": "mt", "environments": []string{"lab"},
		"tools": []any{map[string]any{"name": "ask_client", "description": "the caller answers", "input_schema": map[string]any{"type": "object"}}}}
	body, _ := json.Marshal(map[string]any{"agent": agent, "messages": q.message(k)})
	var req session.Request
	if err := json.Unmarshal(body, &req); err != nil {
		q.t.Fatal(err)
	}
	v, _, err := q.m().Create(context.Background(), &session.CreateParams{Owner: q.owner, Request: &req, Raw: body})
	if err != nil {
		q.t.Fatalf("seed %d: Create: %v", q.seed, err)
	}
	q.ids = append(q.ids, v.ID)
	q.acked[strings.Fields(q.initial(body))[0]] = k
}

// initial is the message of a creation's body.
func (q *seamsSeq) initial(body []byte) string {
	var b struct{ Messages string }
	json.Unmarshal(body, &b)
	return b.Messages
}

// checkAcked checks that every message acknowledged is in its session's
// log exactly once.
func (q *seamsSeq) checkAcked() {
	logged := map[string]int{}
	for _, id := range q.ids {
		all, err := q.base.Events(context.Background(), id, 0, 0)
		if err != nil {
			q.t.Fatal(err)
		}
		for _, e := range all {
			var d session.AgentEventData
			if e.Type != session.EventAgent || json.Unmarshal(e.Data, &d) != nil || d.Kind != session.KindMessage {
				continue
			}
			for _, c := range d.MessageContent {
				if g := mtTag.FindStringSubmatch(strings.TrimSpace(fmt.Sprint(c))); g != nil {
					logged[id+" "+g[1]]++
				}
			}
		}
	}
	for tag, k := range q.acked {
		if n := logged[q.ids[k]+" "+tag]; n != 1 {
			q.errorf("message %s, acknowledged, is in the log of %s %d times", tag, q.ids[k], n)
		}
	}
	q.stats["messages acknowledged"] += len(q.acked)
}

// act does one random action.
func (q *seamsSeq) act() {
	ctx := context.Background()
	switch q.rng.IntN(26) {
	case 2, 3:
		i := q.rng.IntN(2)
		q.ambig[i].armed.Add(1)
		q.logf("replica %d: the next update is written and fails", i)
		return
	case 0:
		i := q.rng.IntN(2)
		q.logf("restart replica %d", i)
		q.stop(i)
		q.newManager(i)
		return
	case 1:
		i, skip, fails := q.rng.IntN(2), q.rng.IntN(4), 1+q.rng.IntN(2)
		q.fails[i].arm(skip, fails)
		q.logf("replica %d: fail %d worker writes after %d", i, fails, skip)
		return
	}
	k := q.rng.IntN(len(q.ids))
	id := q.ids[k]
	m := q.m()
	clients, approvals := q.pending(id)
	var err error
	var what string
	switch n := q.rng.IntN(12); {
	case n < 5 && len(clients) > 0:
		c := clients[q.rng.IntN(len(clients))]
		res := session.ToolResult{Kind: session.KindToolResult, ToolReq: c, Result: json.RawMessage(`"client says hi"`)}
		if q.rng.IntN(3) == 0 {
			res = session.ToolResult{Kind: session.KindError, ToolReq: c, Error: "client failed", Origin: "custom_tools"}
		}
		what = "result " + c.ID
		err = m.PostToolResults(ctx, q.owner, id, []session.ToolResult{res})
	case n < 7 && len(approvals) > 0:
		what = "decide " + approvals[0].ID
		err = m.Decide(ctx, q.owner, id, []session.Decision{{ID: approvals[0].ID, Approved: q.rng.IntN(2) == 0, Reason: "seams"}})
	case n < 9:
		text := q.message(k)
		what = "message " + text
		err = m.SendMessages(ctx, q.owner, id, []session.UserMessage{{Type: "user_message", Message: text}})
		if err == nil {
			q.acked[strings.Fields(text)[0]] = k
		}
	case n == 9:
		what = "pause"
		err = m.Pause(ctx, q.owner, id)
	case n == 10:
		what = "resume"
		err = m.Resume(ctx, q.owner, id)
	default:
		if q.rng.IntN(2) == 0 {
			what = "force answer"
			err = m.ForceAnswer(ctx, q.owner, id)
		} else {
			what = "cancel"
			err = m.Cancel(ctx, q.owner, id)
		}
	}
	q.logf("%s %s: %v", q.keys[k], what, err)
}

// quiet waits until no session of the sequence needs a worker.
func (q *seamsSeq) quiet() bool {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		busy := false
		for _, id := range q.ids {
			s, err := q.base.GetSession(context.Background(), id)
			if err != nil {
				q.t.Fatal(err)
			}
			if s.Runnable || s.LeaseOwner != "" && s.LeaseUntil.After(time.Now()) || session.Workers(q.ms[0].Load(), id)+session.Workers(q.ms[1].Load(), id) > 0 {
				busy = true
			}
		}
		if !busy {
			return true
		}
		time.Sleep(2 * time.Millisecond)
	}
	return false
}

var seamsSequences atomic.Int64

func (q *seamsSeq) run() {
	q.rng = rand.New(rand.NewPCG(q.seed, q.seed>>32|1))
	q.rec = &seamsStore{Store: q.base}
	q.acked = map[string]int{}
	q.w = newWorld()
	q.n = 1000 + seamsSequences.Add(1)
	q.owner = fmt.Sprintf("seams%d", q.seed)
	for i := range q.ms {
		q.ambig[i] = &ambiguousStore{Store: q.rec}
		q.reps[i] = &replicaStore{Store: q.ambig[i]}
		q.fails[i] = &failingStore{Store: q.reps[i]}
		q.newManager(i)
	}
	for range 1 + q.rng.IntN(3) {
		q.create()
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for k, id := range q.ids {
		wg.Add(2)
		go q.follow(id, q.seed+uint64(k), done, &wg)
		go q.probe(id, q.seed+uint64(k)+100, done, &wg)
	}
	steps := 10 + q.rng.IntN(20)
	for range steps {
		q.act()
		q.stats["actions"]++
		if q.rng.IntN(3) == 0 {
			if !q.quiet() {
				q.errorf("the sessions never settle")
				break
			}
			q.compareRecords()
			q.checkCaches()
		} else {
			time.Sleep(time.Duration(q.rng.IntN(20)) * time.Millisecond)
		}
	}
	ctx := context.Background()
	for _, id := range q.ids {
		q.m().Cancel(ctx, q.owner, id)
	}
	q.w.release("*")
	q.quiet()
	q.compareRecords()
	q.checkCaches()
	q.checkAcked()
	close(done)
	wg.Wait()
	for i := range q.ms {
		q.stop(i)
	}
	for _, s := range q.seen {
		if !q.rec.had(s.id, s.count, s.status) {
			q.errorf("%s of %s: status %s with %d events, which the session never had (it had %v)", s.what, s.id, s.status, s.count, q.rec.statuses[s.id][s.count])
		}
	}
	q.stats["long-polls"] += int(q.polls.Load())
	if len(q.errs) > 0 {
		q.t.Errorf("seed %d:\n%s\nactions:\n  %s\nlog:\n%s", q.seed, strings.Join(q.errs, "\n"), strings.Join(q.action, "\n  "), q.log.String())
	}
}

// TestSeamsLongPolls runs random sequences (see the top of this file) on
// each store.
func TestSeamsLongPolls(t *testing.T) {
	eachStore(t, func(t *testing.T, base store.Store) {
		budget := 2 * time.Second
		if *seamsDuration > 0 {
			budget = *seamsDuration
		}
		stats := map[string]int{}
		deadline := time.Now().Add(budget)
		for time.Now().Before(deadline) && !t.Failed() {
			q := &seamsSeq{t: t, seed: rand.Uint64N(1 << 40), base: base, stats: stats}
			q.run()
			stats["sequences"]++
		}
		t.Logf("seams: %v", stats)
	})
}
