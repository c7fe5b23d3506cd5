// Package storetest is the conformance suite of [store.Store]: every
// implementation runs it from its own tests.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			st, err := sqlite.Open(filepath.Join(t.TempDir(), "hrns.db"), nil)
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { st.Close() })
//			return st
//		})
//	}
//
// Each subtest gets a new, empty store from newStore. The Replicas subtest
// runs only against stores that implement [store.Replicas].
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hrns-dev/hrns/store"
)

// Run runs the conformance suite against the stores newStore returns.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, st store.Store)
	}{
		{"CreateGet", testCreateGet},
		{"NotFound", testNotFound},
		{"Idempotency", testIdempotency},
		{"IdempotencyConcurrent", testIdempotencyConcurrent},
		{"UpdateVersion", testUpdateVersion},
		{"EventsRange", testEventsRange},
		{"EventsWithin", testEventsWithin},
		{"ConcurrentAppends", testConcurrentAppends},
		{"List", testList},
		{"ListFilters", testListFilters},
		{"Claim", testClaim},
		{"ClaimConcurrent", testClaimConcurrent},
		{"ClaimBacklog", testClaimBacklog},
		{"ClaimFair", testClaimFair},
		{"ClaimFairBacklog", testClaimFairBacklog},
		{"Leases", testLeases},
		{"ClaimWithUpdate", testClaimWithUpdate},
		{"CreateClaimed", testCreateClaimed},
		{"Committed", testCommitted},
		{"EventCount", testEventCount},
		{"Attempts", testAttempts},
		{"RecoverClaim", testRecoverClaim},
		{"NextWake", testNextWake},
		{"FarWake", testFarWake},
		{"TextWithNUL", testTextWithNUL},
		{"Subscribe", testSubscribe},
		{"Replicas", testReplicas},
		{"Close", testClose},
	}
	tests = append(tests, registryTests...)
	tests = append(tests, quotaTests...)
	tests = append(tests, scheduleTests...)
	tests = append(tests, vaultTests...)
	tests = append(tests, profileTests...)
	tests = append(tests, webhookTests...)
	tests = append(tests, transcriptTests...)
	tests = append(tests, sealedTests...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, newStore(t))
		})
	}
}

var base = time.Date(2026, 6, 1, 15, 14, 5, 0, time.UTC)

func newSession(id, owner string) *store.Session {
	return &store.Session{
		ID:           id,
		Owner:        owner,
		Status:       "pending",
		Agent:        "support-agent",
		FirstMessage: "Check order 4242",
		Request:      json.RawMessage(`{"agent":"support-agent"}`),
		State:        json.RawMessage(`{"step":0}`),
		CreatedAt:    base,
	}
}

func ev(typ string, data string) store.Event {
	return store.Event{Type: typ, Data: json.RawMessage(data)}
}

func mustCreate(t *testing.T, st store.Store, s *store.Session, events ...store.Event) *store.Session {
	t.Helper()
	got, created, err := st.CreateSession(t.Context(), s, events)
	if err != nil || !created {
		t.Fatalf("CreateSession(%s) = created %v, %v", s.ID, created, err)
	}
	return got
}

// cmpSession compares sessions with times at microsecond precision and
// JSON documents by value.
var cmpSession = cmp.Options{
	cmpopts.EquateApproxTime(time.Microsecond),
	cmp.Comparer(func(a, b json.RawMessage) bool {
		if a == nil || b == nil {
			return a == nil && b == nil
		}
		var x, y any
		return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && cmp.Equal(x, y)
	}),
}

func testCreateGet(t *testing.T, st store.Store) {
	ctx := t.Context()
	in := newSession("s1", "alice")
	in.IdempotencyKey, in.RequestHash = "k1", "h1"
	in.Runnable = true
	in.WakeAt = base.Add(time.Hour)
	in.Answer = json.RawMessage(`"shipped"`)
	got := mustCreate(t, st, in, ev("AgentEvent", `{"kind":"message_event"}`), ev("RequestStartEvent", `{}`))
	want := *in
	want.Version, want.EventCount, want.UpdatedAt = 1, 2, base
	if diff := cmp.Diff(&want, got, cmpSession); diff != "" {
		t.Errorf("CreateSession returned (-want +got):\n%s", diff)
	}
	read, err := st.GetSession(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&want, read, cmpSession); diff != "" {
		t.Errorf("GetSession (-want +got):\n%s", diff)
	}
	events, err := st.Events(ctx, "s1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || events[0].Index != 0 || events[1].Index != 1 || events[1].Type != "RequestStartEvent" || events[0].Time.IsZero() {
		t.Errorf("Events = %+v, want the two created events indexed 0 and 1 with times", events)
	}
	// The returned session is the caller's: changing it changes nothing stored.
	read.Status = "mutated"
	again, _ := st.GetSession(ctx, "s1")
	if again.Status != "pending" {
		t.Errorf("store kept the caller's session: status %q", again.Status)
	}
}

func testNotFound(t *testing.T, st store.Store) {
	ctx := t.Context()
	if _, err := st.GetSession(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetSession(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := st.Events(ctx, "nope", 0, 10); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Events(unknown) = %v, want ErrNotFound", err)
	}
	s := newSession("nope", "alice")
	s.Version = 1
	if err := st.UpdateSession(ctx, s, nil, nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UpdateSession(unknown) = %v, want ErrNotFound", err)
	}
	if err := st.Renew(ctx, "nope", "w", base); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Renew(unknown) = %v, want ErrNotFound", err)
	}
	if err := st.Release(ctx, "nope", "w"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Release(unknown) = %v, want ErrNotFound", err)
	}
}

func testIdempotency(t *testing.T, st store.Store) {
	ctx := t.Context()
	a := newSession("a", "alice")
	a.IdempotencyKey, a.RequestHash = "key", "h1"
	mustCreate(t, st, a)
	b := newSession("b", "alice")
	b.IdempotencyKey, b.RequestHash = "key", "h2"
	got, created, err := st.CreateSession(ctx, b, []store.Event{ev("X", `{}`)})
	if err != nil || created || got.ID != "a" || got.RequestHash != "h1" {
		t.Fatalf("second CreateSession with the key = %+v, created %v, %v; want session a, not created", got, created, err)
	}
	if _, err := st.GetSession(ctx, "b"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("session b was stored: %v", err)
	}
	// Keys are per owner.
	c := newSession("c", "bob")
	c.IdempotencyKey = "key"
	mustCreate(t, st, c)
	// No key: no deduplication.
	mustCreate(t, st, newSession("d", "alice"))
	mustCreate(t, st, newSession("e", "alice"))
}

