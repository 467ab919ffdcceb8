package cron

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// cronExpr is a parsed 5-field cron expression: minute, hour, day of month,
// month, day of week. Each field is a bit set of allowed values.
type cronExpr struct {
	minute, hour, dom, month, dow uint64
	domStar, dowStar              bool
	canonical                     string
}

var descriptors = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

var monthNames = map[string]int{"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
	"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}
var dowNames = map[string]int{"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}

// parseCronExpr parses a 5-field expression or an @descriptor. Names of
// months and weekdays (JAN, MON) are accepted; 7 means Sunday in the weekday
// field. The canonical form keeps the user's text with whitespace collapsed.
func parseCronExpr(s string) (*cronExpr, error) {
	text := strings.Join(strings.Fields(s), " ")
	if strings.HasPrefix(text, "@") {
		exp, ok := descriptors[strings.ToLower(text)]
		if !ok {
			return nil, fmt.Errorf("unknown descriptor %q (use @hourly, @daily, @weekly, @monthly or @yearly)", text)
		}
		e, err := parseCronExpr(exp)
		if err != nil {
			return nil, err
		}
		e.canonical = strings.ToLower(text)
		return e, nil
	}
	fields := strings.Fields(text)
	if len(fields) != 5 {
		return nil, fmt.Errorf("cron expression %q has %d fields, want 5 (minute hour day-of-month month day-of-week)", text, len(fields))
	}
	e := &cronExpr{canonical: text}
	var err error
	if e.minute, err = parseField(fields[0], 0, 59, nil); err != nil {
		return nil, fmt.Errorf("minute field: %w", err)
	}
	if e.hour, err = parseField(fields[1], 0, 23, nil); err != nil {
		return nil, fmt.Errorf("hour field: %w", err)
	}
	if e.dom, err = parseField(fields[2], 1, 31, nil); err != nil {
		return nil, fmt.Errorf("day-of-month field: %w", err)
	}
	if e.month, err = parseField(fields[3], 1, 12, monthNames); err != nil {
		return nil, fmt.Errorf("month field: %w", err)
	}
	if e.dow, err = parseField(fields[4], 0, 7, dowNames); err != nil {
		return nil, fmt.Errorf("day-of-week field: %w", err)
	}
	if e.dow&(1<<7) != 0 {
		e.dow = (e.dow | 1) &^ (1 << 7)
	}
	e.domStar = isStar(fields[2])
	e.dowStar = isStar(fields[4])
	return e, nil
}

func isStar(f string) bool { return f == "*" || f == "?" || strings.HasPrefix(f, "*/") }

func parseField(f string, lo, hi int, names map[string]int) (uint64, error) {
	var set uint64
	for _, part := range strings.Split(f, ",") {
		if part == "" {
			return 0, fmt.Errorf("empty list item in %q", f)
		}
		rng, step := part, 1
		if i := strings.IndexByte(part, '/'); i >= 0 {
			rng = part[:i]
			n, err := strconv.Atoi(part[i+1:])
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("bad step in %q", part)
			}
			step = n
		}
		a, b := lo, hi
		switch {
		case rng == "*" || rng == "?":
		case strings.Contains(rng, "-"):
			i := strings.IndexByte(rng, '-')
			var err error
			if a, err = fieldValue(rng[:i], names); err != nil {
				return 0, err
			}
			if b, err = fieldValue(rng[i+1:], names); err != nil {
				return 0, err
			}
		default:
			v, err := fieldValue(rng, names)
			if err != nil {
				return 0, err
			}
			a = v
			if !strings.Contains(part, "/") {
				b = v
			}
		}
		if a < lo || b > hi || a > b {
			return 0, fmt.Errorf("%q out of range %d-%d", part, lo, hi)
		}
		for v := a; v <= b; v += step {
			set |= 1 << uint(v)
		}
	}
	return set, nil
}

func fieldValue(s string, names map[string]int) (int, error) {
	if v, ok := names[strings.ToLower(s)]; ok {
		return v, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("bad value %q", s)
	}
	return v, nil
}

func (e *cronExpr) dayMatches(t time.Time) bool {
	dom := e.dom&(1<<uint(t.Day())) != 0
	dow := e.dow&(1<<uint(t.Weekday())) != 0
	switch {
	case e.domStar && e.dowStar:
		return true
	case e.domStar:
		return dow
	case e.dowStar:
		return dom
	default: // both restricted: classic cron matches either
		return dom || dow
	}
}

// nextWall returns the first naive wall-clock minute at or after w (a time in
// time.UTC used as a zone-free calendar) that matches the expression. It skips
// whole months, days and hours that cannot match, so sparse schedules cost a
// few thousand steps at most. ok is false when nothing matches within 30 years.
func (e *cronExpr) nextWall(w time.Time) (time.Time, bool) {
	w = w.Truncate(time.Minute)
	limit := w.AddDate(30, 0, 0)
	for w.Before(limit) {
		if e.month&(1<<uint(w.Month())) == 0 {
			w = time.Date(w.Year(), w.Month()+1, 1, 0, 0, 0, 0, time.UTC)
			continue
		}
		if !e.dayMatches(w) {
			w = time.Date(w.Year(), w.Month(), w.Day()+1, 0, 0, 0, 0, time.UTC)
			continue
		}
		if e.hour&(1<<uint(w.Hour())) == 0 {
			w = time.Date(w.Year(), w.Month(), w.Day(), w.Hour()+1, 0, 0, 0, time.UTC)
			continue
		}
		if e.minute&(1<<uint(w.Minute())) == 0 {
			// jump to the next allowed minute in this hour, if any
			rest := e.minute >> uint(w.Minute())
			if rest == 0 {
				w = time.Date(w.Year(), w.Month(), w.Day(), w.Hour()+1, 0, 0, 0, time.UTC)
				continue
			}
			w = w.Add(time.Duration(bits.TrailingZeros64(rest)) * time.Minute)
			continue
		}
		return w, true
	}
	return time.Time{}, false
}
