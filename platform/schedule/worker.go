package schedule

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hrns-dev/hrns/internal/retry"
	"github.com/hrns-dev/hrns/session"
	"github.com/hrns-dev/hrns/store"
)

// Bounds of one [Scheduler.Poll].
const (
	dueBatch     = 100 // schedules read at once
	claimBatch   = 16  // orphaned runs taken at once
	pollBatches  = 10  // batches of each per poll
	retryWait    = time.Second
	maxRetryWait = 30 * time.Second
)

// Run fires the schedules of the store until ctx ends: it polls (see
// [Scheduler.Poll]), then sleeps until the next tick of any schedule, a
// change announced by the store ([store.ScheduleTopic]), or
// [Options.MaxWait], whichever comes first. After an error of the store
// it waits a little longer each time, up to 30 seconds. It returns nil
// once ctx ends, after what it took is completed (within about a second
// of ctx's end: see Poll).
func (s *Scheduler) Run(ctx context.Context) error {
	changed, cancel := s.st.Subscribe(store.ScheduleTopic)
	defer cancel()
	backoff := retryWait
	for ctx.Err() == nil {
		fired, err := s.Poll(ctx)
		now := s.opts.Clock.Now()
		wait := s.opts.MaxWait
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			s.log.Error("schedules: poll failed", "err", err)
			wait, backoff = backoff, min(2*backoff, maxRetryWait)
		} else {
			backoff = retryWait
			next, err := s.st.NextScheduleWake(ctx, now)
			switch {
			case err != nil:
				if ctx.Err() != nil {
					break
				}
				s.log.Error("schedules: next wake", "err", err)
				wait = retryWait
			case next.IsZero():
			case !next.After(now):
				// Work is due now. Unless this poll did some, it is work
				// that failed (it stays due): look again a little later
				// rather than spin.
				wait = 0
				if fired == 0 {
					wait = retryWait
				}
			default:
				wait = min(wait, next.Sub(now))
			}
		}
		if wait == 0 {
			continue
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-s.opts.Clock.After(wait):
		}
	}
	return nil
}

// Poll does the work that is due at the clock's now, once: it completes
// the runs whose worker died (their lease expired), and fires each
// schedule whose next tick has come, following the missed-tick policy. It
// returns how many runs it completed or fired. An error of one schedule's
// session is logged, not returned: the run stays pending and is taken
// over later. Errors are the store's.
//
// What a claim or a fire has taken is completed even when ctx ends
// meanwhile (within half a lease, and within stopGrace of ctx's end): a
// run cut there would stay leased to a stopped worker, and start late,
// when its lease expires. The claim or fire in flight is not cut at once
// either (see claim), but stopGrace after ctx ends, so that a store that
// does not answer holds a stopping worker about a second, not for the
// three calls' bounds (90 s with the default lease); what it took is
// then left to its lease's lapse, as after a crash. Once ctx ends, Poll
// takes nothing more.
func (s *Scheduler) Poll(ctx context.Context) (done int, err error) {
	now := s.opts.Clock.Now()
	grace, cancelGrace := retry.Grace(ctx, stopGrace)
	defer cancelGrace()
	for range pollBatches {
		if ctx.Err() != nil {
			return done, ctx.Err()
		}
		runs, err := s.claim(grace)
		if err != nil {
			return done, err
		}
		wctx, cancel := s.uncut(grace)
		for _, r := range runs {
			if err := s.complete(wctx, r); err != nil {
				s.log.Warn("schedules: run not completed; it will be taken over", "schedule", r.ScheduleID, "run", r.ID, "attempts", r.Attempts, "err", err)
				continue
			}
			done++
		}
		cancel()
		if len(runs) < claimBatch {
			break
		}
	}
	for range pollBatches {
		due, err := s.st.DueSchedules(ctx, now, dueBatch)
		if err != nil {
			return done, err
		}
		for _, sc := range due {
			if ctx.Err() != nil {
				return done, ctx.Err()
			}
			fired, err := s.fire(grace, sc, now)
			if err != nil {
				s.log.Warn("schedules: fire", "schedule", sc.ID, "err", err)
			}
			if fired {
				done++
			}
		}
		if len(due) < dueBatch {
			break
		}
	}
	return done, nil
}

// uncut returns a context for work that must not be cut once taken:
// grace (Poll's context given stopGrace after its end: see Poll) bounded
// by half a lease, so that a worker that takes longer loses the work to
// a takeover rather than doing it twice at once.
func (s *Scheduler) uncut(grace context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(grace, s.opts.LeaseTTL/2)
}

