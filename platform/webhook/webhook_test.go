package webhook_test

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/internal/netpolicy/netpolicytest"
	"github.com/hrns-dev/hrns/platform/webhook"
	"github.com/hrns-dev/hrns/store"
	"github.com/hrns-dev/hrns/store/postgres"
	"github.com/hrns-dev/hrns/store/postgres/postgrestest"
	"github.com/hrns-dev/hrns/store/sqlite"
)

// clock is a fake clock the tests move.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

// newClock starts a minute ahead of the store's clock, which dates new
// deliveries: they are due at once.
func newClock() *clock { return &clock{now: time.Now().UTC().Add(time.Minute).Truncate(time.Second)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func loopback(ap netip.AddrPort) bool { return ap.Addr().IsLoopback() }

func openSQLite(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// delivery is what the receiver got in one request.
type delivery struct {
	id, timestamp, signature string
	body                     []byte
	event                    struct {
		ID   string `json:"id"`
		Type string `json:"type"`
		Data struct {
			SessionID      string  `json:"session_id"`
			Status         string  `json:"status"`
			PreviousStatus *string `json:"previous_status"`
		} `json:"data"`
	}
}

// receiver is a webhook endpoint on loopback: it answers each request with
// the next of its answers (the last one repeats) and records it.
type receiver struct {
	*httptest.Server
	mu      sync.Mutex
	got     []delivery
	answers []func(w http.ResponseWriter, r *http.Request)
	arrived chan struct{}
}

func newReceiver(t *testing.T, answers ...func(w http.ResponseWriter, r *http.Request)) *receiver {
	rc := &receiver{answers: answers, arrived: make(chan struct{}, 100)}
	if len(answers) == 0 {
		rc.answers = []func(http.ResponseWriter, *http.Request){status(http.StatusNoContent)}
	}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d := delivery{id: r.Header.Get("webhook-id"), timestamp: r.Header.Get("webhook-timestamp"), signature: r.Header.Get("webhook-signature"), body: body}
		if err := json.Unmarshal(body, &d.event); err != nil {
			t.Errorf("body %q: %v", body, err)
		}
		rc.mu.Lock()
		n := len(rc.got)
		rc.got = append(rc.got, d)
		answer := rc.answers[min(n, len(rc.answers)-1)]
		rc.mu.Unlock()
		rc.arrived <- struct{}{}
		answer(w, r)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func status(code int) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(code) }
}

// hang answers nothing until the request is given up.
func hang(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

// verify checks a delivery's signature as a receiver does: any of the
// header's signatures made with secret.
func verify(secret string, d delivery) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.%s", d.id, d.timestamp, d.body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, sig := range strings.Fields(d.signature) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return true
		}
	}
	return false
}

