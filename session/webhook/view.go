package webhook

import (
	"time"

	"github.com/hrns-dev/hrns/store"
)

// A Record is a webhook as the API shows it (the reference's
// WebhookRecord): never its secret.
type Record struct {
	ID            string   `json:"id"`
	URL           string   `json:"url"`
	EnabledEvents []string `json:"enabled_events"`
	Description   *string  `json:"description"`
	Disabled      bool     `json:"disabled"`
	// LastDeliveryStatus is "succeeded" or "failed", nil before the
	// first attempt.
	LastDeliveryStatus  *string    `json:"last_delivery_status"`
	LastDeliveryError   *string    `json:"last_delivery_error"`
	LastDeliveryAt      *time.Time `json:"last_delivery_at"`
	LastSuccessAt       *time.Time `json:"last_success_at"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	CreatedAt           time.Time  `json:"created_at"`
	UpdatedAt           time.Time  `json:"updated_at"`
}

// WithSecret is a webhook with its signing secret (the reference's
// WebhookWithSecret): what creating one and rotating its secret return.
type WithSecret struct {
	Record
	Secret string `json:"secret"`
}

// Page is a page of webhooks (the reference's Page[WebhookRecord]).
type Page struct {
	Items []Record `json:"items"`
	Total int      `json:"total"`
	Page  int      `json:"page"`
}

// An EventType is one event type a webhook may subscribe to.
type EventType struct {
	Type        string `json:"type"`
	Description string `json:"description"`
}

// A Delivery is one event to deliver to a webhook, with its attempts (an
// hrns addition to the reference: GET /api/v2/webhooks/{id}/deliveries).
type Delivery struct {
	ID        string `json:"id"`
	EventID   string `json:"event_id"`
	EventType string `json:"event_type"`
	SessionID string `json:"session_id"`
	// State is "pending", "delivered" or "failed" (given up).
	State         string     `json:"state"`
	Attempts      []Attempt  `json:"attempts"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
}

// An Attempt is one POST of a delivery.
type Attempt struct {
	N  int       `json:"attempt"`
	At time.Time `json:"at"`
	// DurationMS is how long it took, in milliseconds.
	DurationMS int64 `json:"duration_ms"`
	// StatusCode is the receiver's answer, nil when there was none.
	StatusCode *int `json:"status_code"`
	// Error says what went wrong, nil for a success.
	Error *string `json:"error"`
}

// DeliveryPage is a page of deliveries.
type DeliveryPage struct {
	Items []Delivery `json:"items"`
	Total int        `json:"total"`
	Page  int        `json:"page"`
}

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
