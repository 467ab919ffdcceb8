package cron

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofrs/flock"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/rollout/mcp"
	"github.com/tidwall/gjson"
)

// Scheduler claims and executes due occurrences of the jobs in one home
// folder. Any number of Schedulers (in one process or many) may share a
// folder: the tick lock serialises claiming and the ledger's key makes each
// occurrence claimable once.
type Scheduler struct {
	Home   string
	Store  *Store
	Ledger *Ledger
	// Now is the clock seam; default time.Now.
	Now func() time.Time
	// Agent runs agent jobs; nil makes them fail with a clear error.
	Agent AgentRunner
	// HTTPClient is used for webhooks; default a 30 s client.
	HTTPClient *http.Client
	// WebhookBackoff overrides the wait before webhook retry n (tests).
	WebhookBackoff func(attempt int) time.Duration
	// MaxMissedRows caps missed rows recorded for one job in one pass.
	MaxMissedRows int
	// MaxParallel bounds how many claimed occurrences execute at once in one
	// Tick (default DefaultMaxParallel); the others wait their turn, in
	// claim order.
	MaxParallel int
	// Log receives operational messages; default discards.
	Log *slog.Logger
	// DefaultInactivity, when set, replaces DefaultInactivityTimeout for
	// jobs that set no timeout of their own (HERMES_CRON_TIMEOUT, as in
	// Hermes; 0 means none).
	DefaultInactivity *time.Duration
	// ScriptIsolation is how script jobs run: IsolationBwrap ("" too:
	// confined) or IsolationNone (unconfined, for every job; a job can opt
	// out alone with its policy's script_isolation).
	ScriptIsolation string

	// beforeAdvance, when set, is called with each due job before it is
	// advanced (tests inject failures through it).
	beforeAdvance func(*Job)
}

// RunDir is the output folder that keeps the trajectory of one agent
// execution: <home>/cron/runs/<job id>/<execution id>.
func RunDir(home, jobID, executionID string) string {
	return filepath.Join(home, "cron", "runs", jobID, executionID)
}

// DefaultMaxParallel is how many occurrences a Tick executes at once when
// Scheduler.MaxParallel is not set.
const DefaultMaxParallel = 4

// NewScheduler opens the store and ledger of home. Close releases the ledger.
func NewScheduler(ctx context.Context, home string) (*Scheduler, error) {
	l, err := OpenLedger(ctx, filepath.Join(home, "cron", "executions.db"))
	if err != nil {
		return nil, err
	}
	return &Scheduler{Home: home, Store: NewStore(home), Ledger: l}, nil
}

// Close releases the ledger handle.
func (s *Scheduler) Close() error { return s.Ledger.Close() }

func (s *Scheduler) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

func (s *Scheduler) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.New(slog.DiscardHandler)
}

// Claim is one occurrence this process owns and must execute.
type Claim struct {
	ExecutionID string
	Job         Job
	ScheduledAt time.Time
	Trigger     string
	ClaimedAt   time.Time
}

// ClaimReport says what one claiming pass did.
type ClaimReport struct {
	Busy      bool      // another ticker held the tick lock; nothing was done
	Claims    []Claim   // occurrences to execute now
	Missed    int       // occurrences recorded as missed
	Skipped   int       // occurrences skipped by the overlap policy
	Recovered []string  // executions of dead processes marked unknown
	NextDue   time.Time // earliest next_run_at after the pass (zero: none)
	// Invalid lists stored jobs that cannot be scheduled (they do not
	// decode, or their id, schedule or zone is bad). They are left as they
	// are, reported on every pass and alerted once; the others run.
	Invalid []JobError `json:"Invalid,omitempty"`
	// Failed lists jobs whose claiming failed (a panic included) in this
	// pass: each is paused with the reason, recorded failed and alerted;
	// the others run.
	Failed []JobError `json:"Failed,omitempty"`
}

// Problems is how many jobs the pass could not schedule.
func (r ClaimReport) Problems() []JobError {
	return append(append([]JobError(nil), r.Invalid...), r.Failed...)
}

func (s *Scheduler) tickLockPath() string { return filepath.Join(s.Home, "cron", ".tick.lock") }

// pendingAlert is an alert decided while claiming, sent once the ledger
// rows it reports are committed.
type pendingAlert struct {
	deliver string
	msg     Message
}

