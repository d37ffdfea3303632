package schedule_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/workflowchat/service/shared/errs"
	"github.com/workflowchat/service/shared/schedule"
)

// TestParseAccepts lists expressions EventBridge Scheduler accepts, from
// its documentation and from expressions reported to work on AWS.
func TestParseAccepts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr string
		kind schedule.Kind
	}{
		{"rate(1 minute)", schedule.Rate},
		{"rate(5 minutes)", schedule.Rate},
		{"rate(1 hour)", schedule.Rate},
		{"rate(12 hours)", schedule.Rate},
		{"rate(1 day)", schedule.Rate},
		{"rate(7 days)", schedule.Rate},
		{"rate(36500 days)", schedule.Rate},
		{"cron(0 9 ? * MON-FRI *)", schedule.Cron},
		{"cron(* * * * ? *)", schedule.Cron},
		{"cron(0 10 * * ? *)", schedule.Cron},
		{"cron(15 12 * * ? *)", schedule.Cron},
		{"cron(0 18 ? * MON-FRI *)", schedule.Cron},
		{"cron(0 8 1 * ? *)", schedule.Cron},
		{"cron(0/15 * * * ? *)", schedule.Cron},
		{"cron(*/15 * * * ? *)", schedule.Cron},
		{"cron(0/10 * ? * MON-FRI *)", schedule.Cron},
		{"cron(0/5 8-17 ? * MON-FRI *)", schedule.Cron},
		{"cron(1/10 * * * ? *)", schedule.Cron},
		{"cron(0-15/1 8-8 ? * 2,3,4,5,6,7 *)", schedule.Cron},
		{"cron(30-30 13-13 ? * 2,4,6 *)", schedule.Cron},
		{"cron(1-31/30 1-1 ? * 1,7 *)", schedule.Cron},
		{"cron(0 12 * JAN,FEB,MAR ? 2030-2035)", schedule.Cron},
		{"cron(0 12 * jan-mar ? *)", schedule.Cron},
		{"cron(0 9 ? * mon-fri *)", schedule.Cron},
		{"cron(05 09 01 01 ? 2030)", schedule.Cron},
		{"cron(0 0 1/2 * ? *)", schedule.Cron},
		{"cron(0 0 * 1/3 ? 2026/2)", schedule.Cron},
		{"cron(0 9 ? * 3#2 *)", schedule.Cron},
		{"cron(0 9 ? * TUE#2 *)", schedule.Cron},
		{"cron(0 0 L * ? *)", schedule.Cron},
		{"cron(0 0 L-2 * ? *)", schedule.Cron},
		{"cron(0 0 LW * ? *)", schedule.Cron},
		{"cron(0 0 15W * ? *)", schedule.Cron},
		{"cron(0 0 ? * L *)", schedule.Cron},
		{"cron(0 0 ? * 6L *)", schedule.Cron},
		{"cron(0 0 ? * FRIL *)", schedule.Cron},
		{"cron(0 0 ? * * *)", schedule.Cron},
		{"at(2030-01-02T03:04:05)", schedule.At},
	} {
		s, err := schedule.Parse(tc.expr, "Europe/Paris")
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.expr, err)
			continue
		}
		if s.Kind() != tc.kind || s.String() != tc.expr || s.Timezone() != "Europe/Paris" {
			t.Errorf("Parse(%q) = kind %v, %q in %q", tc.expr, s.Kind(), s.String(), s.Timezone())
		}
	}
}

