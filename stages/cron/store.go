package cron

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gofrs/flock"
	"github.com/hermes-pipe/hermes-pipe/pipeline/atomicfile"
	"github.com/tidwall/gjson"
)

// ErrCorrupt marks a jobs.json that cannot be parsed. The file is never
// rewritten while corrupt.
var ErrCorrupt = errors.New("corrupt cron store")

// ErrLocked is returned when the store lock could not be taken in time; the
// write was refused.
var ErrLocked = errors.New("cron store is locked by another process")

// ErrNotFound is returned for an unknown job id; it wraps ErrUsage.
var ErrNotFound = fmt.Errorf("%w: no such job", ErrUsage)

// Store is the jobs.json file under <home>/cron. Reads need no lock because
// every write is an atomic rename; every read-modify-write holds an exclusive
// file lock. Several Store values (in one process or many) may share a folder.
type Store struct {
	Dir         string           // <home>/cron
	LockTimeout time.Duration    // how long Update waits for the lock; default 10 s
	Now         func() time.Time // clock seam for updated_at; default time.Now
}

// NewStore returns the store of a hermes-pipe home folder. It does no I/O.
func NewStore(home string) *Store {
	return &Store{Dir: filepath.Join(home, "cron")}
}

// Path is the jobs.json path.
func (s *Store) Path() string { return filepath.Join(s.Dir, "jobs.json") }

func (s *Store) indexPath() string { return filepath.Join(s.Dir, ".jobs.index") }
func (s *Store) lockPath() string  { return filepath.Join(s.Dir, ".jobs.lock") }

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Store) ensureDir() error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("create cron folder: %w", err)
	}
	return nil
}

// entry is one job of the file: its raw JSON and, once decoded, the job.
type entry struct {
	raw     []byte
	job     *Job
	id      string
	idKnown bool
	dirty   bool
	deleted bool
	// invalid is why the stored job cannot be scheduled (it does not decode,
	// its id is not a string, its schedule or zone is bad); nil when valid
	// or not checked.
	invalid error
}

// JobError names one job that cannot be scheduled, and why.
type JobError struct {
	ID    string `json:"id"`
	Error string `json:"error"`
}

func (e JobError) String() string { return "job " + e.ID + ": " + e.Error }

// Tx is a view of the store's jobs for one read or one read-modify-write.
// Jobs are decoded lazily, so touching one job of 10,000 costs one decode.
type Tx struct {
	store   *Store
	entries []*entry
	byID    map[string]*entry
	stamp   string
	// prevDue is the index's next-due instant when the index matched the file.
	prevDue     *time.Time
	onlyAppends bool
	changed     bool
}

// Load reads jobs.json without locking. A missing file is an empty store.
func (s *Store) Load() (*Tx, error) {
	data, stamp, err := s.read()
	if err != nil {
		return nil, err
	}
	tx, err := s.parse(data, stamp)
	if err != nil {
		return nil, err
	}
	return tx, nil
}

func (s *Store) read() ([]byte, string, error) {
	f, err := os.Open(s.Path())
	if errors.Is(err, os.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read cron store: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, "", fmt.Errorf("read cron store: %w", err)
	}
	data := make([]byte, st.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, "", fmt.Errorf("read cron store %s: %w", s.Path(), err)
	}
	return data, stampOf(st), nil
}

func stampOf(st os.FileInfo) string {
	var ino uint64
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		ino = sys.Ino
	}
	return strconv.FormatInt(st.Size(), 10) + ":" + strconv.FormatInt(st.ModTime().UnixNano(), 10) + ":" + strconv.FormatUint(ino, 10)
}

func (s *Store) corrupt(reason string) error {
	return fmt.Errorf("%w: %s: %s; the file was left untouched (the previous version is %s.bak) — fix or restore it", ErrCorrupt, s.Path(), reason, s.Path())
}

