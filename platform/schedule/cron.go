package schedule

import (
	"errors"
	"fmt"
	"github.com/hrns-dev/hrns/api"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
)

// Timing is when a schedule fires: [api.ScheduleTiming], a cron
// expression evaluated in an IANA time zone.
type Timing = api.ScheduleTiming

// Limits of a timing's fields.
const (
	maxExpressionLen = 255
	maxTimezoneLen   = 64
)

// parser reads the standard five fields and the descriptors. @every is
// refused after parsing: it is an interval, not a calendar.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// cadence is a parsed timing.
type cadence struct {
	spec *cron.SpecSchedule
	loc  *time.Location
}

// errNever: an expression that matches no time in the next five years
// (robfig/cron's horizon), such as "0 0 30 2 *".
var errNever = errors.New("the expression matches no time in the next five years")

// parseTiming validates t and returns its cadence. Errors name the field
// that is wrong ("expression", "timezone" or "type") with a message for
// the caller.
func parseTiming(t *Timing) (*cadence, string, error) {
	if t.Type != "" && t.Type != "cron" {
		return nil, "type", fmt.Errorf("the only timing type is 'cron', not %q", t.Type)
	}
	tz := t.Timezone
	switch {
	case tz == "":
		return nil, "timezone", errors.New("a time zone is required (an IANA name such as 'Europe/Paris', or 'UTC')")
	case len(tz) > maxTimezoneLen:
		return nil, "timezone", fmt.Errorf("the time zone name is longer than %d bytes", maxTimezoneLen)
	case tz == "Local" || strings.ContainsAny(tz, "\\\x00") || strings.HasPrefix(tz, "/") || strings.Contains(tz, ".."):
		return nil, "timezone", fmt.Errorf("unknown time zone %q (an IANA name such as 'Europe/Paris', or 'UTC')", tz)
	}
	loc, err := loadLocation(tz)
	if err != nil {
		return nil, "timezone", fmt.Errorf("unknown time zone %q (an IANA name such as 'Europe/Paris', or 'UTC')", tz)
	}
	expr := strings.TrimSpace(t.Expression)
	switch {
	case expr == "":
		return nil, "expression", errors.New("a cron expression is required, such as '0 9 * * 1-5'")
	case len(expr) > maxExpressionLen:
		return nil, "expression", fmt.Errorf("the expression is longer than %d bytes", maxExpressionLen)
	case strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ="):
		return nil, "expression", errors.New("the time zone goes in the timing's timezone field, not in the expression")
	case strings.HasPrefix(expr, "@every"):
		return nil, "expression", errors.New("@every is an interval, not a calendar: write it as five cron fields")
	}
	sched, err := parser.Parse(expr)
	if err != nil {
		return nil, "expression", fmt.Errorf("invalid cron expression %q: %v (five fields: minute hour day-of-month month day-of-week)", expr, err)
	}
	spec, ok := sched.(*cron.SpecSchedule)
	if !ok {
		return nil, "expression", fmt.Errorf("invalid cron expression %q", expr)
	}
	spec.Location = loc
	return &cadence{spec: spec, loc: loc}, "", nil
}

// zones caches the zones loaded: time.LoadLocation reads the zone's file
// each time, and listings render every schedule's ticks. Only names that
// load are kept, so the cache is bounded by the zone database.
var zones sync.Map // name -> *time.Location

func loadLocation(name string) (*time.Location, error) {
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	zones.Store(name, loc)
	return loc, nil
}

// next returns the first tick strictly after t, in the schedule's zone,
// or the zero time when there is none within five years.
//
// When the zone's clocks go back, the wall-clock times of the hour that
// repeats happen twice; robfig/cron matches both. A wall-clock time fires
// once, at its first occurrence: the second is passed over.
func (c *cadence) next(t time.Time) time.Time {
	for range 4 { // at most one repeat per transition; bounded anyway
		n := c.spec.Next(t)
		if n.IsZero() || !c.repeated(n) {
			return n.In(c.loc)
		}
		t = n
	}
	return time.Time{}
}

// repeated reports whether n's wall-clock time happened earlier, before
// the zone's clocks went back.
func (c *cadence) repeated(n time.Time) bool {
	local := n.In(c.loc)
	_, now := local.Zone()
	_, before := n.Add(-3 * time.Hour).In(c.loc).Zone()
	if before <= now {
		return false
	}
	first := n.Add(-time.Duration(before-now) * time.Second).In(c.loc)
	y1, m1, d1 := first.Date()
	y2, m2, d2 := local.Date()
	return y1 == y2 && m1 == m2 && d1 == d2 && first.Hour() == local.Hour() && first.Minute() == local.Minute()
}

// maxCounted bounds the ticks counted when catching up: beyond it, the
// skipped count says "at least this many".
const maxCounted = 10000

// catchUp applies the missed-tick policy to a schedule whose next tick,
// due, is at or before now: it returns the tick to fire (the latest at or
// before now) and how many earlier ticks it passes over (counted up to
// maxCounted).
func (c *cadence) catchUp(due, now time.Time) (tick time.Time, skipped int) {
	tick = due
	for skipped < maxCounted {
		n := c.next(tick)
		if n.IsZero() || n.After(now) {
			return tick, skipped
		}
		tick, skipped = n, skipped+1
	}
	// Too many to walk: look back from now in growing windows for a tick,
	// then walk to the latest one.
	for back := time.Minute; back < now.Sub(tick); back *= 2 {
		if n := c.next(now.Add(-back)); !n.IsZero() && !n.After(now) {
			tick = n
			break
		}
	}
	for range maxCounted {
		n := c.next(tick)
		if n.IsZero() || n.After(now) {
			break
		}
		tick = n
	}
	return tick, skipped
}

// upcoming returns up to n ticks from first on (first included).
func (c *cadence) upcoming(first time.Time, n int) []time.Time {
	out := []time.Time{}
	for t := first; !t.IsZero() && len(out) < n; t = c.next(t) {
		out = append(out, t.In(c.loc))
	}
	return out
}