// TestParseRefuses lists expressions AWS refuses (or that this parser
// refuses as ambiguous), each with a part of the message it must give.
func TestParseRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ expr, want string }{
		{"", "is required"},
		{"every(5 minutes)", "is not rate"},
		{"Rate(5 minutes)", "is not rate"},
		{"rate 5 minutes", "is not rate"},
		{"rate(5 minutes", "is not rate"},
		{"rate(0 minutes)", "positive integer"},
		{"rate(-5 minutes)", "positive integer"},
		{"rate(05 minutes)", "positive integer"},
		{"rate(1.5 hours)", "positive integer"},
		{"rate(1 minutes)", "singular"},
		{"rate(1 days)", "singular"},
		{"rate(5 minute)", "plural"},
		{"rate(5 seconds)", "minutes, hours or days"},
		{"rate(5 weeks)", "minutes, hours or days"},
		{"rate(5  minutes)", "value unit"},
		{"rate( 5 minutes)", "value unit"},
		{"rate(5minutes)", "value unit"},
		{"rate(36501 days)", "at most 36500 days"},
		{"rate(999999999 minutes)", "at most"},
		{"rate(9999999999 minutes)", "positive integer"},
		{"cron(0 9 * * ?)", "six fields"},
		{"cron(0 9 * * ? * *)", "six fields"},
		{"cron(0  9 * * ? *)", "six fields"},
		{"cron( 0 9 * * ? *)", "six fields"},
		{"cron(0 9 ? * ? *)", "exactly one of day-of-month and day-of-week"},
		{"cron(0 9 * * * *)", "exactly one of day-of-month and day-of-week"},
		{"cron(0 9 1 * MON *)", "exactly one of day-of-month and day-of-week"},
		{"cron(60 9 * * ? *)", "minutes: 60 is out of range 0-59"},
		{"cron(0 24 * * ? *)", "hours: 24 is out of range 0-23"},
		{"cron(0 9 0 * ? *)", "day-of-month: 0 is out of range 1-31"},
		{"cron(0 9 32 * ? *)", "day-of-month: 32 is out of range 1-31"},
		{"cron(0 9 * 13 ? *)", "month: 13 is out of range 1-12"},
		{"cron(0 9 * 0 ? *)", "month: 0 is out of range 1-12"},
		{"cron(0 9 ? * 0 *)", "day-of-week: 0 is out of range 1-7"},
		{"cron(0 9 ? * 8 *)", "day-of-week: 8 is out of range 1-7"},
		{"cron(0 9 * * ? 1969)", "year: 1969 is out of range 1970-2199"},
		{"cron(0 9 * * ? 2200)", "year: 2200 is out of range 1970-2199"},
		{"cron(0 9 * * ? 2030-2020)", "does not wrap around"},
		{"cron(0 22-2 * * ? *)", "does not wrap around"},
		{"cron(0 9 ? * FRI-MON *)", "does not wrap around"},
		{"cron(0 9 ? * MON#6 *)", "n from 1 to 5"},
		{"cron(0 9 ? * MON#0 *)", "n from 1 to 5"},
		{"cron(0 9 ? * MON#1,FRI#2 *)", "stands alone"},
		{"cron(0 9 ? * 1-3#2 *)", "stands alone"},
		{"cron(0 9 L,15 * ? *)", "stands alone"},
		{"cron(0 9 1-LW * ? *)", "stands alone"},
		{"cron(0 9 ? * 6L,FRI *)", "stands alone"},
		{"cron(0 9 W * ? *)", "nW takes a day"},
		{"cron(0 9 32W * ? *)", "nW takes a day"},
		{"cron(0 9 L-31 * ? *)", "L-n takes n from 0 to 30"},
		{"cron(0 9 ? * 1-7/2 *)", "not allowed in day-of-week"},
		{"cron(0/0 * * * ? *)", "the step must be an integer from 1 to 60"},
		{"cron(0/61 * * * ? *)", "the step must be an integer from 1 to 60"},
		{"cron(? 9 * * ? *)", "minutes: \"?\" is not a number"},
		{"cron(0 9 ?,1 * ? *)", "stands alone"},
		{"cron(0 9 * FOO ? *)", "or a name JAN-DEC"},
		{"cron(0 9 ? * MONDAY *)", "or a name SUN-SAT"},
		{"cron(1,,2 * * * ? *)", "empty list item"},
		{"cron(a b c d e f)", "minutes: \"a\" is not a number"},
		{"cron(00000 9 * * ? *)", "is not a number"},
		{"cron(0 9 * * ? *) ", "is not rate"},
		{"at(2030-01-02 03:04:05)", "yyyy-mm-ddThh:mm:ss"},
		{"at(2030-1-2T03:04:05)", "yyyy-mm-ddThh:mm:ss"},
		{"at(2030-02-30T00:00:00)", "yyyy-mm-ddThh:mm:ss"},
		{"at(2030-01-02T03:04)", "yyyy-mm-ddThh:mm:ss"},
		{"at(1969-12-31T23:59:59)", "the year must be from 1970 to 2199"},
		{strings.Repeat("x", 257), "at most 256 characters"},
	} {
		_, err := schedule.Parse(tc.expr, "UTC")
		assertFieldError(t, tc.expr, err, schedule.FieldSchedule, tc.want)
	}
}

