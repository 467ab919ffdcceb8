package cron

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	_ "time/tzdata"
)

func mustLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// fires lists the next n fire instants after from, in UTC RFC 3339.
func fires(t *testing.T, sched string, loc *time.Location, from time.Time, n int) []string {
	t.Helper()
	s, err := ParseSchedule(sched, loc, from)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	at := from
	for range n {
		next, ok := s.Next(at, loc)
		if !ok {
			t.Fatalf("%s: no next after %s", sched, at)
		}
		if !next.After(at) {
			t.Fatalf("%s: next %s not after %s", sched, next, at)
		}
		out = append(out, next.UTC().Format(time.RFC3339))
		at = next
	}
	return out
}

func TestDSTTransitions(t *testing.T) {
	cases := []struct {
		zone, sched, from string
		want              []string
	}{
		// America/New_York 2026: spring forward Mar 8 02:00 EST -> 03:00 EDT.
		{"America/New_York", "30 2 * * *", "2026-03-06T12:00:00Z", []string{
			"2026-03-07T07:30:00Z", // 02:30 EST
			"2026-03-08T07:00:00Z", // 02:30 does not exist: first valid instant after the gap, 03:00 EDT
			"2026-03-09T06:30:00Z", // 02:30 EDT
		}},
		// Every minute of the gap collapses onto 03:00 EDT, fired once.
		{"America/New_York", "*/20 1-3 8 3 *", "2026-03-08T06:30:00Z", []string{
			"2026-03-08T06:40:00Z", // 01:40 EST
			"2026-03-08T07:00:00Z", // 02:00, 02:20, 02:40 and 03:00 all map here: once
			"2026-03-08T07:20:00Z", // 03:20 EDT
			"2026-03-08T07:40:00Z",
		}},
		// Fall back Nov 1 2026 02:00 EDT -> 01:00 EST: 01:30 fires once, at its first occurrence.
		{"America/New_York", "30 1 * * *", "2026-10-31T12:00:00Z", []string{
			"2026-11-01T05:30:00Z", // 01:30 EDT
			"2026-11-02T06:30:00Z", // 01:30 EST next day; the repeated 01:30 EST on Nov 1 is not fired
		}},
		{"America/New_York", "0 * * * *", "2026-11-01T03:30:00Z", []string{
			"2026-11-01T04:00:00Z", // 00:00 EDT
			"2026-11-01T05:00:00Z", // 01:00 EDT
			"2026-11-01T07:00:00Z", // 02:00 EST (01:00 EST is the repeat, skipped)
		}},
		// 2027: Mar 14 and Nov 7.
		{"America/New_York", "30 2 * * *", "2027-03-13T12:00:00Z", []string{
			"2027-03-14T07:00:00Z", "2027-03-15T06:30:00Z"}},
		{"America/New_York", "30 1 * * *", "2027-11-06T12:00:00Z", []string{
			"2027-11-07T05:30:00Z", "2027-11-08T06:30:00Z"}},
		// A job evaluated from inside the repeated hour does not go back in time.
		{"America/New_York", "45 1 * * *", "2026-11-01T06:10:00Z", []string{ // 01:10 EST (second pass)
			"2026-11-02T06:45:00Z"}},

		// Europe/London 2026: Mar 29 01:00 GMT -> 02:00 BST; Oct 25 02:00 BST -> 01:00 GMT.
		{"Europe/London", "30 1 * * *", "2026-03-28T12:00:00Z", []string{
			"2026-03-29T01:00:00Z", // 01:30 missing: 02:00 BST
			"2026-03-30T00:30:00Z", // 01:30 BST
		}},
		{"Europe/London", "30 1 * * *", "2026-10-24T12:00:00Z", []string{
			"2026-10-25T00:30:00Z", // 01:30 BST, first occurrence only
			"2026-10-26T01:30:00Z", // 01:30 GMT
		}},
		// 2027: Mar 28 and Oct 31.
		{"Europe/London", "30 1 * * *", "2027-03-27T12:00:00Z", []string{
			"2027-03-28T01:00:00Z", "2027-03-29T00:30:00Z"}},
		{"Europe/London", "30 1 * * *", "2027-10-30T12:00:00Z", []string{
			"2027-10-31T00:30:00Z", "2027-11-01T01:30:00Z"}},
		{"Europe/London", "@hourly", "2027-10-30T23:30:00Z", []string{
			"2027-10-31T00:00:00Z", // 01:00 BST
			"2027-10-31T02:00:00Z", // 02:00 GMT; 01:00 GMT (01:00Z) is the repeat
		}},

		// Australia/Lord_Howe: a 30-minute shift. DST (+11) ends first Sunday of
		// April 02:00 -> 01:30 (+10:30); starts first Sunday of October 02:00 -> 02:30.
		{"Australia/Lord_Howe", "45 1 * * *", "2026-04-04T00:00:00Z", []string{
			"2026-04-04T14:45:00Z", // Apr 5 01:45 +11, first occurrence
			"2026-04-05T15:15:00Z", // Apr 6 01:45 +10:30
		}},
		{"Australia/Lord_Howe", "15 2 * * *", "2026-10-03T00:00:00Z", []string{
			"2026-10-03T15:30:00Z", // Oct 4 02:15 does not exist: 02:30 +11
			"2026-10-04T15:15:00Z", // Oct 5 02:15 +11
		}},
		{"Australia/Lord_Howe", "45 1 * * *", "2027-04-03T00:00:00Z", []string{
			"2027-04-03T14:45:00Z", "2027-04-04T15:15:00Z"}},
		{"Australia/Lord_Howe", "15 2 * * *", "2027-10-02T00:00:00Z", []string{
			"2027-10-02T15:30:00Z", "2027-10-03T15:15:00Z"}},
		{"Australia/Lord_Howe", "*/30 * * * *", "2026-04-04T14:20:00Z", []string{
			"2026-04-04T14:30:00Z", // 01:30 +11
			// 15:00Z reads 01:30 +10:30, the repeat of 01:30: not fired again
			"2026-04-04T15:30:00Z", // 02:00 +10:30
			"2026-04-04T16:00:00Z", // 02:30 +10:30
		}},
	}
	for _, c := range cases {
		t.Run(c.zone+"/"+c.sched+"/"+c.from, func(t *testing.T) {
			got := fires(t, c.sched, mustLoc(t, c.zone), utc(c.from), len(c.want))
			if strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Errorf("got  %v\nwant %v", got, c.want)
			}
		})
	}
}

