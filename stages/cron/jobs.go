package cron

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hermes-pipe/hermes-pipe/stages/rollout/mcp"
)

// JobSpec is what a user gives `cron add`. Zero values mean defaults.
type JobSpec struct {
	Name             string
	Schedule         string
	Timezone         string // IANA zone; default the local zone
	Prompt           string
	Script           string
	NoAgent          bool
	Model            string
	Provider         string
	BaseURL          string
	Skills           []string
	ContextFrom      []string
	Toolsets         []string
	Deliver          string
	Workdir          string
	Repeat           int // 0 = forever (one-shots: 1)
	Overlap          string
	StartingDeadline time.Duration
	Timeout          *time.Duration // inactivity; nil = 600 s, 0 = none
	MaxRuntime       time.Duration
	EnvAllow         []string
	Paused           bool
	MaxTurns         int           // agent turns per run; 0 = the cron command's default
	CommandTimeout   time.Duration // per tool command; 0 = the rollout default
	APIKeyEnv        string        // variable holding the API key; "" = from the provider, else the default key
	Sandbox          string        // local (default), docker:IMAGE or ssh:[USER@]HOST[:PORT]
	MCPConfig        string        // MCP configuration file of agent executions (made absolute); "" = none
	SkillsDir        string        // folder of the skills toolset (made absolute); "" = <home>/skills
	ScriptIsolation  string        // bwrap (default) or none: the script runs unconfined
	ScriptNetwork    string        // none (default) or host: network of the confined script
	Sampling         Sampling      // sent with every chat request of the job's agent executions; zero = none
}

// LocalZone names the local time zone for new jobs ("UTC" when unnamed).
func LocalZone() string {
	if tz := os.Getenv("TZ"); tz != "" {
		if _, err := time.LoadLocation(tz); err == nil {
			return tz
		}
	}
	if p, err := filepath.EvalSymlinks("/etc/localtime"); err == nil {
		if i := strings.Index(p, "zoneinfo/"); i >= 0 {
			return p[i+len("zoneinfo/"):]
		}
	}
	if n := time.Local.String(); n != "Local" && n != "" {
		return n
	}
	return "UTC"
}

// NewJob builds and validates a job from spec at now (not yet stored).
// Errors wrap ErrUsage and say what to change.
func NewJob(home string, spec JobSpec, now time.Time) (*Job, error) {
	tz := spec.Timezone
	if tz == "" {
		tz = LocalZone()
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, usagef("time zone %q: %v", tz, err)
	}
	sched, err := ParseSchedule(spec.Schedule, loc, now)
	if err != nil {
		return nil, err
	}
	j := &Job{
		ID: NewJobID(), Name: spec.Name, Prompt: strings.TrimSpace(spec.Prompt),
		Skills: spec.Skills, Model: NullString(spec.Model), Provider: NullString(spec.Provider),
		BaseURL: NullString(strings.TrimRight(spec.BaseURL, "/")), Script: NullString(spec.Script),
		NoAgent: spec.NoAgent, ContextFrom: spec.ContextFrom, Schedule: sched,
		ScheduleDisplay: sched.Display, Enabled: true, State: StateScheduled,
		CreatedAt: fmtTime(now), Deliver: spec.Deliver, EnabledToolsets: spec.Toolsets,
		Workdir: NullString(spec.Workdir), Timezone: tz,
	}
	if len(j.Skills) > 0 {
		j.Skill = NullString(j.Skills[0])
	}
	if j.Deliver == "" {
		j.Deliver = "local"
	}
	if spec.Repeat > 0 {
		n := spec.Repeat
		j.Repeat.Times = &n
	} else if sched.Kind == KindOnce {
		one := 1
		j.Repeat.Times = &one
	}
	j.Policy = Policy{Overlap: spec.Overlap, StartingDeadlineSeconds: int(spec.StartingDeadline / time.Second),
		MaxRuntimeSeconds: int(spec.MaxRuntime / time.Second), EnvAllow: spec.EnvAllow,
		MaxTurns: spec.MaxTurns, CommandTimeoutSeconds: int(spec.CommandTimeout / time.Second), APIKeyEnv: spec.APIKeyEnv,
		Sandbox: spec.Sandbox, MCPConfig: absPath(spec.MCPConfig), SkillsDir: absPath(spec.SkillsDir),
		ScriptIsolation: spec.ScriptIsolation, ScriptNetwork: spec.ScriptNetwork}
	sampling := spec.Sampling
	j.Policy.Sampling = sampling.orNil()
	if spec.Timeout != nil {
		n := int(*spec.Timeout / time.Second)
		j.Policy.TimeoutSeconds = &n
	}
	if j.Name == "" {
		j.Name = defaultName(j)
	}
	if err := ValidateJob(home, j); err != nil {
		return nil, err
	}
	if err := checkToolsets(j.EnabledToolsets, mustToolsets(jobMCP(j))); err != nil {
		return nil, usagef("%v", err)
	}
	if err := ValidateDeliver(j.Deliver); err != nil {
		return nil, err
	}
	first, err := FirstRun(sched, spec.Schedule, loc, now)
	if err != nil {
		return nil, err
	}
	j.NextRunAt = NullString(fmtTime(first))
	if spec.Paused {
		pause(j, now, "created paused")
	}
	return j, nil
}