func TestParseTimezones(t *testing.T) {
	t.Parallel()
	for _, tz := range []string{"", "UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe", "Etc/GMT+5", "America/Argentina/Buenos_Aires"} {
		s, err := schedule.Parse("rate(5 minutes)", tz)
		if err != nil {
			t.Errorf("timezone %q: %v", tz, err)
			continue
		}
		want := tz
		if tz == "" {
			want = "UTC"
		}
		if s.Timezone() != want || s.Location() == nil {
			t.Errorf("timezone %q: got %q", tz, s.Timezone())
		}
	}
	for _, tc := range []struct{ tz, want string }{
		{"Mars/Olympus_Mons", "unknown time zone"},
		{"Local", "not an IANA time zone name"},
		{"../../etc/passwd", "not an IANA time zone name"},
		{"/usr/share/zoneinfo/UTC", "unknown time zone"},
		{"Europe/Paris ", "not an IANA time zone name"},
		{"europe paris", "not an IANA time zone name"},
		{strings.Repeat("A", 51), "at most 50 characters"},
	} {
		_, err := schedule.Parse("rate(5 minutes)", tc.tz)
		assertFieldError(t, tc.tz, err, schedule.FieldTimezone, tc.want)
	}
	// Both wrong: both named.
	_, err := schedule.Parse("rate(5 weeks)", "Nowhere/Town")
	var e *errs.Error
	if !errors.As(err, &e) || len(e.Details) != 2 || e.Details[0].Field != "timezone" || e.Details[1].Field != "schedule" {
		t.Errorf("both wrong: %v (%+v)", err, e)
	}
}

func assertFieldError(t *testing.T, input string, err error, field, want string) {
	t.Helper()
	var e *errs.Error
	if !errors.As(err, &e) {
		t.Errorf("%q: err = %v, want an Invalid error naming %s", input, err, field)
		return
	}
	if e.Kind != errs.Invalid || e.CodeOrDefault() != "VALIDATION_FAILED" || len(e.Details) != 1 || e.Details[0].Field != field {
		t.Errorf("%q: %v details %+v, want VALIDATION_FAILED naming %s", input, e, e.Details, field)
		return
	}
	if !strings.Contains(e.Details[0].Message, want) {
		t.Errorf("%q: message %q, want it to contain %q", input, e.Details[0].Message, want)
	}
}

