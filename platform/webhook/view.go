package webhook

import (
	"github.com/hrns-dev/hrns/api"
	"time"

	"github.com/hrns-dev/hrns/store"
)

// A Record is a webhook as the API shows it: [api.Webhook].
type Record = api.Webhook

// WithSecret is a webhook with its signing secret: [api.WebhookWithSecret].
type WithSecret = api.WebhookWithSecret

// Page is a page of webhooks: [api.WebhookPage].
type Page = api.WebhookPage

// An EventType is one event type a webhook may subscribe to: [api.WebhookEventType].
type EventType = api.WebhookEventType

// A Delivery is one event to deliver to a webhook, with its attempts: [api.WebhookDelivery].
type Delivery = api.WebhookDelivery

// An Attempt is one POST of a delivery: [api.WebhookAttempt].
type Attempt = api.WebhookAttempt

// DeliveryPage is a page of deliveries: [api.WebhookDeliveryPage].
type DeliveryPage = api.WebhookDeliveryPage

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func record(w *store.Webhook) Record {
	events := w.Events
	if events == nil {
		events = []string{}
	}
	return Record{
		ID: w.ID, URL: w.URL, EnabledEvents: events, Description: optString(w.Description), Disabled: w.Disabled,
		LastDeliveryStatus: optString(w.LastDeliveryStatus), LastDeliveryError: optString(w.LastDeliveryError),
		LastDeliveryAt: optTime(w.LastDeliveryAt), LastSuccessAt: optTime(w.LastSuccessAt),
		ConsecutiveFailures: w.ConsecutiveFailures, CreatedAt: w.CreatedAt.UTC(), UpdatedAt: w.UpdatedAt.UTC(),
	}
}

func delivery(d *store.Delivery) Delivery {
	out := Delivery{
		ID: d.ID, EventID: d.EventID, EventType: d.EventType, SessionID: d.SessionID, State: d.State,
		Attempts: make([]Attempt, 0, len(d.Log)), CreatedAt: d.CreatedAt.UTC(), UpdatedAt: d.UpdatedAt.UTC(),
	}
	if d.State == store.DeliveryPending {
		out.NextAttemptAt = optTime(d.NextAttemptAt)
	}
	for _, a := range d.Log {
		at := Attempt{N: a.N, At: a.At.UTC(), DurationMS: a.Duration.Milliseconds(), Error: optString(a.Error)}
		if a.StatusCode != 0 {
			code := a.StatusCode
			at.StatusCode = &code
		}
		out.Attempts = append(out.Attempts, at)
	}
	return out
}