// storeTries bounds the calls of one fire or claim: the first, and the
// calls again after an error.
const storeTries = 3

// claim takes over up to claimBatch runs whose lease expired. A claim
// that answers an error may have committed (its bound passed after the
// commit, or the connection broke while the commit's answer was in
// flight): its runs are leased to this worker, which does not know them,
// each with a takeover counted. So the claim is made again with its
// token, which returns what it took if it committed (and claims as any
// claim if it did not), up to storeTries calls, each on a context of
// its own (see uncut); when every call fails, the runs it may have taken
// wait for their leases to lapse. grace is Poll's context given
// stopGrace after its end.
func (s *Scheduler) claim(grace context.Context) ([]*store.ScheduleRun, error) {
	p := &store.ClaimParams{Owner: s.opts.Owner, Token: rand.Text(), TTL: s.opts.LeaseTTL, Limit: claimBatch}
	var runs []*store.ScheduleRun
	err, earlier := retry.Do(grace, retry.Policy{Tries: storeTries, Bound: s.opts.LeaseTTL / 2}, func(ctx context.Context) (err error) {
		p.Now = s.opts.Clock.Now()
		runs, err = s.st.ClaimScheduleRuns(ctx, p)
		return err
	})
	if err != nil {
		return nil, errors.Join(earlier, err)
	}
	if earlier != nil && len(runs) > 0 {
		s.log.Warn("schedules: a claim answered an error; claimed again with its token", "err", earlier, "runs", len(runs))
	}
	return runs, nil
}

// fire takes the tick of a due schedule and creates its session. It
// reports whether it took the tick. grace is Poll's context given
// stopGrace after its end (see uncut).
//
// A fire that answers an error other than a conflict may have
// committed: its run is leased to this worker, which does not know it.
// So the fire is made again with the same run, which returns the run if
// the first call inserted it (its lease extended) and fires as any fire
// if it did not, up to storeTries calls; when every call fails, a run it
// may have inserted waits for its lease to lapse and is taken over.
func (s *Scheduler) fire(grace context.Context, sc *store.Schedule, now time.Time) (bool, error) {
	base := grace
	ctx, cancel := s.uncut(base)
	defer func() { cancel() }()
	sp, err := decodeSpec(sc)
	var cd *cadence
	if err == nil {
		cd, _, err = parseTiming(&sp.Timing)
	}
	if err != nil {
		// A timing that no longer parses (the system's time zone
		// database lost its zone) would be due for ever: pause it and
		// say why.
		return false, s.disable(ctx, sc, err)
	}
	tick, skipped := cd.catchUp(sc.NextRunAt, now)
	next := cd.next(tick)
	p := &store.FireParams{
		Owner: sc.Owner, ID: sc.ID, Version: sc.Version, NextRunAt: next,
		Run: &store.ScheduleRun{ID: newID(), ScheduledFor: tick, Skipped: skipped, LeaseOwner: s.opts.Owner, LeaseUntil: now.Add(s.opts.LeaseTTL), CreatedAt: now},
	}
	var run *store.ScheduleRun
	calls := 0
	// Each call bounds itself (no Policy.Bound): what follows the call
	// that answers (complete) goes on under that call's bound.
	err, earlier := retry.Do(base, retry.Policy{Tries: storeTries}, func(context.Context) (err error) {
		if calls++; calls > 1 {
			// Each call again, and what follows it, on a bound of its
			// own: the first call may have spent ctx's. The run's lease
			// runs from this call.
			cancel()
			ctx, cancel = s.uncut(base)
			p.Run.LeaseUntil = s.opts.Clock.Now().Add(s.opts.LeaseTTL)
		}
		run, err = s.st.FireSchedule(ctx, p)
		return err
	}, store.ErrConflict, store.ErrScheduleNotFound)
	switch {
	case err == nil && earlier != nil:
		s.log.Warn("schedules: a fire answered an error; fired again with its run", "schedule", sc.ID, "err", earlier)
	case err != nil:
		err = errors.Join(earlier, err)
	}
	switch {
	case errors.Is(err, store.ErrConflict):
		return false, s.unstick(ctx, sc, next)
	case errors.Is(err, store.ErrScheduleNotFound):
		return false, nil // deleted meanwhile
	case err != nil:
		return false, err
	}
	if skipped > 0 {
		s.log.Info("schedules: missed ticks skipped", "schedule", sc.ID, "skipped", skipped, "fired_for", tick)
	}
	return true, s.complete(ctx, run)
}

