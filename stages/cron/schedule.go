package cron

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hermes-pipe/hermes-pipe/stages/rollout"
)

// ErrUsage marks errors caused by bad user input (a schedule that does not
// parse, an unknown job id, a refused prompt). The command layer maps it to
// exit code 2. Test with errors.Is.
var ErrUsage = errors.New("usage")

func usagef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, args...))
}

// Schedule kinds, as Hermes stores them in jobs.json.
const (
	KindOnce     = "once"
	KindInterval = "interval"
	KindCron     = "cron"
)

// Schedule is the stored form of a job's schedule, field for field what
// Hermes writes: {"kind":"once","run_at":...}, {"kind":"interval","minutes":N}
// or {"kind":"cron","expr":"0 9 * * *"}, each with a display string.
type Schedule struct {
	Kind    string  `json:"kind"`
	RunAt   string  `json:"run_at,omitempty"`
	Minutes float64 `json:"minutes,omitempty"`
	Expr    string  `json:"expr,omitempty"`
	Display string  `json:"display,omitempty"`
}

// The duration patterns, compiled at their first use.
var (
	reDuration = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(\d+)\s*(s|sec|secs|second|seconds|m|min|mins|minute|minutes|h|hr|hrs|hour|hours|d|day|days)$`)
	})
	reBareDur = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\d+\s*[a-z]+$`) })
)

// Limits of a duration in a schedule. MinInterval is the shortest repeating
// interval ("every 10s"); MaxDuration is the longest interval or "in"
// offset: longer ones would overflow time arithmetic (about 292 years) and
// are refused rather than wrapped into the past.
const (
	MinInterval = 10 * time.Second
	MaxDuration = 100 * 365 * 24 * time.Hour
)

// parseDuration reads "30s", "30m", "2h", "1d" (whole seconds, at most
// MaxDuration).
func parseDuration(s string) (time.Duration, error) {
	m := reDuration().FindStringSubmatch(strings.ToLower(strings.TrimSpace(s)))
	if m == nil {
		return 0, fmt.Errorf("bad duration %q (use e.g. 30s, 30m, 2h, 1d)", s)
	}
	unit := time.Minute
	switch m[2][0] {
	case 's':
		unit = time.Second
	case 'h':
		unit = time.Hour
	case 'd':
		unit = 24 * time.Hour
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n > int64(MaxDuration/unit) {
		return 0, fmt.Errorf("duration %q is longer than the maximum of %s", s, formatDuration(MaxDuration))
	}
	if n <= 0 {
		return 0, fmt.Errorf("bad duration %q: must be positive", s)
	}
	return time.Duration(n) * unit, nil
}

// formatDuration writes d in the largest unit that divides it: 1d, 2h, 30m, 45s.
func formatDuration(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}

// interval is an interval schedule's period, rounded to the second (Hermes
// stores minutes, a fraction for sub-minute intervals). It is 0 when the
// stored value is not a positive period within MaxDuration.
func (s Schedule) interval() time.Duration {
	if !(s.Minutes > 0) || s.Minutes > float64(MaxDuration/time.Minute) {
		return 0
	}
	return time.Duration(s.Minutes * float64(time.Minute)).Round(time.Second)
}

func intervalSchedule(d time.Duration) Schedule {
	return Schedule{Kind: KindInterval, Minutes: float64(d) / float64(time.Minute), Display: "every " + formatDuration(d)}
}

// ParseSchedule turns the user's schedule text into its stored form.
// "in 30m" and ISO timestamps are one-shots (a timestamp without an offset is
// read in loc, with the DST rules of Next); "every 30m" is an interval; five
// cron fields or an @descriptor are a calendar schedule evaluated in loc. A
// bare duration such as "30m" is refused because Hermes changed its meaning
// once. now anchors "in" schedules. Errors wrap ErrUsage. It does no I/O.
func ParseSchedule(text string, loc *time.Location, now time.Time) (Schedule, error) {
	s := strings.TrimSpace(text)
	lower := strings.ToLower(s)
	switch {
	case s == "":
		return Schedule{}, usagef("empty schedule")
	case strings.HasPrefix(lower, "in "):
		d, err := parseDuration(s[3:])
		if err != nil {
			return Schedule{}, usagef("schedule %q: %v", s, err)
		}
		at := now.Add(d).UTC().Truncate(time.Second)
		return onceAt(at, loc), nil
	case strings.HasPrefix(lower, "every "):
		d, err := parseDuration(s[6:])
		if err != nil {
			return Schedule{}, usagef("schedule %q: %v", s, err)
		}
		if d < MinInterval {
			return Schedule{}, usagef("schedule %q: the shortest interval is %s", s, formatDuration(MinInterval))
		}
		return intervalSchedule(d), nil
	case strings.HasPrefix(s, "@") || len(strings.Fields(s)) == 5:
		e, err := parseCronExpr(s)
		if err != nil {
			return Schedule{}, usagef("schedule %q: %v", s, err)
		}
		return Schedule{Kind: KindCron, Expr: e.canonical, Display: e.canonical}, nil
	case reBareDur().MatchString(lower):
		return Schedule{}, usagef("schedule %q is ambiguous: write \"every %s\" for a repeating interval or \"in %s\" for a one-shot", s, s, s)
	}
	at, err := parseTimestamp(s, loc)
	if err != nil {
		return Schedule{}, usagef("schedule %q: not a duration (in 30m, every 2h), a 5-field cron expression, an @descriptor or an ISO timestamp", s)
	}
	return onceAt(at.UTC(), loc), nil
}

func onceAt(at time.Time, loc *time.Location) Schedule {
	return Schedule{Kind: KindOnce, RunAt: at.UTC().Format(time.RFC3339),
		Display: "once at " + at.In(loc).Format(time.RFC3339)}
}

var naiveLayouts = []string{
	"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02",
}

// parseTimestamp reads RFC 3339 (with offset) or a naive ISO timestamp,
// which is placed in loc by resolveWall.
func parseTimestamp(s string, loc *time.Location) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	// Python isoformat with an offset but without 'T' separator, or with micros.
	if t, err := time.Parse("2006-01-02 15:04:05Z07:00", s); err == nil {
		return t, nil
	}
	if t, err := time.Parse("2006-01-02T15:04:05.999999Z07:00", s); err == nil {
		return t, nil
	}
	for _, layout := range naiveLayouts {
		if w, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return resolveWall(w, loc), nil
		}
	}
	return time.Time{}, fmt.Errorf("bad timestamp %q", s)
}