func (s *Store) parse(data []byte, stamp string) (*Tx, error) {
	tx := &Tx{store: s, stamp: stamp, onlyAppends: true}
	if len(bytes.TrimSpace(data)) == 0 {
		if stamp != "" && len(data) > 0 {
			return nil, s.corrupt("file is blank")
		}
		if stamp != "" {
			return nil, s.corrupt("file is empty")
		}
		zero := time.Time{}
		tx.prevDue = &zero
		return tx, nil
	}
	if idx, err := os.ReadFile(s.indexPath()); err == nil && stamp != "" {
		var ix storeIndex
		if json.Unmarshal(idx, &ix) == nil && ix.fresh(stamp) {
			t := time.Time{}
			if ix.NextDue != "" {
				t, _ = time.Parse(time.RFC3339, ix.NextDue)
			}
			// The file is exactly what this store last wrote: split its
			// one-job-per-line layout without a full JSON scan.
			if raws, ok := splitOwnLayout(data); ok && len(raws) == ix.Jobs {
				for _, r := range raws {
					tx.entries = append(tx.entries, &entry{raw: r})
				}
				tx.prevDue = &t
				return tx, nil
			}
		}
	}
	if !gjson.ValidBytes(data) {
		return nil, s.corrupt("not valid JSON")
	}
	root := gjson.ParseBytes(data)
	list := root
	if root.IsObject() {
		list = root.Get("jobs")
	}
	switch {
	case list.IsArray():
		list.ForEach(func(_, v gjson.Result) bool {
			tx.entries = append(tx.entries, &entry{raw: []byte(v.Raw)})
			return true
		})
	case list.IsObject(): // Hermes' id-keyed map variant
		list.ForEach(func(k, v gjson.Result) bool {
			e := &entry{raw: []byte(v.Raw)}
			if !v.Get("id").Exists() {
				e.id, e.idKnown = k.String(), true
				var j Job
				if json.Unmarshal(e.raw, &j) == nil {
					j.ID = k.String()
					e.job = &j
				}
			}
			tx.entries = append(tx.entries, e)
			return true
		})
	default:
		return nil, s.corrupt(`expected {"jobs": [...]}`)
	}
	for i, e := range tx.entries {
		if len(e.raw) == 0 || e.raw[0] != '{' {
			return nil, s.corrupt(fmt.Sprintf("job #%d is not an object", i+1))
		}
	}
	tx.checkAll()
	return tx, nil
}

// checkAll marks every job that cannot be scheduled. It runs when the file
// was not last written by this store (a hand edit, a copy from Hermes, a
// crash between the file and its index): such a job is reported, never run,
// and never silently completed.
func (tx *Tx) checkAll() {
	for _, e := range tx.entries {
		e.invalid = e.check()
	}
	tx.checkDuplicates()
}

// checkDuplicates marks every job whose id another job of the file also
// has (a hand edit): which of them is meant cannot be known, so none runs
// and each is reported with the positions of all of them.
func (tx *Tx) checkDuplicates() {
	at := map[string][]int{}
	for i, e := range tx.entries {
		if id := e.getID(); id != "" {
			at[id] = append(at[id], i)
		}
	}
	for id, idx := range at {
		if len(idx) < 2 {
			continue
		}
		pos := make([]string, len(idx))
		for k, i := range idx {
			pos[k] = "#" + strconv.Itoa(i+1)
		}
		err := fmt.Errorf("id %q is given to jobs %s of the file; none of them runs until each has its own id", id, strings.Join(pos, ", "))
		for _, i := range idx {
			if tx.entries[i].invalid == nil {
				tx.entries[i].invalid = err
			}
		}
	}
}

// check decodes the entry and validates what scheduling relies on.
func (e *entry) check() error {
	if t := gjson.GetBytes(e.raw, "id"); t.Exists() && t.Type != gjson.String {
		return fmt.Errorf("id %s is not a string", t.Raw)
	}
	if e.job != nil {
		return validateStored(e.job)
	}
	// One decode of the known fields (the unknown ones are kept as raw
	// bytes and need no check); the job is decoded in full when used.
	a := jobAlias{Enabled: true}
	if err := json.Unmarshal(e.raw, &a); err != nil {
		return err
	}
	j := Job(a)
	return validateStored(&j)
}