func must(t *testing.T, expr, tz string) schedule.Schedule {
	t.Helper()
	s, err := schedule.Parse(expr, tz)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", expr, tz, err)
	}
	return s
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestNextRate(t *testing.T) {
	t.Parallel()
	start := utc("2026-03-07T17:00:00Z")
	for _, tc := range []struct {
		expr, tz, after, want string
	}{
		// The first fire is one period after the start.
		{"rate(5 minutes)", "UTC", "2026-03-07T17:00:00Z", "2026-03-07T17:05:00Z"},
		{"rate(5 minutes)", "UTC", "2026-03-07T16:00:00Z", "2026-03-07T17:05:00Z"},
		{"rate(5 minutes)", "UTC", "2026-03-07T17:04:59Z", "2026-03-07T17:05:00Z"},
		// Strictly after.
		{"rate(5 minutes)", "UTC", "2026-03-07T17:05:00Z", "2026-03-07T17:10:00Z"},
		{"rate(5 minutes)", "UTC", "2026-03-07T17:07:00Z", "2026-03-07T17:10:00Z"},
		{"rate(1 hour)", "UTC", "2026-03-08T01:00:00Z", "2026-03-08T02:00:00Z"},
		// A day is 24 hours of elapsed time, whatever the zone's clocks
		// do: across New York's spring forward (2026-03-08) the fire moves
		// from 12:00 EST to 13:00 EDT.
		{"rate(1 day)", "America/New_York", "2026-03-07T17:00:00Z", "2026-03-08T17:00:00Z"},
		{"rate(2 days)", "America/New_York", "2026-03-10T00:00:00Z", "2026-03-11T17:00:00Z"},
	} {
		got, ok := must(t, tc.expr, tc.tz).Next(start, utc(tc.after))
		if !ok || !got.Equal(utc(tc.want)) {
			t.Errorf("%s after %s = %v %v, want %s", tc.expr, tc.after, got.UTC(), ok, tc.want)
		}
	}
}

