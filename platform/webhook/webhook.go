// Package webhook delivers session events to the webhooks API callers
// register: the owner-scoped operations behind /api/v2/webhooks, and the
// worker that empties the store's outbox with signed POSTs.
//
//	svc := webhook.New(st, &webhook.Options{ReplicaID: m.ReplicaID()})
//	svc.Start()
//	defer svc.Stop(ctx)
//	w, err := svc.Create(ctx, owner, &webhook.CreateParams{URL: "https://example.com/hook"})
//	// w.Secret is shown once; the receiver verifies with it.
//
// # Events and the outbox
//
// The store writes a delivery for each event in the same transaction as
// the session change that causes it (see [store.Webhooks]): a change of
// status gives session.status_updated (what a subscription to "*" gets)
// and, for awaiting_tool_results, idle, completed, failed, timed_out and
// interrupted, a granular session.* event delivered to subscriptions that
// list it. Nothing is lost to a crash: the outbox is in the store.
//
// # Delivery
//
// Every replica runs a worker ([Service.Start]); each delivery is leased
// to one of them at a time ([Options.LeaseTTL], longer than an attempt's
// [Options.Timeout]). A delivery is a POST of a JSON body
//
//	{"id": EVENT_ID, "type": "session.completed", "created_at": "2026-...Z", "timestamp": "2026-...Z",
//	 "data": {"session_id": "...", "status": "completed", "previous_status": "running"}}
//
// signed twice with the one secret: as Standard Webhooks 1.0 describes,
// with headers webhook-id (the event id, the same on every attempt:
// receivers deduplicate on it), webhook-timestamp (Unix seconds of the
// attempt) and webhook-signature ("v1," and the base64 HMAC-SHA256 of
// "ID.TIMESTAMP.BODY" with the decoded secret; see [Sign]); and as H's
// SDKs verify, with headers X-H-Webhook-Timestamp (the same seconds) and
// X-H-Webhook-Signature ("sha256=" and the hex HMAC-SHA256 of
// "TIMESTAMP.BODY" keyed with the whole secret string; see [SignH]). Any
// 2xx answer is a success; anything else,
// a redirect, a timeout or a refused address is a failed attempt, retried
// after an exponential backoff with jitter ([Options.BaseDelay],
// [Options.MaxDelay]), or the longer Retry-After of a 429 or 503 (at most
// MaxDelay), up to [Options.MaxAttempts]; each attempt is
// recorded (status code, error, duration) and listed by
// [Service.Deliveries]. At least once: a replica that dies during an
// attempt leaves a lease that expires, and the delivery is attempted
// again. A claim that committed but answered an error is made again with
// its token, which returns what it took (see [store.Webhooks]): its
// deliveries are attempted at once, their attempt counted once.
//
// # Fairness
//
// A worker attempts up to [Options.Concurrency] deliveries at once, each
// in its own goroutine, and claims more as soon as one ends. The store's
// claim takes each API key's due deliveries in turn, the key with the
// fewest in flight first, and leaves no key more than [Options.PerKey]
// in flight across the workers: a receiver that is slow or never answers
// costs only its own key's deliveries.
//
// # Secrets and rotation
//
// A secret is "whsec_" and the base64 of 32 random bytes, returned only by
// [Service.Create] and [Service.Rotate]. After a rotation, deliveries are
// signed with both the new and the previous secret for
// [Options.RotationOverlap] (webhook-signature holds both signatures,
// space-separated; X-H-Webhook-Signature, which holds one, is made with the
// previous secret), so a receiver can switch secrets without missing one.
//
// # Addresses
//
// Targets obey the address policy of package internal/netpolicy: no
// loopback, private, link-local, metadata or other non-public address,
// judged on the address dialled, unless [Options.Allow] lets it through.
// Redirects are not followed; answers are read up to
// [Options.MaxResponseBytes].
package webhook

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"github.com/hrns-dev/hrns/api"
	"log/slog"
	mrand "math/rand/v2"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hrns-dev/hrns/internal/netpolicy"
	"github.com/hrns-dev/hrns/store"
)