// validateStored checks the fields the scheduler relies on, without the
// checks of ValidateJob that depend on this machine (scripts, workdir).
func validateStored(j *Job) error {
	if !validJobID(j.ID) {
		return fmt.Errorf("id %q: use letters, digits, '-', '_' or '.'", j.ID)
	}
	if err := j.Schedule.Validate(); err != nil {
		return err
	}
	if j.Timezone != "" {
		if err := zoneError(j.Timezone); err != nil {
			return fmt.Errorf("time zone %q: %v", j.Timezone, err)
		}
	}
	if j.NextRunAt != "" {
		if _, err := parseTimestamp(string(j.NextRunAt), j.Location()); err != nil {
			return fmt.Errorf("next_run_at: %v", err)
		}
	}
	if j.TriggeredAt != "" {
		if _, err := parseTimestamp(string(j.TriggeredAt), time.UTC); err != nil {
			return fmt.Errorf("triggered_at: %v", err)
		}
	}
	if _, err := j.Policy.Sampling.LLM(); err != nil {
		return err
	}
	// The files these name are read when an execution starts, which fails
	// that execution alone when they are missing or bad.
	return storedPaths(j)
}

// Invalid lists the jobs that cannot be scheduled, in file order. They stay
// in the file untouched until fixed, edited or removed.
func (tx *Tx) Invalid() []JobError {
	var out []JobError
	for _, e := range tx.entries {
		if !e.deleted && e.invalid != nil {
			out = append(out, JobError{ID: e.getID(), Error: e.invalid.Error()})
		}
	}
	return out
}

const (
	layoutHead = "{\"jobs\": ["
	layoutTail = "], \"updated_at\": "
)

// splitOwnLayout splits a file in the layout write produces (a head line,
// one compact job object per line, a tail line) into the jobs' raw bytes,
// sharing data's memory. ok is false for any other layout.
func splitOwnLayout(data []byte) (raws [][]byte, ok bool) {
	if !bytes.HasPrefix(data, []byte(layoutHead+"\n")) && !bytes.HasPrefix(data, []byte(layoutHead+layoutTail)) {
		return nil, false
	}
	rest := data[len(layoutHead):]
	for len(rest) > 0 && rest[0] == '\n' {
		rest = rest[1:]
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			return nil, false
		}
		line := rest[:i]
		if bytes.HasPrefix(line, []byte(layoutTail)) {
			return raws, true
		}
		line = bytes.TrimSuffix(line, []byte(","))
		if len(line) < 2 || line[0] != '{' || line[len(line)-1] != '}' {
			return nil, false
		}
		raws = append(raws, line[:len(line):len(line)])
		rest = rest[i:]
	}
	return raws, bytes.HasPrefix(rest, []byte(layoutTail))
}

func (e *entry) getID() string {
	if !e.idKnown {
		e.id = gjson.GetBytes(e.raw, "id").String()
		e.idKnown = true
	}
	return e.id
}

func (e *entry) decode() (*Job, error) {
	if e.job == nil {
		var j Job
		if err := json.Unmarshal(e.raw, &j); err != nil {
			return nil, err
		}
		e.job = &j
	}
	return e.job, nil
}

func (tx *Tx) index() {
	if tx.byID != nil {
		return
	}
	tx.byID = make(map[string]*entry, len(tx.entries))
	for _, e := range tx.entries {
		if !e.deleted {
			tx.byID[e.getID()] = e
		}
	}
}

// Len is the number of jobs.
func (tx *Tx) Len() int {
	n := 0
	for _, e := range tx.entries {
		if !e.deleted {
			n++
		}
	}
	return n
}

