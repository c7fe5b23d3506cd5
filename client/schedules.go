package client

import (
	"context"
	"github.com/hrns-dev/hrns/api"
	"net/http"
	"net/url"
	"strconv"
)

// The schedules' types, as the API returns them.
type (
	// Schedule is a schedule (/api/v2/schedules).
	Schedule = api.Schedule
	// ScheduleRun is one firing of a schedule: the session it created,
	// or why none was.
	ScheduleRun = api.ScheduleRun
	// ScheduleTiming is a cron expression in an IANA time zone.
	ScheduleTiming = api.ScheduleTiming
)

// ScheduleSpec is a new schedule: each firing creates a session from
// SessionRequest, resolved again at each firing.
type ScheduleSpec struct {
	Name           string          `json:"name"`
	Description    *string         `json:"description,omitempty"`
	Timing         ScheduleTiming  `json:"timing"`
	SessionRequest *SessionRequest `json:"session_request"`
}

// ScheduleUpdate changes the fields it sets of a schedule; nil fields are
// left as they are. A new Timing starts from the first tick after now.
type ScheduleUpdate struct {
	Name           *string         `json:"name,omitempty"`
	Description    *string         `json:"description,omitempty"`
	Timing         *ScheduleTiming `json:"timing,omitempty"`
	SessionRequest *SessionRequest `json:"session_request,omitempty"`
}

// PageOptions select a page of schedules or runs. The zero value is the
// first page of 10, newest first.
type PageOptions struct {
	// Page (from 1) and Size (1 to 1000) select the page.
	Page, Size int
	// Ascending lists the oldest first (schedules by creation, runs by
	// tick).
	Ascending bool
}

func (o *PageOptions) query(field string) string {
	if o == nil {
		return ""
	}
	q := url.Values{}
	if o.Page > 0 {
		q.Set("page", strconv.Itoa(o.Page))
	}
	if o.Size > 0 {
		q.Set("size", strconv.Itoa(o.Size))
	}
	if o.Ascending {
		q.Set("sort", field)
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

const schedulesPath = "/api/v2/schedules"

func schedulePath(id string) string { return schedulesPath + "/" + url.PathEscape(id) }

// CreateSchedule creates a schedule for this key. A bad cron expression,
// an unknown time zone or an invalid session template answers
// [ErrInvalid].
func (c *Client) CreateSchedule(ctx context.Context, s *ScheduleSpec) (*Schedule, error) {
	return send[Schedule](ctx, c, "POST", schedulesPath, s, false)
}

// GetSchedule returns the schedule with the id; another key's schedule is
// [ErrNotFound].
func (c *Client) GetSchedule(ctx context.Context, id string) (*Schedule, error) {
	return send[Schedule](ctx, c, "GET", schedulePath(id), nil, true)
}

// ListSchedules returns a page of this key's schedules.
func (c *Client) ListSchedules(ctx context.Context, opts *PageOptions) (*api.Page[Schedule], error) {
	return send[api.Page[Schedule]](ctx, c, "GET", schedulesPath+opts.query("created_at"), nil, true)
}

// UpdateSchedule changes the fields u sets of the schedule.
func (c *Client) UpdateSchedule(ctx context.Context, id string, u *ScheduleUpdate) (*Schedule, error) {
	return send[Schedule](ctx, c, "PATCH", schedulePath(id), u, true)
}

// DeleteSchedule deletes the schedule; the sessions it created stay.
func (c *Client) DeleteSchedule(ctx context.Context, id string) error {
	_, _, err := c.call(ctx, "DELETE", schedulePath(id), nil, nil, nil, false)
	return err
}

// PauseSchedule stops the schedule from firing; note, when not empty,
// says why (at most 255 characters).
func (c *Client) PauseSchedule(ctx context.Context, id, note string) (*Schedule, error) {
	var body any
	if note != "" {
		body = map[string]string{"note": note}
	}
	return send[Schedule](ctx, c, "POST", schedulePath(id)+"/pause", body, true)
}

// ResumeSchedule lets a paused schedule fire again, from the first tick
// after now.
func (c *Client) ResumeSchedule(ctx context.Context, id string) (*Schedule, error) {
	return send[Schedule](ctx, c, "POST", schedulePath(id)+"/resume", nil, true)
}

// TriggerSchedule fires the schedule once now (paused or not) and returns
// the run, whose SessionID is the session it created. It sends a random
// Idempotency-Key, so that it may retry (as idempotent requests are)
// without firing twice: a retry is given the run the first attempt made.
func (c *Client) TriggerSchedule(ctx context.Context, id string) (*ScheduleRun, error) {
	return c.TriggerScheduleWithKey(ctx, id, randomKey())
}

// TriggerScheduleWithKey is [Client.TriggerSchedule] with the caller's
// Idempotency-Key (1 to 255 printable ASCII characters): a trigger made
// again with the same key, for the same schedule and API key, even from
// another process, returns the run the first made, not a second run.
// An empty key is a random one.
func (c *Client) TriggerScheduleWithKey(ctx context.Context, id, key string) (*ScheduleRun, error) {
	if key == "" {
		key = randomKey()
	}
	var run ScheduleRun
	if _, _, err := c.call(ctx, "POST", schedulePath(id)+"/trigger", http.Header{"Idempotency-Key": {key}}, nil, &run, true); err != nil {
		return nil, err
	}
	return &run, nil
}

// ScheduleRuns returns a page of the schedule's runs, the latest tick
// first unless opts.Ascending.
func (c *Client) ScheduleRuns(ctx context.Context, id string, opts *PageOptions) (*api.Page[ScheduleRun], error) {
	return send[api.Page[ScheduleRun]](ctx, c, "GET", schedulePath(id)+"/runs"+opts.query("scheduled_for"), nil, true)
}