// unstick handles a tick that could not be taken. Usually another replica
// took it or the owner changed the schedule: it reads differently now.
// If it reads the same, the tick already has its run (a replica with a
// slower clock set the schedule back to it): skip to the next tick.
func (s *Scheduler) unstick(ctx context.Context, read *store.Schedule, next time.Time) error {
	sc, err := s.st.GetSchedule(ctx, read.Owner, read.ID)
	if err != nil || sc.Version != read.Version || sc.Paused || !sc.NextRunAt.Equal(read.NextRunAt) {
		if errors.Is(err, store.ErrScheduleNotFound) {
			return nil
		}
		return err
	}
	sc.NextRunAt = next
	if _, err := s.st.UpdateSchedule(ctx, sc); err != nil && !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrScheduleNotFound) {
		return err
	}
	return nil
}

// disable pauses a schedule that cannot fire, with a note saying why.
func (s *Scheduler) disable(ctx context.Context, sc *store.Schedule, why error) error {
	s.log.Error("schedules: pausing a schedule that cannot fire", "schedule", sc.ID, "err", why)
	note := "paused by hrns: " + why.Error()
	if len(note) > maxNoteLen {
		note = note[:maxNoteLen]
	}
	var sp spec
	_ = json.Unmarshal(sc.Spec, &sp) // what can be read of it is kept
	sp.PauseNote = &note
	doc, err := json.Marshal(&sp)
	if err != nil {
		return err
	}
	n := *sc
	n.Spec, n.Paused, n.NextRunAt = doc, true, time.Time{}
	if _, err := s.st.UpdateSchedule(ctx, &n); err != nil && !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrScheduleNotFound) {
		return err
	}
	return nil
}

// runKey is the idempotency key of the session of a run: a worker that
// takes over the run finds the session its first worker created.
func runKey(r *store.ScheduleRun) string { return "schedule-run:" + r.ID }

// complete creates the session of a pending run leased to this worker
// and records the outcome in the store and in r. It returns an error,
// leaving the run pending for a later takeover, when the session could
// not be created for a reason that may pass (the store failed) and the
// run has attempts left.
func (s *Scheduler) complete(ctx context.Context, r *store.ScheduleRun) error {
	sc, err := s.st.GetSchedule(ctx, r.Owner, r.ScheduleID)
	if errors.Is(err, store.ErrScheduleNotFound) {
		return nil // deleted, and its runs with it
	}
	if err != nil {
		return err
	}
	sp, err := decodeSpec(sc)
	if err != nil {
		return s.finish(ctx, r, store.RunError, "", err.Error())
	}
	var req session.Request
	if err := json.Unmarshal(sp.SessionRequest, &req); err != nil {
		return s.finish(ctx, r, store.RunError, "", "the session template does not decode: "+err.Error())
	}
	key := runKey(r)
	v, _, err := s.m.Create(ctx, &session.CreateParams{Owner: r.Owner, Request: &req, Raw: json.RawMessage(key), IdempotencyKey: key, ScheduleID: r.ScheduleID})
	var ve *session.ValidationError
	switch {
	case err == nil:
		return s.finish(ctx, r, store.RunCreated, v.ID, "")
	case errors.As(err, &ve):
		return s.finish(ctx, r, store.RunError, "", "the session template is not valid any more: "+ve.Error())
	case errors.Is(err, session.ErrQuotaExceeded):
		return s.finish(ctx, r, store.RunSkippedQuota, "", "the API key was at its concurrent-session limit and the template says queue: false")
	case errors.Is(err, session.ErrIdempotencyMismatch):
		return s.finish(ctx, r, store.RunError, "", fmt.Sprintf("a session was created with the idempotency key %q by another request", key))
	case ctx.Err() != nil, errors.Is(err, session.ErrInFlight):
		// In flight: this process is creating the run's session (a
		// trigger repeated with its key while the first is at it).
		return err
	case r.Attempts+1 >= s.opts.MaxAttempts:
		return s.finish(ctx, r, store.RunError, "", fmt.Sprintf("the session could not be created after %d attempts: %v", r.Attempts+1, err))
	}
	return err
}

// finish records a run's outcome. A run another worker took over, or
// whose schedule was deleted, is left to that worker, or gone.
func (s *Scheduler) finish(ctx context.Context, r *store.ScheduleRun, status, sessionID, msg string) error {
	r.Status, r.SessionID, r.Error = status, sessionID, msg
	err := s.st.FinishScheduleRun(ctx, r, s.opts.Owner, s.opts.KeepRuns)
	if errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrScheduleRunNotFound) {
		return nil
	}
	return err
}

// stopGrace bounds what the worker still waits for of the store once its
// context ends (see Poll), as session.Manager's does once it stops.
const stopGrace = time.Second