// FirstRun is the first occurrence of sched (parsed from text) after now,
// or the usage error `cron add` refuses the schedule with: a one-shot time
// in the past, a schedule that never fires ("0 0 31 2 *"). `cron next`
// checks a schedule with it too, so both refuse the same schedules.
func FirstRun(sched Schedule, text string, loc *time.Location, now time.Time) (time.Time, error) {
	if sched.Kind == KindOnce {
		at, _ := parseTimestamp(sched.RunAt, loc)
		if now.Sub(at) > minGrace {
			return time.Time{}, usagef("one-shot time %s is in the past", at.In(loc).Format(time.RFC3339))
		}
		return at, nil
	}
	if next, ok := sched.Next(now, loc); ok {
		return next, nil
	}
	return time.Time{}, usagef("schedule %q never fires", text)
}

// defaultName is Hermes' default job name: the start of the prompt (else
// the first skill, else the script), at most 50 characters, cut at a
// character boundary, never inside a UTF-8 sequence.
func defaultName(j *Job) string {
	src := j.Prompt
	if strings.TrimSpace(src) == "" && len(j.Skills) > 0 {
		src = j.Skills[0]
	}
	if strings.TrimSpace(src) == "" {
		src = string(j.Script)
	}
	src = strings.Join(strings.Fields(src), " ")
	if r := []rune(src); len(r) > 50 {
		src = strings.TrimSpace(string(r[:50]))
	}
	if src == "" {
		return "cron job"
	}
	return src
}

// ValidateJob checks a job's fields (on add, edit and import). The deliver
// spec and the toolsets are not checked here: imported Hermes targets are
// kept and fall back to local delivery, imported toolsets hermes-pipe lacks
// are a warning; values the user gives are checked by NewJob and
// JobEdit.Apply (ValidateDeliver, checkToolsets). Errors wrap ErrUsage.
func ValidateJob(home string, j *Job) error {
	if err := checkJobWhen(j); err != nil {
		return err
	}
	if err := checkJobBody(home, j); err != nil {
		return err
	}
	if err := checkJobWorkdir(j); err != nil {
		return err
	}
	return checkJobPolicy(j)
}

// checkJobWhen checks the job's id, its schedule and its time zone.
func checkJobWhen(j *Job) error {
	if !validJobID(j.ID) {
		return usagef("job id %q: use letters, digits, '-', '_' or '.'", j.ID)
	}
	if err := j.Schedule.Validate(); err != nil {
		return usagef("job %s: %v", j.ID, err)
	}
	if j.Timezone != "" {
		if _, err := time.LoadLocation(j.Timezone); err != nil {
			return usagef("job %s: time zone %q: %v", j.ID, j.Timezone, err)
		}
	}
	return nil
}

