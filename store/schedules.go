package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Errors of [Schedules]. ErrConflict and ErrLeaseLost are returned too
// (see UpdateSchedule, FireSchedule and FinishScheduleRun).
var (
	// ErrScheduleNotFound: the owner has no schedule with the id.
	// Returned by GetSchedule, UpdateSchedule, DeleteSchedule,
	// FireSchedule and AddScheduleRun.
	ErrScheduleNotFound = errors.New("store: schedule not found")
	// ErrScheduleRunNotFound: no pending run has the id (it finished, or
	// its schedule was deleted). Returned by FinishScheduleRun.
	ErrScheduleRunNotFound = errors.New("store: schedule run not found")
)

// ScheduleTopic is the [Store.Subscribe] topic of changes that may give
// schedule workers something to do sooner than they planned: a schedule
// created, changed or fired, a run added. Stores shared by several
// processes announce them to every process.
const ScheduleTopic = "*schedules*"

// Statuses of a [ScheduleRun]. A run is pending from the moment its tick
// is taken until the session is created (or the creation fails); the
// others are final.
const (
	RunPending        = "pending"
	RunCreated        = "created"
	RunSkippedOverlap = "skipped_overlap"
	RunSkippedQuota   = "skipped_quota"
	RunError          = "error"
)

// Schedules keeps the schedules callers register, each scoped to its
// owner, and the record of their runs: one row per tick a schedule fired
// for (and per manual trigger). It is part of every [Store], so that every
// replica sees the same schedules and a tick is taken once across them.
//
// # Exactly once per tick
//
// A worker reads the schedules that are due ([Schedules.DueSchedules]),
// computes the tick to fire and the next one (the store knows nothing of
// cron), and takes the tick with [Schedules.FireSchedule]: in one
// transaction the schedule's NextRunAt advances, if its Version is still
// the one read, and a pending run is inserted for the tick, unique per
// schedule and tick. Of two workers firing the same tick, one succeeds
// and the other gets ErrConflict. The run is leased to the worker that
// took it; it creates the session and finishes the run
// ([Schedules.FinishScheduleRun]). A worker that dies in between leaves a
// pending run whose lease expires, and [Schedules.ClaimScheduleRuns]
// gives it to another worker, which completes it (creating the session
// idempotently, so that a session the dead worker did create is found,
// not made twice). A worker whose fire or claim answered an error calls
// it again with the same run, or the claim's token, and is given what
// the first call took, if it committed.
//
// All methods are safe for concurrent use. Values returned are the
// caller's; values given are not retained after the call returns.
type Schedules interface {
	// CreateSchedule inserts sc and returns it as stored: Version 1,
	// CreatedAt and UpdatedAt set to now when zero, LastRunAt zero.
	CreateSchedule(ctx context.Context, sc *Schedule) (*Schedule, error)

	// GetSchedule returns the owner's schedule with the id, or
	// ErrScheduleNotFound (also when another owner has it).
	GetSchedule(ctx context.Context, owner, id string) (*Schedule, error)

	// ListSchedules returns a page of the owner's schedules, newest first
	// (oldest first with p.Ascending), and how many the owner has.
	ListSchedules(ctx context.Context, p *ScheduleListParams) (page []*Schedule, total int, err error)

	// UpdateSchedule replaces the Spec, Paused and NextRunAt of the
	// schedule of sc's Owner and ID if its stored version is
	// sc.Version; otherwise it returns ErrConflict and writes nothing
	// (ErrScheduleNotFound when there is no such schedule). It returns
	// the schedule as stored: Version incremented, UpdatedAt now.
	UpdateSchedule(ctx context.Context, sc *Schedule) (*Schedule, error)

	// DeleteSchedule removes the owner's schedule and its runs, or
	// returns ErrScheduleNotFound. Sessions the schedule created stay.
	DeleteSchedule(ctx context.Context, owner, id string) error

	// DueSchedules returns the schedules, of every owner, that are not
	// paused and whose NextRunAt is set and at or before now, earliest
	// first, at most limit (<= 0 means 100).
	DueSchedules(ctx context.Context, now time.Time, limit int) ([]*Schedule, error)

	// NextScheduleWake returns the earliest time after which a worker
	// may find work it would not find at now: the earliest NextRunAt of
	// a schedule not paused, or the lease expiry of a pending run. It
	// returns the zero time when there is none; a time at or before now
	// means "look again now".
	NextScheduleWake(ctx context.Context, now time.Time) (time.Time, error)

	// FireSchedule takes a tick of a schedule, in one transaction: if
	// the schedule is not paused and its version is p.Version, its
	// NextRunAt becomes p.NextRunAt, its LastRunAt p.Run.CreatedAt and
	// its Version is incremented (UpdatedAt is kept: it dates the
	// owner's changes), and p.Run is inserted as a pending run. It
	// returns ErrConflict, writing nothing, when the version differs,
	// the schedule is paused, or the schedule already has a (not manual)
	// run for p.Run.ScheduledFor; ErrScheduleNotFound when the schedule
	// is gone.
	//
	// A fire whose answer was lost (its transaction committed, but the
	// call returned an error) is recovered by calling again with the
	// same p: when the schedule has a run with p.Run.ID, pending and
	// leased to p.Run.LeaseOwner, its lease is extended to
	// p.Run.LeaseUntil and it is returned, the schedule left as it is;
	// when the run exists otherwise (finished, or taken over by another
	// worker), ErrConflict.
	FireSchedule(ctx context.Context, p *FireParams) (*ScheduleRun, error)

	// AddScheduleRun inserts r, a manual run (r.Manual is required), for
	// the owner's schedule r.ScheduleID, paused or not, and sets the
	// schedule's LastRunAt to r.CreatedAt without changing its Version:
	// a trigger leaves the cadence alone. It returns
	// ErrScheduleNotFound when the owner has no such schedule.
	//
	// When r.IdempotencyKey is set and the schedule already has a run
	// made with that key, that run is returned as it is now (pending or
	// finished, with its own ID), and nothing is written: a trigger
	// repeated because its answer was lost gets the run the first made.
	// Keys are the schedule's, and so its owner's; a run pruned by
	// FinishScheduleRun's keep takes its key with it.
	AddScheduleRun(ctx context.Context, r *ScheduleRun) (*ScheduleRun, error)

	// ClaimScheduleRuns leases pending runs whose lease has expired at
	// p.Now (their worker died) to p.Owner until p.Now+p.TTL, oldest
	// first, at most p.Limit (<= 0 means 1), incrementing their
	// Attempts; p.BelowAttempts is ignored. Two
	// concurrent claims never return the same run.
	//
	// Each lease carries p.Token. A claim whose answer was lost is
	// recovered by calling again with the same p.Owner and p.Token:
	// when pending runs still hold that claim's leases (no
	// FinishScheduleRun ended them, no other claim took them), the call
	// returns them, leases extended to p.Now+p.TTL (a lapsed one too)
	// and Attempts as the first call counted them, and claims nothing
	// more. An empty p.Token recovers nothing.
	ClaimScheduleRuns(ctx context.Context, p *ClaimParams) ([]*ScheduleRun, error)

	// FinishScheduleRun records the outcome of a pending run leased to
	// owner: r's Status (not pending), SessionID and Error, and UpdatedAt
	// now; the lease is cleared. It returns ErrLeaseLost when another
	// worker holds the run's lease, ErrScheduleRunNotFound when the run
	// is not pending any more or does not exist. It then deletes the
	// schedule's oldest finished runs beyond keep (when keep > 0), so
	// that a schedule's history stays bounded.
	FinishScheduleRun(ctx context.Context, r *ScheduleRun, owner string, keep int) error

	// ListScheduleRuns returns a page of the runs of the owner's schedule,
	// newest ScheduledFor first (oldest first with p.Ascending), and how
	// many match. It returns ErrScheduleNotFound when the owner has no
	// such schedule.
	ListScheduleRuns(ctx context.Context, p *ScheduleRunListParams) (page []*ScheduleRun, total int, err error)
}

