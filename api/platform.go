package api

import (
	"encoding/json"
	"time"
)

// This file holds the wire types of the platform's resources: webhooks,
// schedules, feedback lists and the token quota. Their behaviour lives in
// platform/webhook, platform/schedule and session.

// A Webhook is a webhook as the API shows it (the reference's
// WebhookRecord): never its secret.
type Webhook struct {
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

// WebhookWithSecret is a webhook with its signing secret (the reference's
// WebhookWithSecret): what creating one and rotating its secret return.
type WebhookWithSecret struct {
	Webhook
	Secret string `json:"secret"`
}

// WebhookPage is a page of webhooks (the reference's Page[WebhookRecord]).
type WebhookPage struct {
	Items []Webhook `json:"items"`
	Total int       `json:"total"`
	Page  int       `json:"page"`
}

// A WebhookEventType is one event type a webhook may subscribe to.
type WebhookEventType struct {
	Type        string `json:"type"`
	Description string `json:"description"`
}

// A WebhookDelivery is one event to deliver to a webhook, with its
// attempts (an hrns addition to the reference:
// GET /api/v2/webhooks/{id}/deliveries).
type WebhookDelivery struct {
	ID        string `json:"id"`
	EventID   string `json:"event_id"`
	EventType string `json:"event_type"`
	SessionID string `json:"session_id"`
	// State is "pending", "delivered" or "failed" (given up).
	State         string           `json:"state"`
	Attempts      []WebhookAttempt `json:"attempts"`
	NextAttemptAt *time.Time       `json:"next_attempt_at"`
	CreatedAt     time.Time        `json:"created_at"`
	UpdatedAt     time.Time        `json:"updated_at"`
}

// A WebhookAttempt is one POST of a delivery.
type WebhookAttempt struct {
	N  int       `json:"attempt"`
	At time.Time `json:"at"`
	// DurationMS is how long it took, in milliseconds.
	DurationMS int64 `json:"duration_ms"`
	// StatusCode is the receiver's answer, nil when there was none.
	StatusCode *int `json:"status_code"`
	// Error says what went wrong, nil for a success.
	Error *string `json:"error"`
}

// WebhookDeliveryPage is a page of deliveries.
type WebhookDeliveryPage struct {
	Items []WebhookDelivery `json:"items"`
	Total int               `json:"total"`
	Page  int               `json:"page"`
}

// WebhookCreate are the fields of a new webhook.
type WebhookCreate struct {
	// URL receives the deliveries: http or https, at most 2048 bytes.
	URL string `json:"url"`
	// EnabledEvents are the event types delivered; nil means ["*"].
	EnabledEvents []string `json:"enabled_events"`
	// Description is the owner's note, at most 255 characters.
	Description *string `json:"description"`
}

// WebhookUpdate changes the fields of a webhook that are not nil.
type WebhookUpdate struct {
	URL           *string   `json:"url"`
	EnabledEvents *[]string `json:"enabled_events"`
	Description   *string   `json:"description"`
	Disabled      *bool     `json:"disabled"`
}

// WebhookSessionData is the data of the session events a webhook
// receives.
type WebhookSessionData struct {
	SessionID string `json:"session_id"`
	Status    string `json:"status"`
	// PreviousStatus is nil when the session was created.
	PreviousStatus *string `json:"previous_status"`
}

// A Schedule is a schedule as the API shows it (the reference's
// ScheduleRecord).
type Schedule struct {
	ID          string         `json:"id"`
	Name        string         `json:"name"`
	Description *string        `json:"description"`
	Timing      ScheduleTiming `json:"timing"`
	// SessionRequest is the template of the sessions, normalised as
	// POST /api/v2/sessions stores a request.
	SessionRequest json.RawMessage `json:"session_request"`
	Paused         bool            `json:"paused"`
	PauseNote      *string         `json:"pause_note"`
	// NextRunTimes are the next five ticks, at the zone's offset; empty
	// while paused.
	NextRunTimes []time.Time `json:"next_run_times"`
	LastRunAt    *time.Time  `json:"last_run_at"`
	CreatedAt    time.Time   `json:"created_at"`
	UpdatedAt    time.Time   `json:"updated_at"`
}

// A ScheduleRun is one firing of a schedule as the API shows it (the
// reference's ScheduleRunRecord).
type ScheduleRun struct {
	ID         string `json:"id"`
	ScheduleID string `json:"schedule_id"`
	// Status is created, skipped_quota (the template says queue: false
	// and the owner was at its concurrent-session limit) or error (the
	// template did not resolve any more, see Error). hrns does not skip
	// for overlap: skipped_overlap is never used.
	Status       string    `json:"status"`
	ScheduledFor time.Time `json:"scheduled_for"`
	SessionID    *string   `json:"session_id"`
	Error        *string   `json:"error"`
	// TriggeredManually marks a run of POST .../trigger.
	TriggeredManually bool      `json:"triggered_manually"`
	CreatedAt         time.Time `json:"created_at"`
	// SkippedTicks is how many earlier ticks this one passed over (an
	// hrns addition; see docs/serve.md, "Schedules").
	SkippedTicks int `json:"skipped_ticks"`
}

// ScheduleTiming is when a schedule fires: the reference's CronTiming, a
// cron expression evaluated in an IANA time zone.
type ScheduleTiming struct {
	// Type is "cron", the only kind.
	Type string `json:"type"`
	// Expression has five fields (minute, hour, day of month, month, day
	// of week), as in crontab(5), or is one of the descriptors @yearly,
	// @annually, @monthly, @weekly, @daily, @midnight and @hourly.
	Expression string `json:"expression"`
	// Timezone is the IANA name of the zone the expression is read in,
	// such as "Europe/Paris" or "UTC".
	Timezone string `json:"timezone"`
}

// EventFeedback is the feedback given on one event of a session.
type EventFeedback struct {
	EventIndex int64 `json:"event_index"`
	Feedback
}

// FeedbackList is the feedback given on a session and on its events, as
// GET /api/v2/sessions/{id}/feedback shows it (an hrns addition): Session
// is null when none was given; Events are in the order of the log.
type FeedbackList struct {
	Session *Feedback       `json:"session"`
	Events  []EventFeedback `json:"events"`
}

// TokenQuotaStatus is an owner's token quota, as GET /api/v2/quota/tokens
// shows it (the reference's TokenQuotaStatus). Limit and Remaining are
// null without a limit.
type TokenQuotaStatus struct {
	Limit       *int64     `json:"limit"`
	Used        *int64     `json:"used"`
	Remaining   *int64     `json:"remaining"`
	WindowStart time.Time  `json:"window_start"`
	WindowEnd   *time.Time `json:"window_end"`
}
