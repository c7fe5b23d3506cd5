package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hrns-dev/hrns/store"
)

// webhookTests are the subtests of [store.Webhooks].
var webhookTests = []struct {
	name string
	fn   func(t *testing.T, st store.Store)
}{
	{"WebhookCRUD", testWebhookCRUD},
	{"WebhookScope", testWebhookScope},
	{"WebhookOutbox", testWebhookOutbox},
	{"WebhookOutboxRollback", testWebhookOutboxRollback},
	{"WebhookDeliveries", testWebhookDeliveries},
	{"WebhookClaimConcurrent", testWebhookClaimConcurrent},
	{"WebhookClaimFair", testWebhookClaimFair},
	{"WebhookClaimAgain", testWebhookClaimAgain},
	{"WebhookDisable", testWebhookDisable},
}

func newWebhook(id, owner string, events ...string) *store.Webhook {
	return &store.Webhook{
		ID:          id,
		Owner:       owner,
		URL:         "https://hooks.example.com/" + id,
		Events:      events,
		Description: "orders",
		Secret:      "whsec_" + id,
		CreatedAt:   base,
	}
}

func mustCreateWebhook(t *testing.T, st store.Store, w *store.Webhook) *store.Webhook {
	t.Helper()
	got, err := st.CreateWebhook(t.Context(), w)
	if err != nil {
		t.Fatalf("CreateWebhook(%s) = %v", w.ID, err)
	}
	return got
}

// hookID makes a UUID-shaped id.
func hookID(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }

func testWebhookCRUD(t *testing.T, st store.Store) {
	ctx := t.Context()
	in := newWebhook(hookID(1), "alice", "*", store.EventCompleted)
	got := mustCreateWebhook(t, st, in)
	want := *in
	want.Version, want.UpdatedAt = 1, base
	if diff := cmp.Diff(&want, got, cmpSession); diff != "" {
		t.Errorf("CreateWebhook returned (-want +got):\n%s", diff)
	}
	read, err := st.GetWebhook(ctx, "alice", in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&want, read, cmpSession); diff != "" {
		t.Errorf("GetWebhook (-want +got):\n%s", diff)
	}

	read.URL = "https://hooks.example.com/v2"
	read.Events = []string{store.EventFailed}
	read.Disabled = true
	read.PreviousSecret, read.Secret = read.Secret, "whsec_new"
	read.PreviousSecretUntil = base.Add(24 * time.Hour)
	upd, err := st.UpdateWebhook(ctx, read)
	if err != nil {
		t.Fatal(err)
	}
	if upd.Version != 2 || upd.URL != read.URL || !upd.Disabled || upd.Secret != "whsec_new" || upd.PreviousSecret != in.Secret ||
		!upd.PreviousSecretUntil.Equal(read.PreviousSecretUntil) || !slices.Equal(upd.Events, read.Events) || !upd.CreatedAt.Equal(base) {
		t.Errorf("UpdateWebhook returned %+v", upd)
	}
	// The version read before is stale now.
	if _, err := st.UpdateWebhook(ctx, read); !errors.Is(err, store.ErrConflict) {
		t.Errorf("UpdateWebhook with a stale version = %v, want ErrConflict", err)
	}
	// Empty events survive as empty, not nil.
	upd.Events = nil
	upd2, err := st.UpdateWebhook(ctx, upd)
	if err != nil {
		t.Fatal(err)
	}
	if upd2.Events == nil || len(upd2.Events) != 0 {
		t.Errorf("events = %#v, want empty", upd2.Events)
	}

	if err := st.DeleteWebhook(ctx, "alice", in.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetWebhook(ctx, "alice", in.ID); !errors.Is(err, store.ErrWebhookNotFound) {
		t.Errorf("GetWebhook after delete = %v, want ErrWebhookNotFound", err)
	}
	if err := st.DeleteWebhook(ctx, "alice", in.ID); !errors.Is(err, store.ErrWebhookNotFound) {
		t.Errorf("DeleteWebhook twice = %v, want ErrWebhookNotFound", err)
	}
	if _, err := st.UpdateWebhook(ctx, upd2); !errors.Is(err, store.ErrWebhookNotFound) {
		t.Errorf("UpdateWebhook after delete = %v, want ErrWebhookNotFound", err)
	}
}

func testWebhookScope(t *testing.T, st store.Store) {
	ctx := t.Context()
	for i := range 5 {
		w := newWebhook(hookID(i), "alice", "*")
		w.CreatedAt = base.Add(time.Duration(i) * time.Minute)
		mustCreateWebhook(t, st, w)
	}
	mustCreateWebhook(t, st, newWebhook(hookID(9), "bob", "*"))
	page, total, err := st.ListWebhooks(ctx, &store.WebhookListParams{Owner: "alice", Limit: 2, Offset: 1})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, w := range page {
		ids = append(ids, w.ID)
	}
	if total != 5 || !slices.Equal(ids, []string{hookID(3), hookID(2)}) {
		t.Errorf("ListWebhooks = %v (total %d), want [3 2] of 5", ids, total)
	}
	page, _, err = st.ListWebhooks(ctx, &store.WebhookListParams{Owner: "alice", Limit: 1, Ascending: true})
	if err != nil || len(page) != 1 || page[0].ID != hookID(0) {
		t.Errorf("ListWebhooks ascending = %v, %v", page, err)
	}
	if n, err := st.CountWebhooks(ctx, "bob"); n != 1 || err != nil {
		t.Errorf("CountWebhooks(bob) = %d, %v", n, err)
	}
	// Another owner's webhook does not exist for alice.
	if _, err := st.GetWebhook(ctx, "alice", hookID(9)); !errors.Is(err, store.ErrWebhookNotFound) {
		t.Errorf("GetWebhook of bob's as alice = %v", err)
	}
	bobs, _ := st.GetWebhook(ctx, "bob", hookID(9))
	bobs.Owner = "alice"
	if _, err := st.UpdateWebhook(ctx, bobs); !errors.Is(err, store.ErrWebhookNotFound) {
		t.Errorf("UpdateWebhook of bob's as alice = %v", err)
	}
	if err := st.DeleteWebhook(ctx, "alice", hookID(9)); !errors.Is(err, store.ErrWebhookNotFound) {
		t.Errorf("DeleteWebhook of bob's as alice = %v", err)
	}
	if _, _, err := st.ListDeliveries(ctx, &store.DeliveryListParams{Owner: "alice", WebhookID: hookID(9)}); !errors.Is(err, store.ErrWebhookNotFound) {
		t.Errorf("ListDeliveries of bob's as alice = %v", err)
	}
}

// pendingEvents lists the event types and statuses of the webhook's
// deliveries, oldest first.
func pendingEvents(t *testing.T, st store.Store, owner, webhookID string) []string {
	t.Helper()
	page, _, err := st.ListDeliveries(t.Context(), &store.DeliveryListParams{Owner: owner, WebhookID: webhookID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range slices.Backward(page) {
		out = append(out, d.EventType+" "+d.PreviousStatus+">"+d.SessionStatus)
	}
	return out
}

func testWebhookOutbox(t *testing.T, st store.Store) {
	ctx := t.Context()
	all := mustCreateWebhook(t, st, newWebhook(hookID(1), "alice", "*"))
	granular := mustCreateWebhook(t, st, newWebhook(hookID(2), "alice", store.EventCompleted, store.EventAwaitingToolResults))
	off := newWebhook(hookID(3), "alice", "*")
	off.Disabled = true
	mustCreateWebhook(t, st, off)
	mustCreateWebhook(t, st, newWebhook(hookID(4), "bob", "*"))

	work, cancel := st.Subscribe(store.WebhookTopic)
	defer cancel()
	s := mustCreate(t, st, newSession("s1", "alice"))
	// PostgreSQL delivers notifications asynchronously; 5 s bounds the
	// wait, it is no timing assertion.
	select {
	case <-work:
	case <-time.After(5 * time.Second):
		t.Error("creating a session with subscribed webhooks did not notify WebhookTopic")
	}
	// A change without a new status writes nothing.
	s.FirstMessage = "again"
	if err := st.UpdateSession(ctx, s, nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, status := range []string{"running", "awaiting_tool_results", "running", "completed"} {
		s.Status = status
		if err := st.UpdateSession(ctx, s, []store.Event{ev("AgentEvent", `{}`)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	wantAll := []string{
		store.EventStatusUpdated + " >pending",
		store.EventStatusUpdated + " pending>running",
		store.EventStatusUpdated + " running>awaiting_tool_results",
		store.EventStatusUpdated + " awaiting_tool_results>running",
		store.EventStatusUpdated + " running>completed",
	}
	if diff := cmp.Diff(wantAll, pendingEvents(t, st, "alice", all.ID)); diff != "" {
		t.Errorf("deliveries of the * webhook (-want +got):\n%s", diff)
	}
	wantGranular := []string{
		store.EventAwaitingToolResults + " running>awaiting_tool_results",
		store.EventCompleted + " running>completed",
	}
	if diff := cmp.Diff(wantGranular, pendingEvents(t, st, "alice", granular.ID)); diff != "" {
		t.Errorf("deliveries of the granular webhook (-want +got):\n%s", diff)
	}
	if got := pendingEvents(t, st, "alice", off.ID); len(got) != 0 {
		t.Errorf("a disabled webhook got deliveries: %v", got)
	}
	if got := pendingEvents(t, st, "bob", hookID(4)); len(got) != 0 {
		t.Errorf("another owner's webhook got deliveries: %v", got)
	}
	// Event ids are the documented ones, the same for every webhook.
	page, _, _ := st.ListDeliveries(ctx, &store.DeliveryListParams{Owner: "alice", WebhookID: granular.ID})
	version := map[string]int64{store.EventAwaitingToolResults: 4, store.EventCompleted: 6}
	for _, d := range page {
		if want := store.WebhookEventID("s1", version[d.EventType], d.EventType); d.EventID != want {
			t.Errorf("%s event id = %s, want %s", d.EventType, d.EventID, want)
		}
		if d.State != store.DeliveryPending || d.Attempts != 0 || d.SessionID != "s1" || d.Owner != "alice" || d.OccurredAt.IsZero() || d.NextAttemptAt.IsZero() {
			t.Errorf("new delivery = %+v", d)
		}
	}
	if pendingEvents(t, st, "alice", all.ID); len(page) != 2 {
		t.Errorf("granular page = %d deliveries, want 2", len(page))
	}
	// An idempotent replay of a creation writes nothing more.
	s2 := newSession("s2", "alice")
	s2.IdempotencyKey = "k"
	mustCreate(t, st, s2)
	s3 := newSession("s3", "alice")
	s3.IdempotencyKey = "k"
	if _, created, err := st.CreateSession(ctx, s3, nil); err != nil || created {
		t.Fatalf("replay: created %v, %v", created, err)
	}
	if got := len(pendingEvents(t, st, "alice", all.ID)); got != 6 {
		t.Errorf("after a replayed creation: %d deliveries, want 6", got)
	}
}

// testWebhookOutboxRollback: an update that fails writes no delivery.
func testWebhookOutboxRollback(t *testing.T, st store.Store) {
	ctx := t.Context()
	w := mustCreateWebhook(t, st, newWebhook(hookID(1), "alice", "*"))
	s := mustCreate(t, st, newSession("s1", "alice"))
	stale := *s
	s.Status = "running"
	if err := st.UpdateSession(ctx, s, nil, nil); err != nil {
		t.Fatal(err)
	}
	stale.Status = "failed"
	if err := st.UpdateSession(ctx, &stale, nil, nil); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale update = %v", err)
	}
	lost := *s
	lost.Status = "completed"
	if err := st.UpdateSession(ctx, &lost, nil, &store.UpdateOptions{Lease: "nobody"}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("update without the lease = %v", err)
	}
	want := []string{store.EventStatusUpdated + " >pending", store.EventStatusUpdated + " pending>running"}
	if diff := cmp.Diff(want, pendingEvents(t, st, "alice", w.ID)); diff != "" {
		t.Errorf("deliveries (-want +got):\n%s", diff)
	}
}

func testWebhookDeliveries(t *testing.T, st store.Store) {
	ctx := t.Context()
	w := mustCreateWebhook(t, st, newWebhook(hookID(1), "alice", store.EventCompleted))
	s := mustCreate(t, st, newSession("s1", "alice"))
	s.Status = "completed"
	if err := st.UpdateSession(ctx, s, nil, nil); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Add(time.Second)
	got, err := st.ClaimDeliveries(ctx, &store.ClaimParams{Owner: "r1", Now: now, TTL: time.Minute, Limit: 10})
	if err != nil || len(got) != 1 {
		t.Fatalf("ClaimDeliveries = %v, %v; want one", got, err)
	}
	d := got[0]
	if d.Attempts != 1 || d.LeaseOwner != "r1" || !d.LeaseUntil.Equal(now.Add(time.Minute)) || d.Webhook == nil ||
		d.Webhook.URL != w.URL || d.Webhook.Secret != w.Secret || d.EventType != store.EventCompleted {
		t.Errorf("claimed %+v (webhook %+v)", d, d.Webhook)
	}
	// Leased: not claimed again, and due when the lease expires.
	if again, err := st.ClaimDeliveries(ctx, &store.ClaimParams{Owner: "r2", Now: now, TTL: time.Minute}); err != nil || len(again) != 0 {
		t.Errorf("second claim = %v, %v", again, err)
	}
	if next, err := st.NextDelivery(ctx, now); err != nil || !sameTime(next, now.Add(time.Minute)) {
		t.Errorf("NextDelivery while leased = %v, %v; want %v", next, err, now.Add(time.Minute))
	}
	// A failed attempt by someone else than the holder is refused.
	res := &store.DeliveryResult{ID: d.ID, Owner: "r2", Now: now, Attempt: store.DeliveryAttempt{N: 1, At: now, Duration: 1500 * time.Millisecond, StatusCode: 500, Error: "HTTP 500"}, RetryAt: now.Add(10 * time.Second)}
	if err := st.FinishDelivery(ctx, res); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("FinishDelivery by another = %v, want ErrLeaseLost", err)
	}
	res.Owner = "r1"
	if err := st.FinishDelivery(ctx, res); err != nil {
		t.Fatal(err)
	}
	if err := st.FinishDelivery(ctx, res); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("FinishDelivery twice = %v, want ErrLeaseLost", err)
	}
	hook, _ := st.GetWebhook(ctx, "alice", w.ID)
	if hook.LastDeliveryStatus != store.DeliveryFailed || hook.LastDeliveryError != "HTTP 500" || hook.ConsecutiveFailures != 1 || !hook.LastSuccessAt.IsZero() {
		t.Errorf("webhook after a failure: %+v", hook)
	}
	if next, _ := st.NextDelivery(ctx, now); !sameTime(next, res.RetryAt) {
		t.Errorf("NextDelivery after a failure = %v, want %v", next, res.RetryAt)
	}
	if early, _ := st.ClaimDeliveries(ctx, &store.ClaimParams{Owner: "r2", Now: now.Add(9 * time.Second), TTL: time.Minute}); len(early) != 0 {
		t.Errorf("claimed before the retry time: %v", early)
	}
	later := now.Add(10 * time.Second)
	got, err = st.ClaimDeliveries(ctx, &store.ClaimParams{Owner: "r2", Now: later, TTL: time.Minute})
	if err != nil || len(got) != 1 || got[0].Attempts != 2 {
		t.Fatalf("claim of the retry = %v, %v", got, err)
	}
	if err := st.FinishDelivery(ctx, &store.DeliveryResult{ID: d.ID, Owner: "r2", Now: later, Delivered: true,
		Attempt: store.DeliveryAttempt{N: 2, At: later, Duration: time.Millisecond, StatusCode: 204}}); err != nil {
		t.Fatal(err)
	}
	hook, _ = st.GetWebhook(ctx, "alice", w.ID)
	if hook.LastDeliveryStatus != store.DeliverySucceeded || hook.LastDeliveryError != "" || hook.ConsecutiveFailures != 0 || !sameTime(hook.LastSuccessAt, later) {
		t.Errorf("webhook after a success: %+v", hook)
	}
	page, total, err := st.ListDeliveries(ctx, &store.DeliveryListParams{Owner: "alice", WebhookID: w.ID})
	if err != nil || total != 1 {
		t.Fatalf("ListDeliveries = %v, %d, %v", page, total, err)
	}
	wantLog := []store.DeliveryAttempt{
		{N: 1, At: now, Duration: 1500 * time.Millisecond, StatusCode: 500, Error: "HTTP 500"},
		{N: 2, At: later, Duration: time.Millisecond, StatusCode: 204},
	}
	if diff := cmp.Diff(wantLog, page[0].Log, cmpopts.EquateApproxTime(time.Microsecond)); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	if page[0].State != store.DeliveryDelivered || page[0].LastStatusCode != 204 || page[0].Attempts != 2 {
		t.Errorf("delivered: %+v", page[0])
	}
	if next, _ := st.NextDelivery(ctx, later); !next.IsZero() {
		t.Errorf("NextDelivery with nothing pending = %v", next)
	}
	if done, _, _ := st.ListDeliveries(ctx, &store.DeliveryListParams{Owner: "alice", WebhookID: w.ID, State: store.DeliveryPending}); len(done) != 0 {
		t.Errorf("pending filter = %v", done)
	}

	// A worker that dies leaves a lease that expires: another takes the
	// delivery over, and the first can no longer record its attempt.
	s.Status = "running"
	st.UpdateSession(ctx, s, nil, nil)
	s.Status = "completed"
	st.UpdateSession(ctx, s, nil, nil)
	got, _ = st.ClaimDeliveries(ctx, &store.ClaimParams{Owner: "r1", Now: later, TTL: time.Minute})
	if len(got) != 1 {
		t.Fatalf("claim = %v", got)
	}
	expired := later.Add(time.Minute)
	taken, err := st.ClaimDeliveries(ctx, &store.ClaimParams{Owner: "r2", Now: expired, TTL: time.Minute})
	if err != nil || len(taken) != 1 || taken[0].ID != got[0].ID || taken[0].Attempts != 2 {
		t.Fatalf("claim after the lease expired = %v, %v", taken, err)
	}
	if err := st.FinishDelivery(ctx, &store.DeliveryResult{ID: got[0].ID, Owner: "r1", Now: expired, Delivered: true, Attempt: store.DeliveryAttempt{At: later}}); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("FinishDelivery by the worker that lost its lease = %v, want ErrLeaseLost", err)
	}
	if err := st.FinishDelivery(ctx, &store.DeliveryResult{ID: got[0].ID, Owner: "r2", Now: expired, Delivered: true, Attempt: store.DeliveryAttempt{At: expired, StatusCode: 200}}); err != nil {
		t.Fatal(err)
	}

	// A delivery given up on; then pruning.
	s.Status = "running"
	st.UpdateSession(ctx, s, nil, nil)
	s.Status = "completed"
	st.UpdateSession(ctx, s, nil, nil)
	got, _ = st.ClaimDeliveries(ctx, &store.ClaimParams{Owner: "r1", Now: later, TTL: time.Minute})
	if len(got) != 1 {
		t.Fatalf("claim = %v", got)
	}
	if err := st.FinishDelivery(ctx, &store.DeliveryResult{ID: got[0].ID, Owner: "r1", Now: later, Attempt: store.DeliveryAttempt{N: 1, At: later, Error: "connection refused"}}); err != nil {
		t.Fatal(err)
	}
	failed, _, _ := st.ListDeliveries(ctx, &store.DeliveryListParams{Owner: "alice", WebhookID: w.ID, State: store.DeliveryGaveUp})
	if len(failed) != 1 || failed[0].LastError != "connection refused" {
		t.Errorf("failed deliveries = %+v", failed)
	}
	if n, err := st.PruneDeliveries(ctx, later.Add(-time.Hour)); err != nil || n != 0 {
		t.Errorf("PruneDeliveries before = %d, %v", n, err)
	}
	if n, err := st.PruneDeliveries(ctx, later.Add(time.Hour)); err != nil || n != 3 {
		t.Errorf("PruneDeliveries after = %d, %v; want 3", n, err)
	}
	// Deleting the webhook deletes its deliveries.
	s.Status = "running"
	st.UpdateSession(ctx, s, nil, nil)
	s.Status = "completed"
	st.UpdateSession(ctx, s, nil, nil)
	if err := st.DeleteWebhook(ctx, "alice", w.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.ClaimDeliveries(ctx, &store.ClaimParams{Owner: "r1", Now: later.Add(time.Hour), TTL: time.Minute, Limit: 10}); len(got) != 0 {
		t.Errorf("claimed a delivery of a deleted webhook: %v", got)
	}
}

// sameTime compares times at the microsecond precision of PostgreSQL.
func sameTime(a, b time.Time) bool {
	d := a.Sub(b)
	return d > -time.Microsecond && d < time.Microsecond
}

func testWebhookClaimConcurrent(t *testing.T, st store.Store) {
	ctx := t.Context()
	mustCreateWebhook(t, st, newWebhook(hookID(1), "alice", "*"))
	const sessions = 20
	for i := range sessions {
		mustCreate(t, st, newSession(fmt.Sprintf("s%02d", i), "alice"))
	}
	now := time.Now().Add(time.Second)
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for range 10 {
				got, err := st.ClaimDeliveries(ctx, &store.ClaimParams{Owner: fmt.Sprintf("w%d", w), Now: now, TTL: time.Minute, Limit: 3})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, d := range got {
					seen[d.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != sessions {
		t.Errorf("claimed %d deliveries, want %d", len(seen), sessions)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("delivery %s claimed %d times", id, n)
		}
	}
}

// testWebhookClaimFair: one owner's backlog does not hold back another's
// first delivery, and PerKey bounds what an owner has leased at once.
func testWebhookClaimFair(t *testing.T, st store.Store) {
	ctx := t.Context()
	mustCreateWebhook(t, st, newWebhook(hookID(1), "alice", "*"))
	mustCreateWebhook(t, st, newWebhook(hookID(2), "bob", "*"))
	for i := range 6 {
		mustCreate(t, st, newSession(fmt.Sprintf("a%d", i), "alice"))
	}
	mustCreate(t, st, newSession("b0", "bob"))
	now := time.Now().Add(time.Second)
	claim := func(limit, perKey int, at time.Time) map[string]int {
		t.Helper()
		got, err := st.ClaimDeliveries(ctx, &store.ClaimParams{Owner: "r", Now: at, TTL: time.Minute, Limit: limit, PerKey: perKey})
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, d := range got {
			n[d.Owner]++
		}
		return n
	}
	// Bob's only delivery, newer than all of Alice's, is taken in the
	// first claim of two.
	if got := claim(2, 0, now); got["alice"] != 1 || got["bob"] != 1 {
		t.Errorf("claim of 2 = %v, want one of each owner", got)
	}
	// Alice has one leased: with PerKey 3, two more, however many are
	// asked for, and then none.
	if got := claim(10, 3, now); got["alice"] != 2 || got["bob"] != 0 {
		t.Errorf("claim with PerKey 3 = %v, want alice:2", got)
	}
	if got := claim(10, 3, now); len(got) != 0 {
		t.Errorf("claim with Alice at PerKey = %v, want none", got)
	}
	// Without the bound, the rest.
	if got := claim(10, 0, now); got["alice"] != 3 {
		t.Errorf("claim without PerKey = %v, want alice:3", got)
	}
	// Expired leases are not counted.
	if got := claim(10, 2, now.Add(2*time.Minute)); got["alice"] != 2 || got["bob"] != 1 {
		t.Errorf("claim after the leases expired = %v, want alice:2 bob:1", got)
	}
}

// testWebhookClaimAgain: a claim called again with its owner and token
// (its first answer was lost) returns the deliveries the first call
// leased and still holds, leases extended and attempts as counted, and
// claims nothing more; another owner's call with the token, or a call
// after the deliveries were finished or taken, claims as any claim.
func testWebhookClaimAgain(t *testing.T, st store.Store) {
	ctx := t.Context()
	mustCreateWebhook(t, st, newWebhook(hookID(1), "alice", "*"))
	for i := range 3 {
		mustCreate(t, st, newSession(fmt.Sprintf("s%d", i), "alice"))
	}
	now := time.Now().Add(time.Second)
	claim := func(owner, token string, at time.Time, limit int) []*store.Delivery {
		t.Helper()
		got, err := st.ClaimDeliveries(ctx, &store.ClaimParams{Owner: owner, Token: token, Now: at, TTL: time.Minute, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	ids := func(ds []*store.Delivery) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.ID)
		}
		slices.Sort(out)
		return out
	}
	first := claim("r", "t1", now, 2)
	if len(first) != 2 {
		t.Fatalf("first claim took %d, want 2", len(first))
	}
	later := now.Add(30 * time.Second)
	again := claim("r", "t1", later, 2)
	if !slices.Equal(ids(again), ids(first)) {
		t.Fatalf("claim again = %v, want what the first took, %v", ids(again), ids(first))
	}
	for _, d := range again {
		if d.Attempts != 1 || d.LeaseOwner != "r" || !sameTime(d.LeaseUntil, later.Add(time.Minute)) || d.Webhook == nil || d.Webhook.ID != hookID(1) {
			t.Errorf("claimed again: %+v (webhook %+v); want attempts 1, lease to %v", d, d.Webhook, later.Add(time.Minute))
		}
	}
	// The lease was extended: not claimable before its new end.
	if got := claim("r2", "t2", now.Add(time.Minute+time.Second), 10); len(got) != 1 || slices.Contains(ids(first), got[0].ID) {
		t.Errorf("claim after the first lease's end = %v, want the third delivery only", ids(got))
	}
	// Another owner with the token claims as any claim: nothing is due.
	if got := claim("r3", "t1", later, 10); len(got) != 0 {
		t.Errorf("another owner's claim with the token = %v, want none", ids(got))
	}
	// A finished delivery is not returned again.
	if err := st.FinishDelivery(ctx, &store.DeliveryResult{ID: first[0].ID, Owner: "r", Now: later, Delivered: true,
		Attempt: store.DeliveryAttempt{N: 1, At: later, StatusCode: 204}}); err != nil {
		t.Fatal(err)
	}
	rest := first[1].ID
	if got := claim("r", "t1", later, 2); len(got) != 1 || got[0].ID != rest || got[0].Attempts != 1 {
		t.Errorf("claim again after a finish = %v, want [%s] at attempt 1", ids(got), rest)
	}
	// A lapsed lease is recovered while no claim took it.
	lapsed := later.Add(5 * time.Minute)
	if got := claim("r", "t1", lapsed, 2); len(got) != 1 || got[0].ID != rest || !sameTime(got[0].LeaseUntil, lapsed.Add(time.Minute)) {
		t.Errorf("claim again after the lease lapsed = %+v, want [%s] leased to %v", got, rest, lapsed.Add(time.Minute))
	}
	// Once another claim took it, the token's claim is a new claim
	// (here of nothing: the others are leased).
	taken := lapsed.Add(2 * time.Minute)
	if got := claim("r4", "t4", taken, 10); len(got) != 2 || !slices.Contains(ids(got), rest) {
		t.Fatalf("claim after the leases lapsed = %v, want two with %s", ids(got), rest)
	}
	if got := claim("r", "t1", taken, 2); len(got) != 0 {
		t.Errorf("claim again after another took the deliveries = %v, want none", ids(got))
	}
}

func testWebhookDisable(t *testing.T, st store.Store) {
	ctx := t.Context()
	w := mustCreateWebhook(t, st, newWebhook(hookID(1), "alice", "*"))
	now := time.Now().Add(time.Second)
	for i := range 3 {
		mustCreate(t, st, newSession(fmt.Sprintf("s%d", i), "alice"))
	}
	for i := range 2 {
		got, err := st.ClaimDeliveries(ctx, &store.ClaimParams{Owner: "r", Now: now, TTL: time.Minute})
		if err != nil || len(got) != 1 {
			t.Fatalf("claim %d = %v, %v", i, got, err)
		}
		if err := st.FinishDelivery(ctx, &store.DeliveryResult{ID: got[0].ID, Owner: "r", Now: now, DisableAfter: 2,
			Attempt: store.DeliveryAttempt{N: 1, At: now, StatusCode: 500, Error: "HTTP 500"}}); err != nil {
			t.Fatal(err)
		}
	}
	hook, _ := st.GetWebhook(ctx, "alice", w.ID)
	if !hook.Disabled || hook.ConsecutiveFailures != 2 {
		t.Fatalf("after 2 failures with DisableAfter 2: disabled %v, failures %d", hook.Disabled, hook.ConsecutiveFailures)
	}
	// A disabled webhook's pending delivery waits.
	if got, _ := st.ClaimDeliveries(ctx, &store.ClaimParams{Owner: "r", Now: now, TTL: time.Minute}); len(got) != 0 {
		t.Errorf("claimed a delivery of a disabled webhook: %v", got)
	}
	if next, _ := st.NextDelivery(ctx, now); !next.IsZero() {
		t.Errorf("NextDelivery with only a disabled webhook = %v", next)
	}
	hook.Disabled = false
	hook, err := st.UpdateWebhook(ctx, hook)
	if err != nil {
		t.Fatal(err)
	}
	if hook.ConsecutiveFailures != 0 {
		t.Errorf("enabling kept %d failures", hook.ConsecutiveFailures)
	}
	if got, _ := st.ClaimDeliveries(ctx, &store.ClaimParams{Owner: "r", Now: now, TTL: time.Minute}); len(got) != 1 {
		t.Errorf("after enabling: claimed %v, want the waiting delivery", got)
	}
}
