package cron

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	_ "modernc.org/sqlite" // pure-Go SQLite driver "sqlite"
)

// Execution states. claimed and running are transient; the others are
// terminal and written once.
const (
	StateClaimed  = "claimed"
	StateRunning  = "running"
	StateDone     = "completed"
	StateFailed   = "failed"
	StateSkipped  = "skipped"
	StateMissed   = "missed"
	StateUnknown  = "unknown"
	TriggerSched  = "schedule"
	TriggerManual = "manual"
	// TriggerNext marks the run `cron trigger` asked for at the next tick:
	// its own occurrence, keyed by the instant of the request.
	TriggerNext = "trigger"
	// TriggerCheck marks the record of a stored job found unschedulable
	// (it does not decode, its schedule is bad): one row, and one alert,
	// per problem, never an execution.
	TriggerCheck = "check"
)

// Execution is one row of the ledger: one occurrence of one job.
type Execution struct {
	ID          string    `json:"id"`
	JobID       string    `json:"job_id"`
	ScheduledAt time.Time `json:"scheduled_at"`
	Trigger     string    `json:"trigger"`
	State       string    `json:"state"`
	Owner       string    `json:"owner,omitempty"`
	ClaimedAt   time.Time `json:"claimed_at"`
	StartedAt   time.Time `json:"started_at,omitzero"`
	FinishedAt  time.Time `json:"finished_at,omitzero"`
	ExitCode    *int      `json:"exit_code,omitempty"`
	Error       string    `json:"error,omitempty"`
	Output      string    `json:"output,omitempty"`
	Delivery    string    `json:"delivery,omitempty"`
}

// Ledger is the SQLite execution ledger (<home>/cron/executions.db). Each
// occurrence is one row keyed by job id, scheduled instant and trigger; the
// key makes a second claim of the same occurrence impossible, whatever the
// locks do. It is safe for concurrent use and across processes (WAL mode,
// busy timeout).
type Ledger struct {
	db    *sql.DB
	owner string
}

const ledgerSchema = `
CREATE TABLE IF NOT EXISTS executions (
	id           TEXT PRIMARY KEY,
	job_id       TEXT NOT NULL,
	scheduled_at INTEGER NOT NULL,
	trigger      TEXT NOT NULL,
	state        TEXT NOT NULL,
	owner        TEXT NOT NULL DEFAULT '',
	claimed_at   INTEGER NOT NULL,
	started_at   INTEGER,
	finished_at  INTEGER,
	exit_code    INTEGER,
	error        TEXT NOT NULL DEFAULT '',
	output       TEXT NOT NULL DEFAULT '',
	delivery     TEXT NOT NULL DEFAULT '',
	UNIQUE (job_id, scheduled_at, trigger)
);
CREATE INDEX IF NOT EXISTS executions_active ON executions(state) WHERE state IN ('claimed', 'running');
CREATE INDEX IF NOT EXISTS executions_job ON executions(job_id, scheduled_at);
`

// OpenLedger opens (creating if needed) the ledger database at path. Each
// caller should open its own handle; Close releases it.
func OpenLedger(ctx context.Context, path string) (*Ledger, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(15000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open ledger %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, ledgerSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("open ledger %s: %w", path, err)
	}
	_ = os.Chmod(path, 0o600)
	return &Ledger{db: db, owner: processOwner()}, nil
}

// Close closes the database handle.
func (l *Ledger) Close() error { return l.db.Close() }

// ExecutionID is the stable id of an occurrence; webhooks use it as the
// idempotency key.
func ExecutionID(jobID string, scheduled time.Time, trigger string) string {
	switch trigger {
	case TriggerManual:
		return jobID + "-m" + strconv.FormatInt(scheduled.UnixMilli(), 10)
	case TriggerNext:
		return jobID + "-t" + strconv.FormatInt(scheduled.UnixMilli(), 10)
	case TriggerCheck:
		return jobID + "-c" + strconv.FormatInt(scheduled.Unix(), 10)
	}
	return jobID + "-" + strconv.FormatInt(scheduled.Unix(), 10)
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// LedgerTx groups claims into one SQLite transaction.
type LedgerTx struct {
	tx    *sql.Tx
	owner string
}

// Batch runs fn in one write transaction (taken immediately, waiting on the
// busy timeout) and commits it if fn returns nil.
func (l *Ledger) Batch(ctx context.Context, fn func(b *LedgerTx) error) error {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("ledger begin: %w", err)
	}
	if err := fn(&LedgerTx{tx: tx, owner: l.owner}); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("ledger commit: %w", err)
	}
	return nil
}

