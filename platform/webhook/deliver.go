package webhook

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/hrns-dev/hrns/api"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/hrns-dev/hrns/internal/netpolicy"
	"github.com/hrns-dev/hrns/internal/retry"
	"github.com/hrns-dev/hrns/store"
)

// payload is the body of a delivery: the fields of Standard Webhooks'
// examples and of H's (created_at, which H's SDK requires), both the time
// of the event.
type payload struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	CreatedAt time.Time `json:"created_at"`
	Timestamp time.Time `json:"timestamp"`
	Data      any       `json:"data"`
}

// SessionData is the data of the session events: [api.WebhookSessionData].
type SessionData = api.WebhookSessionData

// PingType is the type of the event [Service.Ping] sends.
const PingType = "webhook.ping"

func sessionBody(d *store.Delivery) []byte {
	at := d.OccurredAt.UTC()
	b, _ := json.Marshal(payload{ID: d.EventID, Type: d.EventType, CreatedAt: at, Timestamp: at,
		Data: SessionData{SessionID: d.SessionID, Status: d.SessionStatus, PreviousStatus: optString(d.PreviousStatus)}})
	return b
}

func pingBody(id, webhookID string, now time.Time) []byte {
	b, _ := json.Marshal(payload{ID: id, Type: PingType, CreatedAt: now.UTC(), Timestamp: now.UTC(), Data: map[string]string{"webhook_id": webhookID}})
	return b
}

// client posts deliveries within the address policy, the timeout and the
// size cap, without following redirects.
type client struct {
	hc       *http.Client
	timeout  time.Duration
	maxBytes int64
}

func newClient(o *Options) *client {
	dialer := &net.Dialer{Timeout: o.Timeout, Control: netpolicy.Control(o.Allow)}
	tr := &http.Transport{
		Proxy:                  nil, // a proxy would dial for us, past the policy
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    o.Timeout,
		ResponseHeaderTimeout:  o.Timeout,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &client{
		hc: &http.Client{
			Transport: tr,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
		timeout:  o.Timeout,
		maxBytes: o.MaxResponseBytes,
	}
}

// result is the outcome of one POST.
type result struct {
	StatusCode int
	Error      string // "" for a 2xx; the owner reads it (describe)
	// Detail is the full error of a request that got no answer, for the
	// server's log only: it names the address dialled.
	Detail   string
	Duration time.Duration
	// RetryAfter is the wait a 429 or 503 asked for (Retry-After), 0
	// for none.
	RetryAfter time.Duration
}

// post sends body to w, signed at now, and reports what happened.
func (c *client) post(ctx context.Context, w *store.Webhook, id string, now time.Time, body []byte) result {
	start := time.Now()
	res := c.do(ctx, w, id, now, body)
	res.Duration = time.Since(start)
	return res
}

func (c *client) do(ctx context.Context, w *store.Webhook, id string, now time.Time, body []byte) result {
	if err := netpolicy.CheckHost(hostOf(w.URL)); err != nil {
		return result{Error: err.Error()}
	}
	sig, err := signatures(w.Secret, w.PreviousSecret, w.PreviousSecretUntil, id, now, body)
	if err != nil {
		return result{Error: err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return result{Error: "bad URL: " + err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "hrns-webhooks/1")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	req.Header.Set(HTimestampHeader, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(HSignatureHeader, hSignature(w.Secret, w.PreviousSecret, w.PreviousSecretUntil, now, body))
	resp, err := c.hc.Do(req)
	if err != nil {
		return result{Error: describe(err, ctx, c.timeout), Detail: err.Error()}
	}
	defer resp.Body.Close()
	// Read (and drop) the answer up to the cap, so that the connection
	// can be reused; a longer one is cut.
	_, rerr := io.Copy(io.Discard, io.LimitReader(resp.Body, c.maxBytes))
	res := result{StatusCode: resp.StatusCode}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		res.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), now)
	}
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		res.Error = fmt.Sprintf("HTTP %d: redirects are not followed", resp.StatusCode)
	case resp.StatusCode < 200 || resp.StatusCode >= 300:
		res.Error = fmt.Sprintf("HTTP %d", resp.StatusCode)
	case rerr != nil && ctx.Err() != nil:
		res.Error = "timed out reading the answer after " + c.timeout.String()
	}
	return res
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date after
// now; 0 when it says nothing usable.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 || n > int64(24*time.Hour/time.Second) {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func hostOf(raw string) string {
	req, err := http.NewRequest(http.MethodPost, raw, nil)
	if err != nil {
		return ""
	}
	return req.URL.Hostname()
}

// describe says why a request got no answer, for the webhook's owner:
// without the URL (which the owner knows) and without the address its
// name resolved to (the owner is a tenant, who must not learn what the
// deployment's names resolve to: netpolicy.Refusal). The server's log
// has the full error (result.Detail).
func describe(err error, ctx context.Context, timeout time.Duration) string {
	if _, ok := errors.AsType[*netpolicy.BlockedError](err); ok {
		return netpolicy.Refusal // before the timeout: a refusal is no timeout
	}
	// The attempt's deadline, or the transport's own timeouts, which are
	// the same length and may fire first (ResponseHeaderTimeout).
	var ne net.Error
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return "timed out after " + timeout.String()
	}
	if text, ok := netpolicy.Describe(err); ok {
		return text
	}
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner.Error()
		}
	}
	return err.Error()
}

