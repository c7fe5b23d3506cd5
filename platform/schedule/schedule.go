// Package schedule runs the schedules of hrns serve: cron expressions in
// IANA time zones, each firing of which creates a session from the
// schedule's template through [session.Manager.Create]. It also implements
// the /api/v2/schedules operations (create, read, update, delete, pause,
// resume, trigger, runs) for package server.
//
//	sch := schedule.New(manager, st, nil)
//	go sch.Run(ctx) // fires the schedules of every owner until ctx ends
//
// # Firing once per tick
//
// Schedules live in the store ([store.Schedules]), so any number of
// replicas sharing a store can run a [Scheduler]. A worker that finds a
// schedule due takes its tick with [store.Schedules.FireSchedule], which,
// in one transaction, advances the schedule's next tick (if nobody
// changed the schedule since it was read) and inserts a run row unique
// per schedule and tick: of two replicas, one takes the tick. The run is
// leased to that worker while it creates the session; the session's
// idempotency key is the run's id, so that a worker that takes over the
// run of one that died finds the session if it was created, instead of
// creating a second. A fire, or a claim of runs whose worker died, that
// committed but answered an error is made again (the same run, or the
// claim's token), and the store answers with what the first call took:
// the session is created at once, with no takeover counted for the loss.
//
// # Missed ticks
//
// When no worker ran at a tick's time (the server was down), the next
// worker fires once, for the latest tick at or before now, and passes over
// the earlier ones: the run records how many it skipped
// (ScheduleRunRecord.skipped_ticks, counted up to 10000). A schedule
// created, resumed or retimed starts from the first tick after that
// moment: nothing in the past fires.
//
// # Time zones
//
// The expression is read in the schedule's zone with robfig/cron's
// rules: on the day a zone's clocks go forward, a time that does not
// exist that day (02:30 in Europe/Paris on the last Sunday of March) does
// not fire that day; on the day they go back, a time that happens twice
// (02:30 on the last Sunday of October) fires once, at its first
// occurrence. Ticks are instants: the API shows the upcoming ones
// (next_run_times) at the zone's offset.
//
// # Clock
//
// Every time the package uses comes from [Options.Clock], so that tests
// drive a fake clock instead of waiting.
package schedule

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/hrns-dev/hrns/api"
	"log/slog"
	"os"
	"time"

	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// Errors of the [Scheduler]'s operations. Invalid input is a
// *[session.ValidationError].
var (
	// ErrNotFound: the owner has no schedule with the id (another
	// owner's schedule is not found either).
	ErrNotFound = errors.New("schedule not found")
	// ErrTooMany: the owner has [Options.MaxSchedules] schedules.
	ErrTooMany = errors.New("too many schedules")
	// ErrBusy: the schedule kept changing while an update was applied
	// (a replica fired it, or another request changed it); retry.
	ErrBusy = errors.New("schedule changed concurrently; retry")
)

// A Clock tells the time and waits; [Options.Clock] replaces the real one
// in tests.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives a value once d has passed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Options configure a [Scheduler]. A nil *Options means the defaults; the
// zero value of each field means its default.
type Options struct {
	// Owner names this worker in the leases of the runs it takes; it
	// must be unique among the processes sharing the store. Empty means
	// the host name followed by a random suffix.
	Owner string
	// Clock is the time; nil means the system's.
	Clock Clock
	// LeaseTTL is how long a run taken by a worker stays its own while
	// it creates the session; 0 means 1 minute. A run whose worker died
	// is taken over after it.
	LeaseTTL time.Duration
	// MaxWait bounds how long the worker sleeps between looks at the
	// store when nothing wakes it; 0 means 1 minute.
	MaxWait time.Duration
	// MaxSchedules bounds the schedules of an owner; 0 means 1000.
	MaxSchedules int
	// KeepRuns bounds the finished runs kept per schedule, newest kept;
	// 0 means 1000.
	KeepRuns int
	// MaxAttempts bounds the takeovers of a run whose session could not
	// be created (the store failed, or its worker died) before the run
	// is recorded as an error; 0 means 3.
	MaxAttempts int
	// Logger receives the worker's errors; nil discards them.
	Logger *slog.Logger
}

// A Scheduler keeps the schedules of a store and fires them. Its methods
// are safe for concurrent use, and any number of Schedulers (one per
// replica) may share a store.
type Scheduler struct {
	// fixed at creation
	m    Sessions
	st   store.Store
	opts Options
	log  *slog.Logger
}