// ClaimDue is one claiming pass. It takes the tick lock without waiting
// (held elsewhere: Busy, no error), marks executions of dead processes
// unknown, and for each due job records its occurrences in the ledger and
// advances next_run_at before anything runs: the latest occurrence within
// the grace window is claimed, older ones are recorded missed. When nothing is
// due it reads only the store's small index file, so it costs a few
// milliseconds whatever the number of jobs.
//
// A bad job never stops the others: a stored job that cannot be scheduled is
// reported in Invalid, a job whose claiming fails or panics is paused and
// reported in Failed, and both are alerted through the job's delivery
// target, as are occurrences recorded missed or skipped. Only a failure of
// the store or the ledger themselves fails the pass.
func (s *Scheduler) ClaimDue(ctx context.Context) (ClaimReport, error) {
	var rep ClaimReport
	if err := s.Store.ensureDir(); err != nil {
		return rep, err
	}
	fl := flock.New(s.tickLockPath(), flock.SetPermissions(0o600))
	ok, err := fl.TryLock()
	if err != nil {
		return rep, fmt.Errorf("tick lock: %w", err)
	}
	if !ok {
		rep.Busy = true
		return rep, nil
	}
	defer func() { _ = fl.Unlock() }()

	now := s.now()
	if rep.Recovered, err = s.Ledger.RecoverOrphans(ctx, now); err != nil {
		return rep, err
	}
	for _, id := range rep.Recovered {
		s.log().Warn("execution ended with its process; marked unknown", "execution", id)
	}
	if next, fresh := s.Store.CachedNextDue(); fresh && (next.IsZero() || next.After(now)) {
		rep.NextDue = next
		return rep, nil
	}
	var claimed []Claim
	var alerts []pendingAlert
	committed := false
	err = s.Store.Update(ctx, func(tx *Tx) error {
		claimed, alerts = claimed[:0], alerts[:0]
		rep.Missed, rep.Skipped, rep.Failed = 0, 0, nil
		rep.Invalid = tx.Invalid()
		due, unarmed, triggered := tx.scan(now)
		for _, id := range unarmed {
			if j, err := tx.Get(id); err == nil {
				arm(j, now)
				if err := tx.Put(j); err != nil {
					return err
				}
				if at, ok := j.NextRun(); ok && j.Runnable() && !at.After(now) {
					due = append(due, id)
				}
			}
		}
		if len(due) == 0 && len(triggered) == 0 && len(rep.Invalid) == 0 {
			rep.NextDue = tx.NextDue()
			return nil
		}
		err := s.Ledger.Batch(ctx, func(b *LedgerTx) error {
			var err error
			claimed, alerts, err = s.claimPass(ctx, b, tx, due, triggered, now, &rep)
			return err
		})
		committed = err == nil
		rep.NextDue = tx.NextDue()
		return err
	})
	if committed {
		s.sendAlerts(ctx, alerts)
	}
	if err != nil {
		// The store was not advanced; release the claims so the next pass
		// sees them as already recorded and moves on instead of running them.
		for _, c := range claimed {
			_, _ = s.Ledger.Finish(context.WithoutCancel(ctx), c.ExecutionID, Outcome{State: StateFailed, Error: "claim not committed: " + err.Error()}, now)
		}
		return rep, err
	}
	rep.Claims = claimed
	return rep, nil
}

// claimPass is the ledger part of one claiming pass, in one transaction:
// the stored jobs that cannot be scheduled recorded, the due jobs claimed
// (one whose claiming fails is failed alone), then the pending triggers.
// err is a failure of the ledger, which fails the pass.
func (s *Scheduler) claimPass(ctx context.Context, b *LedgerTx, tx *Tx, due, triggered []string, now time.Time, rep *ClaimReport) (claimed []Claim, alerts []pendingAlert, err error) {
	for _, inv := range rep.Invalid {
		a, err := s.recordInvalid(ctx, b, tx, inv, now)
		if err != nil {
			return nil, nil, err
		}
		alerts = append(alerts, a...)
	}
	for _, id := range due {
		c, a, jobErr, err := s.claimOne(ctx, b, tx, id, now, rep)
		if err != nil {
			return nil, nil, err
		}
		alerts = append(alerts, a...)
		if jobErr != nil {
			a, err := s.failJob(ctx, b, tx, id, now, jobErr)
			if err != nil {
				return nil, nil, err
			}
			alerts = append(alerts, a...)
			rep.Failed = append(rep.Failed, JobError{ID: id, Error: jobErr.Error()})
			continue
		}
		if c != nil {
			claimed = append(claimed, *c)
		}
	}
	for _, id := range triggered {
		c, a, err := s.claimTrigger(ctx, b, tx, id, now, rep)
		if err != nil {
			return nil, nil, err
		}
		alerts = append(alerts, a...)
		if c != nil {
			claimed = append(claimed, *c)
		}
	}
	return claimed, alerts, nil
}