// backoff is the wait after the n-th failed attempt: BaseDelay doubled
// n-1 times, at most MaxDelay, less up to half of it at random.
func (s *Service) backoff(n int) time.Duration {
	d := s.opts.MaxDelay
	if n-1 < 32 {
		if x := s.opts.BaseDelay << (n - 1); x > 0 && x < d {
			d = x
		}
	}
	return d - time.Duration(s.opts.Jitter()*float64(d/2))
}

// Start starts the worker that delivers the outbox, until Stop. Starting
// a started service does nothing.
func (s *Service) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.running, s.stop, s.done = true, cancel, make(chan struct{})
	go s.run(ctx, s.done)
}

// Stop stops the worker and waits, until ctx is done, for the attempts
// in progress to end (each within Options.Timeout) and be recorded, and
// for a claim in flight, at most about a second (see claim).
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	if !s.running {
		s.mu.Unlock()
		return nil
	}
	s.running = false
	stop, done := s.stop, s.done
	s.mu.Unlock()
	stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// pruneEvery is how often a worker deletes deliveries past retention.
const pruneEvery = time.Hour

func (s *Service) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	wake, cancel := s.st.Subscribe(store.WebhookTopic)
	defer cancel()
	d := s.newDispatcher()
	// Stop returns once the attempts in progress are recorded.
	defer d.wg.Wait()
	var pruned time.Time
	for {
		if _, err := d.fill(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("webhook deliveries", "err", err)
		}
		for _, err := range d.takeErrs() {
			s.log.Error("webhook deliveries", "err", err)
		}
		now := s.opts.Now()
		if now.Sub(pruned) >= pruneEvery {
			if n, err := s.st.PruneDeliveries(ctx, now.Add(-s.opts.Retention)); err != nil && ctx.Err() == nil {
				s.log.Error("webhook deliveries: prune", "err", err)
			} else if n > 0 {
				s.log.Info("webhook deliveries: pruned", "deliveries", n)
			}
			pruned = now
		}
		wait := s.opts.PollEvery
		if next, err := s.st.NextDelivery(ctx, now); err == nil && !next.IsZero() {
			// A delivery due now is leased by another replica, was
			// just refused a claim, or its key has PerKey deliveries
			// in flight: look again soon, not at once. When this
			// worker's own attempts are in flight, the end of each
			// wakes it (freed), so it looks less often.
			floor := 100 * time.Millisecond
			if d.busy() > 0 {
				floor = time.Second
			}
			wait = min(wait, max(next.Sub(now), floor))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-wake:
		case <-d.freed:
		case <-t.C:
		}
		t.Stop()
	}
}

// DeliverDue attempts every delivery that is due now (by Options.Now),
// up to Options.Concurrency at a time and Options.PerKey of one API key
// (a slow receiver holds its own key's slots, not a batch), records each
// attempt, and returns how many it attempted. It returns when none is
// left due and the attempts it started are recorded, or when ctx is
// done; attempts already started finish and are recorded even then. The
// worker does the same without waiting for its attempts; tests and tools
// may call DeliverDue.
func (s *Service) DeliverDue(ctx context.Context) (int, error) {
	d := s.newDispatcher()
	total := 0
	for {
		n, err := d.fill(ctx)
		total += n
		if err != nil || n == 0 && d.busy() == 0 {
			d.wg.Wait()
			return total, errors.Join(append(d.takeErrs(), err)...)
		}
		select {
		case <-d.freed:
		case <-ctx.Done():
		}
	}
}

// A dispatcher attempts claimed deliveries, each in a goroutine of its
// own, at most Options.Concurrency at a time. One goroutine calls fill;
// attempts end on their own.
type dispatcher struct {
	s     *Service
	slots chan struct{} // one per attempt in progress
	// freed receives (without blocking the sender, so one value may
	// stand for several) when an attempt ends.
	freed chan struct{}
	wg    sync.WaitGroup

	mu   sync.Mutex
	errs []error // of attempts, since takeErrs
}

func (s *Service) newDispatcher() *dispatcher {
	return &dispatcher{s: s, slots: make(chan struct{}, s.opts.Concurrency), freed: make(chan struct{}, 1)}
}

// busy returns how many attempts are in progress.
func (d *dispatcher) busy() int { return len(d.slots) }