func testIdempotencyConcurrent(t *testing.T, st store.Store) {
	const n = 8
	var wg sync.WaitGroup
	ids := make([]string, n)
	errs := make([]error, n)
	var mu sync.Mutex
	createdCount := 0
	for i := range n {
		wg.Go(func() {
			s := newSession(fmt.Sprintf("s%d", i), "alice")
			s.IdempotencyKey = "same"
			got, created, err := st.CreateSession(context.Background(), s, nil)
			errs[i] = err
			if err == nil {
				ids[i] = got.ID
				mu.Lock()
				if created {
					createdCount++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
		if ids[i] != ids[0] {
			t.Errorf("create %d returned session %s, create 0 returned %s", i, ids[i], ids[0])
		}
	}
	if createdCount != 1 {
		t.Errorf("%d sessions created with one key, want 1", createdCount)
	}
}

func testUpdateVersion(t *testing.T, st store.Store) {
	ctx := t.Context()
	mustCreate(t, st, newSession("s", "alice"), ev("A", `{"n":0}`))
	s1, _ := st.GetSession(ctx, "s")
	s2, _ := st.GetSession(ctx, "s")
	s1.Status = "running"
	s1.State = json.RawMessage(`{"step":1}`)
	s1.StartedAt = base.Add(time.Second)
	s1.Runnable = true
	events := []store.Event{ev("B", `{"n":1}`), ev("C", `{"n":2}`)}
	if err := st.UpdateSession(ctx, s1, events, nil); err != nil {
		t.Fatal(err)
	}
	if s1.Version != 2 || s1.EventCount != 3 {
		t.Errorf("after update: version %d, event count %d; want 2, 3", s1.Version, s1.EventCount)
	}
	if events[0].Index != 1 || events[1].Index != 2 || events[0].Time.IsZero() {
		t.Errorf("events after update = %+v, want indexes 1, 2 and times", events)
	}
	s2.Status = "stale"
	if err := st.UpdateSession(ctx, s2, []store.Event{ev("D", `{}`)}, nil); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("update from a stale read = %v, want ErrConflict", err)
	}
	got, _ := st.GetSession(ctx, "s")
	if got.Status != "running" || got.EventCount != 3 || got.Version != 2 || !got.Runnable || !got.StartedAt.Equal(base.Add(time.Second)) {
		t.Errorf("stored after a conflict = %+v", got)
	}
	if diff := cmp.Diff(json.RawMessage(`{"step":1}`), got.State, cmpSession); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
	all, _ := st.Events(ctx, "s", 0, 0)
	if len(all) != 3 {
		t.Errorf("%d events after a conflicting update, want 3", len(all))
	}
	// Identity fields are not written by updates.
	got.Owner, got.Request = "mallory", json.RawMessage(`{}`)
	if err := st.UpdateSession(ctx, got, nil, nil); err != nil {
		t.Fatal(err)
	}
	again, _ := st.GetSession(ctx, "s")
	if again.Owner != "alice" || string(again.Request) != `{"agent":"support-agent"}` {
		t.Errorf("update changed identity: owner %q request %s", again.Owner, again.Request)
	}
}

func testEventsRange(t *testing.T, st store.Store) {
	ctx := t.Context()
	var events []store.Event
	for i := range 10 {
		events = append(events, ev("E", fmt.Sprintf(`{"n":%d}`, i)))
	}
	mustCreate(t, st, newSession("s", "alice"), events...)
	tests := []struct {
		from  int64
		limit int
		want  []int64
	}{
		{0, 0, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{0, 3, []int64{0, 1, 2}},
		{8, 5, []int64{8, 9}},
		{10, 5, nil},
		{42, 0, nil},
	}
	for _, tt := range tests {
		got, err := st.Events(ctx, "s", tt.from, tt.limit)
		if err != nil {
			t.Fatal(err)
		}
		var idx []int64
		for _, e := range got {
			idx = append(idx, e.Index)
			var d struct{ N int64 }
			if json.Unmarshal(e.Data, &d); d.N != e.Index {
				t.Errorf("event %d holds data %s", e.Index, e.Data)
			}
		}
		if diff := cmp.Diff(tt.want, idx); diff != "" {
			t.Errorf("Events(from %d, limit %d) indexes (-want +got):\n%s", tt.from, tt.limit, diff)
		}
	}
}

// testEventsWithin: a read bounded in bytes stops after the event that
// reaches the bound, always gives the first, and EventIndexes lists the
// events of one type without their data.
func testEventsWithin(t *testing.T, st store.Store) {
	ctx := t.Context()
	var events []store.Event
	for i := range 10 {
		typ := "A"
		if i%3 == 0 {
			typ = "B"
		}
		events = append(events, ev(typ, fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, strings.Repeat("x", 90))))
	}
	mustCreate(t, st, newSession("s", "alice"), events...)
	size := int64(len(events[0].Data)) // all the same size
	tests := []struct {
		from     int64
		limit    int
		maxBytes int64
		want     []int64
	}{
		{0, 0, 0, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{0, 0, 3 * size, []int64{0, 1, 2}},
		{0, 0, 3*size - 1, []int64{0, 1, 2}},
		{0, 0, 3*size + 1, []int64{0, 1, 2, 3}},
		{4, 0, 1, []int64{4}},
		{4, 2, 100 * size, []int64{4, 5}},
		{10, 0, 1, nil},
	}
	for _, tt := range tests {
		got, err := st.EventsWithin(ctx, "s", tt.from, tt.limit, tt.maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		var idx []int64
		for _, e := range got {
			idx = append(idx, e.Index)
		}
		if diff := cmp.Diff(tt.want, idx); diff != "" {
			t.Errorf("EventsWithin(from %d, limit %d, %d bytes) indexes (-want +got):\n%s", tt.from, tt.limit, tt.maxBytes, diff)
		}
	}
	if _, err := st.EventsWithin(ctx, "nope", 0, 0, 1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("EventsWithin of an unknown session = %v, want ErrNotFound", err)
	}
	for typ, want := range map[string][]int64{"B": {0, 3, 6, 9}, "A": {1, 2, 4, 5, 7, 8}, "C": {}} {
		got, err := st.EventIndexes(ctx, "s", typ)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("EventIndexes(%s) (-want +got):\n%s", typ, diff)
		}
	}
	if _, err := st.EventIndexes(ctx, "nope", "A"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("EventIndexes of an unknown session = %v, want ErrNotFound", err)
	}
}

// testConcurrentAppends has writers append through read-modify-write with
// retries: every event lands once, indexed without gaps.
func testConcurrentAppends(t *testing.T, st store.Store) {
	mustCreate(t, st, newSession("s", "alice"))
	const writers, each = 4, 10
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				for {
					s, err := st.GetSession(context.Background(), "s")
					if err != nil {
						t.Error(err)
						return
					}
					err = st.UpdateSession(context.Background(), s, []store.Event{ev("E", fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))}, nil)
					if errors.Is(err, store.ErrConflict) {
						continue
					}
					if err != nil {
						t.Error(err)
					}
					break
				}
			}
		})
	}
	wg.Wait()
	events, err := st.Events(t.Context(), "s", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, e := range events {
		if e.Index != int64(i) {
			t.Errorf("event %d has index %d", i, e.Index)
		}
		if seen[string(e.Data)] {
			t.Errorf("event %s appended twice", e.Data)
		}
		seen[string(e.Data)] = true
	}
	if len(events) != writers*each {
		t.Errorf("%d events, want %d", len(events), writers*each)
	}
	s, _ := st.GetSession(t.Context(), "s")
	if s.EventCount != writers*each || s.Version != writers*each+1 {
		t.Errorf("event count %d version %d, want %d and %d", s.EventCount, s.Version, writers*each, writers*each+1)
	}
}

func testList(t *testing.T, st store.Store) {
	ctx := t.Context()
	for i := range 5 {
		s := newSession(fmt.Sprintf("a%d", i), "alice")
		s.CreatedAt = base.Add(time.Duration(i) * time.Minute)
		if i%2 == 1 {
			s.Status = "completed"
		}
		mustCreate(t, st, s)
	}
	mustCreate(t, st, newSession("b0", "bob"))
	ids := func(ss []*store.Session) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.ID)
		}
		return out
	}
	tests := []struct {
		name      string
		p         store.ListParams
		want      []string
		wantTotal int
	}{
		{"newest first", store.ListParams{Owner: "alice"}, []string{"a4", "a3", "a2", "a1", "a0"}, 5},
		{"page", store.ListParams{Owner: "alice", Offset: 1, Limit: 2}, []string{"a3", "a2"}, 5},
		{"ascending", store.ListParams{Owner: "alice", Limit: 2, Ascending: true}, []string{"a0", "a1"}, 5},
		{"status", store.ListParams{Owner: "alice", Statuses: []string{"completed"}}, []string{"a3", "a1"}, 2},
		{"two statuses", store.ListParams{Owner: "alice", Statuses: []string{"completed", "pending"}, Limit: 1}, []string{"a4"}, 5},
		{"other owner", store.ListParams{Owner: "bob"}, []string{"b0"}, 1},
		{"no sessions", store.ListParams{Owner: "carol"}, nil, 0},
		{"past the end", store.ListParams{Owner: "alice", Offset: 10}, nil, 5},
	}
	for _, tt := range tests {
		page, total, err := st.ListSessions(ctx, &tt.p)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if diff := cmp.Diff(tt.want, ids(page)); diff != "" || total != tt.wantTotal {
			t.Errorf("%s: total %d (want %d), ids (-want +got):\n%s", tt.name, total, tt.wantTotal, diff)
		}
	}
}

// testListFilters checks the filters of ListSessions, each alone and
// combined, and that GroupID, ParentID and ScheduleID are stored.
func testListFilters(t *testing.T, st store.Store) {
	ctx := t.Context()
	mk := func(id string, min int, mut func(s *store.Session)) {
		s := newSession(id, "alice")
		s.CreatedAt = base.Add(time.Duration(min) * time.Minute)
		mut(s)
		mustCreate(t, st, s)
	}
	mk("s0", 0, func(s *store.Session) { s.Agent, s.GroupID, s.FirstMessage = "web", "g1", "Find the CHEAPEST flight" })
	mk("s1", 1, func(s *store.Session) {
		s.Agent, s.GroupID, s.ParentID, s.ScheduleID = "mail", "g1", "s0", "sch"
		s.Answer = []byte(`"100% done_ok"`)
		s.Status, s.FinishedAt = "completed", base.Add(10*time.Minute)
	})
	mk("s2", 2, func(s *store.Session) {
		s.Agent, s.ParentID = "web", "s0"
		s.Status, s.FinishedAt = "failed", base.Add(20*time.Minute)
	})
	mk("s3", 3, func(s *store.Session) { s.Agent, s.FirstMessage = "web", "50% off, under_score" })
	other := newSession("b0", "bob")
	other.GroupID, other.Agent = "g1", "web"
	mustCreate(t, st, other)

	got, err := st.GetSession(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if got.GroupID != "g1" || got.ParentID != "s0" || got.ScheduleID != "sch" {
		t.Errorf("stored group, parent, schedule = %q, %q, %q", got.GroupID, got.ParentID, got.ScheduleID)
	}
	at := func(min int) time.Time { return base.Add(time.Duration(min) * time.Minute) }
	far := func(year int) time.Time { return time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC) }
	tests := []struct {
		name string
		p    store.ListParams
		want []string
	}{
		{"group", store.ListParams{GroupID: "g1"}, []string{"s1", "s0"}},
		{"parent", store.ListParams{ParentID: "s0"}, []string{"s2", "s1"}},
		{"schedule", store.ListParams{ScheduleID: "sch"}, []string{"s1"}},
		{"agents", store.ListParams{Agents: []string{"mail", "nobody"}}, []string{"s1"}},
		{"two agents", store.ListParams{Agents: []string{"mail", "web"}}, []string{"s3", "s2", "s1", "s0"}},
		{"search first message, any case", store.ListParams{Search: "cheapest"}, []string{"s0"}},
		{"search answer", store.ListParams{Search: "DONE"}, []string{"s1"}},
		{"search percent is literal", store.ListParams{Search: "50%"}, []string{"s3"}},
		{"search underscore is literal", store.ListParams{Search: "r_s"}, []string{"s3"}},
		{"search wildcard not matching", store.ListParams{Search: "0_"}, nil},
		{"created after", store.ListParams{CreatedAfter: at(1)}, []string{"s3", "s2"}},
		{"created before", store.ListParams{CreatedBefore: at(1)}, []string{"s0"}},
		{"finished after", store.ListParams{FinishedAfter: at(15)}, []string{"s2"}},
		{"finished before", store.ListParams{FinishedBefore: at(15)}, []string{"s1"}},
		// Times beyond int64 nanoseconds (1678 to 2262) compare as
		// times, on both sides.
		{"created after 2300", store.ListParams{CreatedAfter: far(2300)}, nil},
		{"created after 9999", store.ListParams{CreatedAfter: far(9999)}, nil},
		{"created before 2300", store.ListParams{CreatedBefore: far(2300)}, []string{"s3", "s2", "s1", "s0"}},
		{"created after 1600", store.ListParams{CreatedAfter: far(1600)}, []string{"s3", "s2", "s1", "s0"}},
		{"created before 1600", store.ListParams{CreatedBefore: far(1600)}, nil},
		{"created before year 2", store.ListParams{CreatedBefore: far(2)}, nil},
		{"finished after 2300", store.ListParams{FinishedAfter: far(2300)}, nil},
		{"finished before 2300", store.ListParams{FinishedBefore: far(2300)}, []string{"s2", "s1"}},
		{"finished after 1600", store.ListParams{FinishedAfter: far(1600)}, []string{"s2", "s1"}},
		{"finished after 1960", store.ListParams{FinishedAfter: far(1960)}, []string{"s2", "s1"}},
		{"finished before 1600", store.ListParams{FinishedBefore: far(1600)}, nil},
		{"combined", store.ListParams{Agents: []string{"web"}, ParentID: "s0", Statuses: []string{"failed"}}, []string{"s2"}},
	}
	for _, tt := range tests {
		tt.p.Owner = "alice"
		page, total, err := st.ListSessions(ctx, &tt.p)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		var ids []string
		for _, s := range page {
			ids = append(ids, s.ID)
		}
		if diff := cmp.Diff(tt.want, ids); diff != "" || total != len(tt.want) {
			t.Errorf("%s: total %d, ids (-want +got):\n%s", tt.name, total, diff)
		}
	}
}