// Sessions is what a [Scheduler] needs of the sessions runtime: to check
// a session template as a request, and to create a tick's session. A
// *[session.Manager] is one.
type Sessions interface {
	// CheckRequest validates a session request of owner and returns it
	// normalised ([session.Manager.CheckRequest]).
	CheckRequest(ctx context.Context, owner string, r *session.Request) (*session.Request, error)
	// Create creates a session ([session.Manager.Create]).
	Create(ctx context.Context, p *session.CreateParams) (*session.View, bool, error)
}

// New returns the scheduler of the schedules in st, which creates
// sessions with m (a manager of the same store). Call [Scheduler.Run] to
// fire them.
func New(m Sessions, st store.Store, opts *Options) *Scheduler {
	if mgr, ok := m.(*session.Manager); m == nil || ok && mgr == nil || st == nil {
		panic("schedule.New: nil manager or store")
	}
	s := &Scheduler{m: m, st: st}
	if opts != nil {
		s.opts = *opts
	}
	o := &s.opts
	if o.Owner == "" {
		host, _ := os.Hostname()
		o.Owner = host + "-" + rand.Text()[:8]
	}
	if o.Clock == nil {
		o.Clock = realClock{}
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = time.Minute
	}
	if o.MaxWait <= 0 {
		o.MaxWait = time.Minute
	}
	if o.MaxSchedules <= 0 {
		o.MaxSchedules = 1000
	}
	if o.KeepRuns <= 0 {
		o.KeepRuns = 1000
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 3
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s.log = o.Logger
	return s
}

// Schedule is a schedule as the API shows it: [api.Schedule].
type Schedule = api.Schedule

// Run is one firing of a schedule as the API shows it: [api.ScheduleRun].
type Run = api.ScheduleRun

// spec is what the store keeps of a schedule (store.Schedule.Spec).
type spec struct {
	Name           string          `json:"name"`
	Description    *string         `json:"description"`
	Timing         Timing          `json:"timing"`
	SessionRequest json.RawMessage `json:"session_request"`
	PauseNote      *string         `json:"pause_note,omitempty"`
}

func decodeSpec(sc *store.Schedule) (*spec, error) {
	var sp spec
	if err := json.Unmarshal(sc.Spec, &sp); err != nil {
		return nil, fmt.Errorf("schedule %s: stored definition: %w", sc.ID, err)
	}
	return &sp, nil
}

// upcomingCount is how many ticks NextRunTimes shows.
const upcomingCount = 5

// record renders a stored schedule for the API.
func record(sc *store.Schedule) (*Schedule, error) {
	sp, err := decodeSpec(sc)
	if err != nil {
		return nil, err
	}
	out := &Schedule{
		ID: sc.ID, Name: sp.Name, Description: sp.Description, Timing: sp.Timing, SessionRequest: session.RedactMCPServers(sp.SessionRequest),
		Paused: sc.Paused, PauseNote: sp.PauseNote, NextRunTimes: []time.Time{},
		CreatedAt: sc.CreatedAt.UTC(), UpdatedAt: sc.UpdatedAt.UTC(),
	}
	out.Timing.Type = "cron"
	if !sc.LastRunAt.IsZero() {
		t := sc.LastRunAt.UTC()
		out.LastRunAt = &t
	}
	if !sc.Paused && !sc.NextRunAt.IsZero() {
		if c, _, err := parseTiming(&sp.Timing); err == nil {
			out.NextRunTimes = c.upcoming(sc.NextRunAt, upcomingCount)
		} else {
			out.NextRunTimes = []time.Time{sc.NextRunAt.UTC()}
		}
	}
	return out, nil
}

// runRecord renders a stored run for the API.
func runRecord(r *store.ScheduleRun) *Run {
	out := &Run{
		ID: r.ID, ScheduleID: r.ScheduleID, Status: r.Status, ScheduledFor: r.ScheduledFor.UTC(),
		TriggeredManually: r.Manual, CreatedAt: r.CreatedAt.UTC(), SkippedTicks: r.Skipped,
	}
	if r.SessionID != "" {
		out.SessionID = &r.SessionID
	}
	if r.Error != "" {
		out.Error = &r.Error
	}
	return out
}

// newID returns a random UUID (version 4), the form of the API's ids.
func newID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
