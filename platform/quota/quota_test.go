package quota_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hrns-dev/hrns/platform/quota"
	"github.com/hrns-dev/hrns/session"
)

// TestWindows: a day or a month in UTC, whatever the clock's zone; a nil
// *Tokens, or an unknown period, counts per month without a limit.
func TestWindows(t *testing.T) {
	now := time.Date(2026, 3, 31, 23, 30, 0, 0, time.FixedZone("x", -2*3600)) // April 1st, 01:30 UTC
	clock := func() time.Time { return now }
	for _, tt := range []struct {
		q          *quota.Tokens
		period     string
		start, end time.Time
		limit      int64
	}{
		{&quota.Tokens{Limit: 5, Period: quota.PeriodDay, Now: clock}, "day", time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 4, 2, 0, 0, 0, 0, time.UTC), 5},
		{&quota.Tokens{Limit: 5, Period: quota.PeriodMonth, Now: clock}, "month", time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), 5},
		{&quota.Tokens{Limit: -1, Period: "week", Now: clock}, "month", time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), 0},
	} {
		period, start, end := tt.q.Window()
		if period != tt.period || !start.Equal(tt.start) || !end.Equal(tt.end) || tt.q.TokenLimit() != tt.limit {
			t.Errorf("%+v: %s %v-%v limit %d; want %s %v-%v limit %d", tt.q, period, start, end, tt.q.TokenLimit(), tt.period, tt.start, tt.end, tt.limit)
		}
	}
	var none *quota.Tokens
	if period, _, _ := none.Window(); period != "month" || none.TokenLimit() != 0 {
		t.Errorf("nil *Tokens: %s, limit %d", period, none.TokenLimit())
	}
}

// TestExceeded: the refusal says the use, the limit and the window's end,
// and matches session.ErrTokenQuotaExceeded, which the runtime and the
// server recognise.
func TestExceeded(t *testing.T) {
	q := &quota.Tokens{Limit: 1000, Period: quota.PeriodDay}
	end := time.Date(2026, 4, 2, 0, 0, 0, 0, time.UTC)
	err := q.Exceeded(1100, end)
	var qe *quota.Error
	if !errors.As(err, &qe) || !errors.Is(err, session.ErrTokenQuotaExceeded) || qe.Used != 1100 || qe.Limit != 1000 || !qe.WindowEnd.Equal(end) {
		t.Fatalf("Exceeded = %#v", err)
	}
	if !strings.Contains(err.Error(), "used 1100 of its 1000 tokens") || !strings.Contains(err.Error(), "2026-04-02T00:00:00Z") {
		t.Errorf("Error() = %q", err)
	}
}