// checkJobBody checks what the job runs: there is something to run, its
// script can be read, the guard accepts the prompt and the script, and its
// toolsets are open to cron jobs.
func checkJobBody(home string, j *Job) error {
	if j.NoAgent && j.Script == "" {
		return usagef("job %s: --no-agent needs --script: with no agent and no script there is nothing to run", j.ID)
	}
	if strings.TrimSpace(j.Prompt) == "" && j.Script == "" && len(j.Skills) == 0 {
		return usagef("job %s has nothing to run: give a prompt, a script or a skill", j.ID)
	}
	scriptText := ""
	if j.Script != "" {
		p, err := ResolveScript(home, string(j.Script))
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return usagef("script %s: %v", j.Script, err)
		}
		scriptText = string(b)
	}
	if fs := Scan(j.Prompt, scriptText); len(fs) > 0 {
		return usagef("job %s refused by the guard: %s", j.ID, describeFindings(fs))
	}
	if _, refused := NarrowToolsets(j.EnabledToolsets); len(refused) > 0 {
		return usagef("toolsets %s are not available to cron jobs (no scheduling, messaging or asking the user)", strings.Join(refused, ", "))
	}
	return nil
}

// checkJobWorkdir checks that the job's workdir, when it has one, is an
// existing folder named by an absolute path.
func checkJobWorkdir(j *Job) error {
	w := string(j.Workdir)
	if w == "" {
		return nil
	}
	if !filepath.IsAbs(w) {
		return usagef("workdir %q must be an absolute path", w)
	}
	if st, err := os.Stat(w); err != nil || !st.IsDir() {
		return usagef("workdir %q is not an existing folder", w)
	}
	return nil
}

// checkJobPolicy checks the job's policy: overlap, sandbox, stored paths,
// MCP configuration, skills folder, script isolation, API key variable and
// durations.
func checkJobPolicy(j *Job) error {
	switch j.Policy.Overlap {
	case "", OverlapForbid, OverlapAllow:
	default:
		return usagef("overlap policy %q: use forbid or allow", j.Policy.Overlap)
	}
	if _, _, err := ParseSandbox(j.Policy.Sandbox); err != nil {
		return usagef("job %s: %v", j.ID, err)
	}
	if err := storedPaths(j); err != nil {
		return usagef("job %s: %v", j.ID, err)
	}
	if _, err := jobMCP(j); err != nil {
		return usagef("job %s: %v", j.ID, err)
	}
	if d := j.Policy.SkillsDir; d != "" {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return usagef("job %s: skills_dir %q is not an existing folder", j.ID, d)
		}
	}
	if err := CheckScriptPolicy(j.Policy); err != nil {
		return usagef("job %s: %v", j.ID, err)
	}
	if j.Policy.APIKeyEnv != "" && !reEnvName().MatchString(j.Policy.APIKeyEnv) {
		return usagef("job %s: --api-key-env %q is not an environment variable name", j.ID, j.Policy.APIKeyEnv)
	}
	if negativeDurations(j.Policy) {
		return usagef("job %s: durations must not be negative", j.ID)
	}
	if _, err := j.Policy.Sampling.LLM(); err != nil {
		return usagef("job %s: %v", j.ID, err)
	}
	return nil
}

// negativeDurations reports whether any of the policy's counts or durations
// is negative.
func negativeDurations(p Policy) bool {
	return p.MaxTurns < 0 || p.CommandTimeoutSeconds < 0 || p.StartingDeadlineSeconds < 0 || p.MaxRuntimeSeconds < 0 || (p.TimeoutSeconds != nil && *p.TimeoutSeconds < 0)
}