func TestIntervalKeepsElapsedTimeAcrossDST(t *testing.T) {
	loc := mustLoc(t, "America/New_York")
	got := fires(t, "every 2h", loc, utc("2026-03-08T05:00:00Z"), 3)
	want := []string{"2026-03-08T07:00:00Z", "2026-03-08T09:00:00Z", "2026-03-08T11:00:00Z"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got %v want %v", got, want)
	}
}

func TestNaiveTimestampDST(t *testing.T) {
	ny := mustLoc(t, "America/New_York")
	for _, c := range []struct{ in, want string }{
		{"2026-03-08T02:30", "2026-03-08T07:00:00Z"}, // gap -> 03:00 EDT
		{"2026-11-01 01:30", "2026-11-01T05:30:00Z"}, // repeated -> first (EDT)
		{"2026-07-04T09:00:00", "2026-07-04T13:00:00Z"},
		{"2026-07-04T09:00:00+02:00", "2026-07-04T07:00:00Z"},
	} {
		s, err := ParseSchedule(c.in, ny, utc("2026-01-01T00:00:00Z"))
		if err != nil {
			t.Fatal(err)
		}
		if s.Kind != KindOnce || s.RunAt != c.want {
			t.Errorf("%s: got %+v, want run_at %s", c.in, s, c.want)
		}
	}
}

