package schedule_test

import (
	"testing"
	"time"

	"github.com/workflowchat/service/shared/schedule"
)

// FuzzParse checks that Parse never panics and that every schedule it
// accepts behaves: the expression round-trips, Next terminates with a time
// strictly after its argument, a cron schedule matches the minute Next
// returns and no minute before it (within two days, wall times that repeat
// firing once), and a rate schedule fires on its period's grid.
func FuzzParse(f *testing.F) {
	for _, seed := range []struct {
		expr, tz string
		after    int64
	}{
		{"rate(5 minutes)", "UTC", 1772902800},
		{"rate(1 day)", "America/New_York", 1772902800},
		{"cron(0 9 ? * MON-FRI *)", "Europe/Paris", 1772902800},
		{"cron(0/15 * * * ? *)", "America/New_York", 1772952600},
		{"cron(30 1 * * ? *)", "America/New_York", 1793510000},
		{"cron(0 0 L-2 * ? 2026-2030)", "UTC", 0},
		{"cron(0 0 LW * ? *)", "Asia/Kolkata", 1772902800},
		{"cron(0 0 15W * ? *)", "UTC", 1772902800},
		{"cron(0 9 ? * 3#2 *)", "UTC", 1772902800},
		{"cron(0 9 ? * 6L *)", "Australia/Lord_Howe", 1772902800},
		{"cron(1-31/30 1-1 ? * 1,7 *)", "UTC", 1772902800},
		{"at(2030-01-02T03:04:05)", "Asia/Tokyo", 1772902800},
		{"cron(0 0 30 FEB ? *)", "UTC", 1772902800},
		{"cron(0 22-2 * * ? *)", "UTC", 0},
		{"rate(0 minutes)", "Nowhere", 0},
	} {
		f.Add(seed.expr, seed.tz, seed.after)
	}
	f.Fuzz(func(t *testing.T, expr, tz string, afterUnix int64) {
		s, err := schedule.Parse(expr, tz)
		if err != nil {
			return
		}
		if s.String() != expr {
			t.Fatalf("String() = %q, want %q", s.String(), expr)
		}
		// Keep after within the years a schedule can name.
		after := time.Unix(afterUnix%(200*365*86400), 0).UTC()
		if after.Year() < 1970 {
			after = after.AddDate(1970-after.Year(), 0, 0)
		}
		start := after.Add(-time.Hour)
		next, ok := s.Next(start, after)
		if !ok {
			if s.Kind() == schedule.Rate {
				t.Fatalf("%s: a rate schedule always fires again", expr)
			}
			return
		}
		if !next.After(after) {
			t.Fatalf("%s: Next(%v) = %v, not after", expr, after, next)
		}
		switch s.Kind() {
		case schedule.Rate:
			if d := next.Sub(start); d%s.Period() != 0 || d <= 0 || next.Sub(after) > s.Period() {
				t.Fatalf("%s: Next(%v) = %v, off the grid from %v", expr, after, next, start)
			}
		case schedule.Cron:
			if !s.Matches(next) {
				t.Fatalf("%s in %s: Next(%v) = %v, which it does not match", expr, tz, after, next)
			}
			// Brute force: no earlier minute fires (a wall time seen
			// before, at a repeated hour, does not fire again).
			limit := after.Add(48 * time.Hour)
			if next.Before(limit) {
				limit = next
			}
			seen := map[string]bool{}
			for m := after.Truncate(time.Minute).Add(-2 * time.Hour); m.Before(limit); m = m.Add(time.Minute) {
				if !s.Matches(m) {
					continue
				}
				wall := m.In(s.Location()).Format("2006-01-02T15:04")
				if m.After(after) && !seen[wall] {
					t.Fatalf("%s in %s: Next(%v) = %v, but %v fires earlier", expr, tz, after, next, m)
				}
				seen[wall] = true
			}
		}
	})
}