// Errors of a [Service].
var (
	// ErrNotFound: the owner has no webhook with the id.
	ErrNotFound = errors.New("webhook not found")
	// ErrTooMany: the owner has Options.MaxWebhooks webhooks already.
	ErrTooMany = errors.New("too many webhooks")
	// ErrPing: a ping got no HTTP answer (the error says why).
	ErrPing = errors.New("webhook ping failed")
)

// A ValidationError lists what is wrong with a request, one [FieldError]
// a problem, as the API's 422 answers do.
type ValidationError struct {
	Fields []FieldError
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	for i, f := range e.Fields {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%v: %s", f.Loc, f.Msg)
	}
	return b.String()
}

// A FieldError is one problem of a request: where (Loc, such as
// ["body", "url"]), what, and its kind (Type, such as "value_error").
type FieldError struct {
	Loc  []any
	Msg  string
	Type string
}

// Options configure a [Service]. The zero value of each field means the
// default it documents.
type Options struct {
	// ReplicaID is the lease owner of this process's worker; it must be
	// unique among the processes sharing the store. Empty means a random
	// one.
	ReplicaID string
	// Allow lets deliveries reach an address the policy refuses
	// (loopback, private, ...); nil allows only the public internet.
	Allow func(netip.AddrPort) bool
	// Timeout bounds each attempt, connection to last byte read; 0 means
	// 10 seconds.
	Timeout time.Duration
	// MaxResponseBytes bounds what is read of an answer; 0 means 64 KiB.
	MaxResponseBytes int64
	// MaxAttempts bounds the attempts of a delivery; 0 means 10.
	MaxAttempts int
	// BaseDelay is the wait after the first failed attempt, doubled after
	// each further one up to MaxDelay, less up to half of it at random
	// (jitter); 0 means 10 seconds and 1 hour.
	BaseDelay, MaxDelay time.Duration
	// LeaseTTL is how long a worker holds a delivery it attempts. It
	// must exceed Timeout, or another replica could attempt the
	// delivery at the same time: a value that does not (0 too) means six
	// times Timeout.
	LeaseTTL time.Duration
	// RotationOverlap is how long the previous secret still signs
	// deliveries after a rotation; 0 means 24 hours.
	RotationOverlap time.Duration
	// DisableAfter disables a webhook after this many failed attempts in
	// a row; 0 means 100, a negative value never.
	DisableAfter int
	// MaxWebhooks bounds the webhooks of an owner; 0 means 50. With
	// several replicas the bound is approximate.
	MaxWebhooks int
	// Retention is how long deliveries are kept (delivered, failed, or
	// still pending); 0 means 7 days.
	Retention time.Duration
	// Concurrency bounds the deliveries a worker attempts at once; 0
	// means 64.
	Concurrency int
	// PerKey bounds the deliveries of one API key attempted at once,
	// by all the workers sharing the store (approximately: two claims
	// at once may each take the last place); 0 means 8. With it, and
	// claims that take each key's deliveries in turn, a receiver that
	// is slow or never answers delays only its own key's deliveries.
	PerKey int
	// PollEvery is the longest a worker waits without a notification
	// before it looks for due deliveries; 0 means 30 seconds.
	PollEvery time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Jitter returns a number in [0, 1) for the backoff's jitter; nil
	// means math/rand/v2.
	Jitter func() float64
	// Logger receives the worker's errors; nil discards them.
	Logger *slog.Logger
}

// A Service is the webhooks of a store: the owner-scoped operations of
// the API, and the worker that delivers the outbox (Start, Stop).
type Service struct {
	// fixed at creation
	st     store.Store
	opts   Options
	client *client
	log    *slog.Logger

	mu      sync.Mutex
	running bool
	stop    context.CancelFunc
	done    chan struct{}
}