func TestScheduleGrammar(t *testing.T) {
	loc := time.UTC
	now := utc("2026-05-01T10:00:00Z")
	ok := map[string]string{
		"in 30m":               "once at 2026-05-01T10:30:00Z",
		"every 30m":            "every 30m",
		"every 120 min":        "every 2h",
		"every 1d":             "every 1d",
		"every 30s":            "every 30s",
		"every 90 seconds":     "every 90s",
		"in 45s":               "once at 2026-05-01T10:00:45Z",
		"0 9 * * 1-5":          "cron 0 9 * * 1-5 (UTC)",
		"@daily":               "cron @daily (UTC)",
		"0  9 * JAN MON":       "cron 0 9 * JAN MON (UTC)",
		"2026-06-01T10:00:00Z": "once at 2026-06-01T10:00:00Z",
	}
	for in, want := range ok {
		s, err := ParseSchedule(in, loc, now)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if got := s.Normalized(loc); got != want {
			t.Errorf("%q: normalized %q, want %q", in, got, want)
		}
	}
	for _, bad := range []string{"30m", "2h", "", "every 0m", "every 5s", "every 9 sec", "61 * * * *", "* * * *", "@sometimes", "tomorrow", "0 9 31 2 x"} {
		_, err := ParseSchedule(bad, loc, now)
		if !errors.Is(err, ErrUsage) {
			t.Errorf("%q: err %v, want ErrUsage", bad, err)
		}
	}
	// Seconds are stored as Hermes stores intervals, in (fractional) minutes.
	s30, _ := ParseSchedule("every 30s", loc, now)
	if b, _ := json.Marshal(s30); !strings.Contains(string(b), `"minutes":0.5`) {
		t.Errorf("every 30s stored as %s", b)
	}
	if next, ok := s30.Next(now, loc); !ok || !next.Equal(now.Add(30*time.Second)) {
		t.Errorf("every 30s next %v %v", next, ok)
	}
	_, err := ParseSchedule("30m", loc, now)
	if err == nil || !strings.Contains(err.Error(), "every 30m") || !strings.Contains(err.Error(), "in 30m") {
		t.Errorf("bare duration hint missing: %v", err)
	}
}

func TestCronSemantics(t *testing.T) {
	loc := time.UTC
	// Day-of-month and day-of-week both restricted: either matches (classic cron).
	got := fires(t, "0 0 13 * 5", loc, utc("2026-02-01T00:00:00Z"), 3)
	want := []string{"2026-02-06T00:00:00Z", "2026-02-13T00:00:00Z", "2026-02-20T00:00:00Z"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("dom|dow: got %v want %v", got, want)
	}
	// Leap day, sparse: found without scanning minute by minute.
	got = fires(t, "0 12 29 2 *", loc, utc("2026-01-01T00:00:00Z"), 2)
	want = []string{"2028-02-29T12:00:00Z", "2032-02-29T12:00:00Z"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("leap: got %v want %v", got, want)
	}
	// Sunday as 7, steps with a start value.
	got = fires(t, "5/20 10 * * 7", loc, utc("2026-05-01T00:00:00Z"), 3)
	want = []string{"2026-05-03T10:05:00Z", "2026-05-03T10:25:00Z", "2026-05-03T10:45:00Z"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("steps: got %v want %v", got, want)
	}
	if _, ok := (Schedule{Kind: KindCron, Expr: "0 0 30 2 *"}).Next(utc("2026-01-01T00:00:00Z"), loc); ok {
		t.Error("Feb 30 must never fire")
	}
}

func TestGrace(t *testing.T) {
	loc := time.UTC
	at := utc("2026-05-01T00:00:00Z")
	for _, c := range []struct {
		sched string
		want  time.Duration
	}{
		{"every 1m", 120 * time.Second},
		{"every 30m", 15 * time.Minute},
		{"@daily", 2 * time.Hour},
		{"0 */2 * * *", time.Hour},
	} {
		s, _ := ParseSchedule(c.sched, loc, at)
		if g := GraceFor(s, at, loc, 0); g != c.want {
			t.Errorf("%s: grace %v want %v", c.sched, g, c.want)
		}
	}
	s, _ := ParseSchedule("@daily", loc, at)
	if g := GraceFor(s, at, loc, 10*time.Minute); g != 10*time.Minute {
		t.Errorf("deadline ignored: %v", g)
	}
}