// resolveWall maps a naive wall-clock time (w's fields, in time.UTC) to an
// instant in loc. A wall time that exists once maps to that instant. A wall
// time inside a spring-forward gap maps to the first valid instant after the
// gap (the transition itself). A wall time repeated by a fall-back maps to its
// first (earlier) occurrence.
func resolveWall(w time.Time, loc *time.Location) time.Time {
	u := w.Unix()
	offsets := make([]int, 0, 4)
	add := func(off int) {
		for _, o := range offsets {
			if o == off {
				return
			}
		}
		offsets = append(offsets, off)
	}
	for _, probe := range []int64{u - 86400, u + 86400} {
		_, off := time.Unix(probe, 0).In(loc).Zone()
		add(off)
	}
	for _, o := range append([]int(nil), offsets...) {
		_, off := time.Unix(u-int64(o), 0).In(loc).Zone()
		add(off)
	}
	var best time.Time
	var latest int64 = -1 << 62
	for _, o := range offsets {
		i := u - int64(o)
		if i > latest {
			latest = i
		}
		t := time.Unix(i, 0).In(loc)
		if _, off := t.Zone(); off == o && (best.IsZero() || t.Before(best)) {
			best = t
		}
	}
	if !best.IsZero() {
		return best
	}
	// In a gap: the instant computed with the pre-transition (smaller)
	// offset lies after the transition; its zone period starts at the gap's end.
	start, _ := time.Unix(latest, 0).In(loc).ZoneBounds()
	if start.IsZero() {
		return time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), 0, loc)
	}
	return start
}

// wallOf returns t's wall clock in loc as a naive time in time.UTC.
func wallOf(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}

