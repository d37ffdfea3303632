package schedule

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// The cron fields, as EventBridge documents them:
//
//	field         values           wildcards
//	minutes       0-59             , - * /
//	hours         0-23             , - * /
//	day-of-month  1-31             , - * ? / L W
//	month         1-12 or JAN-DEC  , - * /
//	day-of-week   1-7 or SUN-SAT   , - * ? L #
//	year          1970-2199        , - * /
//
// with these meanings and rules:
//
//   - "a,b" lists, "a-b" is a range (a must not be after b: a range never
//     wraps around), "*" is every value, "x/n" steps by n from x (x is *,
//     a value, or a range) up to the field's last value or the range's end.
//   - "?" is "any" and only stands alone in day-of-month or day-of-week;
//     exactly one of those two fields is "?".
//   - Day-of-month: "L" is the month's last day, "L-n" n days before it,
//     "LW" its last weekday (Monday to Friday), "nW" the weekday nearest
//     to day n within the month (Saturday moves to Friday, Sunday to
//     Monday, never across the month's ends).
//   - Day-of-week (SUN is 1, SAT is 7): "L" alone is Saturday, "xL" the
//     month's last day x, "x#n" its n-th day x (n from 1 to 5).
//   - L, W and # stand alone in their field (no lists or ranges with
//     them), and the step "/" is not a day-of-week wildcard.
//   - Month and day names are case-insensitive; numbers may have leading
//     zeros.

const (
	minYear = 1970
	maxYear = 2199
)

// cronSpec is a parsed cron expression: a set per field, and the day
// fields' special forms.
type cronSpec struct {
	minutes uint64 // bits 0-59
	hours   uint32 // bits 0-23
	months  uint16 // bits 1-12
	years   [4]uint64
	dom     dayOfMonth
	dow     dayOfWeek
}

type domKind uint8

const (
	domAny            domKind = iota // ?
	domSet                           // values, ranges, steps, *
	domLast                          // L, L-n
	domLastWeekday                   // LW
	domNearestWeekday                // nW
)

type dayOfMonth struct {
	kind domKind
	days uint32 // domSet: bits 1-31
	n    int    // domLast: the offset; domNearestWeekday: the day
}

type dowKind uint8

const (
	dowAny    dowKind = iota // ?
	dowSet                   // values, ranges, *, L alone (Saturday)
	dowLastOf                // xL
	dowNth                   // x#n
)

type dayOfWeek struct {
	kind dowKind
	days uint8 // dowSet: bits 0-6, time.Weekday
	day  time.Weekday
	n    int
}

// field describes one cron field's values.
type field struct {
	name     string
	min, max int
	names    []string // names[i] is value min+i, when the field has names
}

var (
	minuteField = field{name: "minutes", min: 0, max: 59}
	hourField   = field{name: "hours", min: 0, max: 23}
	domField    = field{name: "day-of-month", min: 1, max: 31}
	monthField  = field{name: "month", min: 1, max: 12, names: []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}}
	dowField    = field{name: "day-of-week", min: 1, max: 7, names: []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}}
	yearField   = field{name: "year", min: minYear, max: maxYear}
)

// parseCron parses the six fields between "cron(" and ")".
func parseCron(s string) (*cronSpec, error) {
	parts := strings.Split(s, " ")
	if len(parts) != 6 {
		return nil, fmt.Errorf("want six fields separated by single spaces (minutes hours day-of-month month day-of-week year), got %d", len(parts))
	}
	c := &cronSpec{}
	var err error
	if c.minutes, err = minuteField.parseMask(parts[0]); err != nil {
		return nil, err
	}
	var m uint64
	if m, err = hourField.parseMask(parts[1]); err != nil {
		return nil, err
	}
	c.hours = uint32(m)
	if c.dom, err = parseDayOfMonth(parts[2]); err != nil {
		return nil, err
	}
	if m, err = monthField.parseMask(parts[3]); err != nil {
		return nil, err
	}
	c.months = uint16(m)
	if c.dow, err = parseDayOfWeek(parts[4]); err != nil {
		return nil, err
	}
	err = yearField.parseSet(parts[5], true, func(y int) {
		i := y - minYear
		c.years[i/64] |= 1 << (i % 64)
	})
	if err != nil {
		return nil, err
	}
	if (c.dom.kind == domAny) == (c.dow.kind == dowAny) {
		return nil, fmt.Errorf("exactly one of day-of-month and day-of-week must be \"?\" (e.g. cron(0 9 ? * MON-FRI *) or cron(0 9 1 * ? *))")
	}
	return c, nil
}

// parseMask parses a field whose values are below 64 into a mask whose
// bit v is value v.
func (f field) parseMask(s string) (uint64, error) {
	var m uint64
	err := f.parseSet(s, true, func(v int) { m |= 1 << v })
	return m, err
}