// New returns the webhooks of st.
func New(st store.Store, opts *Options) *Service {
	if st == nil {
		panic("webhook.New: nil store")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.ReplicaID == "" {
		o.ReplicaID = "webhooks-" + rand.Text()[:10]
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = 64 << 10
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 10
	}
	if o.BaseDelay <= 0 {
		o.BaseDelay = 10 * time.Second
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = time.Hour
	}
	o.MaxDelay = max(o.MaxDelay, o.BaseDelay)
	if o.LeaseTTL <= o.Timeout {
		o.LeaseTTL = 6 * o.Timeout
	}
	if o.RotationOverlap <= 0 {
		o.RotationOverlap = 24 * time.Hour
	}
	if o.DisableAfter == 0 {
		o.DisableAfter = 100
	}
	if o.MaxWebhooks <= 0 {
		o.MaxWebhooks = 50
	}
	if o.Retention <= 0 {
		o.Retention = 7 * 24 * time.Hour
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 64
	}
	if o.PerKey <= 0 {
		o.PerKey = 8
	}
	if o.PollEvery <= 0 {
		o.PollEvery = 30 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Jitter == nil {
		o.Jitter = mrand.Float64
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{st: st, opts: o, log: o.Logger, client: newClient(&o)}
}

// ReplicaID returns the lease owner of this service's worker.
func (s *Service) ReplicaID() string { return s.opts.ReplicaID }

// The event types of the API: what GET /api/v2/webhooks/events lists.
var eventTypes = []EventType{
	{Type: "*", Description: "Every change of a session's status (delivered as " + store.EventStatusUpdated + ")."},
	{Type: store.EventStatusUpdated, Description: "A session's status changed, its creation included."},
	{Type: store.EventAwaitingToolResults, Description: "A session waits for the results of client-side tool calls."},
	{Type: store.EventIdle, Description: "A session answered and waits for a message."},
	{Type: store.EventCompleted, Description: "A session completed."},
	{Type: store.EventFailed, Description: "A session failed."},
	{Type: store.EventTimedOut, Description: "A session reached its time budget (max_time_s)."},
	{Type: store.EventInterrupted, Description: "A session was cancelled."},
}

// EventTypes returns the event types a webhook may subscribe to.
func EventTypes() []EventType { return append([]EventType(nil), eventTypes...) }

func knownEvent(t string) bool {
	for _, e := range eventTypes {
		if e.Type == t {
			return true
		}
	}
	return false
}

// CreateParams are the fields of a new webhook: [api.WebhookCreate].
type CreateParams = api.WebhookCreate

// UpdateParams change the fields that are not nil: [api.WebhookUpdate].
type UpdateParams = api.WebhookUpdate

// Limits of the fields of a webhook.
const (
	maxURL         = 2048
	maxDescription = 255
	maxEvents      = 32
)

type validation struct{ fields []FieldError }

func (v *validation) add(field, msg, typ string) {
	v.fields = append(v.fields, FieldError{Loc: []any{"body", field}, Msg: msg, Type: typ})
}

func (v *validation) err() error {
	if len(v.fields) == 0 {
		return nil
	}
	return &ValidationError{Fields: v.fields}
}

func (s *Service) checkURL(v *validation, raw string) {
	switch {
	case raw == "":
		v.add("url", "String should have at least 1 character", "string_too_short")
		return
	case len(raw) > maxURL:
		v.add("url", fmt.Sprintf("String should have at most %d characters", maxURL), "string_too_long")
		return
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		v.add("url", "URL should be an absolute http or https URL", "url_parsing")
		return
	}
	host := u.Hostname()
	if err := netpolicy.CheckHost(host); err != nil {
		v.add("url", err.Error(), "value_error")
		return
	}
	// An address given as such is judged now; names, when dialled.
	if a, err := netip.ParseAddr(host); err == nil {
		port := 80
		if u.Scheme == "https" {
			port = 443
		}
		if p := u.Port(); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > 65535 {
				v.add("url", "URL should have a port from 1 to 65535", "url_parsing")
				return
			}
			port = n
		}
		ap := netip.AddrPortFrom(a.Unmap(), uint16(port))
		if r := netpolicy.Reason(a); r != "" && (s.opts.Allow == nil || !s.opts.Allow(ap)) {
			v.add("url", fmt.Sprintf("%v is %s; webhooks may reach only public internet addresses unless the operator allows others", a, r), "value_error")
		}
	}
}

func checkEvents(v *validation, events []string) []string {
	if len(events) == 0 {
		v.add("enabled_events", "List should have at least 1 item", "too_short")
		return nil
	}
	if len(events) > maxEvents {
		v.add("enabled_events", fmt.Sprintf("List should have at most %d items", maxEvents), "too_long")
		return nil
	}
	var out []string
	for i, e := range events {
		if !knownEvent(e) {
			v.fields = append(v.fields, FieldError{Loc: []any{"body", "enabled_events", i},
				Msg: fmt.Sprintf("unknown event type %q (GET /api/v2/webhooks/events lists them)", truncate(e, 64)), Type: "value_error"})
			continue
		}
		if !contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

func checkDescription(v *validation, d string) {
	if utf8.RuneCountInString(d) > maxDescription || !utf8.ValidString(d) {
		v.add("description", fmt.Sprintf("String should have at most %d characters", maxDescription), "string_too_long")
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// newID returns a random UUID (version 4).
func newID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// Create registers a webhook of owner and returns it with its secret.
func (s *Service) Create(ctx context.Context, owner string, p *CreateParams) (*WithSecret, error) {
	var v validation
	s.checkURL(&v, p.URL)
	events := []string{"*"}
	if p.EnabledEvents != nil {
		events = checkEvents(&v, p.EnabledEvents)
	}
	var desc string
	if p.Description != nil {
		desc = *p.Description
		checkDescription(&v, desc)
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	n, err := s.st.CountWebhooks(ctx, owner)
	if err != nil {
		return nil, err
	}
	if n >= s.opts.MaxWebhooks {
		return nil, fmt.Errorf("%w: an API key may have %d", ErrTooMany, s.opts.MaxWebhooks)
	}
	now := s.opts.Now().UTC()
	w, err := s.st.CreateWebhook(ctx, &store.Webhook{
		ID: newID(), Owner: owner, URL: p.URL, Events: events, Description: desc,
		Secret: NewSecret(), CreatedAt: now, UpdatedAt: now,
	})
	if err != nil {
		return nil, err
	}
	return &WithSecret{Webhook: record(w), Secret: w.Secret}, nil
}

// Get returns the owner's webhook.
func (s *Service) Get(ctx context.Context, owner, id string) (*Record, error) {
	w, err := s.get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	r := record(w)
	return &r, nil
}

func (s *Service) get(ctx context.Context, owner, id string) (*store.Webhook, error) {
	w, err := s.st.GetWebhook(ctx, owner, id)
	if errors.Is(err, store.ErrWebhookNotFound) {
		return nil, ErrNotFound
	}
	return w, err
}

// ListParams select a page of webhooks.
type ListParams struct {
	// Page counts from 1; Size is at most 1000.
	Page, Size int
	// Ascending lists oldest first.
	Ascending bool
}

// List returns a page of the owner's webhooks, newest first.
func (s *Service) List(ctx context.Context, owner string, p *ListParams) (*Page, error) {
	page, size := max(p.Page, 1), min(max(p.Size, 1), 1000)
	ws, total, err := s.st.ListWebhooks(ctx, &store.WebhookListParams{Owner: owner, Offset: (page - 1) * size, Limit: size, Ascending: p.Ascending})
	if err != nil {
		return nil, err
	}
	out := &Page{Items: make([]Record, 0, len(ws)), Total: total, Page: page}
	for _, w := range ws {
		out.Items = append(out.Items, record(w))
	}
	return out, nil
}

// change reads the owner's webhook, applies fn and writes it, again when
// someone else wrote it meanwhile.
func (s *Service) change(ctx context.Context, owner, id string, fn func(w *store.Webhook) error) (*store.Webhook, error) {
	for range 8 {
		w, err := s.get(ctx, owner, id)
		if err != nil {
			return nil, err
		}
		if err := fn(w); err != nil {
			return nil, err
		}
		got, err := s.st.UpdateWebhook(ctx, w)
		switch {
		case errors.Is(err, store.ErrConflict):
			continue
		case errors.Is(err, store.ErrWebhookNotFound):
			return nil, ErrNotFound
		}
		return got, err
	}
	return nil, fmt.Errorf("update webhook %s: %w", id, store.ErrConflict)
}

// Update changes the fields p gives.
func (s *Service) Update(ctx context.Context, owner, id string, p *UpdateParams) (*Record, error) {
	var v validation
	var events []string
	if p.URL != nil {
		s.checkURL(&v, *p.URL)
	}
	if p.EnabledEvents != nil {
		events = checkEvents(&v, *p.EnabledEvents)
	}
	if p.Description != nil {
		checkDescription(&v, *p.Description)
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	w, err := s.change(ctx, owner, id, func(w *store.Webhook) error {
		if p.URL != nil {
			w.URL = *p.URL
		}
		if p.EnabledEvents != nil {
			w.Events = events
		}
		if p.Description != nil {
			w.Description = *p.Description
		}
		if p.Disabled != nil {
			w.Disabled = *p.Disabled
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	r := record(w)
	return &r, nil
}

// Rotate replaces the webhook's secret and returns the new one; the old
// one keeps signing deliveries, beside it, for Options.RotationOverlap.
// A rotation during the overlap of the previous one ends that overlap.
func (s *Service) Rotate(ctx context.Context, owner, id string) (*WithSecret, error) {
	now := s.opts.Now()
	w, err := s.change(ctx, owner, id, func(w *store.Webhook) error {
		w.PreviousSecret, w.PreviousSecretUntil = w.Secret, now.Add(s.opts.RotationOverlap)
		w.Secret = NewSecret()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &WithSecret{Webhook: record(w), Secret: w.Secret}, nil
}

// Delete removes the webhook and its deliveries.
func (s *Service) Delete(ctx context.Context, owner, id string) error {
	err := s.st.DeleteWebhook(ctx, owner, id)
	if errors.Is(err, store.ErrWebhookNotFound) {
		return ErrNotFound
	}
	return err
}

// Ping sends a signed webhook.ping event to the webhook now, once, and
// returns the receiver's HTTP status; an error wrapping ErrPing when it
// got none. Pings are not recorded with the deliveries.
func (s *Service) Ping(ctx context.Context, owner, id string) (int, error) {
	w, err := s.get(ctx, owner, id)
	if err != nil {
		return 0, err
	}
	now, id := s.opts.Now(), newID()
	res := s.client.post(ctx, w, id, now, pingBody(id, w.ID, now))
	if res.StatusCode == 0 {
		if res.Detail != "" {
			s.log.Info("webhook ping: no answer", "webhook", w.ID, "err", res.Detail)
		}
		return 0, fmt.Errorf("%w: %s", ErrPing, res.Error)
	}
	return res.StatusCode, nil
}

// DeliveryParams select a page of a webhook's deliveries.
type DeliveryParams struct {
	// State, when set, keeps the deliveries in this state: "pending",
	// "delivered" or "failed".
	State string
	// Page counts from 1; Size is at most 100.
	Page, Size int
}

// Deliveries returns a page of the deliveries of the owner's webhook,
// newest first, each with its attempts.
func (s *Service) Deliveries(ctx context.Context, owner, id string, p *DeliveryParams) (*DeliveryPage, error) {
	switch p.State {
	case "", store.DeliveryPending, store.DeliveryDelivered, store.DeliveryGaveUp:
	default:
		return nil, &ValidationError{Fields: []FieldError{{Loc: []any{"query", "state"}, Msg: "Input should be 'pending', 'delivered' or 'failed'", Type: "enum"}}}
	}
	page, size := max(p.Page, 1), min(max(p.Size, 1), 100)
	ds, total, err := s.st.ListDeliveries(ctx, &store.DeliveryListParams{Owner: owner, WebhookID: id, State: p.State, Offset: (page - 1) * size, Limit: size})
	if errors.Is(err, store.ErrWebhookNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	out := &DeliveryPage{Items: make([]Delivery, 0, len(ds)), Total: total, Page: page}
	for _, d := range ds {
		out.Items = append(out.Items, delivery(d))
	}
	return out, nil
}
