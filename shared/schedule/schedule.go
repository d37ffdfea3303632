// Package schedule parses and evaluates the schedule expressions of
// Amazon EventBridge Scheduler, so that a trigger's schedule is refused
// here when AWS would refuse it and fires locally when AWS would fire it:
//
//   - rate(value unit): unit minute, hour or day when value is 1, minutes,
//     hours or days otherwise; value a positive integer without leading
//     zeros. A rate schedule fires every period, counted in elapsed time
//     (a day is 24 hours whatever the clocks do), the first time one
//     period after its start (the time it was set).
//   - cron(minutes hours day-of-month month day-of-week year): six fields
//     with the wildcards AWS documents (see cron.go), evaluated in the
//     schedule's time zone. Exactly one of day-of-month and day-of-week is
//     "?".
//   - at(yyyy-mm-ddThh:mm:ss): once, at that wall-clock time in the time
//     zone.
//
// Time zones are IANA names (the tz database is embedded, so the Lambda
// OS-only runtime, which has no /usr/share/zoneinfo, resolves them too).
// Daylight saving time is handled as EventBridge Scheduler documents it: a
// wall-clock time that does not exist (spring forward) is skipped, one
// that happens twice (fall back) fires once, at its first occurrence.
//
// No expression fires more often than once a minute: rate's smallest
// period is 1 minute and cron has no seconds field, so cron(* * * * ? *),
// every minute, is the most frequent schedule.
//
// Errors are Invalid (400 VALIDATION_FAILED) with a detail naming the
// field at fault: "schedule" or "timezone".
package schedule

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // IANA zones without a system tz database (Lambda's provided.al2023)

	"github.com/workflowchat/service/shared/errs"
)

// Bounds of the inputs, as EventBridge Scheduler bounds them.
const (
	// MaxExpressionLen is the longest schedule expression (ScheduleExpression).
	MaxExpressionLen = 256
	// MaxTimezoneLen is the longest time zone name (ScheduleExpressionTimezone).
	MaxTimezoneLen = 50
	// MaxRatePeriod bounds a rate's period, so that every fire time is a
	// representable instant.
	MaxRatePeriod = 100 * 365 * 24 * time.Hour
	// DefaultTimezone is the time zone of a schedule that names none.
	DefaultTimezone = "UTC"
)

// The fields errors name.
const (
	FieldSchedule = "schedule"
	FieldTimezone = "timezone"
)

// Kind is what an expression is.
type Kind uint8

// The kinds of expressions.
const (
	Rate Kind = iota + 1
	Cron
	At
)