// complete creates a session of owner and completes it: its webhooks
// subscribed to session.completed get one delivery.
func complete(t *testing.T, st store.Store, owner, id string) {
	t.Helper()
	ctx := t.Context()
	s, _, err := st.CreateSession(ctx, &store.Session{ID: id, Owner: owner, Status: "pending"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Status = "completed"
	if err := st.UpdateSession(ctx, s, nil, nil); err != nil {
		t.Fatal(err)
	}
}

func newService(st store.Store, c *clock, o *webhook.Options) *webhook.Service {
	var opts webhook.Options
	if o != nil {
		opts = *o
	}
	if opts.Allow == nil {
		opts.Allow = loopback
	}
	opts.Now = c.Now
	opts.Jitter = func() float64 { return 0 }
	return webhook.New(st, &opts)
}

func completedOnly() *webhook.CreateParams {
	return &webhook.CreateParams{EnabledEvents: []string{store.EventCompleted}}
}

func create(t *testing.T, svc *webhook.Service, owner, url string, p *webhook.CreateParams) *webhook.WithSecret {
	t.Helper()
	if p == nil {
		p = &webhook.CreateParams{}
	}
	p.URL = url
	w, err := svc.Create(t.Context(), owner, p)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func deliverDue(t *testing.T, svc *webhook.Service) int {
	t.Helper()
	n, err := svc.DeliverDue(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestDeliverySigned(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	c := newClock()
	svc := newService(st, c, nil)
	rc := newReceiver(t)
	all := create(t, svc, "alice", rc.URL+"/all", nil)
	complete(t, st, "alice", "s1")
	if n := deliverDue(t, svc); n != 2 {
		t.Fatalf("attempted %d deliveries, want 2 (pending>completed is a status update too)", n)
	}
	got := rc.deliveries()
	if len(got) != 2 {
		t.Fatalf("received %d requests, want 2", len(got))
	}
	// Deliveries are attempted concurrently: no order is promised.
	slices.SortFunc(got, func(a, b delivery) int { return cmp.Compare(b.event.Data.Status, a.event.Data.Status) })
	for i, want := range []struct{ prev, status string }{{"", "pending"}, {"pending", "completed"}} {
		d := got[i]
		if !verify(all.Secret, d) {
			t.Errorf("delivery %d: signature %q does not verify", i, d.signature)
		}
		if d.id != d.event.ID || d.event.Type != store.EventStatusUpdated || d.event.Data.SessionID != "s1" || d.event.Data.Status != want.status {
			t.Errorf("delivery %d: header id %s, body %s", i, d.id, d.body)
		}
		if prev := d.event.Data.PreviousStatus; (prev == nil) != (want.prev == "") || prev != nil && *prev != want.prev {
			t.Errorf("delivery %d: previous_status %v, want %q", i, prev, want.prev)
		}
		if ts, _ := strconv.ParseInt(d.timestamp, 10, 64); ts != c.Now().Unix() {
			t.Errorf("delivery %d: timestamp %s, want %d", i, d.timestamp, c.Now().Unix())
		}
	}
	if verify(webhook.NewSecret(), got[0]) {
		t.Error("a delivery verifies with another secret")
	}
	rec, _ := svc.Get(t.Context(), "alice", all.ID)
	if rec.LastDeliveryStatus == nil || *rec.LastDeliveryStatus != "succeeded" || rec.LastSuccessAt == nil || rec.ConsecutiveFailures != 0 {
		t.Errorf("record after deliveries: %+v", rec)
	}
	if n := deliverDue(t, svc); n != 0 {
		t.Errorf("delivered %d more, want none", n)
	}
}

func TestRetryAfterServerError(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	c := newClock()
	svc := newService(st, c, &webhook.Options{BaseDelay: 10 * time.Second})
	rc := newReceiver(t, status(500), status(503), status(200))
	w := create(t, svc, "alice", rc.URL, completedOnly())
	complete(t, st, "alice", "s1")
	deliverDue(t, svc)
	// Due again after 10 s, then 20 s (no jitter here).
	for _, wait := range []time.Duration{10 * time.Second, 20 * time.Second} {
		c.Advance(wait - time.Second)
		if n := deliverDue(t, svc); n != 0 {
			t.Fatalf("retried %v early", time.Second)
		}
		c.Advance(time.Second)
		if n := deliverDue(t, svc); n != 1 {
			t.Fatalf("retried %d deliveries after %v, want 1", n, wait)
		}
	}
	got := rc.deliveries()
	if len(got) != 3 || got[0].id != got[2].id || got[0].event.ID != got[1].event.ID {
		t.Fatalf("received %d deliveries; the event id must stay the same on every attempt", len(got))
	}
	page, err := svc.Deliveries(t.Context(), "alice", w.ID, &webhook.DeliveryParams{})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("Deliveries = %+v, %v", page, err)
	}
	d := page.Items[0]
	if d.State != "delivered" || len(d.Attempts) != 3 {
		t.Fatalf("delivery %+v", d)
	}
	for i, want := range []struct {
		code int
		err  string
	}{{500, "HTTP 500"}, {503, "HTTP 503"}, {200, ""}} {
		a := d.Attempts[i]
		if a.N != i+1 || a.StatusCode == nil || *a.StatusCode != want.code || (a.Error == nil) != (want.err == "") || a.Error != nil && *a.Error != want.err {
			t.Errorf("attempt %d = %+v, want %d %q", i+1, a, want.code, want.err)
		}
	}
}

func TestRetryAfterHeader(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	c := newClock()
	svc := newService(st, c, &webhook.Options{BaseDelay: 10 * time.Second, MaxDelay: 5 * time.Minute})
	rc := newReceiver(t,
		func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(http.StatusServiceUnavailable)
		},
		func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "86400") // more than MaxDelay
			w.WriteHeader(http.StatusTooManyRequests)
		},
		status(204))
	create(t, svc, "alice", rc.URL, completedOnly())
	complete(t, st, "alice", "s1")
	deliverDue(t, svc)
	for _, wait := range []time.Duration{2 * time.Minute, 5 * time.Minute} {
		c.Advance(wait - time.Second)
		if n := deliverDue(t, svc); n != 0 {
			t.Fatalf("retried before the %v the receiver asked for (or MaxDelay)", wait)
		}
		c.Advance(time.Second)
		if n := deliverDue(t, svc); n != 1 {
			t.Fatalf("not retried after %v", wait)
		}
	}
	if n := len(rc.deliveries()); n != 3 {
		t.Errorf("%d attempts, want 3", n)
	}
}

func TestRetryAfterTimeout(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	c := newClock()
	// The receiver hangs until the attempt gives up: the timeout ends the
	// wait, not a clock the test reads.
	svc := newService(st, c, &webhook.Options{Timeout: time.Second})
	rc := newReceiver(t, hang, status(204))
	w := create(t, svc, "alice", rc.URL, completedOnly())
	complete(t, st, "alice", "s1")
	deliverDue(t, svc)
	c.Advance(time.Hour)
	deliverDue(t, svc)
	page, _ := svc.Deliveries(t.Context(), "alice", w.ID, &webhook.DeliveryParams{})
	d := page.Items[0]
	if d.State != "delivered" || len(d.Attempts) != 2 {
		t.Fatalf("delivery %+v", d)
	}
	if a := d.Attempts[0]; a.StatusCode != nil || a.Error == nil || !strings.Contains(*a.Error, "timed out") {
		t.Errorf("first attempt %+v, want a timeout", a)
	}
}

func TestGiveUp(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	c := newClock()
	svc := newService(st, c, &webhook.Options{MaxAttempts: 2, DisableAfter: 3})
	rc := newReceiver(t, status(500))
	w := create(t, svc, "alice", rc.URL, completedOnly())
	complete(t, st, "alice", "s1")
	for range 5 {
		deliverDue(t, svc)
		c.Advance(2 * time.Hour)
	}
	if n := len(rc.deliveries()); n != 2 {
		t.Errorf("%d attempts, want 2 (MaxAttempts)", n)
	}
	page, _ := svc.Deliveries(t.Context(), "alice", w.ID, &webhook.DeliveryParams{State: "failed"})
	if len(page.Items) != 1 || page.Items[0].NextAttemptAt != nil {
		t.Fatalf("failed deliveries: %+v", page.Items)
	}
	// The third failure in a row disables the webhook.
	complete(t, st, "alice", "s2")
	deliverDue(t, svc)
	rec, _ := svc.Get(t.Context(), "alice", w.ID)
	if !rec.Disabled || rec.ConsecutiveFailures != 3 || rec.LastDeliveryError == nil || *rec.LastDeliveryError != "HTTP 500" {
		t.Errorf("after 3 failures: %+v", rec)
	}
}

// restartMidRetry: a delivery that failed once survives the process:
// another service on a store opened again delivers it, once, when due.
// open opens the store (the second time after the first is closed).
func restartMidRetry(t *testing.T, open func() store.Store) {
	st := open()
	c := newClock()
	svc := newService(st, c, &webhook.Options{BaseDelay: time.Minute})
	rc := newReceiver(t, status(500), status(204))
	w := create(t, svc, "alice", rc.URL, completedOnly())
	complete(t, st, "alice", "s1")
	svc.Start() // the worker runs: the test does not depend on it having run
	deliverDue(t, svc)
	if err := svc.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Either the worker or deliverDue made the first attempt: a worker
	// stopped inside its claim (PostgreSQL's SKIP LOCKED hid the row
	// from deliverDue meanwhile) finishes the claim and the attempt
	// instead of leaving the delivery leased to no one for LeaseTTL.
	if n := len(rc.deliveries()); n != 1 {
		t.Fatalf("before the restart, the receiver got %d requests, want the first attempt", n)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st2 := open()
	svc2 := newService(st2, c, nil)
	if n := deliverDue(t, svc2); n != 0 {
		t.Fatalf("after the restart, %d delivered before the retry time", n)
	}
	c.Advance(time.Minute)
	if n := deliverDue(t, svc2); n != 1 {
		t.Fatalf("after the restart, %d delivered, want 1", n)
	}
	deliverDue(t, svc2)
	got := rc.deliveries()
	if len(got) != 2 || got[0].id != got[1].id {
		t.Fatalf("receiver got %d requests, want 2 of one event", len(got))
	}
	if !verify(w.Secret, got[1]) {
		t.Error("the retry's signature does not verify")
	}
	page, _ := svc2.Deliveries(t.Context(), "alice", w.ID, &webhook.DeliveryParams{})
	if d := page.Items[0]; d.State != "delivered" || len(d.Attempts) != 2 {
		t.Errorf("delivery after the restart: %+v", d)
	}
}

func TestRestartMidRetrySQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hrns.db")
	restartMidRetry(t, func() store.Store { return openSQLite(t, path) })
}

func TestRestartMidRetryPostgres(t *testing.T) {
	dsn := postgrestest.DSN(t)
	restartMidRetry(t, func() store.Store { return openPostgres(t, dsn) })
}

func openPostgres(t *testing.T, dsn string) store.Store {
	t.Helper()
	st, err := postgres.Open(t.Context(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestReplicaDiesMidAttempt: a replica that took a delivery and died
// leaves its lease to expire; another replica then delivers it, and the
// dead one's late report is refused.
func TestReplicaDiesMidAttempt(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	c := newClock()
	rc := newReceiver(t)
	svc := newService(st, c, &webhook.Options{ReplicaID: "b", LeaseTTL: time.Minute})
	w := create(t, svc, "alice", rc.URL, completedOnly())
	complete(t, st, "alice", "s1")
	// Replica a takes the delivery, then dies.
	taken, err := st.ClaimDeliveries(t.Context(), &store.ClaimParams{Owner: "a", Now: c.Now(), TTL: time.Minute})
	if err != nil || len(taken) != 1 {
		t.Fatalf("claim = %v, %v", taken, err)
	}
	if n := deliverDue(t, svc); n != 0 {
		t.Fatalf("b attempted %d deliveries under a's lease", n)
	}
	c.Advance(time.Minute)
	if n := deliverDue(t, svc); n != 1 {
		t.Fatalf("b attempted %d deliveries after a's lease expired, want 1", n)
	}
	err = st.FinishDelivery(t.Context(), &store.DeliveryResult{ID: taken[0].ID, Owner: "a", Now: c.Now(), Delivered: true})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("a's late report = %v, want ErrLeaseLost", err)
	}
	page, _ := svc.Deliveries(t.Context(), "alice", w.ID, &webhook.DeliveryParams{})
	if d := page.Items[0]; d.State != "delivered" || len(d.Attempts) != 1 || d.Attempts[0].N != 2 {
		t.Errorf("delivery %+v: want delivered by b's attempt, the second started", d)
	}
}

// twoWorkers runs two services on stores of one database at once: each
// delivery reaches the receiver once.
func twoWorkers(t *testing.T, a, b store.Store) {
	c := newClock()
	rc := newReceiver(t)
	svcA := newService(a, c, &webhook.Options{ReplicaID: "a", Concurrency: 3})
	svcB := newService(b, c, &webhook.Options{ReplicaID: "b", Concurrency: 3})
	create(t, svcA, "alice", rc.URL, completedOnly())
	const sessions = 24
	for i := range sessions {
		complete(t, a, "alice", fmt.Sprintf("s%02d", i))
	}
	var wg sync.WaitGroup
	for _, svc := range []*webhook.Service{svcA, svcB} {
		wg.Go(func() {
			if _, err := svc.DeliverDue(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	seen := map[string]int{}
	for _, d := range rc.deliveries() {
		seen[d.id]++
	}
	if len(seen) != sessions {
		t.Errorf("%d events delivered, want %d", len(seen), sessions)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("event %s delivered %d times", id, n)
		}
	}
}

func TestTwoWorkersSQLite(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	twoWorkers(t, st, st)
}

func TestTwoWorkersPostgres(t *testing.T) {
	dsn := postgrestest.DSN(t)
	twoWorkers(t, openPostgres(t, dsn), openPostgres(t, dsn))
}

func TestAddressPolicy(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	c := newClock()
	strict := webhook.New(st, &webhook.Options{Now: c.Now})
	rc := newReceiver(t)
	for _, url := range []string{
		rc.URL, // 127.0.0.1
		"http://10.1.2.3/hook",
		"http://169.254.169.254/latest/meta-data",
		"http://[::1]:8080/",
		"http://[::ffff:127.0.0.1]/",
		"http://0x7f000001/",
		"ftp://example.com/",
		"/relative",
		"http://" + strings.Repeat("a", 2050) + ".com/",
		"http://1.1.1.1:70000/",
	} {
		_, err := strict.Create(t.Context(), "alice", &webhook.CreateParams{URL: url})
		if _, ok := errors.AsType[*webhook.ValidationError](err); !ok {
			t.Errorf("Create(%.60s) = %v, want a ValidationError", url, err)
		}
	}
	// A name is judged on the address dialled.
	w, err := strict.Create(t.Context(), "alice", &webhook.CreateParams{URL: strings.Replace(rc.URL, "127.0.0.1", "localhost", 1), EnabledEvents: []string{store.EventCompleted}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := strict.Ping(t.Context(), "alice", w.ID); !errors.Is(err, webhook.ErrPing) || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("Ping of localhost = %v, want a refusal of loopback", err)
	}
	complete(t, st, "alice", "s1")
	deliverDue(t, strict)
	if n := len(rc.deliveries()); n != 0 {
		t.Fatalf("the receiver on loopback got %d requests", n)
	}
	page, _ := strict.Deliveries(t.Context(), "alice", w.ID, &webhook.DeliveryParams{})
	// The owner is told why, not the address the name resolved to.
	if a := page.Items[0].Attempts; len(a) != 1 || a[0].Error == nil || !strings.Contains(*a[0].Error, "loopback") || strings.Contains(*a[0].Error, "127.0.0.1") || strings.Contains(*a[0].Error, "::1") {
		t.Errorf("attempts %+v, want a refusal of loopback", a)
	}
}

func TestRedirectNotFollowed(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	c := newClock()
	svc := newService(st, c, nil)
	target := newReceiver(t)
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
	})
	w := create(t, svc, "alice", rc.URL, completedOnly())
	complete(t, st, "alice", "s1")
	deliverDue(t, svc)
	if n := len(target.deliveries()); n != 0 {
		t.Errorf("the redirect was followed")
	}
	page, _ := svc.Deliveries(t.Context(), "alice", w.ID, &webhook.DeliveryParams{})
	if a := page.Items[0].Attempts[0]; a.Error == nil || !strings.Contains(*a.Error, "redirect") || *a.StatusCode != 307 {
		t.Errorf("attempt %+v", a)
	}
}

func TestResponseCapped(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	c := newClock()
	svc := newService(st, c, &webhook.Options{MaxResponseBytes: 1024})
	// An endless answer: the worker reads 1 KiB of it and moves on.
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		chunk := []byte(strings.Repeat("x", 4096))
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	create(t, svc, "alice", rc.URL, completedOnly())
	complete(t, st, "alice", "s1")
	if n := deliverDue(t, svc); n != 1 {
		t.Fatalf("delivered %d", n)
	}
}

func TestRotation(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	c := newClock()
	svc := newService(st, c, &webhook.Options{RotationOverlap: time.Hour})
	rc := newReceiver(t)
	old := create(t, svc, "alice", rc.URL, completedOnly())
	rotated, err := svc.Rotate(t.Context(), "alice", old.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rotated.Secret == old.Secret || !strings.HasPrefix(rotated.Secret, "whsec_") {
		t.Fatalf("rotated secret %q", rotated.Secret)
	}
	complete(t, st, "alice", "s1")
	deliverDue(t, svc)
	c.Advance(time.Hour)
	complete(t, st, "alice", "s2")
	deliverDue(t, svc)
	got := rc.deliveries()
	if len(got) != 2 {
		t.Fatalf("%d deliveries", len(got))
	}
	if !verify(rotated.Secret, got[0]) || !verify(old.Secret, got[0]) || len(strings.Fields(got[0].signature)) != 2 {
		t.Errorf("during the overlap: %q should carry both signatures", got[0].signature)
	}
	if !verify(rotated.Secret, got[1]) || verify(old.Secret, got[1]) {
		t.Errorf("after the overlap: %q should carry the new signature only", got[1].signature)
	}
}

func TestOwnerScope(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	c := newClock()
	svc := newService(st, c, &webhook.Options{MaxWebhooks: 2})
	rc := newReceiver(t)
	w := create(t, svc, "alice", rc.URL, completedOnly())
	ctx := t.Context()
	if _, err := svc.Get(ctx, "bob", w.ID); !errors.Is(err, webhook.ErrNotFound) {
		t.Errorf("Get = %v", err)
	}
	disabled := true
	if _, err := svc.Update(ctx, "bob", w.ID, &webhook.UpdateParams{Disabled: &disabled}); !errors.Is(err, webhook.ErrNotFound) {
		t.Errorf("Update = %v", err)
	}
	if _, err := svc.Rotate(ctx, "bob", w.ID); !errors.Is(err, webhook.ErrNotFound) {
		t.Errorf("Rotate = %v", err)
	}
	if _, err := svc.Ping(ctx, "bob", w.ID); !errors.Is(err, webhook.ErrNotFound) {
		t.Errorf("Ping = %v", err)
	}
	if _, err := svc.Deliveries(ctx, "bob", w.ID, &webhook.DeliveryParams{}); !errors.Is(err, webhook.ErrNotFound) {
		t.Errorf("Deliveries = %v", err)
	}
	if err := svc.Delete(ctx, "bob", w.ID); !errors.Is(err, webhook.ErrNotFound) {
		t.Errorf("Delete = %v", err)
	}
	// Bob's sessions do not reach Alice's webhook.
	complete(t, st, "bob", "s1")
	if n := deliverDue(t, svc); n != 0 {
		t.Errorf("bob's session gave alice's webhook %d deliveries", n)
	}
	if page, _ := svc.List(ctx, "bob", &webhook.ListParams{}); page.Total != 0 || len(page.Items) != 0 {
		t.Errorf("bob lists %+v", page)
	}
	create(t, svc, "alice", rc.URL, nil)
	if _, err := svc.Create(ctx, "alice", &webhook.CreateParams{URL: rc.URL}); !errors.Is(err, webhook.ErrTooMany) {
		t.Errorf("third webhook with MaxWebhooks 2: %v", err)
	}
}

func TestValidation(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	svc := newService(st, newClock(), nil)
	long := strings.Repeat("é", 256)
	for _, tc := range []struct {
		name string
		p    webhook.CreateParams
		loc  string
	}{
		{"no url", webhook.CreateParams{}, "[body url]"},
		{"unknown event", webhook.CreateParams{URL: "https://example.com/", EnabledEvents: []string{"session.exploded"}}, "[body enabled_events 0]"},
		{"no events", webhook.CreateParams{URL: "https://example.com/", EnabledEvents: []string{}}, "[body enabled_events]"},
		{"long description", webhook.CreateParams{URL: "https://example.com/", Description: &long}, "[body description]"},
	} {
		_, err := svc.Create(t.Context(), "alice", &tc.p)
		ve, ok := errors.AsType[*webhook.ValidationError](err)
		if !ok || len(ve.Fields) != 1 || fmt.Sprint(ve.Fields[0].Loc) != tc.loc {
			t.Errorf("%s: %v, want one error at %s", tc.name, err, tc.loc)
		}
	}
	w, err := svc.Create(t.Context(), "alice", &webhook.CreateParams{URL: "https://example.com/", EnabledEvents: []string{"*", "*", store.EventFailed}})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(w.EnabledEvents) != "[* session.failed]" || w.Description != nil {
		t.Errorf("created %+v", w.Webhook)
	}
}

// TestWorker: the background worker delivers a change as soon as it is
// committed (a notification, not a poll).
func TestWorker(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	svc := webhook.New(st, &webhook.Options{Allow: loopback, PollEvery: time.Hour})
	rc := newReceiver(t)
	create(t, svc, "alice", rc.URL, completedOnly())
	svc.Start()
	defer svc.Stop(context.Background())
	complete(t, st, "alice", "s1")
	select {
	case <-rc.arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("no delivery")
	}
}

// TestBackoff: each wait doubles up to MaxDelay, less the jitter's share
// of half of it.
func TestBackoff(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	c := newClock()
	svc := webhook.New(st, &webhook.Options{Allow: loopback, Now: c.Now, Jitter: func() float64 { return 0.5 },
		BaseDelay: 10 * time.Second, MaxDelay: 30 * time.Second, MaxAttempts: 20})
	rc := newReceiver(t, status(500))
	create(t, svc, "alice", rc.URL, completedOnly())
	complete(t, st, "alice", "s1")
	deliverDue(t, svc)
	for i, wait := range []time.Duration{7500 * time.Millisecond, 15 * time.Second, 22500 * time.Millisecond, 22500 * time.Millisecond} {
		c.Advance(wait - time.Millisecond)
		if n := deliverDue(t, svc); n != 0 {
			t.Fatalf("retry %d before %v", i+1, wait)
		}
		c.Advance(time.Millisecond)
		if n := deliverDue(t, svc); n != 1 {
			t.Fatalf("retry %d not made after %v", i+1, wait)
		}
	}
}

// TestDeliveryTLSCertificateNames: a receiver at an address the operator
// allowed whose certificate is valid for other names: the owner reads
// that the certificate was not valid for the name, in the delivery's
// attempts and a ping's error, not the x509 error, which lists the
// certificate's names (the deployment's hosts); the log has it. The test
// CA is among the system's roots (a child process), as a deployment's
// own CA is.
func TestDeliveryTLSCertificateNames(t *testing.T) {
	if !netpolicytest.RunTrusted(t) {
		return
	}
	srv := netpolicytest.NewTLSServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	port := netip.MustParseAddrPort(srv.Listener.Addr().String()).Port()
	st := openSQLite(t, filepath.Join(t.TempDir(), "hrns.db"))
	var logs bytes.Buffer
	var mu sync.Mutex
	svc := newService(st, newClock(), &webhook.Options{Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))})
	w := create(t, svc, "alice", fmt.Sprintf("https://localhost:%d/hook", port), completedOnly())
	complete(t, st, "alice", "s1")
	deliverDue(t, svc)
	_, perr := svc.Ping(t.Context(), "alice", w.ID)
	page, err := svc.Deliveries(t.Context(), "alice", w.ID, &webhook.DeliveryParams{})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("deliveries: %+v, %v", page, err)
	}
	a := page.Items[0].Attempts
	if len(a) != 1 || a[0].Error == nil || *a[0].Error != "the server's certificate was not valid for this name" {
		t.Errorf("attempts %+v, want the certificate's failure in fixed words", a)
	}
	if perr == nil || !strings.Contains(perr.Error(), "the server's certificate was not valid for this name") {
		t.Errorf("Ping = %v, want the certificate's failure in fixed words", perr)
	}
	view, _ := json.Marshal(page)
	for _, secret := range netpolicytest.Secrets {
		if strings.Contains(string(view), secret) || perr != nil && strings.Contains(perr.Error(), secret) {
			t.Errorf("the owner reads %q: %s; ping: %v", secret, view, perr)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), netpolicytest.SecretName) {
		t.Errorf("the log lost the x509 error:\n%s", logs.String())
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