// savepoint opens a nested transaction for one job's rows, so a job that
// fails half-way leaves none of them (rollbackTo) and the others commit.
func (b *LedgerTx) savepoint(ctx context.Context) error {
	if _, err := b.tx.ExecContext(ctx, `SAVEPOINT job`); err != nil {
		return fmt.Errorf("ledger savepoint: %w", err)
	}
	return nil
}

// release keeps the rows written since savepoint.
func (b *LedgerTx) release(ctx context.Context) error {
	if _, err := b.tx.ExecContext(ctx, `RELEASE job`); err != nil {
		return fmt.Errorf("ledger release: %w", err)
	}
	return nil
}

// rollbackTo drops the rows written since savepoint.
func (b *LedgerTx) rollbackTo(ctx context.Context) error {
	if _, err := b.tx.ExecContext(ctx, `ROLLBACK TO job`); err != nil {
		return fmt.Errorf("ledger rollback: %w", err)
	}
	return b.release(ctx)
}

// Insert adds the occurrence with the given state unless a row for it
// exists; inserted is false when another claimant got there first.
func (b *LedgerTx) Insert(ctx context.Context, jobID string, scheduled time.Time, trigger, state, reason string, now time.Time) (id string, inserted bool, err error) {
	id = ExecutionID(jobID, scheduled, trigger)
	var fin any
	owner := ""
	if state == StateClaimed || state == StateRunning {
		owner = b.owner
	} else {
		fin = ms(now)
	}
	res, err := b.tx.ExecContext(ctx, `INSERT INTO executions (id, job_id, scheduled_at, trigger, state, owner, claimed_at, finished_at, error)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		id, jobID, scheduled.Unix(), trigger, state, owner, ms(now), fin, reason)
	if err != nil {
		return id, false, fmt.Errorf("ledger insert %s: %w", id, err)
	}
	n, _ := res.RowsAffected()
	return id, n == 1, nil
}

// ActiveFor lists the job's claimed or running executions whose owner
// process is alive.
func (b *LedgerTx) ActiveFor(ctx context.Context, jobID string) ([]string, error) {
	rows, err := b.tx.QueryContext(ctx, `SELECT id, owner FROM executions WHERE job_id = ? AND state IN ('claimed', 'running')`, jobID)
	if err != nil {
		return nil, fmt.Errorf("ledger active %s: %w", jobID, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, owner string
		if err := rows.Scan(&id, &owner); err != nil {
			return nil, err
		}
		if ownerAlive(owner) {
			out = append(out, id)
		}
	}
	return out, rows.Err()
}

// Start moves a claimed execution to running.
func (l *Ledger) Start(ctx context.Context, id string, now time.Time) error {
	res, err := l.db.ExecContext(ctx, `UPDATE executions SET state = 'running', started_at = ? WHERE id = ? AND state = 'claimed'`, ms(now), id)
	if err != nil {
		return fmt.Errorf("ledger start %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("ledger start %s: execution is no longer claimed", id)
	}
	return nil
}

// Outcome is what Finish writes.
type Outcome struct {
	State    string
	ExitCode *int
	Error    string
	Output   string
	Delivery string
}

const maxStoredOutput = 256 << 10

// Finish writes the terminal state of a running or claimed execution. It
// reports false when the row was already terminal (a terminal state is
// written once and never changed).
func (l *Ledger) Finish(ctx context.Context, id string, o Outcome, now time.Time) (bool, error) {
	out := o.Output
	if len(out) > maxStoredOutput {
		out = out[:maxStoredOutput]
	}
	var code any
	if o.ExitCode != nil {
		code = *o.ExitCode
	}
	res, err := l.db.ExecContext(ctx, `UPDATE executions SET state = ?, finished_at = ?, exit_code = ?, error = ?, output = ?, delivery = ?
		WHERE id = ? AND state IN ('claimed', 'running')`, o.State, ms(now), code, o.Error, out, o.Delivery, id)
	if err != nil {
		return false, fmt.Errorf("ledger finish %s: %w", id, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// SetDelivery records the delivery result of a terminal execution.
func (l *Ledger) SetDelivery(ctx context.Context, id, delivery string) error {
	_, err := l.db.ExecContext(ctx, `UPDATE executions SET delivery = ? WHERE id = ?`, delivery, id)
	if err != nil {
		return fmt.Errorf("ledger delivery %s: %w", id, err)
	}
	return nil
}

// RecoverOrphans marks claimed or running executions whose owner process is
// gone as unknown: they may or may not have had effects, so they are never
// retried. It returns the ids it marked.
func (l *Ledger) RecoverOrphans(ctx context.Context, now time.Time) ([]string, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT id, owner FROM executions WHERE state IN ('claimed', 'running')`)
	if err != nil {
		return nil, fmt.Errorf("ledger recover: %w", err)
	}
	var dead []string
	for rows.Next() {
		var id, owner string
		if err := rows.Scan(&id, &owner); err != nil {
			rows.Close()
			return nil, fmt.Errorf("ledger recover: %w", err)
		}
		if !ownerAlive(owner) {
			dead = append(dead, id)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger recover: %w", err)
	}
	var marked []string
	for _, id := range dead {
		res, err := l.db.ExecContext(ctx, `UPDATE executions SET state = 'unknown', finished_at = ?, error = 'the process running it ended without recording a result'
			WHERE id = ? AND state IN ('claimed', 'running')`, ms(now), id)
		if err != nil {
			return marked, fmt.Errorf("ledger recover %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			marked = append(marked, id)
		}
	}
	return marked, nil
}

const execColumns = `id, job_id, scheduled_at, trigger, state, owner, claimed_at, started_at, finished_at, exit_code, error, output, delivery`

func scanExecution(sc interface{ Scan(...any) error }) (Execution, error) {
	var e Execution
	var sched, claimed int64
	var started, finished, code sql.NullInt64
	if err := sc.Scan(&e.ID, &e.JobID, &sched, &e.Trigger, &e.State, &e.Owner, &claimed, &started, &finished, &code, &e.Error, &e.Output, &e.Delivery); err != nil {
		return e, err
	}
	e.ScheduledAt = time.Unix(sched, 0).UTC()
	e.ClaimedAt = time.UnixMilli(claimed).UTC()
	if started.Valid {
		e.StartedAt = time.UnixMilli(started.Int64).UTC()
	}
	if finished.Valid {
		e.FinishedAt = time.UnixMilli(finished.Int64).UTC()
	}
	if code.Valid {
		c := int(code.Int64)
		e.ExitCode = &c
	}
	return e, nil
}

// History returns a job's executions, oldest first; limit <= 0 means all,
// otherwise the newest limit rows.
func (l *Ledger) History(ctx context.Context, jobID string, limit int) ([]Execution, error) {
	q := `SELECT ` + execColumns + ` FROM executions WHERE job_id = ? ORDER BY scheduled_at DESC, claimed_at DESC`
	args := []any{jobID}
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	rows, err := l.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger history %s: %w", jobID, err)
	}
	defer rows.Close()
	var out []Execution
	for rows.Next() {
		e, err := scanExecution(rows)
		if err != nil {
			return nil, fmt.Errorf("ledger history %s: %w", jobID, err)
		}
		out = append(out, e)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, rows.Err()
}

// Get returns one execution by id.
func (l *Ledger) Get(ctx context.Context, id string) (Execution, error) {
	e, err := scanExecution(l.db.QueryRowContext(ctx, `SELECT `+execColumns+` FROM executions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return e, fmt.Errorf("%w: no execution %s", ErrUsage, id)
	}
	if err != nil {
		return e, fmt.Errorf("ledger get %s: %w", id, err)
	}
	return e, nil
}

// LatestOutput returns the newest completed execution of a job that
// produced output; ok is false when there is none.
func (l *Ledger) LatestOutput(ctx context.Context, jobID string) (Execution, bool, error) {
	e, err := scanExecution(l.db.QueryRowContext(ctx, `SELECT `+execColumns+` FROM executions
		WHERE job_id = ? AND state = 'completed' AND output != '' ORDER BY finished_at DESC LIMIT 1`, jobID))
	if errors.Is(err, sql.ErrNoRows) {
		return e, false, nil
	}
	if err != nil {
		return e, false, fmt.Errorf("ledger latest output %s: %w", jobID, err)
	}
	return e, true, nil
}

// All returns every execution (tests and audits), ordered by job and instant.
func (l *Ledger) All(ctx context.Context) ([]Execution, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT `+execColumns+` FROM executions ORDER BY job_id, scheduled_at, trigger`)
	if err != nil {
		return nil, fmt.Errorf("ledger list: %w", err)
	}
	defer rows.Close()
	var out []Execution
	for rows.Next() {
		e, err := scanExecution(rows)
		if err != nil {
			return nil, fmt.Errorf("ledger list: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
