package webhook_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/platform/webhook"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
)

// lostClaimStore lets a claim of deliveries commit and then answers an
// error, as a claim cut by its bound after the commit, or whose
// connection broke while the commit's answer was in flight, does: the
// deliveries it leased are the worker's, which does not know it. The
// first lose claims that took a delivery are lost so (all of them when
// lose < 0); the others answer as the store does.
type lostClaimStore struct {
	store.Store
	mu     sync.Mutex
	lose   int
	claims int // calls of ClaimDeliveries
	lost   int // claims lost
}

func (s *lostClaimStore) ClaimDeliveries(ctx context.Context, p *store.ClaimParams) ([]*store.Delivery, error) {
	got, err := s.Store.ClaimDeliveries(ctx, p)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claims++
	if err == nil && len(got) > 0 && (s.lose < 0 || s.lost < s.lose) {
		s.lost++
		return nil, fmt.Errorf("claim deliveries: %w", context.DeadlineExceeded)
	}
	return got, err
}

// lostClaim: the worker's claim of alice's delivery commits and answers
// an error. The worker claims again with the same token, which returns
// what the lost claim took: the delivery is attempted at once (not a
// lease later, nor blocked for alice's other deliveries with PerKey 1),
// and the lost claim costs no attempt: it is retried after its first
// failure (MaxAttempts 2) and delivered. Before the worker claimed again,
// the delivery sat leased for a whole lease, was claimed again as its
// second attempt, failed, and was given up after one request.
func lostClaim(t *testing.T, st store.Store) {
	ls := &lostClaimStore{Store: st, lose: 1}
	c := newClock()
	lease := time.Minute
	svc := newService(ls, c, &webhook.Options{MaxAttempts: 2, BaseDelay: time.Second, LeaseTTL: lease, PerKey: 1})
	rc := newReceiver(t, status(500), status(204))
	w := create(t, svc, "alice", rc.URL, completedOnly())
	complete(t, st, "alice", "s1")

	n, err := svc.DeliverDue(t.Context())
	if got := len(rc.deliveries()); n != 1 || got != 1 || err != nil {
		t.Errorf("after a lost claim: %d attempted, %d requests, err %v; want the delivery attempted at once", n, got, err)
	}
	for range 3 {
		c.Advance(lease)
		if _, err := svc.DeliverDue(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	page, err := svc.Deliveries(t.Context(), "alice", w.ID, &webhook.DeliveryParams{})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("deliveries: %+v, %v", page, err)
	}
	d := page.Items[0]
	var ns []int
	for _, a := range d.Attempts {
		ns = append(ns, a.N)
	}
	if d.State != "delivered" || fmt.Sprint(ns) != "[1 2]" || len(rc.deliveries()) != 2 {
		t.Errorf("delivery %s with attempts %v after %d requests; want delivered by attempts [1 2]", d.State, ns, len(rc.deliveries()))
	}
	if ls.lost != 1 {
		t.Errorf("%d claims lost, want 1", ls.lost)
	}
}

func TestLostClaimSQLite(t *testing.T) {
	lostClaim(t, openSQLite(t, filepath.Join(t.TempDir(), "hrns.db")))
}

func TestLostClaimPostgres(t *testing.T) {
	lostClaim(t, openPostgres(t, postgrestest.DSN(t)))
}

// TestLostClaimEveryCall: when every call of a claim answers an error,
// the worker makes three (the claim and two calls again with its token)
// and reports the error; the delivery the claim took waits for its lease
// to lapse and is then attempted, the lost claim's attempt counted (its
// first request is attempt 2).
func TestLostClaimEveryCall(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	ls := &lostClaimStore{Store: st, lose: -1}
	c := newClock()
	svc := newService(ls, c, &webhook.Options{Timeout: 100 * time.Millisecond, LeaseTTL: time.Minute})
	rc := newReceiver(t)
	w := create(t, svc, "alice", rc.URL, completedOnly())
	complete(t, st, "alice", "s1")
	if n, err := svc.DeliverDue(t.Context()); n != 0 || err == nil || ls.claims != 3 {
		t.Fatalf("every call lost: %d attempted, err %v, %d calls; want 0, an error, 3 calls", n, err, ls.claims)
	}
	ls.mu.Lock()
	ls.lose = 0
	ls.mu.Unlock()
	if n := deliverDue(t, svc); n != 0 {
		t.Fatalf("%d attempted under the lost claim's lease", n)
	}
	c.Advance(time.Minute)
	if n := deliverDue(t, svc); n != 1 {
		t.Fatalf("%d attempted after the lease lapsed, want 1", n)
	}
	page, _ := svc.Deliveries(t.Context(), "alice", w.ID, &webhook.DeliveryParams{})
	if d := page.Items[0]; d.State != "delivered" || len(d.Attempts) != 1 || d.Attempts[0].N != 2 {
		t.Errorf("delivery %+v: want delivered by attempt 2", d)
	}
}