// fill claims due deliveries for the free slots and starts their
// attempts, until the slots are full or the store has no more to give
// (none due, or their keys at Options.PerKey); it returns how many it
// started.
func (d *dispatcher) fill(ctx context.Context) (int, error) {
	s := d.s
	n := 0
	for ctx.Err() == nil {
		// Only fill takes slots: free can only grow meanwhile.
		free := cap(d.slots) - len(d.slots)
		if free == 0 {
			return n, nil
		}
		ds, err := s.claim(ctx, free)
		if err != nil {
			return n, err
		}
		for _, del := range ds {
			d.slots <- struct{}{}
			d.wg.Go(func() {
				defer d.release()
				if err := s.attempt(context.WithoutCancel(ctx), del); err != nil {
					d.mu.Lock()
					d.errs = append(d.errs, err)
					d.mu.Unlock()
				}
			})
		}
		n += len(ds)
		if len(ds) < free {
			return n, nil
		}
	}
	return n, ctx.Err()
}

// claimTries bounds the calls of one claim: the first, and the calls
// again with its token after an error.
const claimTries = 3

// claim leases up to free due deliveries to this worker. The claim is
// not cut by Stop at once: a claim cancelled after its transaction
// committed would leave the deliveries leased to a worker that never
// attempts them, late by LeaseTTL. It is bounded by the attempt timeout
// instead, and by stopGrace once ctx ends (Stop), so that a store that
// does not answer holds Stop for about a second, not for the three
// calls' bounds (32 s with the default timeout); what it took is
// attempted (Stop waits for the attempts), or, when the grace cut it,
// waits for its leases to lapse, as after a crash.
//
// A claim that answers an error may have committed (its bound passed
// after the commit, or the connection broke while the commit's answer
// was in flight): its deliveries are leased to this worker, which does
// not know them, and each has an attempt counted. So the claim is made
// again with its token, which returns what it took if it committed (and
// claims as any claim if it did not), up to claimTries calls; when
// every call fails, the deliveries it may have taken wait for their
// leases to lapse, an attempt counted.
func (s *Service) claim(ctx context.Context, free int) ([]*store.Delivery, error) {
	p := &store.ClaimParams{Owner: s.opts.ReplicaID, Token: rand.Text(), TTL: s.opts.LeaseTTL, Limit: free, PerKey: s.opts.PerKey}
	var ds []*store.Delivery
	policy := retry.Policy{Tries: claimTries, Bound: s.opts.Timeout, Pause: s.opts.Timeout / 10}
	gctx, cancel := retry.Grace(ctx, stopGrace)
	defer cancel()
	err, earlier := retry.Do(gctx, policy, func(ctx context.Context) (err error) {
		p.Now = s.opts.Now()
		ds, err = s.st.ClaimDeliveries(ctx, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claiming deliveries (what a claim that answered an error took waits for its leases to lapse): %w", errors.Join(earlier, err))
	}
	if earlier != nil && len(ds) > 0 {
		s.log.Warn("webhook deliveries: a claim answered an error; claimed again with its token", "err", earlier, "deliveries", len(ds))
	}
	return ds, nil
}

func (d *dispatcher) release() {
	<-d.slots
	select {
	case d.freed <- struct{}{}:
	default:
	}
}

// takeErrs returns the errors of the attempts ended since the last call.
func (d *dispatcher) takeErrs() []error {
	d.mu.Lock()
	defer d.mu.Unlock()
	errs := d.errs
	d.errs = nil
	return errs
}

// attempt posts one claimed delivery and records the outcome.
func (s *Service) attempt(ctx context.Context, d *store.Delivery) error {
	at := s.opts.Now()
	res := s.client.post(ctx, d.Webhook, d.EventID, at, sessionBody(d))
	if res.Detail != "" {
		s.log.Info("webhook delivery: no answer", "delivery", d.ID, "webhook", d.Webhook.ID, "err", res.Detail)
	}
	r := &store.DeliveryResult{
		ID: d.ID, Owner: s.opts.ReplicaID, Now: s.opts.Now(),
		Attempt:      store.DeliveryAttempt{N: d.Attempts, At: at, Duration: res.Duration, StatusCode: res.StatusCode, Error: res.Error},
		Delivered:    res.Error == "",
		DisableAfter: max(s.opts.DisableAfter, 0),
	}
	if !r.Delivered && d.Attempts < s.opts.MaxAttempts {
		// The receiver's Retry-After may ask for longer than the
		// backoff, up to MaxDelay.
		r.RetryAt = r.Now.Add(max(s.backoff(d.Attempts), min(res.RetryAfter, s.opts.MaxDelay)))
	}
	err := s.st.FinishDelivery(ctx, r)
	if errors.Is(err, store.ErrLeaseLost) {
		// The attempt outlived the lease; another replica has or will
		// have the delivery.
		s.log.Warn("webhook delivery: lease lost during the attempt", "delivery", d.ID)
		return nil
	}
	return err
}

// stopGrace bounds what Stop still waits for of a claim in flight (see
// claim), as session.Manager's does of its dispatcher's: a store that
// answers within it has what the claim took attempted at once, and one
// that does not leaves it leased until the leases lapse.
const stopGrace = time.Second