// Next returns the first fire instant strictly after `after`, evaluated in
// loc. ok is false when the schedule has no further occurrence (a one-shot in
// the past, an impossible cron date). It is pure computation: a cron schedule
// costs microseconds, never I/O.
func (s Schedule) Next(after time.Time, loc *time.Location) (time.Time, bool) {
	switch s.Kind {
	case KindOnce:
		at, err := parseTimestamp(s.RunAt, loc)
		if err != nil || !at.After(after) {
			return time.Time{}, false
		}
		return at.UTC(), true
	case KindInterval:
		p := s.interval()
		if p <= 0 {
			return time.Time{}, false
		}
		return after.Add(p).UTC().Truncate(time.Second), true
	case KindCron:
		e, err := parseCronExpr(s.Expr)
		if err != nil {
			return time.Time{}, false
		}
		return e.next(after, loc)
	}
	return time.Time{}, false
}

func (e *cronExpr) next(after time.Time, loc *time.Location) (time.Time, bool) {
	w := wallOf(after, loc).Truncate(time.Minute)
	for range 4096 {
		cand, ok := e.nextWall(w)
		if !ok {
			return time.Time{}, false
		}
		if i := resolveWall(cand, loc); i.After(after) {
			return i.UTC(), true
		}
		w = cand.Add(time.Minute)
	}
	return time.Time{}, false
}

// Validate checks a stored schedule (as read from an imported jobs.json).
func (s Schedule) Validate() error {
	switch s.Kind {
	case KindOnce:
		if _, err := parseTimestamp(s.RunAt, time.UTC); err != nil {
			return fmt.Errorf("once schedule: %v", err)
		}
	case KindInterval:
		if p := s.interval(); p < MinInterval {
			return fmt.Errorf("interval schedule: minutes %v must be a period between %s and %s", s.Minutes, formatDuration(MinInterval), formatDuration(MaxDuration))
		}
	case KindCron:
		if _, err := parseCronExpr(s.Expr); err != nil {
			return fmt.Errorf("cron schedule: %v", err)
		}
	default:
		return fmt.Errorf("unknown schedule kind %q", s.Kind)
	}
	return nil
}

// Normalized is the schedule as the user should read it back.
func (s Schedule) Normalized(loc *time.Location) string {
	switch s.Kind {
	case KindOnce:
		at, err := parseTimestamp(s.RunAt, loc)
		if err != nil {
			return "once at " + s.RunAt
		}
		return "once at " + at.In(loc).Format(time.RFC3339)
	case KindInterval:
		return "every " + formatDuration(s.interval())
	case KindCron:
		return "cron " + s.Expr + " (" + loc.String() + ")"
	}
	return s.Display
}

// Period is the schedule's cadence near `at`: the interval, or the gap between
// the two cron occurrences after `at`. One-shots have no period (0).
func (s Schedule) Period(at time.Time, loc *time.Location) time.Duration {
	switch s.Kind {
	case KindInterval:
		return s.interval()
	case KindCron:
		a, ok := s.Next(at, loc)
		if !ok {
			return 0
		}
		b, ok := s.Next(a, loc)
		if !ok {
			return 0
		}
		return b.Sub(a)
	}
	return 0
}

// Grace windows for late runs: half the period, clamped.
const (
	minGrace = 120 * time.Second
	maxGrace = 2 * time.Hour
)

// GraceFor returns how late an occurrence may start and still run: the
// deadline when positive, else half the period clamped to 120 s – 2 h.
func GraceFor(s Schedule, at time.Time, loc *time.Location, deadline time.Duration) time.Duration {
	if deadline > 0 {
		return deadline
	}
	g := s.Period(at, loc) / 2
	return min(max(g, minGrace), maxGrace)
}

// PlanSchedule reads a schedule as `cron add` does, in UTC, for the cronjob
// toolset of rollouts (rollout.Options.PlanSchedule, bound by the command
// layer): its display form, its first occurrence after now, and whether it
// fires once. A schedule `cron add` refuses is refused with its message.
func PlanSchedule(text string, now time.Time) (rollout.PlannedSchedule, error) {
	sched, err := ParseSchedule(text, time.UTC, now)
	if err == nil {
		var next time.Time
		if next, err = FirstRun(sched, text, time.UTC, now); err == nil {
			return rollout.PlannedSchedule{Display: sched.Normalized(time.UTC), Next: next, Once: sched.Kind == KindOnce}, nil
		}
	}
	return rollout.PlannedSchedule{}, errors.New(strings.TrimPrefix(err.Error(), ErrUsage.Error()+": "))
}