// parseSet parses a list of values, ranges, steps (when steps is true) and
// *, calling add for each value it names.
func (f field) parseSet(s string, steps bool, add func(int)) error {
	if s == "" {
		return fmt.Errorf("%s: empty field", f.name)
	}
	for _, item := range strings.Split(s, ",") {
		if err := f.parseItem(item, steps, add); err != nil {
			return err
		}
	}
	return nil
}

// parseItem parses one list item, calling add for each of its values.
func (f field) parseItem(item string, steps bool, add func(int)) error {
	if item == "" {
		return fmt.Errorf("%s: empty list item", f.name)
	}
	base, stepStr, hasStep := strings.Cut(item, "/")
	if hasStep && !steps {
		return fmt.Errorf("%s: %q: the step \"/\" is not allowed in %s", f.name, item, f.name)
	}
	lo, hi := f.min, f.max
	switch {
	case base == "*":
	case strings.Contains(base, "-"):
		a, b, _ := strings.Cut(base, "-")
		var err error
		if lo, err = f.value(a); err != nil {
			return err
		}
		if hi, err = f.value(b); err != nil {
			return err
		}
		if lo > hi {
			return fmt.Errorf("%s: range %q: the start is after the end (a range does not wrap around; write two ranges)", f.name, base)
		}
	default:
		v, err := f.value(base)
		if err != nil {
			return err
		}
		lo, hi = v, v
		if hasStep {
			hi = f.max
		}
	}
	step := 1
	if hasStep {
		n, err := number(stepStr)
		if err != nil || n < 1 || n > f.max-f.min+1 {
			return fmt.Errorf("%s: %q: the step must be an integer from 1 to %d", f.name, item, f.max-f.min+1)
		}
		step = n
	}
	for v := lo; v <= hi; v += step {
		add(v)
	}
	return nil
}

// value parses one value of f: a number in range or, for month and
// day-of-week, a name.
func (f field) value(s string) (int, error) {
	for i, n := range f.names {
		if strings.EqualFold(s, n) {
			return f.min + i, nil
		}
	}
	n, err := number(s)
	if err != nil {
		if f.names != nil {
			return 0, fmt.Errorf("%s: %q is not a number from %d to %d or a name %s-%s", f.name, s, f.min, f.max, f.names[0], f.names[len(f.names)-1])
		}
		return 0, fmt.Errorf("%s: %q is not a number from %d to %d", f.name, s, f.min, f.max)
	}
	if n < f.min || n > f.max {
		return 0, fmt.Errorf("%s: %d is out of range %d-%d", f.name, n, f.min, f.max)
	}
	return n, nil
}

// number parses a decimal of at most 4 digits (leading zeros allowed).
func number(s string) (int, error) {
	if s == "" || len(s) > 4 {
		return 0, fmt.Errorf("not a number")
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("not a number")
		}
	}
	return strconv.Atoi(s)
}

// alone reports the error of a special form that does not stand alone.
func alone(f field, s, form string) error {
	return fmt.Errorf("%s: %q: %s stands alone in its field (no lists or ranges with it)", f.name, s, form)
}

func parseDayOfMonth(s string) (dayOfMonth, error) {
	f := domField
	switch {
	case s == "?":
		return dayOfMonth{kind: domAny}, nil
	case s == "L":
		return dayOfMonth{kind: domLast}, nil
	case s == "LW":
		return dayOfMonth{kind: domLastWeekday}, nil
	case strings.HasPrefix(s, "L-"):
		n, err := number(s[2:])
		if err != nil || n > 30 {
			return dayOfMonth{}, fmt.Errorf("%s: %q: L-n takes n from 0 to 30", f.name, s)
		}
		return dayOfMonth{kind: domLast, n: n}, nil
	case strings.HasSuffix(s, "W") && !strings.ContainsAny(s, ",-/*"):
		n, err := f.value(strings.TrimSuffix(s, "W"))
		if err != nil {
			return dayOfMonth{}, fmt.Errorf("%s: %q: nW takes a day n from 1 to 31", f.name, s)
		}
		return dayOfMonth{kind: domNearestWeekday, n: n}, nil
	case strings.ContainsAny(s, "LW"):
		return dayOfMonth{}, alone(f, s, "L or W")
	case strings.Contains(s, "?"):
		return dayOfMonth{}, fmt.Errorf("%s: %q: \"?\" stands alone in its field", f.name, s)
	}
	m, err := f.parseMask(s)
	if err != nil {
		return dayOfMonth{}, err
	}
	return dayOfMonth{kind: domSet, days: uint32(m)}, nil
}

