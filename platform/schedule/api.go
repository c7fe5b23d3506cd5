package schedule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// CreateRequest is the body of POST /api/v2/schedules (the reference's
// CreateSchedule).
type CreateRequest struct {
	Name        string  `json:"name"`
	Description *string `json:"description"`
	Timing      *Timing `json:"timing"`
	// SessionRequest is the template of each session, a SessionRequest
	// as POST /api/v2/sessions takes; it is validated now and resolved
	// again at each firing.
	SessionRequest json.RawMessage `json:"session_request"`
}

// UpdateRequest is the body of PATCH /api/v2/schedules/{id} (the
// reference's UpdateSchedule): a field left out, or null, is unchanged.
type UpdateRequest struct {
	Name           *string         `json:"name"`
	Description    *string         `json:"description"`
	Timing         *Timing         `json:"timing"`
	SessionRequest json.RawMessage `json:"session_request"`
}

// Limits of the text fields, as the reference gives them.
const (
	maxNameLen        = 255
	maxDescriptionLen = 255
	maxNoteLen        = 255
	// maxTemplateBytes bounds a session template as stored: a schedule
	// is kept for ever and read at every firing.
	maxTemplateBytes = 256 << 10
)

// checker collects the field errors of a request body.
type checker struct{ fields []session.FieldError }

func (c *checker) add(msg, typ string, loc ...any) {
	c.fields = append(c.fields, session.FieldError{Loc: append([]any{"body"}, loc...), Msg: msg, Type: typ})
}

func (c *checker) err() error {
	if len(c.fields) == 0 {
		return nil
	}
	return &session.ValidationError{Fields: c.fields}
}

func (c *checker) text(field, v string, minLen, maxLen int) {
	switch n := utf8.RuneCountInString(v); {
	case n < minLen:
		c.add(fmt.Sprintf("String should have at least %d character", minLen), "string_too_short", field)
	case n > maxLen:
		c.add(fmt.Sprintf("String should have at most %d characters", maxLen), "string_too_long", field)
	}
}

// timing checks a timing and returns its cadence, refusing one that
// would never fire after now.
func (c *checker) timing(t *Timing, now time.Time) *cadence {
	cd, field, err := parseTiming(t)
	if err != nil {
		c.add(err.Error(), "value_error", "timing", field)
		return nil
	}
	if cd.next(now).IsZero() {
		c.add(errNever.Error(), "value_error", "timing", "expression")
		return nil
	}
	return cd
}

