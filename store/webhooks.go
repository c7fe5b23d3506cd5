package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"time"
)

// Errors of [Webhooks].
var (
	// ErrWebhookNotFound: the owner has no webhook with the id (another
	// owner's webhook is not found either). Returned by GetWebhook,
	// UpdateWebhook, DeleteWebhook and DeliveryAttempts.
	ErrWebhookNotFound = errors.New("store: webhook not found")
)

// The webhook event types a session change causes (see [WebhookEvents]).
const (
	// EventStatusUpdated is sent on every change of a session's status,
	// its creation included; a subscription to "*" receives it.
	EventStatusUpdated = "session.status_updated"
	// The granular events, sent only to subscriptions that list them.
	EventAwaitingToolResults = "session.awaiting_tool_results"
	EventIdle                = "session.idle"
	EventCompleted           = "session.completed"
	EventFailed              = "session.failed"
	EventTimedOut            = "session.timed_out"
	EventInterrupted         = "session.interrupted"
)

// WebhookEvents returns the event types of a session whose status changes
// from old to new ("" for a session being created), in order: none when
// the status did not change, else [EventStatusUpdated] and, for the
// statuses that have one, the granular event.
func WebhookEvents(old, new string) []string {
	if old == new {
		return nil
	}
	events := []string{EventStatusUpdated}
	switch new {
	case "awaiting_tool_results":
		events = append(events, EventAwaitingToolResults)
	case "idle":
		events = append(events, EventIdle)
	case "completed":
		events = append(events, EventCompleted)
	case "failed":
		events = append(events, EventFailed)
	case "timed_out":
		events = append(events, EventTimedOut)
	case "interrupted":
		events = append(events, EventInterrupted)
	}
	return events
}

// Subscribes reports whether a webhook enabled for events receives events
// of type typ: "*" stands for [EventStatusUpdated]; the other types must
// be listed.
func Subscribes(events []string, typ string) bool {
	return slices.Contains(events, typ) || (typ == EventStatusUpdated && slices.Contains(events, "*"))
}

// WebhookEventID is the id of the event of type typ that the change of the
// session to version makes: the same for every webhook it goes to and for
// every attempt, so that receivers can recognise a delivery they already
// had. It has the form of a UUID.
func WebhookEventID(sessionID string, version int64, typ string) string {
	h := sha256.New()
	h.Write([]byte(sessionID))
	h.Write([]byte{0})
	var v [8]byte
	for i := range v {
		v[i] = byte(version >> (8 * i))
	}
	h.Write(v[:])
	h.Write([]byte(typ))
	var b [16]byte
	copy(b[:], h.Sum(nil))
	b[6] = b[6]&0x0f | 0x80 // version 8: custom
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	x := hex.EncodeToString(b[:])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}