// String returns the expression's keyword: rate, cron or at.
func (k Kind) String() string {
	switch k {
	case Rate:
		return "rate"
	case Cron:
		return "cron"
	case At:
		return "at"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Schedule is a parsed expression in its time zone. The zero value is not
// a schedule; use Parse.
type Schedule struct {
	expr   string
	tzName string
	loc    *time.Location
	kind   Kind
	period time.Duration // Rate
	cron   *cronSpec     // Cron
	at     wallTime      // At
}

// Parse parses expression in the IANA time zone timezone ("" is UTC). It
// fails with Invalid VALIDATION_FAILED whose details name "schedule" for a
// malformed expression and "timezone" for an unknown zone (both when both
// are wrong).
func Parse(expression, timezone string) (Schedule, error) {
	const op = "schedule.Parse"
	var bad errs.FieldErrors
	loc, tzName, err := LoadTimezone(timezone)
	if err != nil {
		bad.Add(FieldTimezone, "%s", err.Error())
	}
	s, err := parseExpression(expression)
	if err != nil {
		bad.Add(FieldSchedule, "%s", err.Error())
	}
	if len(bad) > 0 {
		return Schedule{}, bad.Err(op)
	}
	s.loc, s.tzName = loc, tzName
	return s, nil
}

// LoadTimezone resolves an IANA time zone name; "" is UTC. It fails for
// an unknown or over-long name, for "Local" (the server's zone, which
// means nothing to a user) and for anything that is not a zone name.
func LoadTimezone(name string) (*time.Location, string, error) {
	if name == "" {
		name = DefaultTimezone
	}
	if len(name) > MaxTimezoneLen {
		return nil, "", fmt.Errorf("must be an IANA time zone name of at most %d characters", MaxTimezoneLen)
	}
	for _, r := range name {
		if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '/' || r == '_' || r == '-' || r == '+') {
			return nil, "", fmt.Errorf("%q is not an IANA time zone name such as Europe/Paris", name)
		}
	}
	if name == "Local" {
		return nil, "", fmt.Errorf("%q is not an IANA time zone name such as Europe/Paris", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, "", fmt.Errorf("unknown time zone %q (an IANA name such as Europe/Paris or UTC)", name)
	}
	return loc, name, nil
}

// parseExpression parses the expression itself, without its zone.
func parseExpression(expr string) (Schedule, error) {
	if expr == "" {
		return Schedule{}, fmt.Errorf("is required: rate(value unit), cron(minutes hours day-of-month month day-of-week year) or at(yyyy-mm-ddThh:mm:ss)")
	}
	if len(expr) > MaxExpressionLen {
		return Schedule{}, fmt.Errorf("must be at most %d characters", MaxExpressionLen)
	}
	keyword, inner, ok := strings.Cut(expr, "(")
	if !ok || !strings.HasSuffix(inner, ")") {
		return Schedule{}, fmt.Errorf("%q is not rate(value unit), cron(minutes hours day-of-month month day-of-week year) or at(yyyy-mm-ddThh:mm:ss)", expr)
	}
	inner = strings.TrimSuffix(inner, ")")
	s := Schedule{expr: expr}
	var err error
	switch keyword {
	case "rate":
		s.kind = Rate
		s.period, err = parseRate(inner)
	case "cron":
		s.kind = Cron
		s.cron, err = parseCron(inner)
	case "at":
		s.kind = At
		s.at, err = parseAt(inner)
	default:
		return Schedule{}, fmt.Errorf("%q is not rate(value unit), cron(minutes hours day-of-month month day-of-week year) or at(yyyy-mm-ddThh:mm:ss)", expr)
	}
	if err != nil {
		return Schedule{}, fmt.Errorf("%s(...): %w", keyword, err)
	}
	return s, nil
}

// parseRate parses "value unit".
func parseRate(s string) (time.Duration, error) {
	value, unit, ok := strings.Cut(s, " ")
	if !ok || value == "" || unit == "" || strings.Contains(unit, " ") {
		return 0, fmt.Errorf("want \"value unit\", e.g. rate(5 minutes)")
	}
	if len(value) > 1 && value[0] == '0' || len(value) > 9 {
		return 0, fmt.Errorf("value %q must be a positive integer", value)
	}
	n, err := strconv.Atoi(value)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("value %q must be a positive integer", value)
	}
	var per time.Duration
	switch unit {
	case "minute", "minutes":
		per = time.Minute
	case "hour", "hours":
		per = time.Hour
	case "day", "days":
		per = 24 * time.Hour
	default:
		return 0, fmt.Errorf("unit %q must be minutes, hours or days", unit)
	}
	plural := strings.HasSuffix(unit, "s")
	if n == 1 && plural {
		return 0, fmt.Errorf("with value 1 the unit is singular: rate(1 %s)", strings.TrimSuffix(unit, "s"))
	}
	if n > 1 && !plural {
		return 0, fmt.Errorf("with a value above 1 the unit is plural: rate(%d %ss)", n, unit)
	}
	if time.Duration(n) > MaxRatePeriod/per {
		return 0, fmt.Errorf("the period must be at most %d days", int(MaxRatePeriod/(24*time.Hour)))
	}
	return time.Duration(n) * per, nil
}

// parseAt parses "yyyy-mm-ddThh:mm:ss".
func parseAt(s string) (wallTime, error) {
	t, err := time.Parse("2006-01-02T15:04:05", s)
	if err != nil || t.Format("2006-01-02T15:04:05") != s {
		return wallTime{}, fmt.Errorf("%q is not a date and time yyyy-mm-ddThh:mm:ss", s)
	}
	if t.Year() < minYear || t.Year() > maxYear {
		return wallTime{}, fmt.Errorf("the year must be from %d to %d", minYear, maxYear)
	}
	return wallTime{year: t.Year(), month: t.Month(), day: t.Day(), hour: t.Hour(), minute: t.Minute(), second: t.Second()}, nil
}

// String returns the expression as given.
func (s Schedule) String() string { return s.expr }

// Timezone returns the time zone's name ("UTC" when none was given).
func (s Schedule) Timezone() string { return s.tzName }

// Location returns the time zone.
func (s Schedule) Location() *time.Location { return s.loc }

// Kind returns what the expression is.
func (s Schedule) Kind() Kind { return s.kind }

// Period returns a rate schedule's period; 0 for the other kinds.
func (s Schedule) Period() time.Duration { return s.period }

// Next returns the first fire time strictly after after, and false when
// the schedule never fires again. start is when the schedule was set:
// a rate schedule fires at start + k·period for k >= 1; the other kinds
// ignore it.
func (s Schedule) Next(start, after time.Time) (time.Time, bool) {
	switch s.kind {
	case Rate:
		first := start.Add(s.period)
		if after.Before(first) {
			return first, true
		}
		k := after.Sub(start)/s.period + 1
		return start.Add(k * s.period), true
	case Cron:
		return s.cron.next(after, s.loc)
	case At:
		t, ok := s.at.resolve(s.loc)
		if !ok || !t.After(after) {
			return time.Time{}, false
		}
		return t, true
	}
	return time.Time{}, false
}

// Matches reports whether a cron schedule fires at t (a whole minute, as
// read in its time zone). Only cron schedules match anything.
func (s Schedule) Matches(t time.Time) bool {
	if s.kind != Cron {
		return false
	}
	lt := t.In(s.loc)
	return lt.Second() == 0 && lt.Nanosecond() == 0 && s.cron.matchesWall(lt.Year(), lt.Month(), lt.Day(), lt.Hour(), lt.Minute())
}

// wallTime is a time as read on the clocks of a zone, without the zone.
type wallTime struct {
	year                      int
	month                     time.Month
	day, hour, minute, second int
}

// resolve returns the instant at which the clocks of loc read w: the
// earlier of two when w happens twice (fall back), false when it never
// happens (spring forward).
func (w wallTime) resolve(loc *time.Location) (time.Time, bool) {
	asUTC := time.Date(w.year, w.month, w.day, w.hour, w.minute, w.second, 0, time.UTC)
	var best time.Time
	found := false
	// Every offset in effect within a day of w; a zone changes its offset
	// at most once a day.
	for _, probe := range []time.Duration{-24 * time.Hour, 0, 24 * time.Hour} {
		_, off := asUTC.Add(probe).In(loc).Zone()
		cand := asUTC.Add(-time.Duration(off) * time.Second)
		lc := cand.In(loc)
		if lc.Year() != w.year || lc.Month() != w.month || lc.Day() != w.day || lc.Hour() != w.hour || lc.Minute() != w.minute || lc.Second() != w.second {
			continue
		}
		if !found || cand.Before(best) {
			best, found = cand, true
		}
	}
	return best, found
}