var reEnvName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// absPath makes a path the user gave absolute, so a stored job does not
// depend on the folder cron runs from; "" stays "".
func absPath(p string) string {
	if p == "" {
		return ""
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// mustToolsets is the toolsets of a configuration jobMCP read; none when it
// could not (ValidateJob reports why).
func mustToolsets(cfg *mcp.Config, err error) []string {
	if err != nil {
		return nil
	}
	return cfg.Toolsets()
}

func pause(j *Job, now time.Time, reason string) {
	j.Enabled = false
	j.State = StatePaused
	j.PausedAt = NullString(fmtTime(now))
	j.PausedReason = NullString(reason)
}

// AddJob validates spec and appends the job to the store under its lock.
// Jobs named in context_from must exist.
func AddJob(ctx context.Context, st *Store, home string, spec JobSpec, now time.Time) (*Job, error) {
	j, err := NewJob(home, spec, now)
	if err != nil {
		return nil, err
	}
	err = st.Update(ctx, func(tx *Tx) error {
		for _, id := range j.ContextFrom {
			if _, err := tx.Get(id); err != nil {
				return usagef("context_from: no job %s", id)
			}
		}
		return tx.Add(j)
	})
	if err != nil {
		return nil, err
	}
	return j, nil
}

// ModifyJob applies fn to one job under the store lock, revalidates it and,
// when the schedule or zone changed, recomputes next_run_at from now.
func ModifyJob(ctx context.Context, st *Store, home, id string, now time.Time, fn func(j *Job) error) (*Job, error) {
	var out *Job
	err := st.Update(ctx, func(tx *Tx) error {
		j, err := tx.Get(id)
		if err != nil {
			return err
		}
		before := j.Schedule
		beforeTZ := j.Timezone
		if err := fn(j); err != nil {
			return err
		}
		if err := ValidateJob(home, j); err != nil {
			return err
		}
		for _, c := range j.ContextFrom {
			if _, err := tx.Get(c); err != nil {
				return usagef("context_from: no job %s", c)
			}
		}
		if j.Schedule != before || j.Timezone != beforeTZ {
			j.ScheduleDisplay = j.Schedule.Display
			if j.Runnable() {
				rearm(j, now)
			}
		}
		out = j
		return tx.Put(j)
	})
	return out, err
}

// rearm sets next_run_at to the first occurrence after now (one-shots keep
// their instant if it is still ahead): FirstRun, none when it refuses.
func rearm(j *Job, now time.Time) {
	if next, err := FirstRun(j.Schedule, j.Schedule.Display, j.Location(), now); err == nil {
		j.NextRunAt = NullString(fmtTime(next))
	} else {
		j.NextRunAt = ""
	}
}

// arm gives a runnable job without next_run_at its next occurrence, as
// import does: a one-shot its own instant (late or not: the next pass runs
// it or, past its starting deadline, records it missed and alerts), a
// recurring job its first occurrence after now. A job with no occurrence
// left, or whose repeat count is used up, is completed.
func arm(j *Job, now time.Time) {
	switch {
	case j.Repeat.Times != nil && j.Repeat.Completed >= *j.Repeat.Times:
		j.NextRunAt = ""
	case j.Schedule.Kind == KindOnce:
		j.NextRunAt = ""
		if at, err := parseTimestamp(j.Schedule.RunAt, j.Location()); err == nil {
			j.NextRunAt = NullString(fmtTime(at))
		}
	default:
		rearm(j, now)
	}
	if j.NextRunAt == "" {
		j.State, j.Enabled = StateCompleted, false
	}
}

// PlannedRun is the job's next run: next_run_at, or for a runnable job
// without one the instant the scheduler's next pass arms it with (see arm).
func (j *Job) PlannedRun(now time.Time) (time.Time, bool) {
	if at, ok := j.NextRun(); ok || !j.Runnable() {
		return at, ok
	}
	c := *j
	arm(&c, now)
	return c.NextRun()
}

// PauseJob disables a job; its occurrences until resume are not recorded.
func PauseJob(ctx context.Context, st *Store, home, id string, now time.Time) (*Job, error) {
	return ModifyJob(ctx, st, home, id, now, func(j *Job) error {
		pause(j, now, "paused by user")
		j.NextRunAt = ""
		return nil
	})
}

// ResumeJob re-enables a job; it next fires at its first occurrence after now.
func ResumeJob(ctx context.Context, st *Store, home, id string, now time.Time) (*Job, error) {
	return ModifyJob(ctx, st, home, id, now, func(j *Job) error {
		if j.State == StateCompleted && j.Schedule.Kind == KindOnce {
			return usagef("job %s is a finished one-shot; edit its schedule to run it again", j.ID)
		}
		j.Enabled, j.State, j.PausedAt, j.PausedReason = true, StateScheduled, "", ""
		rearm(j, now)
		if j.NextRunAt == "" {
			return usagef("job %s has no future occurrence", j.ID)
		}
		return nil
	})
}

// RemoveJob deletes a job; its ledger history is kept.
func RemoveJob(ctx context.Context, st *Store, id string) error {
	return st.Update(ctx, func(tx *Tx) error {
		if !tx.Delete(id) {
			return fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return nil
	})
}

// ImportReport lists what ImportHermes did.
type ImportReport struct {
	Imported []string          `json:"imported"`
	Rejected map[string]string `json:"rejected,omitempty"` // id -> reason
	// NotTaken are jobs left out because their script is in neither the
	// scripts folder given (ImportOptions.ScriptsDir) nor <home>/cron/scripts
	// (id -> which script, where it was looked for). They never refuse the
	// import: the other jobs are imported.
	NotTaken map[string]string `json:"not_taken,omitempty"`
	// Scripts are the scripts copied from ImportOptions.ScriptsDir into
	// <home>/cron/scripts, and ScriptsDir the folder they came from.
	Scripts    []string `json:"scripts_copied,omitempty"`
	ScriptsDir string   `json:"scripts_dir,omitempty"`
	// Warnings are imported jobs that will not run as they did in Hermes
	// until edited (id -> what to change): toolsets hermes-pipe lacks.
	Warnings map[string]string `json:"warnings,omitempty"`
}

func (r *ImportReport) warn(id, msg string) {
	if w := r.Warnings[id]; w != "" {
		msg = w + "; " + msg
	}
	r.Warnings[id] = msg
}

// ImportHermes reads a Hermes jobs.json (the {"jobs": [...]} object, a bare
// list, or an id-keyed map) and adds its jobs, keeping their ids and fields.
// Jobs without a zone get tz. Missing next_run_at values are computed
// (arm); past ones are kept, so the first pass runs or records them missed
// (with an alert) as for any late occurrence. Jobs asking for toolsets or
// skills hermes-pipe lacks are imported with a warning. With skipInvalid, bad jobs are reported and skipped;
// otherwise any bad job refuses the whole import and nothing is written.
func ImportHermes(ctx context.Context, st *Store, home, file, tz string, now time.Time, skipInvalid bool) (ImportReport, error) {
	return ImportHermesWith(ctx, st, home, file, ImportOptions{TZ: tz, Now: now, SkipInvalid: skipInvalid})
}

// ImportOptions are the settings of ImportHermesWith.
type ImportOptions struct {
	TZ          string // zone of jobs without one; "" = the local zone
	Now         time.Time
	SkipInvalid bool
	// ScriptsDir is the folder Hermes' script jobs' scripts are in
	// (Hermes keeps them in <hermes home>/scripts); the scripts the
	// imported jobs name are copied from it into <home>/cron/scripts.
	// "" = that folder of the Hermes home the file is in, when the file is
	// <hermes home>/cron/jobs.json and the folder exists.
	ScriptsDir string
}

// ImportHermesWith is ImportHermes with its options. file may also be a
// Hermes home (its cron/jobs.json is read). A job whose script is in
// neither opts.ScriptsDir nor <home>/cron/scripts is not taken (reported in
// NotTaken); the others are imported.
func ImportHermesWith(ctx context.Context, st *Store, home, file string, opts ImportOptions) (ImportReport, error) {
	rep := ImportReport{Rejected: map[string]string{}, Warnings: map[string]string{}, NotTaken: map[string]string{}}
	tz, now, skipInvalid := opts.TZ, opts.Now, opts.SkipInvalid
	if fi, err := os.Stat(file); err == nil && fi.IsDir() {
		file = filepath.Join(file, "cron", "jobs.json")
	}
	scripts, err := importScriptsDir(file, opts.ScriptsDir)
	if err != nil {
		return rep, err
	}
	rep.ScriptsDir = scripts.dir
	src := &Store{Dir: filepath.Dir(file)}
	data, err := os.ReadFile(file)
	if err != nil {
		return rep, usagef("import: %v", err)
	}
	tx0, err := src.parse(data, "import")
	if err != nil {
		return rep, usagef("import %s: not a jobs file: %v", file, errors.Unwrap(err))
	}
	jobs, err := tx0.Jobs()
	if err != nil {
		return rep, usagef("import %s: %v", file, err)
	}
	// A job Jobs left out (it did not decode, or its stored check failed)
	// is refused with the check's reason; the others are checked below.
	listed := map[string]bool{}
	for _, j := range jobs {
		listed[j.ID] = true
	}
	for _, inv := range tx0.Invalid() {
		if !listed[inv.ID] {
			rep.Rejected[inv.ID] = inv.Error
		}
	}
	if tz == "" {
		tz = LocalZone()
	}
	err = st.Update(ctx, func(tx *Tx) error {
		ids := map[string]bool{}
		for _, j := range jobs {
			ids[j.ID] = true
		}
		var ok []*Job
		for _, j := range jobs {
			if importJob(tx, home, j, ids, scripts, &rep, tz, now) {
				ok = append(ok, j)
			}
		}
		if len(rep.Rejected) > 0 && !skipInvalid {
			ids := make([]string, 0, len(rep.Rejected))
			for id, why := range rep.Rejected {
				ids = append(ids, id+": "+why)
			}
			slices.Sort(ids)
			scripts.undoAll(home)
			return usagef("import refused, nothing written (use --skip-invalid to import the rest):\n  %s", strings.Join(ids, "\n  "))
		}
		for _, j := range ok {
			if err := tx.Add(j); err != nil {
				return err
			}
			rep.Imported = append(rep.Imported, j.ID)
		}
		rep.Scripts = scripts.names()
		return nil
	})
	if err != nil {
		scripts.undoAll(home)
	}
	return rep, err
}

// importJob checks one job of an import and completes it (zone, delivery,
// state, its script copied in, next_run_at); false when it is not taken
// (rep.NotTaken) or refused (rep.Rejected). ids are the import's jobs.
func importJob(tx *Tx, home string, j *Job, ids map[string]bool, scripts *importScripts, rep *ImportReport, tz string, now time.Time) bool {
	if j.Timezone == "" {
		j.Timezone = tz
	}
	if j.Deliver == "" {
		j.Deliver = "local"
	}
	if j.State == "" {
		j.State = StateScheduled
	}
	// The job's script, copied from Hermes' scripts folder; a job whose
	// script is nowhere is left out, the others imported.
	reason, missing := scripts.take(home, j)
	if missing {
		rep.NotTaken[j.ID] = reason
		return false
	}
	// Hermes targets hermes-pipe lacks (telegram, origin...) are kept:
	// they fall back to local delivery at run time.
	check := *j
	if ValidateDeliver(check.Deliver) != nil {
		check.Deliver = "local"
	}
	// Toolsets Hermes has and hermes-pipe lacks (web, browser...) do
	// not refuse the import: each execution fails naming them, with
	// an alert, until the job is edited. The report says so now.
	for _, name := range jobSkills(j) {
		if _, err := LoadSkill(home, name); err != nil {
			rep.warn(j.ID, fmt.Sprintf("%v: its runs fail until the skill is installed (cron import --skills-dir links Hermes' skills folder)", err))
		}
	}
	if err := checkToolsets(j.EnabledToolsets, mustToolsets(jobMCP(j))); err != nil {
		rep.warn(j.ID, fmt.Sprintf("%v: its runs fail until `cron edit %s --toolsets ...`", err, j.ID))
	}
	switch err := ValidateJob(home, &check); {
	case reason != "": // the script could not be copied in
	case err != nil:
		reason = strings.TrimPrefix(err.Error(), ErrUsage.Error()+": ")
	default:
		if _, err := tx.Get(j.ID); err == nil {
			reason = "a job with this id already exists"
		}
	}
	for _, c := range j.ContextFrom {
		if _, err := tx.Get(c); err != nil && !ids[c] && reason == "" {
			reason = "context_from names unknown job " + c
		}
	}
	if reason != "" {
		rep.Rejected[j.ID] = reason
		scripts.undoJob(home, j.ID)
		return false
	}
	// A job keeps its next_run_at even when it is past: the next
	// pass runs what is within its grace window and records the rest
	// missed, with an alert, instead of dropping it here unheard.
	if _, ok := j.NextRun(); !ok && j.Runnable() {
		arm(j, now)
	}
	return true
}

// MarshalIndent renders a job for `cron show --json`.
func (j *Job) MarshalIndent() ([]byte, error) {
	b, err := json.Marshal(j)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