// claimOne advances one due job inside its own savepoint. jobErr is the
// job's own failure (it does not decode or validate, or advancing it
// panicked): its rows are rolled back and the caller fails the job. err is a
// failure of the ledger, which fails the pass.
func (s *Scheduler) claimOne(ctx context.Context, b *LedgerTx, tx *Tx, id string, now time.Time, rep *ClaimReport) (c *Claim, alerts []pendingAlert, jobErr, err error) {
	job, gerr := tx.Get(id)
	if gerr != nil {
		return nil, nil, gerr, nil
	}
	if verr := validateStored(job); verr != nil {
		return nil, nil, verr, nil
	}
	if err := b.savepoint(ctx); err != nil {
		return nil, nil, nil, err
	}
	var missed, skipped []Execution
	func() {
		defer func() {
			if r := recover(); r != nil {
				jobErr = fmt.Errorf("panic while scheduling: %v", r)
				s.log().Error("job panicked while being scheduled", "job", id, "panic", r, "stack", string(debug.Stack()))
			}
		}()
		if s.beforeAdvance != nil {
			s.beforeAdvance(job)
		}
		c, missed, skipped, err = s.advance(ctx, b, job, now)
	}()
	if jobErr != nil {
		if err := b.rollbackTo(ctx); err != nil {
			return nil, nil, nil, err
		}
		return nil, nil, jobErr, nil
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if err := b.release(ctx); err != nil {
		return nil, nil, nil, err
	}
	rep.Missed += len(missed)
	rep.Skipped += len(skipped)
	if err := tx.Put(job); err != nil {
		return nil, nil, nil, err
	}
	if a, ok := notRunAlert(job, missed, StateMissed); ok {
		alerts = append(alerts, a)
	}
	if a, ok := notRunAlert(job, skipped, StateSkipped); ok {
		alerts = append(alerts, a)
	}
	return c, alerts, nil, nil
}

// claimTrigger takes the pending trigger of one job (`cron trigger`): it
// clears triggered_at and records the run as its own occurrence (trigger
// "trigger", keyed by the instant of the request) in the same pass, so the
// store write and the ledger row stand or fall together with the rest of
// the pass. The occurrence is claimed, or recorded skipped when the job
// was paused or completed since, or when an earlier run is still active and
// its overlap policy forbids a second. A row the ledger already holds (a
// pass that committed the ledger and died before the store write) is not
// run again: the trigger is only cleared. A triggered run does not move the
// schedule and does not count towards the repeat count, as `cron run`.
func (s *Scheduler) claimTrigger(ctx context.Context, b *LedgerTx, tx *Tx, id string, now time.Time, rep *ClaimReport) (c *Claim, alerts []pendingAlert, err error) {
	job, gerr := tx.Get(id)
	if gerr != nil {
		return nil, nil, nil // the store check reports it
	}
	at, ok := job.Triggered()
	if !ok {
		return nil, nil, nil
	}
	job.TriggeredAt = ""
	if err := tx.Put(job); err != nil {
		return nil, nil, err
	}
	reason := ""
	if !job.Runnable() {
		reason = "the job was paused or completed after it was triggered"
	} else if active, err := b.ActiveFor(ctx, job.ID); err != nil {
		return nil, nil, err
	} else if len(active) > 0 && job.Policy.OverlapMode() == OverlapForbid {
		reason = "previous run " + strings.Join(active, ", ") + " still running (overlap policy forbid)"
	}
	if reason != "" {
		execID, ins, err := b.Insert(ctx, job.ID, at, TriggerNext, StateSkipped, "triggered run: "+reason, now)
		if err != nil || !ins {
			return nil, nil, err
		}
		rep.Skipped++
		a, _ := notRunAlert(job, []Execution{{ID: execID, JobID: job.ID, ScheduledAt: at, State: StateSkipped, Error: "triggered run: " + reason}}, StateSkipped)
		return nil, []pendingAlert{a}, nil
	}
	execID, ins, err := b.Insert(ctx, job.ID, at, TriggerNext, StateClaimed, "", now)
	if err != nil {
		return nil, nil, err
	}
	if !ins {
		s.log().Warn("triggered run already recorded; not run again", "job", job.ID, "execution", execID)
		return nil, nil, nil
	}
	return &Claim{ExecutionID: execID, Job: *job, ScheduledAt: at, Trigger: TriggerNext, ClaimedAt: now}, nil, nil
}

// failJob makes a job whose claiming failed that job's error: it is paused
// with the reason (resume re-arms it), its due occurrence is recorded
// failed and, the first time, alerted.
func (s *Scheduler) failJob(ctx context.Context, b *LedgerTx, tx *Tx, id string, now time.Time, jobErr error) ([]pendingAlert, error) {
	msg := "scheduler error: " + jobErr.Error()
	s.log().Error("job could not be scheduled; paused", "job", id, "err", jobErr)
	tx.reload(id)
	at := now
	job, err := tx.Get(id)
	if err == nil {
		if t, ok := job.NextRun(); ok {
			at = t
		}
		pause(job, now, msg)
		job.NextRunAt, job.LastStatus, job.LastError = "", "error", NullString(msg)
		if err := tx.Put(job); err != nil {
			return nil, err
		}
	} else {
		job = &Job{ID: id, Name: id}
	}
	execID, ins, err := b.Insert(ctx, id, at, TriggerSched, StateFailed, msg+" (the job was paused; fix it, then cron resume "+id+")", now)
	if err != nil || !ins {
		return nil, err
	}
	return []pendingAlert{{deliver: job.Deliver, msg: Message{ExecutionID: execID, JobID: id, JobName: job.Name,
		ScheduledAt: at, Kind: DeliverAlert, Status: StateFailed, Error: msg,
		Text: "The scheduler could not run this job and paused it: " + jobErr.Error() + "\nFix it, then run `hermes-pipe cron resume " + id + "`."}}}, nil
}

// recordInvalid records a stored job that cannot be scheduled, once per
// problem (keyed by its next_run_at), and alerts it the first time.
func (s *Scheduler) recordInvalid(ctx context.Context, b *LedgerTx, tx *Tx, inv JobError, now time.Time) ([]pendingAlert, error) {
	tx.index()
	e := tx.byID[inv.ID]
	at := time.Unix(0, 0).UTC()
	deliver, name := "local", inv.ID
	if e != nil {
		r := gjson.GetManyBytes(e.raw, "next_run_at", "deliver", "name")
		if t, err := parseTimestamp(r[0].String(), time.UTC); err == nil {
			at = t.UTC()
		}
		if r[1].Type == gjson.String {
			deliver = r[1].String()
		}
		if r[2].Type == gjson.String && r[2].String() != "" {
			name = r[2].String()
		}
	}
	if !validJobID(inv.ID) {
		return nil, nil // no safe folder or ledger key to record it under; reported only
	}
	msg := "job refused on load: " + inv.Error
	execID, ins, err := b.Insert(ctx, inv.ID, at, TriggerCheck, StateFailed, msg, now)
	if err != nil || !ins {
		return nil, err
	}
	return []pendingAlert{{deliver: deliver, msg: Message{ExecutionID: execID, JobID: inv.ID, JobName: name,
		ScheduledAt: at, Kind: DeliverAlert, Status: StateFailed, Error: msg,
		Text: "This job in jobs.json cannot be scheduled and does not run until it is fixed: " + inv.Error}}}, nil
}

// notRunAlert summarises the occurrences of one job recorded missed or
// skipped in one pass as one alert; ok is false when there are none.
func notRunAlert(job *Job, rows []Execution, state string) (pendingAlert, bool) {
	if len(rows) == 0 {
		return pendingAlert{}, false
	}
	var b strings.Builder
	verb := "did not run"
	if state == StateSkipped {
		verb = "was skipped"
	}
	if len(rows) == 1 {
		fmt.Fprintf(&b, "The occurrence scheduled at %s %s: %s\n", rows[0].ScheduledAt.In(job.Location()).Format(time.RFC3339), verb, rows[0].Error)
	} else {
		fmt.Fprintf(&b, "%d occurrences %s:\n", len(rows), strings.Replace(verb, "was", "were", 1))
		for i, r := range rows {
			if i == 20 && len(rows) > 21 {
				fmt.Fprintf(&b, "- ... %d more\n", len(rows)-21)
				r = rows[len(rows)-1]
			} else if i > 20 {
				break
			}
			fmt.Fprintf(&b, "- %s: %s\n", r.ScheduledAt.In(job.Location()).Format(time.RFC3339), r.Error)
		}
	}
	last := rows[len(rows)-1]
	return pendingAlert{deliver: job.Deliver, msg: Message{ExecutionID: last.ID, JobID: job.ID, JobName: job.Name,
		ScheduledAt: last.ScheduledAt, Kind: DeliverAlert, Status: state, Text: b.String(), Error: last.Error}}, true
}

// sendAlerts delivers alerts through each job's target and records the
// delivery on the execution row it reports.
func (s *Scheduler) sendAlerts(ctx context.Context, alerts []pendingAlert) {
	if len(alerts) == 0 {
		return
	}
	d := &deliverer{home: s.Home, client: s.HTTPClient, backoff: s.WebhookBackoff}
	dctx := context.WithoutCancel(ctx)
	for _, a := range alerts {
		summary := d.deliver(dctx, a.deliver, a.msg)
		if err := s.Ledger.SetDelivery(dctx, a.msg.ExecutionID, summary); err != nil {
			s.log().Error("recording an alert's delivery failed", "execution", a.msg.ExecutionID, "err", err)
		}
	}
}

// advance decides what happens to a due job at now, records it in the
// ledger and moves the job's next_run_at past now. It returns the claim (if
// an occurrence runs now) and the rows it recorded missed and skipped.
//
// The steps, in the order their rows are written: the occurrences at or
// before now, oldest first; every one but the last recorded missed (the last
// too when it is past its grace window); the last claimed, or skipped when
// an earlier run is active and overlap is forbidden; then next_run_at.
func (s *Scheduler) advance(ctx context.Context, b *LedgerTx, job *Job, now time.Time) (c *Claim, missed, skipped []Execution, err error) {
	loc := job.Location()
	first, ok := job.NextRun()
	if !ok {
		return nil, nil, nil, nil
	}
	grace := graceOf(job, first, loc)
	occ := dueOccurrences(job, first, now, loc, s.maxMissedRows())
	last := occ.at[len(occ.at)-1]
	runIt := now.Sub(last) <= grace
	if missed, err = recordMissed(ctx, b, job, occ, runIt, grace, now); err != nil {
		return nil, nil, nil, err
	}
	if runIt {
		if c, skipped, err = claimOrSkip(ctx, b, job, last, now); err != nil {
			return nil, nil, nil, err
		}
	}
	moveNextRun(job, occ.next, occ.hasNext)
	if c != nil {
		c.Job = *job
	}
	return c, missed, skipped, nil
}

// maxMissedRows is MaxMissedRows, 1000 when unset.
func (s *Scheduler) maxMissedRows() int {
	if s.MaxMissedRows <= 0 {
		return 1000
	}
	return s.MaxMissedRows
}

// graceOf is how late the occurrence at may start and still run.
func graceOf(job *Job, at time.Time, loc *time.Location) time.Duration {
	if job.Schedule.Kind == KindOnce && job.Policy.StartingDeadline() <= 0 {
		// As in Hermes, a one-shot found late still runs once: "in 30m
		// check the deploy" must not vanish because the machine was off.
		return MaxDuration
	}
	return GraceFor(job.Schedule, at, loc, job.Policy.StartingDeadline())
}

// occurrences are a job's occurrences at or before now, oldest first (only
// the last may run), and the one after them.
type occurrences struct {
	at []time.Time
	// truncated counts the earliest occurrences left out of at (at most
	// maxRows+1 are listed).
	truncated int
	next      time.Time
	hasNext   bool
}

// dueOccurrences lists the job's occurrences from first up to now.
func dueOccurrences(job *Job, first, now time.Time, loc *time.Location, maxRows int) occurrences {
	var o occurrences
	switch job.Schedule.Kind {
	case KindInterval:
		p := job.Schedule.interval()
		k := int(now.Sub(first) / p)
		start := max(0, k-maxRows)
		o.truncated = start
		for i := start; i <= k; i++ {
			o.at = append(o.at, first.Add(time.Duration(i)*p))
		}
		o.next, o.hasNext = first.Add(time.Duration(k+1)*p), true
	case KindOnce:
		o.at = []time.Time{first}
	default:
		at, ok := first, true
		for !at.After(now) {
			o.at = append(o.at, at)
			if len(o.at) > maxRows {
				o.at = o.at[1:]
				o.truncated++
			}
			if at, ok = job.Schedule.Next(at, loc); !ok {
				break
			}
		}
		o.next, o.hasNext = at, ok
	}
	return o
}

// recordMissed records every occurrence but the last missed, and the last
// too when it does not run; it returns the rows it inserted.
func recordMissed(ctx context.Context, b *LedgerTx, job *Job, occ occurrences, runIt bool, grace time.Duration, now time.Time) (missed []Execution, err error) {
	last := occ.at[len(occ.at)-1]
	for i, at := range occ.at {
		if i == len(occ.at)-1 && runIt {
			break
		}
		reason := fmt.Sprintf("not started within the grace window of %s (checked at %s)", grace, now.Format(time.RFC3339))
		if i < len(occ.at)-1 {
			reason = fmt.Sprintf("superseded by the later occurrence %s (no catch-up bursts)", last.Format(time.RFC3339))
		}
		if i == 0 && occ.truncated > 0 {
			reason += fmt.Sprintf("; %d earlier occurrences were not listed", occ.truncated)
		}
		if id, ins, err := b.Insert(ctx, job.ID, at, TriggerSched, StateMissed, reason, now); err != nil {
			return nil, err
		} else if ins {
			missed = append(missed, Execution{ID: id, JobID: job.ID, ScheduledAt: at, State: StateMissed, Error: reason})
		}
	}
	return missed, nil
}

// claimOrSkip claims the occurrence at last (counting it towards the job's
// repeat count), or records it skipped when an earlier run is still active
// and the overlap policy forbids a second. A row the ledger already holds
// is neither claimed nor skipped again.
func claimOrSkip(ctx context.Context, b *LedgerTx, job *Job, last, now time.Time) (c *Claim, skipped []Execution, err error) {
	active, err := b.ActiveFor(ctx, job.ID)
	if err != nil {
		return nil, nil, err
	}
	if len(active) > 0 && job.Policy.OverlapMode() == OverlapForbid {
		reason := "previous run " + strings.Join(active, ", ") + " still running (overlap policy forbid)"
		if id, ins, err := b.Insert(ctx, job.ID, last, TriggerSched, StateSkipped, reason, now); err != nil {
			return nil, nil, err
		} else if ins {
			skipped = append(skipped, Execution{ID: id, JobID: job.ID, ScheduledAt: last, State: StateSkipped, Error: reason})
		}
		return nil, skipped, nil
	}
	id, ins, err := b.Insert(ctx, job.ID, last, TriggerSched, StateClaimed, "", now)
	if err != nil {
		return nil, nil, err
	}
	if ins {
		job.Repeat.Completed++
		c = &Claim{ExecutionID: id, ScheduledAt: last, Trigger: TriggerSched, ClaimedAt: now}
	}
	return c, nil, nil
}

// moveNextRun moves the job's next_run_at to next, or completes and
// disables the job when it has no next occurrence or has run its repeat
// count.
func moveNextRun(job *Job, next time.Time, hasNext bool) {
	if job.Repeat.Times != nil && job.Repeat.Completed >= *job.Repeat.Times {
		hasNext = false
	}
	if hasNext {
		job.NextRunAt = NullString(fmtTime(next))
	} else {
		job.NextRunAt = ""
		job.State = StateCompleted
		job.Enabled = false
	}
}

// Result is how one execution ended.
type Result struct {
	ExecutionID string `json:"execution_id"`
	JobID       string `json:"job_id"`
	State       string `json:"state"`
	Error       string `json:"error,omitempty"`
	Output      string `json:"output,omitempty"`
	Delivery    string `json:"delivery,omitempty"`
}

// Execute runs one claimed occurrence: guards again, the script or agent,
// delivery, then the ledger's terminal state and the job's last_* fields. It
// blocks until the run ends (bounded by the job's wall-clock cap) and never
// returns an error: failures are the execution's outcome.
func (s *Scheduler) Execute(ctx context.Context, c Claim) Result {
	job := c.Job
	res := Result{ExecutionID: c.ExecutionID, JobID: job.ID}
	if err := s.Ledger.Start(ctx, c.ExecutionID, s.now()); err != nil {
		res.State, res.Error = StateFailed, err.Error()
		return res
	}
	out := s.runSafe(ctx, &job, c)

	kind := DeliverOutput
	switch {
	case out.State != StateDone:
		kind = DeliverAlert
	case strings.TrimSpace(out.Output) == "":
		kind = "" // silent
	}
	if kind != "" {
		d := &deliverer{home: s.Home, client: s.HTTPClient, backoff: s.WebhookBackoff}
		text := out.Output
		if kind == DeliverAlert && text == "" {
			text = out.Error
		}
		out.Delivery = d.deliver(context.WithoutCancel(ctx), job.Deliver, Message{
			ExecutionID: c.ExecutionID, JobID: job.ID, JobName: job.Name, ScheduledAt: c.ScheduledAt,
			Kind: kind, Status: out.State, Text: text, ExitCode: out.ExitCode, Error: out.Error,
		})
	} else {
		out.Delivery = "silent"
	}
	fctx := context.WithoutCancel(ctx)
	if _, err := s.Ledger.Finish(fctx, c.ExecutionID, out, s.now()); err != nil {
		s.log().Error("ledger finish failed", "execution", c.ExecutionID, "err", err)
	}
	status := "ok"
	if out.State != StateDone {
		status = "error"
	}
	err := s.Store.Update(fctx, func(tx *Tx) error {
		j, err := tx.Get(job.ID)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		j.LastRunAt = NullString(fmtTime(c.ClaimedAt))
		j.LastStatus = NullString(status)
		j.LastError = NullString(out.Error)
		return tx.Put(j)
	})
	if err != nil {
		s.log().Error("store update after run failed", "job", job.ID, "err", err)
	}
	res.State, res.Error, res.Output, res.Delivery = out.State, out.Error, out.Output, out.Delivery
	return res
}

// runSafe is run with a panic of the job's body (its script handling, its
// agent runner) turned into that execution's failure, so one job cannot take
// the scheduler and the other running jobs down with it.
func (s *Scheduler) runSafe(ctx context.Context, job *Job, c Claim) (out Outcome) {
	defer func() {
		if r := recover(); r != nil {
			s.log().Error("execution panicked", "execution", c.ExecutionID, "panic", r, "stack", string(debug.Stack()))
			out = Outcome{State: StateFailed, Error: fmt.Sprintf("panic during the execution: %v", r)}
		}
	}()
	return s.run(ctx, job, c)
}

// run executes the job body and classifies the outcome: the script (read,
// guarded, run confined), then, unless the script ends the execution, the
// agent with everything its prompt is built from guarded too.
func (s *Scheduler) run(ctx context.Context, job *Job, c Claim) Outcome {
	scriptPath, scriptText, err := readJobScript(s.Home, job)
	if err != nil {
		return failed(err)
	}
	if fs := Scan(job.Prompt, scriptText); len(fs) > 0 {
		return failf("blocked by guard: %s", describeFindings(fs))
	}
	maxRun := job.Policy.MaxRuntime()
	rctx, cancel := runContext(ctx, maxRun)
	defer cancel()
	inactivity := s.inactivity(job)

	var scriptOut string
	if scriptPath != "" {
		out, end := s.runJobScript(rctx, job, c, scriptPath, maxRun, inactivity)
		if end != nil {
			return *end
		}
		scriptOut = out
	}
	if job.NoAgent {
		return failf("no_agent job has no script")
	}
	if s.Agent == nil {
		return failf("no agent runner configured for agent jobs")
	}
	aj, err := s.agentJob(ctx, job, c, scriptOut, maxRun, inactivity)
	if err != nil {
		return failed(err)
	}
	ar, err := s.Agent.RunAgent(rctx, aj)
	return agentOutcome(ctx, rctx, maxRun, ar, err)
}

// failf is a failed outcome whose error is the formatted text.
func failf(format string, args ...any) Outcome {
	return Outcome{State: StateFailed, Error: fmt.Sprintf(format, args...)}
}

// failed is a failed outcome whose error is err's text.
func failed(err error) Outcome {
	return Outcome{State: StateFailed, Error: err.Error()}
}

// readJobScript resolves the job's script (if it has one) inside the home
// folder and reads it; both are "" for a job without a script.
func readJobScript(home string, job *Job) (path, text string, err error) {
	if job.Script == "" {
		return "", "", nil
	}
	p, err := ResolveScript(home, string(job.Script))
	if err != nil {
		return "", "", err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", "", fmt.Errorf("read script: %v", err)
	}
	return p, string(b), nil
}

// runContext is the context of the job's body: ctx bounded by the job's
// wall-clock cap when it has one.
func runContext(ctx context.Context, maxRun time.Duration) (context.Context, context.CancelFunc) {
	if maxRun > 0 {
		return context.WithTimeout(ctx, maxRun)
	}
	return context.WithCancel(ctx)
}

// inactivity is the job's inactivity timeout: its own, or the scheduler's
// default (HERMES_CRON_TIMEOUT) when the job sets none.
func (s *Scheduler) inactivity(job *Job) time.Duration {
	if job.Policy.TimeoutSeconds == nil && s.DefaultInactivity != nil {
		return *s.DefaultInactivity
	}
	return job.Policy.Inactivity()
}

// runJobScript runs the job's script, confined unless its isolation is
// none, and returns its standard output for the agent. end is set when the
// script decides the execution's outcome: it failed or timed out, the job
// has no agent, or it printed nothing (silent, no agent call).
func (s *Scheduler) runJobScript(rctx context.Context, job *Job, c Claim, scriptPath string, maxRun, inactivity time.Duration) (stdout string, end *Outcome) {
	workdir := string(job.Workdir)
	iso := scriptIsolation(s.ScriptIsolation, job.Policy)
	var ro, rw []string
	var err error
	if iso == IsolationNone {
		if workdir == "" {
			workdir = s.Home
		}
		if job.Policy.ScriptIsolation == IsolationNone {
			s.log().Warn("script_isolation none: the script runs as this user with its files, network and processes in reach", "job", job.ID, "execution", c.ExecutionID)
		}
	} else if workdir, ro, rw, err = scriptFolders(s.Home, job.ID, scriptPath, workdir); err != nil {
		out := failf("script: cannot confine the script: %v", err)
		return "", &out
	}
	r := runScript(rctx, scriptRun{
		Path: scriptPath, Workdir: workdir, EnvAllow: job.Policy.EnvAllow,
		MaxRuntime: maxRun, Inactivity: inactivity,
		Isolation: iso, Network: job.Policy.ScriptNetwork, ReadOnly: ro, ReadWrite: rw,
		Env: []string{
			"HERMES_PIPE_HOME=" + s.Home, "HERMES_PIPE_JOB_ID=" + job.ID,
			"HERMES_PIPE_EXECUTION_ID=" + c.ExecutionID, "HERMES_PIPE_SCHEDULED_AT=" + fmtTime(c.ScheduledAt),
		},
	})
	return scriptOutcome(job, r)
}

// scriptOutcome classifies a finished script run: end is set when it
// decides the execution's outcome, otherwise stdout goes to the agent.
func scriptOutcome(job *Job, r ScriptResult) (stdout string, end *Outcome) {
	code := r.ExitCode
	switch {
	case r.Err != nil:
		return "", &Outcome{State: StateFailed, Error: "script: " + r.Err.Error(), ExitCode: &code}
	case r.TimedOut:
		return "", &Outcome{State: StateFailed, Error: "script stopped: " + r.Reason, Output: r.Stdout, ExitCode: &code}
	case r.ExitCode != 0:
		msg := fmt.Sprintf("script exited with status %d", r.ExitCode)
		if tail := lastLines(r.Stderr, 20); tail != "" {
			msg += "; stderr:\n" + tail
		}
		return "", &Outcome{State: StateFailed, Error: msg, Output: r.Stdout, ExitCode: &code}
	case job.NoAgent:
		return "", &Outcome{State: StateDone, Output: r.Stdout, ExitCode: &code}
	case strings.TrimSpace(r.Stdout) == "":
		return "", &Outcome{State: StateDone} // nothing to look at: silent, no agent call
	}
	return r.Stdout, nil
}

// agentJob builds the agent's request for one execution: the latest outputs
// of the context_from jobs, the job's MCP configuration and toolsets, its
// skills, SOUL.md and the workdir's project context, each read now and
// guarded. An error is the execution's failure text.
func (s *Scheduler) agentJob(ctx context.Context, job *Job, c Claim, scriptOut string, maxRun, inactivity time.Duration) (AgentJob, error) {
	contexts, err := s.contextOutputs(ctx, job)
	if err != nil {
		return AgentJob{}, err
	}
	if err := guardRuntimeInputs(job, contexts, scriptOut); err != nil {
		return AgentJob{}, err
	}
	// The job's MCP configuration is read now, so a missing or broken file
	// fails this execution alone, naming it; its servers are started by
	// the runner before the first model call.
	mcpCfg, err := jobMCP(job)
	if err != nil {
		return AgentJob{}, fmt.Errorf("%v; fix the file or `cron edit %s --mcp-config FILE`", err, job.ID)
	}
	if err := checkToolsets(job.EnabledToolsets, mcpCfg.Toolsets()); err != nil {
		return AgentJob{}, fmt.Errorf("%v; edit the job's toolsets", err)
	}
	toolsets, off, err := s.jobToolsets(job)
	if err != nil {
		return AgentJob{}, err
	}
	mcpCfg = withoutServers(mcpCfg, off)
	sampling, err := job.Policy.Sampling.LLM()
	if err != nil {
		return AgentJob{}, fmt.Errorf("%v; `cron edit %s` with the sampling flags (--no-sampling drops them)", err, job.ID)
	}
	skillsDir := job.Policy.SkillsDir
	if skillsDir == "" {
		skillsDir = SkillsDir(s.Home)
	}
	skills := jobSkills(job)
	workdir := string(job.Workdir)
	prompt, err := s.withJobSkills(skills, buildPrompt(job, contexts, scriptOut))
	if err != nil {
		return AgentJob{}, err
	}
	soulText, files, err := s.contextFiles(workdir)
	if err != nil {
		return AgentJob{}, err
	}
	return AgentJob{
		JobID: job.ID, ExecutionID: c.ExecutionID, Name: job.Name, ScheduledAt: c.ScheduledAt,
		Prompt: prompt, SystemPrompt: systemPrompt(soulText, files), Model: string(job.Model), Provider: string(job.Provider),
		BaseURL: string(job.BaseURL), Skills: skills, Toolsets: toolsets, Workdir: workdir, MCP: mcpCfg, SkillsDir: skillsDir,
		InactivityTimeout: inactivity, MaxRuntime: maxRun,
		MaxTurns: job.Policy.MaxTurns, CommandTimeout: time.Duration(job.Policy.CommandTimeoutSeconds) * time.Second, APIKeyEnv: job.KeyEnv(), Sandbox: job.Policy.Sandbox,
		Sampling: sampling,
		OutDir:   RunDir(s.Home, job.ID, c.ExecutionID),
	}, nil
}

// jobToolsets is the toolsets the job's execution is given: its own,
// narrowed by the cron policy, without the operator's disabled_toolsets
// (<home>/cron/config.yaml, read now); off is that list. A bad config
// file, or a job left with no toolset, fails the execution naming the file.
func (s *Scheduler) jobToolsets(job *Job) (toolsets, off []string, err error) {
	cfg, err := LoadConfig(s.Home)
	if err != nil {
		return nil, nil, err
	}
	toolsets, disabled := cfg.JobToolsets(job)
	if len(disabled) > 0 {
		s.log().Info("toolsets disabled by the operator's config removed", "job", job.ID, "disabled", disabled, "config", ConfigPath(s.Home))
	}
	if len(toolsets) == 0 {
		return nil, nil, fmt.Errorf("every toolset of the job (%s) is disabled by disabled_toolsets in %s; edit the job's toolsets or the file", strings.Join(disabled, ", "), ConfigPath(s.Home))
	}
	return toolsets, cfg.DisabledToolsets, nil
}

// withoutServers drops the MCP servers whose toolset is disabled, so they
// are not even started; nil when none is left.
func withoutServers(cfg *mcp.Config, off []string) *mcp.Config {
	if cfg == nil || len(off) == 0 {
		return cfg
	}
	cfg.Servers = slices.DeleteFunc(cfg.Servers, func(sv *mcp.Server) bool { return slices.Contains(off, sv.Toolset) })
	if len(cfg.Servers) == 0 {
		return nil
	}
	return cfg
}

// contextOutputs is the latest output of each context_from job that has
// one, in the job's order.
func (s *Scheduler) contextOutputs(ctx context.Context, job *Job) ([]contextOutput, error) {
	var contexts []contextOutput
	// jobs.json is read at most once, for the names of the context jobs; if
	// it cannot be read the ids stand in for the names.
	loadJobs := sync.OnceValue(func() *Tx {
		tx, _ := s.Store.Load()
		return tx
	})
	for _, id := range job.ContextFrom {
		e, ok, err := s.Ledger.LatestOutput(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("context_from %s: %v", id, err)
		}
		if !ok {
			continue
		}
		name := id
		if tx := loadJobs(); tx != nil {
			if j, err := tx.Get(id); err == nil {
				name = j.Name
			}
		}
		contexts = append(contexts, contextOutput{id: id, name: name, text: e.Output, at: e.ScheduledAt})
	}
	return contexts, nil
}

// guardRuntimeInputs scans the text from other jobs and from the script,
// which reaches the model too: a hit stops the execution (an alert names
// the rule and the source).
func guardRuntimeInputs(job *Job, contexts []contextOutput, scriptOut string) error {
	for _, c := range contexts {
		if fs := ScanRuntime(c.text); len(fs) > 0 {
			return fmt.Errorf("blocked by guard: the latest output of context_from job %q (%s): %s", c.name, c.id, describeFindings(fs))
		}
	}
	if fs := ScanRuntime(scriptOut); len(fs) > 0 {
		return fmt.Errorf("blocked by guard: the output of script %s: %s", job.Script, describeFindings(fs))
	}
	return nil
}

// withJobSkills places the job's skills in the prompt as Hermes does; a
// missing skill, or one the guard refuses, fails the execution naming it.
func (s *Scheduler) withJobSkills(skills []string, prompt string) (string, error) {
	if len(skills) == 0 {
		return prompt, nil
	}
	texts := make([]string, len(skills))
	for i, name := range skills {
		text, err := LoadSkill(s.Home, name)
		if err != nil {
			return "", err
		}
		if fs := ScanRuntime(text); len(fs) > 0 {
			return "", fmt.Errorf("blocked by guard: skill %q: %s", name, describeFindings(fs))
		}
		texts[i] = text
	}
	return withSkills(skills, texts, prompt), nil
}

// contextFiles reads SOUL.md and the workdir's project context, which reach
// the model as Hermes places them, and guards each.
func (s *Scheduler) contextFiles(workdir string) (soulText string, files []contextFile, err error) {
	soulText, err = soul(s.Home)
	if err != nil {
		return "", nil, err
	}
	files, err = projectContext(workdir)
	if err != nil {
		return "", nil, err
	}
	for _, f := range append([]contextFile{{"SOUL.md", soulText}}, files...) {
		if fs := ScanRuntime(f.text); len(fs) > 0 {
			return "", nil, fmt.Errorf("blocked by guard: context file %s: %s", f.name, describeFindings(fs))
		}
	}
	return soulText, files, nil
}

// agentOutcome classifies how the agent's run ended: rctx ending while ctx
// has not is the job's wall-clock cap.
func agentOutcome(ctx, rctx context.Context, maxRun time.Duration, ar AgentResult, err error) Outcome {
	switch {
	case err != nil:
		return failf("agent: %v", err)
	case rctx.Err() != nil && ctx.Err() == nil:
		return Outcome{State: StateFailed, Error: fmt.Sprintf("wall-clock cap of %s reached", maxRun), Output: ar.Output}
	case ar.Outcome != "" && ar.Outcome != schemas.OutcomeCompleted:
		msg := "agent run ended with outcome " + string(ar.Outcome)
		if ar.Error != "" {
			msg += ": " + ar.Error
		}
		return Outcome{State: StateFailed, Error: msg, Output: ar.Output}
	case ar.Error != "":
		return Outcome{State: StateFailed, Error: ar.Error, Output: ar.Output}
	}
	return Outcome{State: StateDone, Output: ar.Output}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// TickReport is the outcome of one `cron tick` pass.
type TickReport struct {
	ClaimReport
	Results []Result
}

// Tick is one full pass: ClaimDue, then every claimed occurrence executed
// through a pool of MaxParallel workers (default DefaultMaxParallel), in
// claim order; it returns when all have finished. A busy tick lock is not an
// error (Busy is set).
func (s *Scheduler) Tick(ctx context.Context) (TickReport, error) {
	cr, err := s.ClaimDue(ctx)
	rep := TickReport{ClaimReport: cr}
	if err != nil {
		return rep, err
	}
	rep.Results = make([]Result, len(cr.Claims))
	pool := s.newPool()
	for i, c := range cr.Claims {
		pool.execute(ctx, c, func(r Result) { rep.Results[i] = r })
	}
	pool.wait()
	return rep, nil
}

// pool executes claimed occurrences with at most MaxParallel at once; the
// others wait their turn in claim order. Every claim given to it is
// executed, also after ctx ends (Execute then records the cancellation), so
// no claimed occurrence is left without an outcome.
type pool struct {
	s   *Scheduler
	sem chan struct{}
	wg  sync.WaitGroup
}

func (s *Scheduler) newPool() *pool {
	limit := s.MaxParallel
	if limit <= 0 {
		limit = DefaultMaxParallel
	}
	return &pool{s: s, sem: make(chan struct{}, limit)}
}

// execute starts c as soon as a slot is free and returns at once; done, when
// set, receives the result.
func (p *pool) execute(ctx context.Context, c Claim, done func(Result)) {
	p.wg.Go(func() {
		select {
		case p.sem <- struct{}{}:
			defer func() { <-p.sem }()
		case <-ctx.Done():
		}
		r := p.s.Execute(ctx, c)
		if done != nil {
			done(r)
		}
	})
}

// wait blocks until every claim given to execute has finished.
func (p *pool) wait() { p.wg.Wait() }

// RunNow executes a job immediately as a manual occurrence (it does not move
// the schedule) and blocks until it ends.
func (s *Scheduler) RunNow(ctx context.Context, jobID string) (Result, error) {
	tx, err := s.Store.Load()
	if err != nil {
		return Result{}, err
	}
	job, err := tx.Get(jobID)
	if err != nil {
		return Result{}, err
	}
	now := s.now()
	var id string
	err = s.Ledger.Batch(ctx, func(b *LedgerTx) error {
		var ins bool
		id, ins, err = b.Insert(ctx, job.ID, now, TriggerManual, StateClaimed, "", now)
		if err == nil && !ins {
			err = fmt.Errorf("manual run %s already recorded", id)
		}
		return err
	})
	if err != nil {
		return Result{}, err
	}
	return s.Execute(ctx, Claim{ExecutionID: id, Job: *job, ScheduledAt: now, Trigger: TriggerManual, ClaimedAt: now}), nil
}

// TriggerJob marks a job to run at the next tick (`cron trigger`, as
// Hermes' trigger) and returns at once; the tick records and runs it as its
// own occurrence (see claimTrigger). A job already triggered keeps its
// pending trigger (pending reports it); a paused or completed job is
// refused, as Hermes refuses it. It writes jobs.json under the store lock.
func TriggerJob(ctx context.Context, st *Store, id string, now time.Time) (j *Job, pending bool, err error) {
	err = st.Update(ctx, func(tx *Tx) error {
		job, err := tx.Get(id)
		if err != nil {
			return err
		}
		for _, inv := range tx.Invalid() {
			if inv.ID == id {
				return usagef("job %s cannot be scheduled (%s); fix it first", id, inv.Error)
			}
		}
		if !job.Runnable() {
			return usagef("job %s is %s; resume it before triggering it (or `cron run %s` to run it now)", id, job.ShownState(), id)
		}
		j = job
		if _, ok := job.Triggered(); ok {
			pending = true
			return nil
		}
		job.TriggeredAt = NullString(fmtTime(now))
		return tx.Put(job)
	})
	if err != nil {
		return nil, false, err
	}
	return j, pending, nil
}

// ParseCronTimeout reads HERMES_CRON_TIMEOUT as Hermes does: seconds (a
// fraction allowed), 0 meaning no inactivity timeout. ok is false when it is
// unset; a value that is not a number of seconds is an error (Hermes would
// quietly use its default).
func ParseCronTimeout(v string) (d time.Duration, ok bool, err error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f > float64(MaxDuration/time.Second) {
		return 0, false, usagef("HERMES_CRON_TIMEOUT=%q: want a number of seconds (0: no inactivity timeout)", v)
	}
	return time.Duration(f * float64(time.Second)), true, nil
}
