package schedule

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func mustCadence(t *testing.T, expr, tz string) *cadence {
	t.Helper()
	c, field, err := parseTiming(&Timing{Expression: expr, Timezone: tz})
	if err != nil {
		t.Fatalf("parseTiming(%q, %q): %s: %v", expr, tz, field, err)
	}
	return c
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func instants(ts []time.Time) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Format(time.RFC3339))
	}
	return out
}

// TestTicksAcrossDST: ticks are instants computed in the zone; around the
// zone's transitions a missing wall-clock time does not fire that day and
// a repeated one fires once.
func TestTicksAcrossDST(t *testing.T) {
	for _, tt := range []struct {
		name, expr, tz, from string
		want                 []string
	}{
		{"daily 09:00 keeps local time across spring forward", "0 9 * * *", "Europe/Paris", "2026-03-27T12:00:00Z",
			[]string{"2026-03-28T09:00:00+01:00", "2026-03-29T09:00:00+02:00", "2026-03-30T09:00:00+02:00"}},
		{"daily 09:00 keeps local time across fall back", "0 9 * * *", "Europe/Paris", "2026-10-24T00:00:00Z",
			[]string{"2026-10-24T09:00:00+02:00", "2026-10-25T09:00:00+01:00", "2026-10-26T09:00:00+01:00"}},
		{"02:30 does not exist on the spring-forward day", "30 2 * * *", "Europe/Paris", "2026-03-27T12:00:00Z",
			[]string{"2026-03-28T02:30:00+01:00", "2026-03-30T02:30:00+02:00", "2026-03-31T02:30:00+02:00"}},
		{"02:30 happens twice on the fall-back day and fires once", "30 2 * * *", "Europe/Paris", "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00", "2026-10-27T02:30:00+01:00"}},
		{"half-hourly through the repeated hour", "*/30 * * * *", "Europe/Paris", "2026-10-24T23:15:00Z",
			[]string{"2026-10-25T01:30:00+02:00", "2026-10-25T02:00:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-25T03:00:00+01:00", "2026-10-25T03:30:00+01:00"}},
		{"weekdays at 09:00 in Tokyo", "0 9 * * 1-5", "Asia/Tokyo", "2026-06-05T01:00:00Z",
			[]string{"2026-06-08T09:00:00+09:00", "2026-06-09T09:00:00+09:00"}},
		{"descriptor", "@daily", "UTC", "2026-06-05T01:00:00Z",
			[]string{"2026-06-06T00:00:00Z", "2026-06-07T00:00:00Z"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCadence(t, tt.expr, tt.tz)
			got := c.upcoming(c.next(utc(tt.from)), len(tt.want))
			if diff := cmp.Diff(tt.want, instants(got)); diff != "" {
				t.Errorf("ticks after %s (-want +got):\n%s", tt.from, diff)
			}
		})
	}
}

// TestNewYorkSpringForward: 02:30 does not exist on 2026-03-08 in New
// York; the day's tick is skipped, the next day's is at the new offset.
func TestNewYorkSpringForward(t *testing.T) {
	c := mustCadence(t, "30 2 * * *", "America/New_York")
	got := instants(c.upcoming(c.next(utc("2026-03-07T12:00:00Z")), 2))
	want := []string{"2026-03-09T02:30:00-04:00", "2026-03-10T02:30:00-04:00"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestCatchUp(t *testing.T) {
	for _, tt := range []struct {
		name, expr, due, now string
		tick                 string
		skipped              int
	}{
		{"on time", "*/15 * * * *", "2026-06-01T10:00:00Z", "2026-06-01T10:00:03Z", "2026-06-01T10:00:00Z", 0},
		{"three hours down", "*/15 * * * *", "2026-06-01T10:00:00Z", "2026-06-01T13:05:00Z", "2026-06-01T13:00:00Z", 12},
		{"down exactly to a tick", "0 * * * *", "2026-06-01T10:00:00Z", "2026-06-01T12:00:00Z", "2026-06-01T12:00:00Z", 2},
		// A year of minutes: more than maxCounted; the latest tick is still
		// found, and the count saturates.
		{"a year down, every minute", "* * * * *", "2025-06-01T10:00:00Z", "2026-06-01T10:00:30Z", "2026-06-01T10:00:00Z", maxCounted},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCadence(t, tt.expr, "UTC")
			tick, skipped := c.catchUp(utc(tt.due), utc(tt.now))
			if !tick.Equal(utc(tt.tick)) || skipped != tt.skipped {
				t.Errorf("catchUp = %v, %d; want %s, %d", tick, skipped, tt.tick, tt.skipped)
			}
		})
	}
}

func TestParseTimingErrors(t *testing.T) {
	for _, tt := range []struct {
		expr, tz, field string
	}{
		{"0 9 * * *", "", "timezone"},
		{"0 9 * * *", "Mars/Olympus", "timezone"},
		{"0 9 * * *", "Local", "timezone"},
		{"0 9 * * *", "../../etc/passwd", "timezone"},
		{"0 9 * * *", "/etc/localtime", "timezone"},
		{"", "UTC", "expression"},
		{"61 * * * *", "UTC", "expression"},
		{"0 9 * *", "UTC", "expression"},
		{"0 0 9 * * *", "UTC", "expression"},
		{"@every 5m", "UTC", "expression"},
		{"TZ=UTC 0 9 * * *", "UTC", "expression"},
		{"CRON_TZ=Europe/Paris 0 9 * * *", "UTC", "expression"},
		{"not cron at all", "UTC", "expression"},
	} {
		_, field, err := parseTiming(&Timing{Expression: tt.expr, Timezone: tt.tz})
		if err == nil || field != tt.field {
			t.Errorf("parseTiming(%q, %q) = %s, %v; want an error of %s", tt.expr, tt.tz, field, err, tt.field)
		}
	}
	if _, field, err := parseTiming(&Timing{Type: "interval", Expression: "0 9 * * *", Timezone: "UTC"}); err == nil || field != "type" {
		t.Errorf("type interval: %s, %v", field, err)
	}
}

// FuzzParseTiming: any expression and zone is refused or gives a cadence
// whose ticks move forward.
func FuzzParseTiming(f *testing.F) {
	for _, s := range []string{"0 9 * * 1-5", "*/5 * * * *", "@hourly", "0 0 30 2 *", "5-2/0 * * * *", "* * * * 8"} {
		f.Add(s, "Europe/Paris")
	}
	from := utc("2026-06-01T00:00:00Z")
	f.Fuzz(func(t *testing.T, expr, tz string) {
		c, _, err := parseTiming(&Timing{Expression: expr, Timezone: tz})
		if err != nil {
			return
		}
		prev := from
		for _, tick := range c.upcoming(c.next(from), 3) {
			if !tick.After(prev) {
				t.Fatalf("%q in %q: tick %v not after %v", expr, tz, tick, prev)
			}
			prev = tick
		}
	})
}