// A Schedule is one stored schedule.
type Schedule struct {
	// ID is unique in the store; Owner is who may see and change it.
	ID    string
	Owner string
	// Spec is the schedule's definition (JSON: its name, timing and
	// session template), owned by the caller.
	Spec json.RawMessage
	// Paused schedules are not due, whatever their NextRunAt.
	Paused bool
	// NextRunAt is the next tick, zero for none.
	NextRunAt time.Time
	// LastRunAt is when it last fired (a tick or a trigger), zero before.
	// Set only by FireSchedule and AddScheduleRun.
	LastRunAt time.Time
	// Version counts committed changes (updates and fires).
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// A ScheduleRun is one firing of a schedule: a tick or a manual trigger.
type ScheduleRun struct {
	// ID is unique in the store.
	ID string
	// ScheduleID and Owner are the schedule's.
	ScheduleID string
	Owner      string
	// Status is one of the Run constants.
	Status string
	// ScheduledFor is the tick; for a manual run, when it was triggered.
	ScheduledFor time.Time
	// Manual marks a run made by a trigger, not by the cadence.
	Manual bool
	// IdempotencyKey is the key of the trigger that made a manual run,
	// empty for none (see AddScheduleRun). Set only by AddScheduleRun;
	// other methods return it empty.
	IdempotencyKey string
	// Skipped counts the ticks passed over before this one (missed
	// while no worker ran).
	Skipped int
	// SessionID is the session created, once it is; Error says why
	// none was.
	SessionID string
	Error     string
	// LeaseOwner holds the pending run until LeaseUntil; Attempts counts
	// its claims after the first.
	LeaseOwner string
	LeaseUntil time.Time
	Attempts   int
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// FireParams are the arguments of [Schedules.FireSchedule].
type FireParams struct {
	// Owner and ID name the schedule; Version is the one read.
	Owner, ID string
	Version   int64
	// NextRunAt is the schedule's next tick after this one (zero: none).
	NextRunAt time.Time
	// Run is the run to insert: ID, ScheduledFor, Skipped, LeaseOwner
	// and LeaseUntil set by the caller; CreatedAt and UpdatedAt default
	// to now; Status is pending, ScheduleID and Owner the schedule's.
	Run *ScheduleRun
}

// ScheduleListParams select schedules for [Schedules.ListSchedules].
type ScheduleListParams struct {
	// Owner is required: only the owner's schedules are listed.
	Owner string
	// Offset and Limit select the page; Limit <= 0 means 50.
	Offset, Limit int
	// Ascending lists oldest first.
	Ascending bool
}

// ScheduleRunListParams select runs for [Schedules.ListScheduleRuns].
type ScheduleRunListParams struct {
	// Owner and ScheduleID are required.
	Owner, ScheduleID string
	// Finished, when set, leaves out pending runs.
	Finished bool
	// Offset and Limit select the page; Limit <= 0 means 50.
	Offset, Limit int
	// Ascending lists the oldest tick first.
	Ascending bool
}