// Webhooks keeps the webhooks each owner registers and their outbox: the
// deliveries of session events, written in the same transaction as the
// session change that causes them.
//
// # The outbox
//
// [Store.CreateSession] and [Store.UpdateSession] compare the session's
// status before and after the change; when it changes, they write, in the
// same transaction, one pending [Delivery] per event type of
// [WebhookEvents] and per webhook of the session's owner that is enabled
// and [Subscribes] to it, and notify [WebhookTopic] once committed. A
// delivery is therefore never lost to a crash, nor announced for a change
// that was not committed.
//
// Workers take due deliveries with ClaimDeliveries, which leases each to
// one worker, and report each attempt with FinishDelivery: delivered,
// retried later, or failed for good. A worker that dies leaves a lease
// that expires, and the delivery is claimed again (at least once). A
// worker whose claim answered an error calls it again with the claim's
// token, which returns what the claim took, if anything.
//
// All methods are safe for concurrent use; values returned are the
// caller's, values given are not retained.
type Webhooks interface {
	// CreateWebhook inserts w and returns it as stored: Version 1,
	// CreatedAt and UpdatedAt set to now when zero.
	CreateWebhook(ctx context.Context, w *Webhook) (*Webhook, error)

	// GetWebhook returns the owner's webhook with the id, or
	// ErrWebhookNotFound.
	GetWebhook(ctx context.Context, owner, id string) (*Webhook, error)

	// ListWebhooks returns a page of the owner's webhooks, newest first
	// (oldest first with p.Ascending), and how many the owner has.
	ListWebhooks(ctx context.Context, p *WebhookListParams) (page []*Webhook, total int, err error)

	// CountWebhooks returns how many webhooks the owner has.
	CountWebhooks(ctx context.Context, owner string) (int, error)

	// UpdateWebhook writes the URL, Events, Description, Disabled and
	// secrets of the webhook named by w's Owner and ID if its stored
	// version is w.Version, and returns it as stored (Version
	// incremented, UpdatedAt now); otherwise ErrConflict, or
	// ErrWebhookNotFound. Enabling a disabled webhook resets its
	// ConsecutiveFailures. The delivery fields are not written.
	UpdateWebhook(ctx context.Context, w *Webhook) (*Webhook, error)

	// DeleteWebhook removes the webhook and its deliveries, or returns
	// ErrWebhookNotFound.
	DeleteWebhook(ctx context.Context, owner, id string) error

	// ClaimDeliveries leases pending deliveries whose NextAttemptAt is at
	// or before p.Now, of enabled webhooks, whose lease is free or
	// expired: each is returned with LeaseOwner p.Owner, LeaseUntil
	// p.Now+p.TTL, Attempts incremented (the attempt is counted when it
	// starts, so a worker that dies has used it) and Webhook set, at most
	// p.Limit (<= 0 means 1). Two concurrent claims never return the
	// same delivery.
	//
	// The claim is fair across API keys (the deliveries' Owner): it takes
	// each key's oldest due deliveries in turn, a key with fewer
	// deliveries leased first (each delivery ranks by the key's leased
	// deliveries plus its place among the key's due ones, oldest first),
	// so that one key's backlog does not hold back another's first
	// delivery; and, with p.PerKey > 0, it leaves no key more than
	// p.PerKey deliveries leased. The result is in that order.
	//
	// Each lease carries p.Token. A claim whose answer was lost (its
	// transaction committed, but the call returned an error) is
	// recovered by calling again with the same p.Owner and p.Token:
	// when pending deliveries still hold that claim's leases (no
	// FinishDelivery gave them up, no other claim took them), the call
	// returns them, due first, their leases extended to p.Now+p.TTL (a
	// lapsed one too) and Attempts left as the first call counted them,
	// and claims nothing more. An empty p.Token recovers nothing.
	ClaimDeliveries(ctx context.Context, p *ClaimParams) ([]*Delivery, error)

	// FinishDelivery records an attempt of a delivery the caller leased,
	// releases the lease and updates the delivery and its webhook (see
	// [DeliveryResult]), in one transaction. It returns ErrLeaseLost,
	// writing nothing, when p.Owner no longer holds the lease at p.Now.
	FinishDelivery(ctx context.Context, p *DeliveryResult) error

	// ListDeliveries returns a page of the deliveries of the owner's
	// webhook, newest first, each with its Log, and how many it has. It
	// returns ErrWebhookNotFound when the owner has no such webhook.
	ListDeliveries(ctx context.Context, p *DeliveryListParams) (page []*Delivery, total int, err error)

	// NextDelivery returns the earliest time at which ClaimDeliveries
	// may return a pending delivery of an enabled webhook: its retry
	// time, or the expiry of the lease that holds it, whichever is
	// later; the zero time when there is none. A time at or before now
	// means "claim again".
	NextDelivery(ctx context.Context, now time.Time) (time.Time, error)

	// PruneDeliveries deletes the deliveries (and their attempts) that
	// are no longer pending and were last updated before before, and the
	// pending ones created before it, and returns how many it deleted.
	PruneDeliveries(ctx context.Context, before time.Time) (int, error)
}

// WebhookTopic is the [Store.Subscribe] topic of new deliveries.
const WebhookTopic = "*webhooks*"