// template checks a session template for the owner and returns it
// normalised.
func (s *Scheduler) template(ctx context.Context, c *checker, owner string, raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) > maxTemplateBytes {
		c.add(fmt.Sprintf("the session template is larger than %d KiB", maxTemplateBytes>>10), "value_error", "session_request")
		return nil, nil
	}
	var req session.Request
	if err := json.Unmarshal(raw, &req); err != nil {
		c.add("Input should be a valid SessionRequest: "+err.Error(), "model_type", "session_request")
		return nil, nil
	}
	norm, err := s.m.CheckRequest(ctx, owner, &req)
	var ve *session.ValidationError
	if errors.As(err, &ve) {
		for _, f := range ve.Fields {
			loc := f.Loc
			if len(loc) > 0 && loc[0] == "body" {
				loc = loc[1:]
			}
			f.Loc = append([]any{"body", "session_request"}, loc...)
			c.fields = append(c.fields, f)
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(norm)
}

func absent(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// Create validates and stores a new schedule of the owner. Its first tick
// is the first after now.
//
// Errors: a *[session.ValidationError] for an invalid request (bad cron
// expression, unknown time zone, invalid template), [ErrTooMany].
func (s *Scheduler) Create(ctx context.Context, owner string, r *CreateRequest) (*Schedule, error) {
	c := &checker{}
	c.text("name", r.Name, 1, maxNameLen)
	if r.Description != nil {
		c.text("description", *r.Description, 0, maxDescriptionLen)
	}
	var cd *cadence
	if r.Timing == nil {
		c.add("Field required", "missing", "timing")
	} else {
		cd = c.timing(r.Timing, s.opts.Clock.Now())
	}
	var tmpl json.RawMessage
	if absent(r.SessionRequest) {
		c.add("Field required", "missing", "session_request")
	} else {
		var err error
		if tmpl, err = s.template(ctx, c, owner, r.SessionRequest); err != nil {
			return nil, err
		}
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	_, n, err := s.st.ListSchedules(ctx, &store.ScheduleListParams{Owner: owner, Limit: 1})
	if err != nil {
		return nil, err
	}
	if n >= s.opts.MaxSchedules {
		return nil, fmt.Errorf("%w: this API key has %d schedules, the most it may have; delete some first", ErrTooMany, n)
	}
	t := *r.Timing
	t.Type = "cron"
	doc, err := json.Marshal(&spec{Name: r.Name, Description: r.Description, Timing: t, SessionRequest: tmpl})
	if err != nil {
		return nil, err
	}
	now := s.opts.Clock.Now()
	sc, err := s.st.CreateSchedule(ctx, &store.Schedule{ID: newID(), Owner: owner, Spec: doc, NextRunAt: cd.next(now), CreatedAt: now, UpdatedAt: now})
	if err != nil {
		return nil, err
	}
	return record(sc)
}

// Get returns the owner's schedule.
//
// Errors: [ErrNotFound].
func (s *Scheduler) Get(ctx context.Context, owner, id string) (*Schedule, error) {
	sc, err := s.get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return record(sc)
}

func (s *Scheduler) get(ctx context.Context, owner, id string) (*store.Schedule, error) {
	sc, err := s.st.GetSchedule(ctx, owner, id)
	if errors.Is(err, store.ErrScheduleNotFound) {
		return nil, ErrNotFound
	}
	return sc, err
}

// ListParams select a page of a listing: Page from 1, Size items, newest
// first unless Ascending.
type ListParams struct {
	Page, Size int
	Ascending  bool
}

func (p *ListParams) window() (offset, limit, page int) {
	page, limit = max(p.Page, 1), p.Size
	if limit <= 0 {
		limit = 10
	}
	return (page - 1) * limit, limit, page
}

// List returns a page of the owner's schedules.
func (s *Scheduler) List(ctx context.Context, owner string, p *ListParams) (*session.Page[*Schedule], error) {
	offset, limit, page := p.window()
	scs, total, err := s.st.ListSchedules(ctx, &store.ScheduleListParams{Owner: owner, Offset: offset, Limit: limit, Ascending: p.Ascending})
	if err != nil {
		return nil, err
	}
	out := &session.Page[*Schedule]{Items: []*Schedule{}, Total: total, Page: page}
	for _, sc := range scs {
		r, err := record(sc)
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, r)
	}
	return out, nil
}

// maxRetries bounds the read-modify-write rounds of an update that races
// with firings and other updates.
const maxRetries = 8

// change applies fn to the owner's schedule and stores the result, again
// from a fresh read when the schedule changed meanwhile.
func (s *Scheduler) change(ctx context.Context, owner, id string, fn func(sc *store.Schedule, sp *spec) error) (*Schedule, error) {
	for range maxRetries {
		sc, err := s.get(ctx, owner, id)
		if err != nil {
			return nil, err
		}
		sp, err := decodeSpec(sc)
		if err != nil {
			return nil, err
		}
		if err := fn(sc, sp); err != nil {
			return nil, err
		}
		if sc.Spec, err = json.Marshal(sp); err != nil {
			return nil, err
		}
		got, err := s.st.UpdateSchedule(ctx, sc)
		switch {
		case errors.Is(err, store.ErrConflict):
			continue
		case errors.Is(err, store.ErrScheduleNotFound):
			return nil, ErrNotFound
		case err != nil:
			return nil, err
		}
		return record(got)
	}
	return nil, ErrBusy
}

// Update changes the fields r gives of the owner's schedule. A new timing
// starts from the first tick after now (unless the schedule is paused).
//
// Errors: [ErrNotFound], a *[session.ValidationError], [ErrBusy].
func (s *Scheduler) Update(ctx context.Context, owner, id string, r *UpdateRequest) (*Schedule, error) {
	if _, err := s.get(ctx, owner, id); err != nil {
		return nil, err // 404 before 422: another owner learns nothing
	}
	c := &checker{}
	if r.Name != nil {
		c.text("name", *r.Name, 1, maxNameLen)
	}
	if r.Description != nil {
		c.text("description", *r.Description, 0, maxDescriptionLen)
	}
	var cd *cadence
	if r.Timing != nil {
		cd = c.timing(r.Timing, s.opts.Clock.Now())
	}
	var tmpl json.RawMessage
	if !absent(r.SessionRequest) {
		var err error
		if tmpl, err = s.template(ctx, c, owner, r.SessionRequest); err != nil {
			return nil, err
		}
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	return s.change(ctx, owner, id, func(sc *store.Schedule, sp *spec) error {
		if r.Name != nil {
			sp.Name = *r.Name
		}
		if r.Description != nil {
			sp.Description = r.Description
		}
		if tmpl != nil {
			sp.SessionRequest = tmpl
		}
		if r.Timing != nil {
			sp.Timing = *r.Timing
			sp.Timing.Type = "cron"
			if !sc.Paused {
				sc.NextRunAt = cd.next(s.opts.Clock.Now())
			}
		}
		return nil
	})
}

// Delete removes the owner's schedule and its runs. Sessions it created
// stay.
//
// Errors: [ErrNotFound].
func (s *Scheduler) Delete(ctx context.Context, owner, id string) error {
	err := s.st.DeleteSchedule(ctx, owner, id)
	if errors.Is(err, store.ErrScheduleNotFound) {
		return ErrNotFound
	}
	return err
}

// Pause stops the owner's schedule from firing, with an optional note
// (at most 255 characters) saying why. Pausing a paused schedule changes
// only its note.
//
// Errors: [ErrNotFound], a *[session.ValidationError], [ErrBusy].
func (s *Scheduler) Pause(ctx context.Context, owner, id string, note *string) (*Schedule, error) {
	if _, err := s.get(ctx, owner, id); err != nil {
		return nil, err
	}
	if note != nil {
		c := &checker{}
		c.text("note", *note, 0, maxNoteLen)
		if err := c.err(); err != nil {
			return nil, err
		}
	}
	return s.change(ctx, owner, id, func(sc *store.Schedule, sp *spec) error {
		sc.Paused, sc.NextRunAt, sp.PauseNote = true, time.Time{}, note
		return nil
	})
}

// Resume lets the owner's paused schedule fire again, from the first
// tick after now: ticks that passed while it was paused do not fire.
// Resuming a schedule that is not paused changes nothing.
//
// Errors: [ErrNotFound], [ErrBusy].
func (s *Scheduler) Resume(ctx context.Context, owner, id string) (*Schedule, error) {
	sc, err := s.get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	if !sc.Paused {
		return record(sc)
	}
	return s.change(ctx, owner, id, func(sc *store.Schedule, sp *spec) error {
		if !sc.Paused {
			return nil
		}
		sc.Paused, sp.PauseNote = false, nil
		cd, _, err := parseTiming(&sp.Timing)
		if err != nil {
			return &session.ValidationError{Fields: []session.FieldError{{Loc: []any{"body", "timing"}, Msg: "the schedule's timing is not valid any more: " + err.Error(), Type: "value_error"}}}
		}
		sc.NextRunAt = cd.next(s.opts.Clock.Now())
		return nil
	})
}

// Trigger fires the owner's schedule once now, paused or not, without
// changing its cadence, and returns the run once its session is created
// (or its creation failed: see Run.Status).
//
// key, when not empty, makes the trigger safe to repeat: when the
// schedule already has a run triggered with key, that run is returned
// and made is false; a run still pending (the first call's answer was
// lost, or it is still being made) has its session created now, or
// found, as a worker taking it over would (the session of a run is
// created once, whoever creates it).
//
// Errors: [ErrNotFound]; an error of the store, in which case the run
// stays pending and a worker completes it later; [session.ErrInFlight]
// when the same key's run is having its session created by this process.
func (s *Scheduler) Trigger(ctx context.Context, owner, id, key string) (run *Run, made bool, err error) {
	now := s.opts.Clock.Now()
	n := &store.ScheduleRun{
		ID: newID(), ScheduleID: id, Owner: owner, Manual: true, ScheduledFor: now,
		LeaseOwner: s.opts.Owner, LeaseUntil: now.Add(s.opts.LeaseTTL), CreatedAt: now, IdempotencyKey: key,
	}
	r, err := s.st.AddScheduleRun(ctx, n)
	if errors.Is(err, store.ErrScheduleNotFound) {
		return nil, false, ErrNotFound
	}
	if err != nil {
		return nil, false, err
	}
	made = r.ID == n.ID
	if r.Status == store.RunPending {
		if err := s.complete(ctx, r); err != nil {
			return nil, false, err
		}
	}
	return runRecord(r), made, nil
}

// Runs returns a page of the runs of the owner's schedule, the latest
// tick first unless p.Ascending. Runs whose session is being created are
// not listed yet.
//
// Errors: [ErrNotFound].
func (s *Scheduler) Runs(ctx context.Context, owner, id string, p *ListParams) (*session.Page[*Run], error) {
	offset, limit, page := p.window()
	runs, total, err := s.st.ListScheduleRuns(ctx, &store.ScheduleRunListParams{Owner: owner, ScheduleID: id, Finished: true, Offset: offset, Limit: limit, Ascending: p.Ascending})
	if errors.Is(err, store.ErrScheduleNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	out := &session.Page[*Run]{Items: []*Run{}, Total: total, Page: page}
	for _, r := range runs {
		out.Items = append(out.Items, runRecord(r))
	}
	return out, nil
}