// Get decodes the job with id; the returned job may be modified and handed to
// Put. Unknown ids give ErrNotFound.
func (tx *Tx) Get(id string) (*Job, error) {
	tx.index()
	e, ok := tx.byID[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	j, err := e.decode()
	if err != nil {
		return nil, tx.store.corrupt(fmt.Sprintf("job %s: %v", id, err))
	}
	return j, nil
}

// Jobs decodes every job, in file order. Jobs that do not decode are left
// out when Invalid lists them (and are an ErrCorrupt error otherwise).
func (tx *Tx) Jobs() ([]*Job, error) {
	out := make([]*Job, 0, len(tx.entries))
	for _, e := range tx.entries {
		if e.deleted {
			continue
		}
		if e.invalid != nil && e.job == nil {
			continue
		}
		j, err := e.decode()
		if err != nil {
			return nil, tx.store.corrupt(fmt.Sprintf("job %q: %v", e.getID(), err))
		}
		out = append(out, j)
	}
	return out, nil
}

// Put marks a job obtained from Get as changed.
func (tx *Tx) Put(j *Job) error {
	tx.index()
	e, ok := tx.byID[j.ID]
	if !ok {
		return fmt.Errorf("%w: %s", ErrNotFound, j.ID)
	}
	e.job, e.dirty, e.invalid = j, true, nil
	tx.changed, tx.onlyAppends = true, false
	return nil
}

// reload drops the decoded (and possibly modified) copy of a job that was
// not Put, so the next Get decodes the stored one again.
func (tx *Tx) reload(id string) {
	tx.index()
	if e, ok := tx.byID[id]; ok && !e.dirty {
		e.job = nil
	}
}

// Add appends a new job. Its id must be unused.
func (tx *Tx) Add(j *Job) error {
	if j.ID == "" {
		return fmt.Errorf("add job: empty id")
	}
	if tx.byID != nil || tx.Len() < 50_000 {
		tx.index()
		if _, dup := tx.byID[j.ID]; dup {
			return usagef("job id %s already exists", j.ID)
		}
	}
	e := &entry{job: j, id: j.ID, idKnown: true, dirty: true}
	tx.entries = append(tx.entries, e)
	if tx.byID != nil {
		tx.byID[j.ID] = e
	}
	tx.changed = true
	return nil
}

// Delete removes a job; it reports whether the id existed.
func (tx *Tx) Delete(id string) bool {
	tx.index()
	e, ok := tx.byID[id]
	if !ok {
		return false
	}
	e.deleted = true
	delete(tx.byID, id)
	tx.changed, tx.onlyAppends = true, false
	return true
}

// DueIDs lists the ids of enabled jobs whose next_run_at is at or before
// now, reading only those two fields of each job.
func (tx *Tx) DueIDs(now time.Time) []string {
	var out []string
	for _, e := range tx.entries {
		if e.deleted {
			continue
		}
		at, ok := e.nextDue()
		if ok && !at.After(now) {
			out = append(out, e.getID())
		}
	}
	return out
}

// scan lists, in one read of each job's scheduling fields, the jobs due at
// now, the runnable jobs that have no next_run_at at all (a hand edit, a
// copy from Hermes), which the scheduler arms as import does, and the jobs
// with a pending trigger (`cron trigger`) at or before now.
func (tx *Tx) scan(now time.Time) (due, unarmed, triggered []string) {
	for _, e := range tx.entries {
		if e.deleted || e.invalid != nil {
			continue
		}
		if at, ok := e.nextDue(); ok {
			if !at.After(now) {
				due = append(due, e.getID())
			}
		} else if e.unarmed() {
			unarmed = append(unarmed, e.getID())
		}
		if at, ok := e.triggerAt(); ok && !at.After(now) {
			triggered = append(triggered, e.getID())
		}
	}
	return due, unarmed, triggered
}

// triggerAt returns the entry's pending trigger (triggered_at), whether or
// not the job is runnable: the tick gives every trigger an outcome.
func (e *entry) triggerAt() (time.Time, bool) {
	if e.invalid != nil {
		return time.Time{}, false
	}
	if e.job != nil {
		return e.job.Triggered()
	}
	r := gjson.GetBytes(e.raw, "triggered_at")
	if r.Type != gjson.String || r.String() == "" {
		return time.Time{}, false
	}
	t, err := parseTimestamp(r.String(), time.UTC)
	if err != nil {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// unarmed reports whether the entry is a runnable job whose next_run_at is
// missing or null.
func (e *entry) unarmed() bool {
	if e.job != nil {
		return e.job.Runnable() && e.job.NextRunAt == ""
	}
	r := gjson.GetManyBytes(e.raw, "enabled", "state", "next_run_at")
	if r[0].Exists() && !r[0].Bool() {
		return false
	}
	if st := r[1].String(); st == StatePaused || st == StateCompleted {
		return false
	}
	return !r[2].Exists() || r[2].Type == gjson.Null || (r[2].Type == gjson.String && r[2].String() == "")
}

// nextDue returns the entry's next_run_at if the job is runnable.
func (e *entry) nextDue() (time.Time, bool) {
	if e.invalid != nil {
		return time.Time{}, false
	}
	if e.job != nil {
		if !e.job.Runnable() {
			return time.Time{}, false
		}
		return e.job.NextRun()
	}
	r := gjson.GetManyBytes(e.raw, "enabled", "state", "next_run_at", "timezone")
	if r[0].Exists() && !r[0].Bool() {
		return time.Time{}, false
	}
	if st := r[1].String(); st == StatePaused || st == StateCompleted {
		return time.Time{}, false
	}
	if r[2].Type != gjson.String {
		return time.Time{}, false
	}
	loc := time.UTC
	if tz := r[3].String(); tz != "" {
		loc = loadLocation(tz)
	}
	t, err := parseTimestamp(r[2].String(), loc)
	if err != nil {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// NextDue is the earliest next_run_at among runnable jobs, or pending
// trigger among all jobs (zero if none).
func (tx *Tx) NextDue() time.Time {
	var best time.Time
	for _, e := range tx.entries {
		if e.deleted {
			continue
		}
		if at, ok := e.nextDue(); ok && (best.IsZero() || at.Before(best)) {
			best = at
		}
		if at, ok := e.triggerAt(); ok && (best.IsZero() || at.Before(best)) {
			best = at
		}
	}
	return best
}

type storeIndex struct {
	V       int    `json:"v"`
	Stamp   string `json:"stamp"`
	NextDue string `json:"next_due"`
	Jobs    int    `json:"jobs"`
	// Invalid counts the jobs that cannot be scheduled; while any is left
	// the index is not trusted, so every pass checks and reports them.
	Invalid int `json:"invalid,omitempty"`
}

// indexVersion changes when what makes a stored job valid changes, so a
// store written by an older version is checked once in full.
const indexVersion = 3

// fresh reports whether the index describes the file with this stamp and
// lets readers skip checking every job.
func (ix storeIndex) fresh(stamp string) bool {
	return ix.V == indexVersion && ix.Stamp == stamp && ix.Invalid == 0
}

// CachedNextDue returns the earliest next_run_at from the small index file
// kept next to jobs.json, without parsing jobs.json. fresh is false when the
// index does not describe the current file (a hand edit, a crash between the
// two writes); callers then fall back to Load. Costs one stat and one small read.
func (s *Store) CachedNextDue() (next time.Time, fresh bool) {
	st, err := os.Stat(s.Path())
	if errors.Is(err, os.ErrNotExist) {
		return time.Time{}, true
	}
	if err != nil {
		return time.Time{}, false
	}
	b, err := os.ReadFile(s.indexPath())
	if err != nil {
		return time.Time{}, false
	}
	var ix storeIndex
	if json.Unmarshal(b, &ix) != nil || !ix.fresh(stampOf(st)) {
		return time.Time{}, false
	}
	if ix.NextDue == "" {
		return time.Time{}, true
	}
	t, err := time.Parse(time.RFC3339, ix.NextDue)
	return t, err == nil
}

// Stamp identifies the current version of jobs.json (size, mtime, inode);
// the daemon compares it to notice changes. Empty when the file is missing.
func (s *Store) Stamp() string {
	st, err := os.Stat(s.Path())
	if err != nil {
		return ""
	}
	return stampOf(st)
}

// Update runs fn on the current jobs under the exclusive store lock and, if fn
// changed anything, writes jobs.json atomically (temp file, fsync, rename,
// fsync of the folder) keeping the previous version as jobs.json.bak. It waits
// up to LockTimeout for the lock and then refuses with ErrLocked; it never
// writes without the lock, and never writes over a corrupt file.
func (s *Store) Update(ctx context.Context, fn func(tx *Tx) error) error {
	if err := s.ensureDir(); err != nil {
		return err
	}
	unlock, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	tx, err := s.Load()
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	if !tx.changed {
		if tx.prevDue == nil && tx.stamp != "" {
			// The index is stale (hand edit, crash): rebuild it, no rewrite of jobs.json.
			return s.writeIndex(tx.stamp, tx.NextDue(), tx.Len(), len(tx.Invalid()))
		}
		return nil
	}
	return s.write(tx)
}

func (s *Store) writeIndex(stamp string, due time.Time, n, invalid int) error {
	ix := storeIndex{V: indexVersion, Stamp: stamp, Jobs: n, Invalid: invalid}
	if !due.IsZero() {
		ix.NextDue = fmtTime(due)
	}
	ib, _ := json.Marshal(ix)
	if err := writeCacheFile(s.indexPath(), ib); err != nil {
		return fmt.Errorf("write cron store index: %w", err)
	}
	return nil
}

func (s *Store) lock(ctx context.Context) (func(), error) {
	timeout := s.LockTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	fl := flock.New(s.lockPath(), flock.SetPermissions(0o600))
	lctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ok, err := fl.TryLockContext(lctx, 5*time.Millisecond)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("lock cron store: %w", err)
	}
	if !ok {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("lock cron store: %w", ctx.Err())
		}
		return nil, fmt.Errorf("%w (waited %s for %s); nothing was written", ErrLocked, timeout, s.lockPath())
	}
	return func() { _ = fl.Unlock() }, nil
}

func (s *Store) write(tx *Tx) error {
	var buf bytes.Buffer
	buf.Grow(len(tx.entries)*800 + 64)
	buf.WriteString(layoutHead)
	first := true
	for _, e := range tx.entries {
		if e.deleted {
			continue
		}
		if e.dirty {
			b, err := json.Marshal(e.job)
			if err != nil {
				return fmt.Errorf("encode job %s: %w", e.job.ID, err)
			}
			e.raw, e.dirty = b, false
		}
		if !first {
			buf.WriteByte(',')
		}
		first = false
		buf.WriteString("\n")
		buf.Write(e.raw)
	}
	buf.WriteString("\n" + layoutTail)
	ts, _ := json.Marshal(s.now().UTC().Format(time.RFC3339))
	buf.Write(ts)
	buf.WriteString("}\n")

	var due time.Time
	if tx.onlyAppends && tx.prevDue != nil {
		due = *tx.prevDue
		for _, e := range tx.entries {
			if e.job != nil && !e.deleted {
				if at, ok := e.nextDue(); ok && (due.IsZero() || at.Before(due)) {
					due = at
				}
				if at, ok := e.triggerAt(); ok && (due.IsZero() || at.Before(due)) {
					due = at
				}
			}
		}
	} else {
		due = tx.NextDue()
	}
	if err := s.writeJobsFile(buf.Bytes()); err != nil {
		return fmt.Errorf("write cron store: %w", err)
	}
	st, err := os.Stat(s.Path())
	if err != nil {
		return fmt.Errorf("write cron store: %w", err)
	}
	tx.stamp, tx.prevDue, tx.changed, tx.onlyAppends = stampOf(st), &due, false, true
	return s.writeIndex(tx.stamp, due, tx.Len(), len(tx.Invalid()))
}

// writeJobsFile replaces jobs.json durably with pipeline.WriteAtomic, first
// keeping the version being replaced as jobs.json.bak (a hard link, so no
// copy). Update calls it under the store lock, so the fixed link name is ours.
func (s *Store) writeJobsFile(data []byte) error {
	bak := s.Path() + ".bak"
	_ = os.Remove(bak + ".tmp") // left by a crash between link and rename
	if os.Link(s.Path(), bak+".tmp") == nil {
		_ = os.Rename(bak+".tmp", bak)
	}
	return atomicfile.Write(s.Dir, filepath.Base(s.Path()), data)
}

// writeCacheFile replaces path via a temp file and a rename, without the
// fsyncs of pipeline.WriteAtomic: for the index, a cache validated by the
// jobs.json stamp, written on every store write. Mode 0600.
func writeCacheFile(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}