func parseDayOfWeek(s string) (dayOfWeek, error) {
	f := dowField
	switch {
	case s == "?":
		return dayOfWeek{kind: dowAny}, nil
	case s == "L":
		return dayOfWeek{kind: dowSet, days: 1 << time.Saturday}, nil
	case strings.Contains(s, "#"):
		d, n, _ := strings.Cut(s, "#")
		if strings.ContainsAny(d, ",-/*L") || strings.ContainsAny(n, ",-/*L#") {
			return dayOfWeek{}, alone(f, s, "#")
		}
		v, err := f.value(d)
		if err != nil {
			return dayOfWeek{}, err
		}
		k, err := number(n)
		if err != nil || k < 1 || k > 5 {
			return dayOfWeek{}, fmt.Errorf("%s: %q: x#n takes n from 1 to 5", f.name, s)
		}
		return dayOfWeek{kind: dowNth, day: time.Weekday(v - 1), n: k}, nil
	case strings.HasSuffix(s, "L") && !strings.ContainsAny(s, ",-/*"):
		v, err := f.value(strings.TrimSuffix(s, "L"))
		if err != nil {
			return dayOfWeek{}, err
		}
		return dayOfWeek{kind: dowLastOf, day: time.Weekday(v - 1)}, nil
	case strings.Contains(s, "L"):
		return dayOfWeek{}, alone(f, s, "L")
	case strings.Contains(s, "?"):
		return dayOfWeek{}, fmt.Errorf("%s: %q: \"?\" stands alone in its field", f.name, s)
	}
	// Day v (SUN is 1) is time.Weekday v-1.
	var days uint8
	if err := f.parseSet(s, false, func(v int) { days |= 1 << (v - 1) }); err != nil {
		return dayOfWeek{}, err
	}
	return dayOfWeek{kind: dowSet, days: days}, nil
}

// hasYear reports whether year y is in the set.
func (c *cronSpec) hasYear(y int) bool {
	if y < minYear || y > maxYear {
		return false
	}
	i := y - minYear
	return c.years[i/64]&(1<<(i%64)) != 0
}

// matchesDay reports whether the day y-m-d is one of the schedule's days.
func (c *cronSpec) matchesDay(y int, m time.Month, d int) bool {
	last := daysIn(y, m)
	switch c.dom.kind {
	case domSet:
		return c.dom.days&(1<<d) != 0
	case domLast:
		return d == last-c.dom.n
	case domLastWeekday:
		day := last
		for wd := weekday(y, m, day); wd == time.Saturday || wd == time.Sunday; wd = weekday(y, m, day) {
			day--
		}
		return d == day
	case domNearestWeekday:
		return d == nearestWeekday(y, m, c.dom.n, last)
	}
	wd := weekday(y, m, d)
	switch c.dow.kind {
	case dowSet:
		return c.dow.days&(1<<wd) != 0
	case dowLastOf:
		return wd == c.dow.day && d+7 > last
	case dowNth:
		return wd == c.dow.day && (d-1)/7+1 == c.dow.n
	}
	return false
}

// nearestWeekday returns the weekday nearest to day n of the month
// within the month, 0 when the month has no day n.
func nearestWeekday(y int, m time.Month, n, last int) int {
	if n > last {
		return 0
	}
	switch weekday(y, m, n) {
	case time.Saturday:
		if n == 1 {
			return n + 2
		}
		return n - 1
	case time.Sunday:
		if n == last {
			return n - 2
		}
		return n + 1
	}
	return n
}

// matchesWall reports whether the wall-clock minute matches.
func (c *cronSpec) matchesWall(y int, m time.Month, d, h, min int) bool {
	return c.hasYear(y) && c.months&(1<<m) != 0 && c.matchesDay(y, m, d) && c.hours&(1<<h) != 0 && c.minutes&(1<<min) != 0
}

// next returns the first matching minute strictly after after, read on
// loc's clocks: wall-clock minutes in order, each at its first instant,
// skipping those the clocks never show.
func (c *cronSpec) next(after time.Time, loc *time.Location) (time.Time, bool) {
	lt := after.In(loc)
	y0, m0, d0, h0, min0 := lt.Year(), lt.Month(), lt.Day(), lt.Hour(), lt.Minute()
	for y := max(y0, minYear); y <= maxYear; y++ {
		if !c.hasYear(y) {
			continue
		}
		for m := time.January; m <= time.December; m++ {
			if c.months&(1<<m) == 0 || y == y0 && m < m0 {
				continue
			}
			sameMonth := y == y0 && m == m0
			for d := 1; d <= daysIn(y, m); d++ {
				if sameMonth && d < d0 || !c.matchesDay(y, m, d) {
					continue
				}
				sameDay := sameMonth && d == d0
				for h := 0; h < 24; h++ {
					if c.hours&(1<<h) == 0 || sameDay && h < h0 {
						continue
					}
					for mins := c.minutes; mins != 0; mins &= mins - 1 {
						mi := bits.TrailingZeros64(mins)
						if sameDay && h == h0 && mi < min0 {
							continue
						}
						t, ok := wallTime{year: y, month: m, day: d, hour: h, minute: mi}.resolve(loc)
						if ok && t.After(after) {
							return t, true
						}
					}
				}
			}
		}
	}
	return time.Time{}, false
}

func daysIn(y int, m time.Month) int {
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

func weekday(y int, m time.Month, d int) time.Weekday {
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Weekday()
}