// A Webhook is an owner's subscription to session events, delivered as
// signed POSTs to URL.
type Webhook struct {
	// ID is unique in the store (a UUID); Owner is who may see it.
	ID    string
	Owner string
	// URL receives the deliveries.
	URL string
	// Events are the event types delivered ("*" for
	// [EventStatusUpdated]); see [Subscribes].
	Events []string
	// Description is the owner's note; empty for none.
	Description string
	// Disabled webhooks get no new deliveries, and their pending ones
	// wait.
	Disabled bool
	// Secret signs deliveries. PreviousSecret, until
	// PreviousSecretUntil, signs them too: the overlap of a rotation.
	Secret              string
	PreviousSecret      string
	PreviousSecretUntil time.Time

	// What the latest attempts did, written by FinishDelivery:
	// LastDeliveryStatus is "", DeliverySucceeded or DeliveryFailed.
	LastDeliveryStatus  string
	LastDeliveryError   string
	LastDeliveryAt      time.Time
	LastSuccessAt       time.Time
	ConsecutiveFailures int

	// Version counts committed changes of UpdateWebhook.
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Results of attempts, in [Webhook.LastDeliveryStatus].
const (
	DeliverySucceeded = "succeeded"
	DeliveryFailed    = "failed"
)

// The states of a [Delivery].
const (
	DeliveryPending   = "pending"   // to be attempted (again)
	DeliveryDelivered = "delivered" // a 2xx answered an attempt
	DeliveryGaveUp    = "failed"    // no attempt succeeded, and no more will be made
)

// A Delivery is one event to deliver to one webhook: a row of the outbox.
type Delivery struct {
	// ID is unique in the store.
	ID        string
	WebhookID string
	Owner     string
	// EventID ([WebhookEventID]) and EventType identify the event; the
	// session fields say what happened.
	EventID        string
	EventType      string
	SessionID      string
	SessionStatus  string
	PreviousStatus string // "" when the session was created
	OccurredAt     time.Time

	// State is DeliveryPending, DeliveryDelivered or DeliveryGaveUp.
	State string
	// Attempts counts the attempts started; NextAttemptAt is when a
	// pending delivery is due.
	Attempts      int
	NextAttemptAt time.Time
	// LeaseOwner holds the delivery until LeaseUntil (ClaimDeliveries).
	LeaseOwner string
	LeaseUntil time.Time
	// LastStatusCode and LastError describe the latest attempt.
	LastStatusCode int
	LastError      string
	CreatedAt      time.Time
	UpdatedAt      time.Time

	// Webhook is the webhook as it is when ClaimDeliveries returns the
	// delivery (its URL and secrets); nil elsewhere.
	Webhook *Webhook
	// Log holds the attempts, in order, in ListDeliveries; nil elsewhere.
	Log []DeliveryAttempt
}

// A DeliveryAttempt is one POST of a delivery.
type DeliveryAttempt struct {
	// N numbers the delivery's attempts from 1.
	N int
	// At is when it started; Duration how long it took.
	At       time.Time
	Duration time.Duration
	// StatusCode is the receiver's answer, 0 when there was none.
	StatusCode int
	// Error says what went wrong, empty for a success.
	Error string
}

// DeliveryResult is what [Webhooks.FinishDelivery] records.
type DeliveryResult struct {
	// ID is the delivery's; Owner the lease owner; Now the time the
	// lease is checked at.
	ID    string
	Owner string
	Now   time.Time
	// Attempt is the attempt made (its N is the delivery's Attempts).
	Attempt DeliveryAttempt
	// Delivered marks a success. Otherwise the delivery is due again at
	// RetryAt, or, when RetryAt is zero, has failed for good.
	Delivered bool
	RetryAt   time.Time
	// DisableAfter, when > 0, disables the webhook once this attempt
	// makes its ConsecutiveFailures reach it.
	DisableAfter int
}

// WebhookListParams select webhooks for [Webhooks.ListWebhooks].
type WebhookListParams struct {
	// Owner is required.
	Owner string
	// Offset and Limit select the page; Limit <= 0 means 50.
	Offset, Limit int
	// Ascending lists oldest first.
	Ascending bool
}

// DeliveryListParams select deliveries for [Webhooks.ListDeliveries].
type DeliveryListParams struct {
	// Owner and WebhookID are required.
	Owner, WebhookID string
	// State, when set, keeps the deliveries in this state.
	State string
	// Offset and Limit select the page; Limit <= 0 means 50.
	Offset, Limit int
}

// A RankedDelivery is a due delivery and its turn in a fair claim
// ([ClaimParams.PerKey]): the count of its owner's deliveries in flight
// plus its place among the owner's due ones. The stores order a claim's
// deliveries by it ([CompareRanked]).
type RankedDelivery struct {
	Delivery *Delivery
	Rank     int64
}

// CompareRanked orders deliveries as a fair claim takes them: by rank,
// then due time, creation and id.
func CompareRanked(a, b RankedDelivery) int {
	if a.Rank != b.Rank {
		return cmp.Compare(a.Rank, b.Rank)
	}
	if c := a.Delivery.NextAttemptAt.Compare(b.Delivery.NextAttemptAt); c != 0 {
		return c
	}
	if c := a.Delivery.CreatedAt.Compare(b.Delivery.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.Delivery.ID, b.Delivery.ID)
}