func testClaim(t *testing.T, st store.Store) {
	ctx := t.Context()
	now := time.Now()
	mk := func(id string, runnable bool, wake time.Time, age time.Duration) {
		s := newSession(id, "alice")
		s.Runnable, s.WakeAt, s.CreatedAt = runnable, wake, now.Add(-age)
		mustCreate(t, st, s)
	}
	mk("run-old", true, time.Time{}, 3*time.Minute)
	mk("run-new", true, time.Time{}, time.Minute)
	mk("waiting", false, time.Time{}, 4*time.Minute)
	mk("wake-due", false, now.Add(-time.Second), 2*time.Minute)
	mk("wake-later", false, now.Add(time.Hour), 5*time.Minute)

	claim := func(owner string, at time.Time, limit int) []string {
		t.Helper()
		got, err := st.Claim(ctx, &store.ClaimParams{Owner: owner, Now: at, TTL: time.Minute, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, s := range got {
			ids = append(ids, s.ID)
			if s.LeaseOwner != owner || s.LeaseUntil.Sub(at.Add(time.Minute)).Abs() > time.Microsecond {
				t.Errorf("claimed %s with lease %q until %v", s.ID, s.LeaseOwner, s.LeaseUntil)
			}
		}
		return ids
	}
	if diff := cmp.Diff([]string{"run-old", "wake-due"}, claim("w1", now, 2)); diff != "" {
		t.Errorf("first claim (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"run-new"}, claim("w2", now, 10)); diff != "" {
		t.Errorf("second claim (-want +got):\n%s", diff)
	}
	if got := claim("w2", now, 10); got != nil {
		t.Errorf("third claim = %v, want none", got)
	}
	// Leases expire.
	if diff := cmp.Diff([]string{"run-old", "wake-due", "run-new"}, claim("w3", now.Add(2*time.Minute), 10)); diff != "" {
		t.Errorf("claim after expiry (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"wake-later", "run-old", "wake-due", "run-new"}, claim("w4", now.Add(2*time.Hour), 10)); diff != "" {
		t.Errorf("claim in two hours (-want +got):\n%s", diff)
	}
}

// testClaimBacklog claims, a few at a time, from many sessions of every
// kind (runnable, due, due later, both runnable and due, waiting, leased
// by another worker until before or after the claim, claimed too often),
// and checks each claim against a model: the oldest sessions that are
// runnable or due, whose lease is free and which are below the attempts
// bound, each once.
func testClaimBacklog(t *testing.T, st store.Store) {
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond) // Renew checks leases against the clock
	type model struct {
		id         string
		created    time.Time
		runnable   bool
		wake       time.Time
		leaseUntil time.Time
		attempts   int
	}
	var all []*model
	r := uint32(7)
	next := func(n uint32) uint32 { r = r*1664525 + 1013904223; return (r >> 8) % n }
	for i := range 90 {
		m := &model{id: fmt.Sprintf("s%02d", i), created: base.Add(time.Duration(next(1_000_000)) * time.Millisecond)}
		switch next(6) {
		case 0, 1:
			m.runnable = true
		case 2:
			m.wake = now.Add(-time.Duration(next(100)+1) * time.Second)
		case 3:
			m.wake = now.Add(time.Hour)
		case 4:
			m.runnable, m.wake = true, now.Add(-time.Second)
		}
		s := newSession(m.id, "alice")
		s.Runnable, s.WakeAt, s.CreatedAt = m.runnable, m.wake, m.created
		mustCreate(t, st, s)
		all = append(all, m)
	}
	// Some are held by another worker: a lease that ends before the
	// claims (as if it had expired) or long after them; their attempts
	// count.
	held, err := st.Claim(ctx, &store.ClaimParams{Owner: "other", Now: now, TTL: time.Minute, Limit: 12})
	if err != nil {
		t.Fatal(err)
	}
	later := now.Add(10 * time.Minute) // when the claims below are made
	for i, s := range held {
		m := all[slices.IndexFunc(all, func(m *model) bool { return m.id == s.ID })]
		m.attempts++
		m.leaseUntil = now.Add(time.Minute)
		if i%2 == 0 {
			if err := st.Renew(ctx, s.ID, "other", later.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			m.leaseUntil = later.Add(time.Hour)
		}
	}
	const below = 2
	for round := 0; ; round++ {
		limit := int(next(5)) + 1
		var want []string
		eligible := slices.Clone(all)
		slices.SortFunc(eligible, func(a, b *model) int { return a.created.Compare(b.created) })
		for _, m := range eligible {
			due := m.runnable || !m.wake.IsZero() && !m.wake.After(later)
			if due && !m.leaseUntil.After(later) && m.attempts < below && len(want) < limit {
				want = append(want, m.id)
			}
		}
		got, err := st.Claim(ctx, &store.ClaimParams{Owner: "w", Now: later, TTL: time.Hour, Limit: limit, BelowAttempts: below})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, s := range got {
			ids = append(ids, s.ID)
			m := all[slices.IndexFunc(all, func(m *model) bool { return m.id == s.ID })]
			m.leaseUntil = later.Add(time.Hour)
			m.attempts++
			if s.State == nil || s.Owner != "alice" {
				t.Errorf("claimed %s without its fields: %+v", s.ID, s)
			}
		}
		if diff := cmp.Diff(want, ids); diff != "" {
			t.Fatalf("claim %d, limit %d (-want +got):\n%s", round, limit, diff)
		}
		if len(want) == 0 {
			if round < 10 {
				t.Fatalf("only %d claims: the backlog is too small to test", round)
			}
			return
		}
	}
}

// testClaimFair: a claim takes sessions in turn across owners (API
// keys), each owner's oldest first, the owner with the fewest sessions
// running first, so that a key's backlog does not queue the sessions of
// keys created after it. Key A has 200 runnable sessions created first,
// key B two created after: a claim of four takes both of B's.
func testClaimFair(t *testing.T, st store.Store) {
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond)
	mk := func(id, owner string, age time.Duration) {
		s := newSession(id, owner)
		s.Runnable, s.CreatedAt = true, now.Add(-age)
		mustCreate(t, st, s)
	}
	for i := range 200 {
		mk(fmt.Sprintf("a%03d", i), "key-a", time.Hour-time.Duration(i)*time.Second)
	}
	mk("b0", "key-b", 30*time.Minute)
	mk("b1", "key-b", 29*time.Minute)
	claim := func(worker string, limit, below int) []string {
		t.Helper()
		got, err := st.Claim(ctx, &store.ClaimParams{Owner: worker, Token: worker + "-token", Now: now, TTL: time.Hour, Limit: limit, BelowAttempts: below})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, s := range got {
			ids = append(ids, s.ID)
		}
		return ids
	}
	// In turn, oldest first: A's oldest, B's oldest, A's next, B's next
	// (returned in creation order).
	if diff := cmp.Diff([]string{"a000", "a001", "b0", "b1"}, claim("w1", 4, 2)); diff != "" {
		t.Errorf("claim of 4 (-want +got):\n%s", diff)
	}
	// A third key's one session goes before the others': A and B have two
	// running each, C none.
	mk("c0", "key-c", time.Minute)
	mk("b2", "key-b", 30*time.Second)
	if diff := cmp.Diff([]string{"c0"}, claim("w2", 1, 2)); diff != "" {
		t.Errorf("claim with a new key's session waiting (-want +got):\n%s", diff)
	}
	// A and B have two running each: one more each, A's the older.
	if diff := cmp.Diff([]string{"a002", "b2"}, claim("w2", 2, 2)); diff != "" {
		t.Errorf("claim of A's and B's third (-want +got):\n%s", diff)
	}
	// B has nothing left: A takes the idle capacity.
	if diff := cmp.Diff([]string{"a003", "a004", "a005"}, claim("w3", 3, 2)); diff != "" {
		t.Errorf("claim with A alone waiting (-want +got):\n%s", diff)
	}
	// Sessions whose lease ended count no more: B's released, B runs
	// none and A six, so B's next goes first, though A's are older. A
	// waiting session whose time has come counts with its owner's; D's
	// goes before A's too.
	for _, id := range []string{"b0", "b1", "b2"} {
		if err := st.Release(ctx, id, "w1"); err != nil && id != "b2" {
			t.Fatal(err)
		}
	}
	if err := st.Release(ctx, "b2", "w2"); err != nil {
		t.Fatal(err)
	}
	d := newSession("d0", "key-d")
	d.WakeAt, d.CreatedAt = now.Add(-time.Second), now.Add(-10*time.Second)
	mustCreate(t, st, d)
	if diff := cmp.Diff([]string{"b0", "b1", "d0"}, claim("w4", 3, 2)); diff != "" {
		t.Errorf("claim after B's leases were given up (-want +got):\n%s", diff)
	}
	// A claim's token still finds what it took.
	got, err := st.RecoverClaim(ctx, &store.ClaimParams{Owner: "w4", Token: "w4-token", Now: now, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range got {
		ids = append(ids, s.ID)
	}
	if diff := cmp.Diff([]string{"b0", "b1", "d0"}, ids); diff != "" {
		t.Errorf("RecoverClaim (-want +got):\n%s", diff)
	}
}

// testClaimFairBacklog claims, a few at a time, from many sessions of
// three owners and of every kind (as testClaimBacklog), and checks each
// claim against a model of the fair claim (see [store.Store.Claim]):
// each candidate ranked by its owner's runnable sessions leased plus its
// place among the owner's candidates, the due waiting ones narrowed to
// the oldest of all owners first.
func testClaimFairBacklog(t *testing.T, st store.Store) {
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond)
	type model struct {
		id, owner  string
		created    time.Time
		runnable   bool
		wake       time.Time
		leaseUntil time.Time
		attempts   int
	}
	var all []*model
	r := uint32(11)
	next := func(n uint32) uint32 { r = r*1664525 + 1013904223; return (r >> 8) % n }
	owners := []string{"key-a", "key-a", "key-a", "key-a", "key-b", "key-c"}
	for i := range 120 {
		m := &model{id: fmt.Sprintf("s%03d", i), owner: owners[next(uint32(len(owners)))],
			created: base.Add(time.Duration(next(1_000_000)) * time.Millisecond)}
		switch next(6) {
		case 0, 1, 5:
			m.runnable = true
		case 2:
			m.wake = now.Add(-time.Duration(next(100)+1) * time.Second)
		case 3:
			m.wake = now.Add(time.Hour)
		case 4:
			m.runnable, m.wake = true, now.Add(-time.Second)
		}
		s := newSession(m.id, m.owner)
		s.Runnable, s.WakeAt, s.CreatedAt = m.runnable, m.wake, m.created
		mustCreate(t, st, s)
		all = append(all, m)
	}
	find := func(id string) *model { return all[slices.IndexFunc(all, func(m *model) bool { return m.id == id })] }
	held, err := st.Claim(ctx, &store.ClaimParams{Owner: "other", Now: now, TTL: time.Minute, Limit: 16})
	if err != nil {
		t.Fatal(err)
	}
	later := now.Add(10 * time.Minute)
	for i, s := range held {
		m := find(s.ID)
		m.attempts++
		m.leaseUntil = now.Add(time.Minute)
		if i%2 == 0 {
			if err := st.Renew(ctx, s.ID, "other", later.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
			m.leaseUntil = later.Add(time.Hour)
		}
	}
	older := func(a, b *model) int {
		if c := a.created.Compare(b.created); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	}
	const below = 2
	for round := 0; ; round++ {
		limit := int(next(5)) + 1
		eligible := slices.Clone(all)
		slices.SortFunc(eligible, older)
		free := func(m *model) bool { return !m.leaseUntil.After(later) && m.attempts < below }
		var wakeDue []*model
		for _, m := range eligible {
			if !m.wake.IsZero() && !m.wake.After(later) && free(m) && len(wakeDue) < limit {
				wakeDue = append(wakeDue, m)
			}
		}
		type ranked struct {
			m    *model
			rank int
		}
		var cands []ranked
		for _, o := range []string{"key-a", "key-b", "key-c"} {
			busy := 0
			var own []*model
			for _, m := range eligible {
				if m.owner != o {
					continue
				}
				if m.runnable && m.leaseUntil.After(later) {
					busy++
				}
				if (m.runnable && free(m) || slices.Contains(wakeDue, m)) && len(own) < limit {
					own = append(own, m)
				}
			}
			for i, m := range own {
				cands = append(cands, ranked{m, busy + i})
			}
		}
		slices.SortFunc(cands, func(a, b ranked) int {
			if a.rank != b.rank {
				return a.rank - b.rank
			}
			return older(a.m, b.m)
		})
		var chosen []*model
		for _, c := range cands[:min(limit, len(cands))] {
			chosen = append(chosen, c.m)
		}
		slices.SortFunc(chosen, older)
		var want []string
		for _, m := range chosen {
			want = append(want, m.id)
		}
		got, err := st.Claim(ctx, &store.ClaimParams{Owner: "w", Now: later, TTL: time.Hour, Limit: limit, BelowAttempts: below})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, s := range got {
			ids = append(ids, s.ID)
			m := find(s.ID)
			m.leaseUntil = later.Add(time.Hour)
			m.attempts++
		}
		if diff := cmp.Diff(want, ids); diff != "" {
			t.Fatalf("claim %d, limit %d (-want +got):\n%s", round, limit, diff)
		}
		// Now and then a worker gives a lease up (as a stopping process
		// does): the session is free again, its attempts reset, and its
		// owner runs one fewer.
		if len(got) > 0 && next(3) == 0 {
			m := find(got[0].ID)
			if err := st.Release(ctx, m.id, "w"); err != nil {
				t.Fatal(err)
			}
			m.leaseUntil, m.attempts = time.Time{}, 0
		}
		if len(want) == 0 {
			if round < 10 {
				t.Fatalf("only %d claims: the backlog is too small to test", round)
			}
			return
		}
	}
}

func testClaimConcurrent(t *testing.T, st store.Store) {
	const n = 20
	for i := range n {
		s := newSession(fmt.Sprintf("s%02d", i), "alice")
		s.Runnable = true
		mustCreate(t, st, s)
	}
	var mu sync.Mutex
	claimed := map[string]string{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			owner := fmt.Sprintf("w%d", w)
			for {
				got, err := st.Claim(context.Background(), &store.ClaimParams{Owner: owner, Now: time.Now(), TTL: time.Hour, Limit: 3})
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, s := range got {
					if prev, dup := claimed[s.ID]; dup {
						t.Errorf("%s claimed by %s and %s", s.ID, prev, owner)
					}
					claimed[s.ID] = owner
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(claimed) != n {
		t.Errorf("%d sessions claimed, want %d", len(claimed), n)
	}
}

func testLeases(t *testing.T, st store.Store) {
	ctx := t.Context()
	s := newSession("s", "alice")
	s.Runnable = true
	mustCreate(t, st, s)
	now := time.Now()
	got, err := st.Claim(ctx, &store.ClaimParams{Owner: "w1", Now: now, TTL: time.Hour})
	if err != nil || len(got) != 1 {
		t.Fatalf("Claim = %v, %v", got, err)
	}
	if err := st.Renew(ctx, "s", "w1", now.Add(2*time.Hour)); err != nil {
		t.Errorf("Renew by the holder: %v", err)
	}
	if err := st.Renew(ctx, "s", "w2", now.Add(2*time.Hour)); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Renew by another = %v, want ErrLeaseLost", err)
	}
	cur, _ := st.GetSession(ctx, "s")
	if cur.LeaseOwner != "w1" || cur.LeaseUntil.Sub(now.Add(2*time.Hour)).Abs() > time.Millisecond {
		t.Errorf("lease = %q until %v", cur.LeaseOwner, cur.LeaseUntil)
	}
	// Writes that require the lease.
	cur.Status = "running"
	if err := st.UpdateSession(ctx, cur, nil, &store.UpdateOptions{Lease: "w2"}); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("update with another's lease = %v, want ErrLeaseLost", err)
	}
	// Plain updates keep the lease.
	if err := st.UpdateSession(ctx, cur, nil, nil); err != nil {
		t.Fatal(err)
	}
	cur, _ = st.GetSession(ctx, "s")
	if cur.LeaseOwner != "w1" {
		t.Errorf("plain update changed the lease to %q", cur.LeaseOwner)
	}
	cur.Runnable = false
	if err := st.UpdateSession(ctx, cur, nil, &store.UpdateOptions{Lease: "w1", Release: true}); err != nil {
		t.Fatalf("update with release: %v", err)
	}
	cur, _ = st.GetSession(ctx, "s")
	if cur.LeaseOwner != "" || !cur.LeaseUntil.IsZero() {
		t.Errorf("after release: lease %q until %v", cur.LeaseOwner, cur.LeaseUntil)
	}
	if err := st.Renew(ctx, "s", "w1", now.Add(time.Hour)); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Renew after release = %v, want ErrLeaseLost", err)
	}
	// Release by a non-holder does nothing.
	cur.Runnable = true
	if err := st.UpdateSession(ctx, cur, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Claim(ctx, &store.ClaimParams{Owner: "w3", Now: now, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := st.Release(ctx, "s", "w1"); err != nil {
		t.Fatal(err)
	}
	cur, _ = st.GetSession(ctx, "s")
	if cur.LeaseOwner != "w3" {
		t.Errorf("release by a non-holder changed the lease to %q", cur.LeaseOwner)
	}
	if err := st.Release(ctx, "s", "w3"); err != nil {
		t.Fatal(err)
	}
	cur, _ = st.GetSession(ctx, "s")
	if cur.LeaseOwner != "" {
		t.Errorf("release by the holder left the lease to %q", cur.LeaseOwner)
	}
	// An expired lease is lost.
	if _, err := st.Claim(ctx, &store.ClaimParams{Owner: "w4", Now: now.Add(-2 * time.Hour), TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := st.Renew(ctx, "s", "w4", now.Add(time.Hour)); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Renew of an expired lease = %v, want ErrLeaseLost", err)
	}
}

// testAttempts: Claim counts the claims of a session, committed with the
// lease; a worker that made progress or stopped cleanly resets the count.
// testClaimWithUpdate: an update with UpdateOptions.Claim leases the
// session it leaves runnable, and only a session Claim could take.
func testClaimWithUpdate(t *testing.T, st store.Store) {
	ctx := t.Context()
	now := time.Now()
	claim := func(owner string, below int) *store.UpdateOptions {
		return &store.UpdateOptions{Claim: &store.ClaimParams{Owner: owner, Now: now, TTL: time.Hour, BelowAttempts: below}}
	}
	get := func(id string) *store.Session {
		t.Helper()
		s, err := st.GetSession(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	update := func(s *store.Session, runnable bool, opts *store.UpdateOptions) *store.Session {
		t.Helper()
		s.Runnable = runnable
		if err := st.UpdateSession(ctx, s, []store.Event{ev("AgentEvent", `{}`)}, opts); err != nil {
			t.Fatalf("update of %s: %v", s.ID, err)
		}
		return s
	}
	type lease struct {
		Owner    string
		Attempts int
		Until    bool // LeaseUntil is the claim's: now + 1h
	}
	leaseOf := func(s *store.Session) lease {
		return lease{s.LeaseOwner, s.Attempts, s.LeaseUntil.Sub(now.Add(time.Hour)).Abs() < time.Millisecond}
	}
	check := func(name string, given *store.Session, want lease) {
		t.Helper()
		if got := leaseOf(given); got != want {
			t.Errorf("%s: the updated session says %+v, want %+v", name, got, want)
		}
		if got := leaseOf(get(given.ID)); got != want {
			t.Errorf("%s: stored %+v, want %+v", name, got, want)
		}
	}

	// A free session the update makes runnable is claimed.
	free := mustCreate(t, st, newSession("free", "alice"))
	check("free", update(free, true, claim("w1", 2)), lease{"w1", 1, true})
	if got, _ := st.Claim(ctx, &store.ClaimParams{Owner: "w2", Now: now, TTL: time.Hour, Limit: 10}); len(got) != 0 {
		t.Errorf("Claim after an update claimed it = %d sessions, want none", len(got))
	}

	// Not runnable: not claimed.
	idle := mustCreate(t, st, newSession("idle", "alice"))
	check("not runnable", update(idle, false, claim("w1", 0)), lease{"", 0, false})

	// Held by another, or by the claimer itself: not claimed, lease kept.
	held := newSession("held", "alice")
	held.Runnable = true
	mustCreate(t, st, held)
	if got, err := st.Claim(ctx, &store.ClaimParams{Owner: "w2", Now: now, TTL: 2 * time.Hour}); err != nil || len(got) != 1 {
		t.Fatalf("Claim = %v, %v", got, err)
	}
	h := get("held")
	update(h, true, claim("w1", 0))
	if got := get("held"); got.LeaseOwner != "w2" || got.Attempts != 1 {
		t.Errorf("held by another: stored lease %q, %d attempts; want w2's, 1", got.LeaseOwner, got.Attempts)
	}
	h = get("held")
	update(h, true, claim("w2", 0))
	if got := get("held"); got.LeaseOwner != "w2" || got.Attempts != 1 || got.LeaseUntil.Sub(now.Add(2*time.Hour)).Abs() > time.Millisecond {
		t.Errorf("held by the claimer: stored lease %q until %v, %d attempts; want w2's as it was, 1", got.LeaseOwner, got.LeaseUntil, got.Attempts)
	}

	// An expired lease is taken over, its attempt counted.
	expired := newSession("expired", "alice")
	expired.Runnable = true
	mustCreate(t, st, expired)
	if got, err := st.Claim(ctx, &store.ClaimParams{Owner: "w2", Now: now.Add(-2 * time.Hour), TTL: time.Hour}); err != nil || len(got) == 0 {
		t.Fatalf("Claim = %v, %v", got, err)
	}
	check("expired", update(get("expired"), true, claim("w1", 0)), lease{"w1", 2, true})

	// BelowAttempts leaves a session claimed that often to Claim.
	check("attempts", update(get("expired"), true, nil), lease{"w1", 2, true})
	if err := st.Release(ctx, "expired", "w1"); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Duration{-3 * time.Hour, -2 * time.Hour} { // two claims whose leases expired
		if got, err := st.Claim(ctx, &store.ClaimParams{Owner: "w2", Now: now.Add(at), TTL: time.Hour}); err != nil || len(got) == 0 {
			t.Fatalf("Claim = %v, %v", got, err)
		}
	}
	suspect := get("expired") // 2 attempts, lease expired
	update(suspect, true, claim("w1", 2))
	if got := get("expired"); got.LeaseOwner != "w2" || got.Attempts != 2 {
		t.Errorf("at BelowAttempts: stored lease %q, %d attempts; want w2's (expired), 2", got.LeaseOwner, got.Attempts)
	}

	// A claim under a lease is refused, and nothing is written.
	w := get("free")
	version := w.Version
	w.Runnable = true
	err := st.UpdateSession(ctx, w, nil, &store.UpdateOptions{Lease: "w1", Claim: &store.ClaimParams{Owner: "w1", Now: now, TTL: time.Hour}})
	if !errors.Is(err, store.ErrClaimWithLease) {
		t.Errorf("claim with a lease = %v, want ErrClaimWithLease", err)
	}
	if got := get("free"); got.Version != version {
		t.Errorf("a refused claim wrote version %d over %d", got.Version, version)
	}
}

// testCreateClaimed: a session created runnable with a lease owner is
// created claimed by it; otherwise the lease given is ignored.
// testCommitted: UpdateOptions.Committed sees each committed update as
// GetSession and Events then return it, exactly, and is not called for
// an update that fails.
func testCommitted(t *testing.T, st store.Store) {
	ctx := t.Context()
	var calls int
	var gotS store.Session
	var gotE []store.Event
	committed := func(s *store.Session, events []store.Event) {
		calls++
		gotS, gotE = *s, slices.Clone(events)
	}
	s := mustCreate(t, st, newSession("c", "alice"), ev("E0", `{}`))
	// Times with nanoseconds in another zone, an event without data and
	// one with its own time: each is given back as stored.
	zone := time.FixedZone("X", 5*3600+1800)
	s.Status = "running"
	s.Agent = "billing-agent" // written too, though no session's agent changes in practice
	s.StartedAt = time.Date(2026, 6, 1, 18, 0, 0, 123456789, zone)
	s.WakeAt = time.Now().Add(time.Hour).In(zone)
	s.Runnable = true
	s.State = json.RawMessage(`{"step": 1}`)
	events := []store.Event{{Type: "E1"}, {Type: "E2", Data: json.RawMessage(`{"a": [1, 2]}`), Time: time.Date(2026, 6, 1, 18, 0, 1, 987654321, zone)}}
	now := time.Now()
	opts := &store.UpdateOptions{Committed: committed, Claim: &store.ClaimParams{Owner: "w1", Now: now, TTL: time.Hour}}
	if err := st.UpdateSession(ctx, s, events, opts); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Fatalf("Committed called %d times, want once", calls)
	}
	stored, err := st.GetSession(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(stored, &gotS); d != "" {
		t.Errorf("Committed's session differs from the stored one (-stored +given):\n%s", d)
	}
	if d := cmp.Diff(stored, s); d != "" {
		t.Errorf("the updated session differs from the stored one (-stored +given):\n%s", d)
	}
	if gotS.LeaseOwner != "w1" || gotS.EventCount != 3 {
		t.Errorf("Committed's session has lease %q and %d events, want w1 and 3", gotS.LeaseOwner, gotS.EventCount)
	}
	storedEvents, err := st.Events(ctx, "c", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(storedEvents, gotE); d != "" {
		t.Errorf("Committed's events differ from the stored ones (-stored +given):\n%s", d)
	}

	// An update that fails calls nothing.
	stale := *s
	stale.Version--
	lost := *s
	gone := *s
	gone.ID = "nobody"
	for name, tc := range map[string]struct {
		s    *store.Session
		opts *store.UpdateOptions
		want error
	}{
		"conflict":   {&stale, &store.UpdateOptions{Committed: committed}, store.ErrConflict},
		"lease lost": {&lost, &store.UpdateOptions{Committed: committed, Lease: "w2"}, store.ErrLeaseLost},
		"not found":  {&gone, &store.UpdateOptions{Committed: committed}, store.ErrNotFound},
	} {
		if err := st.UpdateSession(ctx, tc.s, []store.Event{ev("E", `{}`)}, tc.opts); !errors.Is(err, tc.want) {
			t.Errorf("%s: UpdateSession = %v, want %v", name, err, tc.want)
		}
	}
	if calls != 1 {
		t.Errorf("Committed called %d times after failed updates, want still once", calls)
	}
}

// testEventCount: EventCount gives the owner and the event count of the
// session as GetSession does, after creation and after updates.
func testEventCount(t *testing.T, st store.Store) {
	ctx := t.Context()
	if _, _, err := st.EventCount(ctx, "nobody"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("EventCount of an unknown session = %v, want ErrNotFound", err)
	}
	s := mustCreate(t, st, newSession("n", "alice"), ev("A", `{}`), ev("B", `{}`))
	for i := range 3 {
		owner, count, err := st.EventCount(ctx, "n")
		if err != nil || owner != "alice" || count != s.EventCount || count != int64(2+i) {
			t.Fatalf("EventCount after %d updates = %q, %d, %v; want alice, %d", i, owner, count, err, 2+i)
		}
		if err := st.UpdateSession(ctx, s, []store.Event{ev("C", `{}`)}, nil); err != nil {
			t.Fatal(err)
		}
	}
}

func testCreateClaimed(t *testing.T, st store.Store) {
	ctx := t.Context()
	now := time.Now()
	in := newSession("claimed", "alice")
	in.Runnable = true
	in.LeaseOwner, in.LeaseUntil, in.Attempts = "w1", now.Add(time.Hour), 5
	got := mustCreate(t, st, in)
	stored, err := st.GetSession(ctx, "claimed")
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*store.Session{"returned": got, "stored": stored} {
		if s.LeaseOwner != "w1" || s.LeaseUntil.Sub(now.Add(time.Hour)).Abs() > time.Millisecond || s.Attempts != 1 {
			t.Errorf("%s: lease %q until %v, %d attempts; want w1's for an hour, 1", name, s.LeaseOwner, s.LeaseUntil, s.Attempts)
		}
	}
	if c, err := st.Claim(ctx, &store.ClaimParams{Owner: "w2", Now: now, TTL: time.Hour, Limit: 10}); err != nil || len(c) != 0 {
		t.Errorf("Claim of a session created claimed = %d sessions, %v; want none", len(c), err)
	}
	if err := st.Release(ctx, "claimed", "w1"); err != nil {
		t.Fatal(err)
	}
	if c, err := st.Claim(ctx, &store.ClaimParams{Owner: "w2", Now: now, TTL: time.Hour, Limit: 10}); err != nil || len(c) != 1 {
		t.Errorf("Claim after its release = %d sessions, %v; want it", len(c), err)
	}

	// Not runnable: no lease.
	idle := newSession("idle", "alice")
	idle.LeaseOwner, idle.LeaseUntil = "w1", now.Add(time.Hour)
	if got := mustCreate(t, st, idle); got.LeaseOwner != "" || !got.LeaseUntil.IsZero() || got.Attempts != 0 {
		t.Errorf("not runnable: created with the lease of %q, %d attempts; want none", got.LeaseOwner, got.Attempts)
	}
	if s, _ := st.GetSession(ctx, "idle"); s.LeaseOwner != "" || s.Attempts != 0 {
		t.Errorf("not runnable: stored with the lease of %q, %d attempts; want none", s.LeaseOwner, s.Attempts)
	}

	// An idempotent creation that finds the session claims nothing.
	first := newSession("k1", "alice")
	first.IdempotencyKey, first.Runnable = "key", true
	mustCreate(t, st, first)
	again := newSession("k2", "alice")
	again.IdempotencyKey, again.Runnable = "key", true
	again.LeaseOwner, again.LeaseUntil = "w3", now.Add(time.Hour)
	got, created, err := st.CreateSession(ctx, again, nil)
	if err != nil || created || got.ID != "k1" || got.LeaseOwner != "" {
		t.Errorf("second creation with the key = %s created %v, lease %q, %v; want k1, not created, no lease", got.ID, created, got.LeaseOwner, err)
	}
}

func testAttempts(t *testing.T, st store.Store) {
	ctx := t.Context()
	in := newSession("s", "alice")
	in.Runnable = true
	in.Attempts = 7 // not the caller's to set
	if got := mustCreate(t, st, in); got.Attempts != 0 {
		t.Errorf("created with Attempts %d, want 0", got.Attempts)
	}
	now := time.Now()
	stored := func() int {
		t.Helper()
		s, err := st.GetSession(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		return s.Attempts
	}
	claim := func(owner string, at time.Time) *store.Session {
		t.Helper()
		got, err := st.Claim(ctx, &store.ClaimParams{Owner: owner, Now: at, TTL: time.Minute})
		if err != nil || len(got) != 1 {
			t.Fatalf("Claim by %s = %v, %v; want the session", owner, got, err)
		}
		return got[0]
	}
	if got := claim("w1", now); got.Attempts != 1 || stored() != 1 {
		t.Errorf("after a first claim: returned %d, stored %d; want 1", got.Attempts, stored())
	}
	// The worker dies: its lease expires, another claims the session.
	if got := claim("w2", now.Add(2*time.Minute)); got.Attempts != 2 || stored() != 2 {
		t.Errorf("after a claim of the expired lease: returned %d, stored %d; want 2", got.Attempts, stored())
	}
	// Updates without the options leave the count alone, whatever the
	// session given says.
	cur, _ := st.GetSession(ctx, "s")
	cur.Attempts = 0
	if err := st.UpdateSession(ctx, cur, []store.Event{ev("E", `{}`)}, &store.UpdateOptions{Lease: "w2"}); err != nil {
		t.Fatal(err)
	}
	if stored() != 2 {
		t.Errorf("after a plain update: stored %d, want 2", stored())
	}
	// A release by a former holder is no release.
	if err := st.Release(ctx, "s", "w1"); err != nil {
		t.Fatal(err)
	}
	if stored() != 2 {
		t.Errorf("after a release by a former holder: stored %d, want 2", stored())
	}
	// A reset from a worker that lost its lease writes nothing.
	cur = claim("w3", now.Add(4*time.Minute))
	stale, _ := st.GetSession(ctx, "s")
	if err := st.UpdateSession(ctx, stale, nil, &store.UpdateOptions{Lease: "w2", ResetAttempts: true}); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("reset by a former holder = %v, want ErrLeaseLost", err)
	}
	if cur.Attempts != 3 || stored() != 3 {
		t.Errorf("third claim: returned %d, stored %d; want 3", cur.Attempts, stored())
	}
	// Claims may leave out the sessions claimed that often.
	for _, below := range []int{1, 3} {
		got, err := st.Claim(ctx, &store.ClaimParams{Owner: "w", Now: now.Add(time.Hour), TTL: time.Minute, BelowAttempts: below})
		if err != nil || len(got) != 0 {
			t.Errorf("Claim below %d attempts = %v, %v; want none", below, got, err)
		}
	}
	if stored() != 3 {
		t.Errorf("after claims that left it out: stored %d, want 3", stored())
	}
	// Progress under the lease resets it, in the same transaction.
	cur, _ = st.GetSession(ctx, "s")
	if err := st.UpdateSession(ctx, cur, []store.Event{ev("E", `{}`)}, &store.UpdateOptions{Lease: "w3", ResetAttempts: true}); err != nil {
		t.Fatal(err)
	}
	if cur.Attempts != 0 || stored() != 0 {
		t.Errorf("after a reset: returned %d, stored %d; want 0", cur.Attempts, stored())
	}
	if cur.LeaseOwner != "w3" {
		t.Errorf("a reset gave up the lease: %q", cur.LeaseOwner)
	}
	// So does a clean release, by either way.
	if got, err := st.Claim(ctx, &store.ClaimParams{Owner: "w4", Now: now.Add(6 * time.Minute), TTL: time.Minute, BelowAttempts: 1}); err != nil || len(got) != 1 {
		t.Fatalf("Claim below 1 attempt after a reset = %v, %v; want the session", got, err)
	}
	if got := claim("w5", now.Add(8*time.Minute)); got.Attempts != 2 {
		t.Errorf("claim returned %d, want 2", got.Attempts)
	}
	if err := st.Release(ctx, "s", "w5"); err != nil {
		t.Fatal(err)
	}
	if stored() != 0 {
		t.Errorf("after Release: stored %d, want 0", stored())
	}
	claim("w6", now.Add(10*time.Minute))
	cur, _ = st.GetSession(ctx, "s")
	cur.Runnable = false
	if err := st.UpdateSession(ctx, cur, nil, &store.UpdateOptions{Lease: "w6", Release: true}); err != nil {
		t.Fatal(err)
	}
	if cur.Attempts != 0 || stored() != 0 {
		t.Errorf("after an update with Release: returned %d, stored %d; want 0", cur.Attempts, stored())
	}
}

// testRecoverClaim: RecoverClaim finds the sessions a claim took by its
// owner and token, as long as that claim's lease holds them (lapsed or
// not), extends their leases and leaves their attempts as the claim
// counted them.
func testRecoverClaim(t *testing.T, st store.Store) {
	ctx := t.Context()
	for i, id := range []string{"a", "b", "c", "d"} {
		s := newSession(id, "alice")
		s.CreatedAt = base.Add(time.Duration(i) * time.Second)
		s.Runnable = true
		mustCreate(t, st, s)
	}
	now := time.Now()
	claim := func(owner, token string, at time.Time, limit int) []string {
		t.Helper()
		got, err := st.Claim(ctx, &store.ClaimParams{Owner: owner, Token: token, Now: at, TTL: time.Minute, Limit: limit})
		if err != nil {
			t.Fatalf("Claim by %s (%s): %v", owner, token, err)
		}
		var ids []string
		for _, s := range got {
			ids = append(ids, s.ID)
		}
		return ids
	}
	recoverClaim := func(owner, token string, at time.Time) []*store.Session {
		t.Helper()
		got, err := st.RecoverClaim(ctx, &store.ClaimParams{Owner: owner, Token: token, Now: at, TTL: time.Minute, Limit: 1, BelowAttempts: 1})
		if err != nil {
			t.Fatalf("RecoverClaim(%s, %s): %v", owner, token, err)
		}
		return got
	}
	ids := func(ss []*store.Session) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.ID)
		}
		return out
	}
	if got := claim("w1", "t1", now, 2); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("first claim took %v, want a and b", got)
	}
	if got := claim("w1", "t2", now, 1); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("second claim took %v, want c", got)
	}
	// What the first claim took, its leases extended, its attempts
	// counted once; as many times as it is asked.
	later := now.Add(10 * time.Second)
	for range 2 {
		got := recoverClaim("w1", "t1", later)
		if !slices.Equal(ids(got), []string{"a", "b"}) {
			t.Fatalf("RecoverClaim(t1) = %v, want a and b", ids(got))
		}
		for _, s := range got {
			if s.LeaseOwner != "w1" || s.LeaseUntil.Sub(later.Add(time.Minute)).Abs() > time.Millisecond || s.Attempts != 1 {
				t.Errorf("recovered %s: lease %q until %v, attempts %d; want w1 until %v, 1", s.ID, s.LeaseOwner, s.LeaseUntil, s.Attempts, later.Add(time.Minute))
			}
			stored, err := st.GetSession(ctx, s.ID)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(stored, s, cmpSession); diff != "" {
				t.Errorf("recovered %s differs from the stored session (-stored +recovered):\n%s", s.ID, diff)
			}
		}
	}
	if got := recoverClaim("w1", "t2", later); !slices.Equal(ids(got), []string{"c"}) {
		t.Errorf("RecoverClaim(t2) = %v, want c", ids(got))
	}
	for _, k := range [][2]string{{"w2", "t1"}, {"w1", ""}, {"w1", "t9"}} {
		if got := recoverClaim(k[0], k[1], later); len(got) != 0 {
			t.Errorf("RecoverClaim(%s, %q) = %v, want none", k[0], k[1], ids(got))
		}
	}
	// A session released is no longer the claim's.
	if err := st.Release(ctx, "b", "w1"); err != nil {
		t.Fatal(err)
	}
	if got := recoverClaim("w1", "t1", later); !slices.Equal(ids(got), []string{"a"}) {
		t.Errorf("RecoverClaim(t1) after b's release = %v, want a", ids(got))
	}
	// A lapsed lease that nothing took since is the claim's still.
	lapsed := later.Add(5 * time.Minute)
	if got := recoverClaim("w1", "t1", lapsed); !slices.Equal(ids(got), []string{"a"}) {
		t.Errorf("RecoverClaim(t1) after a's lease lapsed = %v, want a", ids(got))
	}
	// Once another claim took it, it is that claim's, the same owner's
	// included.
	if got := claim("w2", "t3", lapsed.Add(2*time.Minute), 1); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("claim after the lapse took %v, want a", got)
	}
	if got := recoverClaim("w1", "t1", lapsed); len(got) != 0 {
		t.Errorf("RecoverClaim(t1) after w2 claimed a = %v, want none", ids(got))
	}
	if got := claim("w1", "t4", lapsed.Add(2*time.Minute), 10); !slices.Equal(got, []string{"b", "c", "d"}) {
		t.Fatalf("w1's later claim took %v, want b, c and d", got)
	}
	if got := recoverClaim("w1", "t2", lapsed); len(got) != 0 {
		t.Errorf("RecoverClaim(t2) after w1's claim t4 took c = %v, want none", ids(got))
	}
	if got := recoverClaim("w1", "t4", lapsed); !slices.Equal(ids(got), []string{"b", "c", "d"}) {
		t.Errorf("RecoverClaim(t4) = %v, want b, c and d", ids(got))
	}
	// An update that gives the lease up; one that claims, with its token.
	cur, _ := st.GetSession(ctx, "d")
	cur.Runnable = false
	if err := st.UpdateSession(ctx, cur, nil, &store.UpdateOptions{Lease: "w1", Release: true}); err != nil {
		t.Fatal(err)
	}
	if got := recoverClaim("w1", "t4", lapsed); !slices.Equal(ids(got), []string{"b", "c"}) {
		t.Errorf("RecoverClaim(t4) after d's release = %v, want b and c", ids(got))
	}
	cur.Runnable = true
	if err := st.UpdateSession(ctx, cur, nil, &store.UpdateOptions{Claim: &store.ClaimParams{Owner: "w3", Token: "t5", Now: now, TTL: time.Minute}}); err != nil || cur.LeaseOwner != "w3" {
		t.Fatalf("update claiming d = %v, lease %q", err, cur.LeaseOwner)
	}
	if got := recoverClaim("w3", "t5", later); !slices.Equal(ids(got), []string{"d"}) || got[0].Attempts != 1 {
		t.Errorf("RecoverClaim(t5) = %v, want d with 1 attempt", ids(got))
	}
	for _, id := range []string{"a", "b", "c", "d"} {
		s, _ := st.GetSession(ctx, id)
		want := map[string]int{"a": 2, "b": 1, "c": 2, "d": 1}[id]
		if s.Attempts != want {
			t.Errorf("%s: %d attempts, want %d (one per claim, none per recovery)", id, s.Attempts, want)
		}
	}
}

func testNextWake(t *testing.T, st store.Store) {
	ctx := t.Context()
	now := time.Now().UTC()
	next := func() time.Time {
		t.Helper()
		w, err := st.NextWake(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	if w := next(); !w.IsZero() {
		t.Errorf("NextWake of an empty store = %v, want zero", w)
	}
	s := newSession("later", "alice")
	s.WakeAt = now.Add(time.Hour)
	mustCreate(t, st, s)
	s = newSession("sooner", "alice")
	s.WakeAt = now.Add(time.Minute)
	mustCreate(t, st, s)
	s = newSession("idle", "alice")
	mustCreate(t, st, s)
	if w := next(); w.Sub(now.Add(time.Minute)).Abs() > time.Millisecond {
		t.Errorf("NextWake = %v, want in a minute", w)
	}
	// A runnable session held by a worker is due when its lease expires.
	s = newSession("held", "alice")
	s.Runnable = true
	mustCreate(t, st, s)
	if _, err := st.Claim(ctx, &store.ClaimParams{Owner: "w", Now: now, TTL: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if w := next(); w.Sub(now.Add(10*time.Second)).Abs() > time.Millisecond {
		t.Errorf("NextWake with a held session = %v, want at its lease expiry", w)
	}
}

// testFarWake: a session whose wake time is centuries away (an idle
// session of a caller's idle_timeout_s of 9,000,000,000 seconds) is not due
// and is not claimed: its time, past what int64 nanoseconds hold (2262),
// is kept or saturated, never wrapped into the past, where the dispatcher
// claimed it again and again, a core busy for one request.
func testFarWake(t *testing.T, st store.Store) {
	ctx := t.Context()
	now := time.Now().UTC()
	for i, wake := range []time.Time{now.Add(9e9 * time.Second), now.Add(math.MaxInt64)} {
		s := newSession("far"+strconv.Itoa(i), "alice")
		s.WakeAt = wake
		mustCreate(t, st, s)
		got, err := st.GetSession(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !got.WakeAt.After(now.Add(200 * 365 * 24 * time.Hour)) {
			t.Errorf("a session to wake at %v reads back to wake at %v", wake, got.WakeAt)
		}
	}
	if w, err := st.NextWake(ctx, now); err != nil || !w.IsZero() && !w.After(now.Add(200*365*24*time.Hour)) {
		t.Errorf("NextWake = %v, %v; want none, or centuries away", w, err)
	}
	claimed, err := st.Claim(ctx, &store.ClaimParams{Owner: "w", Now: now, TTL: 10 * time.Second})
	if err != nil || len(claimed) != 0 {
		t.Errorf("Claim = %v, %v; want nothing due", claimed, err)
	}
}

// testTextWithNUL: a session's texts may hold NUL (a caller's JSON
// \u0000 in its first message, agent name or group id; a model server's
// error): the store takes them, on creation, update and in list filters,
// keeping each NUL or putting U+FFFD in its place (PostgreSQL's text
// holds no NUL: its creation was a 500).
func testTextWithNUL(t *testing.T, st store.Store) {
	ctx := t.Context()
	s := newSession("nul", "alice")
	s.Agent, s.FirstMessage, s.GroupID = "a\x00b", "hi\x00there", "g\x00"
	mustCreate(t, st, s)
	got, err := st.GetSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	same := func(got, want string) bool { return got == want || got == strings.ReplaceAll(want, "\x00", "\uFFFD") }
	if !same(got.Agent, s.Agent) || !same(got.FirstMessage, s.FirstMessage) || !same(got.GroupID, s.GroupID) {
		t.Errorf("read back agent %q, first message %q, group %q", got.Agent, got.FirstMessage, got.GroupID)
	}
	got.Status, got.Error, got.ErrorCode = "failed", "the model said \x00", "model"
	if err := st.UpdateSession(ctx, got, []store.Event{ev("AgentErrorEvent", `{"error":"the model said \u0000"}`)}, nil); err != nil {
		t.Fatalf("UpdateSession with an error holding NUL: %v", err)
	}
	list, total, err := st.ListSessions(ctx, &store.ListParams{Owner: "alice", Agents: []string{"a\x00b"}, GroupID: "g\x00", Search: "hi\x00"})
	if err != nil || total != 1 || len(list) != 1 {
		t.Errorf("ListSessions by the texts with NUL = %d of %d, %v; want the session", len(list), total, err)
	}
	// A registered skill's or agent's description, a webhook's.
	e := newEntry("skill", "alice", "s")
	e.Description = "d\x00"
	e = mustCreateEntry(t, st, e)
	e.Description = "e\x00"
	if _, err := st.UpdateEntry(ctx, e); err != nil {
		t.Errorf("UpdateEntry with a description holding NUL: %v", err)
	}
	w := newWebhook("w", "alice", "session.completed")
	w.Description = "d\x00"
	w = mustCreateWebhook(t, st, w)
	w.Description = "e\x00"
	if _, err := st.UpdateWebhook(ctx, w); err != nil {
		t.Errorf("UpdateWebhook with a description holding NUL: %v", err)
	}
	// A browser profile's name, description and browser version.
	if _, err := st.CreateProfile(ctx, &store.Profile{ID: "p", Owner: "alice", UploadToken: profileToken, UploadExpires: base.Add(time.Hour), CreatedAt: base}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutProfileUpload(ctx, "p", profileToken, base, []byte("archive")); err != nil {
		t.Fatal(err)
	}
	desc := "d\x00"
	if _, err := st.CompleteProfile(ctx, &store.Profile{ID: "p", Owner: "alice", Name: "n\x00", Description: &desc, BrowserName: "chromium", BrowserVersion: "1\x00", SizeBytes: 7, Checksum: "c"}, []byte("archive")); err != nil {
		t.Errorf("CompleteProfile with texts holding NUL: %v", err)
	}
}

func testSubscribe(t *testing.T, st store.Store) {
	ctx := t.Context()
	mustCreate(t, st, newSession("s", "alice"))
	mustCreate(t, st, newSession("other", "alice"))
	ch, cancel := st.Subscribe("s")
	defer cancel()
	work, cancelWork := st.Subscribe(store.WorkTopic)
	defer cancelWork()
	received := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		case <-time.After(5 * time.Second):
			return false
		}
	}
	empty := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return false
		default:
			return true
		}
	}
	// A store may deliver notifications asynchronously (PostgreSQL's
	// LISTEN): the creations above may reach ch after Subscribe. A
	// barrier committed later arrives after them, in commit order; then
	// ch is drained (if asked) and holds only what the steps below cause.
	barrier := func(drain bool) {
		t.Helper()
		b, cancelB := st.Subscribe("barrier")
		defer cancelB()
		bs, err := st.GetSession(ctx, "barrier")
		if errors.Is(err, store.ErrNotFound) {
			mustCreate(t, st, newSession("barrier", "alice"))
		} else if err != nil {
			t.Fatal(err)
		} else if err := st.UpdateSession(ctx, bs, nil, nil); err != nil {
			t.Fatal(err)
		}
		if !received(b) {
			t.Fatal("no notification of the barrier")
		}
		for drain && len(ch) > 0 {
			<-ch
		}
	}
	barrier(true)
	other, _ := st.GetSession(ctx, "other")
	if err := st.UpdateSession(ctx, other, []store.Event{ev("E", `{}`)}, nil); err != nil {
		t.Fatal(err)
	}
	barrier(false)
	if !empty(ch) {
		t.Error("notified of another session's change")
	}
	// Several changes coalesce into one pending notification.
	for range 3 {
		s, _ := st.GetSession(ctx, "s")
		if err := st.UpdateSession(ctx, s, []store.Event{ev("E", `{}`)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	barrier(false)
	if !received(ch) {
		t.Fatal("no notification after updates")
	}
	if !empty(ch) {
		t.Error("more than one pending notification")
	}
	// Becoming runnable wakes workers.
	for len(work) > 0 {
		<-work
	}
	s, _ := st.GetSession(ctx, "s")
	s.Runnable = true
	if err := st.UpdateSession(ctx, s, nil, nil); err != nil {
		t.Fatal(err)
	}
	if !received(work) {
		t.Error("no work notification for a runnable session")
	}
	if !received(ch) {
		t.Error("no session notification")
	}
	// A runnable session whose lease its holder keeps is the holder's to
	// run: its updates wake no worker, until the holder lets it go.
	now := time.Now()
	if got, err := st.Claim(ctx, &store.ClaimParams{Owner: "w1", Now: now, TTL: time.Hour, Limit: 10}); err != nil || len(got) != 1 {
		t.Fatalf("Claim = %v, %v", got, err)
	}
	barrier(false)
	for len(work) > 0 {
		<-work
	}
	s, _ = st.GetSession(ctx, "s")
	if err := st.UpdateSession(ctx, s, []store.Event{ev("E", `{}`)}, &store.UpdateOptions{Lease: "w1"}); err != nil {
		t.Fatal(err)
	}
	barrier(false)
	if !empty(work) {
		t.Error("work notification for a runnable session its lease holder keeps")
	}
	if err := st.UpdateSession(ctx, s, nil, &store.UpdateOptions{Lease: "w1", Release: true}); err != nil {
		t.Fatal(err)
	}
	if !received(work) {
		t.Error("no work notification for a runnable session its holder released")
	}
	barrier(true)
	// After cancel, nothing more arrives; cancel twice is fine.
	cancel()
	cancel()
	s, _ = st.GetSession(ctx, "s")
	if err := st.UpdateSession(ctx, s, nil, nil); err != nil {
		t.Fatal(err)
	}
	if !empty(ch) {
		t.Error("notified after cancel")
	}
}

func testReplicas(t *testing.T, st store.Store) {
	rs, ok := st.(store.Replicas)
	if !ok {
		t.Skip("the store does not implement store.Replicas")
	}
	ctx := t.Context()
	now := time.Now().UTC()
	list := func(at time.Time) []*store.Replica {
		t.Helper()
		got, err := rs.Replicas(ctx, at)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := list(now); len(got) != 0 {
		t.Errorf("Replicas of a new store = %v, want none", got)
	}
	a := &store.Replica{ID: "a", Host: "host-1", PID: 42, StartedAt: now.Add(-time.Minute), SeenAt: now, ExpiresAt: now.Add(15 * time.Second), Workers: 64, Running: 1}
	b := &store.Replica{ID: "b", Host: "host-2", PID: 7, StartedAt: now, SeenAt: now, ExpiresAt: now.Add(15 * time.Second), Workers: 8}
	for _, r := range []*store.Replica{a, b} {
		if err := rs.Beat(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// Leases count the sessions a replica holds, not expired ones.
	for i, owner := range []string{"a", "a", "b"} {
		s := newSession(fmt.Sprint("s", i), "alice")
		s.Runnable = true
		s.CreatedAt = base.Add(time.Duration(i) * time.Second)
		mustCreate(t, st, s)
		ttl := time.Hour
		if i == 2 {
			ttl = time.Second
		}
		if got, err := st.Claim(ctx, &store.ClaimParams{Owner: owner, Now: now, TTL: ttl}); err != nil || len(got) != 1 {
			t.Fatalf("Claim by %s = %v, %v", owner, got, err)
		}
	}
	wantA, wantB := *a, *b
	wantA.Leases, wantB.Leases = 2, 1
	if diff := cmp.Diff([]*store.Replica{&wantA, &wantB}, list(now), cmpSession); diff != "" {
		t.Errorf("Replicas (-want +got):\n%s", diff)
	}
	wantB.Leases = 0
	if diff := cmp.Diff([]*store.Replica{&wantA, &wantB}, list(now.Add(time.Minute)), cmpSession); diff != "" {
		t.Errorf("Replicas after b's lease expired (-want +got):\n%s", diff)
	}
	// A beat replaces the record.
	a2 := *a
	a2.SeenAt, a2.ExpiresAt, a2.Running = now.Add(5*time.Second), now.Add(20*time.Second), 2
	if err := rs.Beat(ctx, &a2); err != nil {
		t.Fatal(err)
	}
	got := list(now)
	if len(got) != 2 || got[0].SeenAt.Sub(a2.SeenAt).Abs() > time.Microsecond || got[0].Running != 2 {
		t.Errorf("after a second beat of a: %+v", *got[0])
	}
	// Leaving removes the record; leaving twice is fine.
	for range 2 {
		if err := rs.Leave(ctx, "b"); err != nil {
			t.Fatal(err)
		}
	}
	if got := list(now); len(got) != 1 || got[0].ID != "a" {
		t.Errorf("after b left: %d replicas, want a only", len(got))
	}
	// Records not beaten for an hour are forgotten at the next beat.
	c := &store.Replica{ID: "c", StartedAt: now.Add(2 * time.Hour), SeenAt: now.Add(2 * time.Hour), ExpiresAt: now.Add(2*time.Hour + time.Minute)}
	if err := rs.Beat(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got := list(now); len(got) != 1 || got[0].ID != "c" {
		t.Errorf("after an hour without a's beat: %d replicas, want c only", len(got))
	}
}

func testClose(t *testing.T, st store.Store) {
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if _, err := st.GetSession(context.Background(), "s"); err == nil {
		t.Error("GetSession after Close succeeded")
	}
}