func TestNextCron(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, expr, tz, after, want string // want "" means never
	}{
		{"weekdays in Paris", "cron(0 9 ? * MON-FRI *)", "Europe/Paris", "2026-03-06T10:00:00+01:00", "2026-03-09T09:00:00+01:00"},
		{"strictly after a fire", "cron(0 9 ? * MON-FRI *)", "UTC", "2026-03-09T09:00:00Z", "2026-03-10T09:00:00Z"},
		{"seconds into a fire minute", "cron(* * * * ? *)", "UTC", "2026-03-09T09:00:30Z", "2026-03-09T09:01:00Z"},
		{"every minute", "cron(* * * * ? *)", "UTC", "2026-03-09T09:00:00Z", "2026-03-09T09:01:00Z"},
		{"step from a value", "cron(1/10 * * * ? *)", "UTC", "2026-03-09T09:02:00Z", "2026-03-09T09:11:00Z"},
		{"range with step", "cron(10-40/15 * * * ? *)", "UTC", "2026-03-09T09:26:00Z", "2026-03-09T09:40:00Z"},
		{"range with step wraps to the next hour", "cron(10-40/15 * * * ? *)", "UTC", "2026-03-09T09:41:00Z", "2026-03-09T10:10:00Z"},
		{"year end", "cron(0 0 1 JAN ? *)", "UTC", "2026-06-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{"second Tuesday", "cron(0 9 ? * 3#2 *)", "UTC", "2026-01-01T00:00:00Z", "2026-01-13T09:00:00Z"},
		{"fifth Friday skips months without one", "cron(0 9 ? * FRI#5 *)", "UTC", "2026-02-01T00:00:00Z", "2026-05-29T09:00:00Z"},
		{"last Friday", "cron(0 9 ? * 6L *)", "UTC", "2026-01-01T00:00:00Z", "2026-01-30T09:00:00Z"},
		{"L in day-of-week is Saturday", "cron(0 9 ? * L *)", "UTC", "2026-01-01T00:00:00Z", "2026-01-03T09:00:00Z"},
		{"last day of a leap February", "cron(0 0 L * ? *)", "UTC", "2028-02-02T00:00:00Z", "2028-02-29T00:00:00Z"},
		{"two days before the last", "cron(0 0 L-2 * ? *)", "UTC", "2026-02-02T00:00:00Z", "2026-02-26T00:00:00Z"},
		{"last weekday when the 31st is a Sunday", "cron(0 0 LW * ? *)", "UTC", "2026-05-02T00:00:00Z", "2026-05-29T00:00:00Z"},
		{"1W on a Sunday moves to Monday", "cron(0 0 1W * ? *)", "UTC", "2026-01-31T00:00:00Z", "2026-02-02T00:00:00Z"},
		{"1W on a Saturday moves forward, not into July", "cron(0 0 1W * ? *)", "UTC", "2026-07-29T00:00:00Z", "2026-08-03T00:00:00Z"},
		{"31W on a Sunday moves back", "cron(0 0 31W * ? *)", "UTC", "2026-05-01T00:00:00Z", "2026-05-29T00:00:00Z"},
		{"15W on a weekday stays", "cron(0 0 15W * ? *)", "UTC", "2026-04-01T00:00:00Z", "2026-04-15T00:00:00Z"},
		{"30W skips February", "cron(0 0 30W * ? *)", "UTC", "2026-01-31T00:00:00Z", "2026-03-30T00:00:00Z"},
		{"the 31st skips short months", "cron(0 0 31 * ? *)", "UTC", "2026-04-01T00:00:00Z", "2026-05-31T00:00:00Z"},
		{"year list", "cron(0 0 1 1 ? 2027,2029)", "UTC", "2027-01-01T00:00:00Z", "2029-01-01T00:00:00Z"},
		{"past years never fire", "cron(0 0 1 1 ? 2025)", "UTC", "2026-01-01T00:00:00Z", ""},
		{"no 30th of February", "cron(0 0 30 FEB ? *)", "UTC", "2026-01-01T00:00:00Z", ""},
		{"the last possible fire", "cron(59 23 31 DEC ? 2199)", "UTC", "2199-12-31T23:58:00Z", "2199-12-31T23:59:00Z"},
		{"nothing after the last year", "cron(59 23 31 DEC ? 2199)", "UTC", "2199-12-31T23:59:00Z", ""},
		{"from before 1970", "cron(0 0 1 1 ? 1970)", "UTC", "1969-06-01T00:00:00Z", "1970-01-01T00:00:00Z"},
		{"a half-hour zone", "cron(0 9 * * ? *)", "Asia/Kolkata", "2026-03-09T00:00:00Z", "2026-03-09T03:30:00Z"},

		// New York springs forward on 2026-03-08: 02:00 EST becomes 03:00
		// EDT; 02:xx does not exist that day and is skipped.
		{"spring forward skips the missing time", "cron(30 2 * * ? *)", "America/New_York", "2026-03-07T12:00:00-05:00", "2026-03-09T02:30:00-04:00"},
		{"spring forward: the fire before", "cron(30 2 * * ? *)", "America/New_York", "2026-03-06T12:00:00-05:00", "2026-03-07T02:30:00-05:00"},
		{"spring forward: every 15 minutes jumps the gap", "cron(0/15 * * * ? *)", "America/New_York", "2026-03-08T01:50:00-05:00", "2026-03-08T03:00:00-04:00"},
		{"spring forward: 03:00 happens", "cron(0 3 * * ? *)", "America/New_York", "2026-03-07T12:00:00-05:00", "2026-03-08T03:00:00-04:00"},
		// New York falls back on 2026-11-01: 02:00 EDT becomes 01:00 EST;
		// 01:xx happens twice and fires once, the first time.
		{"fall back: the first 01:30", "cron(30 1 * * ? *)", "America/New_York", "2026-10-31T12:00:00-04:00", "2026-11-01T01:30:00-04:00"},
		{"fall back: not the second 01:30", "cron(30 1 * * ? *)", "America/New_York", "2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"},
		{"fall back: every 30 minutes skips the repeated hour", "cron(0/30 * * * ? *)", "America/New_York", "2026-11-01T01:30:00-04:00", "2026-11-01T02:00:00-05:00"},
		{"fall back: from inside the repeated hour", "cron(0/30 * * * ? *)", "America/New_York", "2026-11-01T01:10:00-05:00", "2026-11-01T02:00:00-05:00"},
		{"fall back: 00:30 before it", "cron(30 0 * * ? *)", "America/New_York", "2026-10-31T12:00:00-04:00", "2026-11-01T00:30:00-04:00"},
		// Paris falls back on 2026-10-25 at 03:00 CEST -> 02:00 CET.
		{"fall back in Paris", "cron(30 2 * * ? *)", "Europe/Paris", "2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"},
		// Lord Howe shifts by 30 minutes (02:00 -> 02:30 on 2026-10-04).
		{"half-hour spring forward", "cron(15 2 * * ? *)", "Australia/Lord_Howe", "2026-10-03T12:00:00+10:30", "2026-10-05T02:15:00+11:00"},
	} {
		s := must(t, tc.expr, tc.tz)
		got, ok := s.Next(time.Time{}, utc(tc.after))
		if tc.want == "" {
			if ok {
				t.Errorf("%s: %s after %s = %v, want never", tc.name, tc.expr, tc.after, got)
			}
			continue
		}
		if !ok || !got.Equal(utc(tc.want)) {
			t.Errorf("%s: %s in %s after %s = %v %v, want %s", tc.name, tc.expr, tc.tz, tc.after, got.In(s.Location()), ok, tc.want)
			continue
		}
		if !s.Matches(got) {
			t.Errorf("%s: Next %v does not match", tc.name, got)
		}
	}
}

func TestNextAt(t *testing.T) {
	t.Parallel()
	s := must(t, "at(2030-01-02T03:04:05)", "Asia/Tokyo")
	if got, ok := s.Next(time.Time{}, utc("2029-01-01T00:00:00Z")); !ok || !got.Equal(utc("2030-01-01T18:04:05Z")) {
		t.Errorf("at: %v %v", got, ok)
	}
	if _, ok := s.Next(time.Time{}, utc("2030-01-01T18:04:05Z")); ok {
		t.Error("at fires again after its time")
	}
	// A time the zone's clocks skip never happens.
	gap := must(t, "at(2026-03-08T02:30:00)", "America/New_York")
	if got, ok := gap.Next(time.Time{}, utc("2026-01-01T00:00:00Z")); ok {
		t.Errorf("at in the spring-forward gap fires at %v", got)
	}
	// A repeated time happens at its first occurrence.
	twice := must(t, "at(2026-11-01T01:30:00)", "America/New_York")
	if got, ok := twice.Next(time.Time{}, utc("2026-01-01T00:00:00Z")); !ok || !got.Equal(utc("2026-11-01T05:30:00Z")) {
		t.Errorf("at in the fall-back hour: %v %v", got, ok)
	}
	if s.Matches(utc("2030-01-01T18:04:05Z")) {
		t.Error("only cron schedules match")
	}
}

// TestNextSequence walks a schedule through a year and checks each fire
// against a brute-force scan of every minute.
func TestNextSequence(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ expr, tz string }{
		{"cron(0/20 1-3 ? * SUN *)", "America/New_York"},
		{"cron(30 2 L * ? *)", "Europe/London"},
		{"cron(30 1 ? * 1L *)", "Europe/London"}, // last Sundays: 01:30 skipped in March, once in October
		{"cron(0 0 ? * 2#1 *)", "UTC"},
	} {
		s := must(t, tc.expr, tc.tz)
		from, to := utc("2026-01-01T00:00:00Z"), utc("2027-01-01T00:00:00Z")
		var want []time.Time
		seen := map[string]bool{}
		for m := from.Add(time.Minute); !m.After(to); m = m.Add(time.Minute) {
			if !s.Matches(m) {
				continue
			}
			wall := m.In(s.Location()).Format("2006-01-02T15:04")
			if !seen[wall] { // a repeated wall time fires once
				want = append(want, m)
			}
			seen[wall] = true
		}
		var got []time.Time
		for t0 := from; ; {
			n, ok := s.Next(time.Time{}, t0)
			if !ok || n.After(to) {
				break
			}
			got = append(got, n)
			t0 = n
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d fires, want %d", tc.expr, len(got), len(want))
		}
		for i := range got {
			if !got[i].Equal(want[i]) {
				t.Fatalf("%s: fire %d at %v, want %v", tc.expr, i, got[i], want[i])
			}
		}
	}
}
