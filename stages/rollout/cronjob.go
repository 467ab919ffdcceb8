package rollout

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// The cronjob toolset is Hermes' `cronjob` tool (one tool, an action
// argument) against a job store that lives in memory for one rollout:
// nothing is scheduled for real and nothing outlives the rollout, so a
// trajectory holds scheduling calls and their answers without side effects.
// Schedules are read by Options.PlanSchedule (bound by the command layer to
// the cron scheduler's grammar), so the answers say what `cron add` would.

// PlannedSchedule is a schedule the cronjob toolset was given, as the cron
// scheduler reads it: its display form, its first occurrence after now,
// and whether it fires once.
type PlannedSchedule struct {
	Display string
	Next    time.Time
	Once    bool
}

const cronjobDesc = "Manage scheduled cron jobs with one action per call: create (schedule and prompt required), " +
	"list, update, pause, resume, remove, run (also trigger: fire at the next scheduler tick). Jobs run later in " +
	"fresh sessions with none of this conversation, so a prompt must say everything the job needs. " +
	"List first to find a job_id; never guess one."

const cronjobParams = `{"type": "object", "properties": {` +
	`"action": {"type": "string", "description": "One of: create, list, update, pause, resume, remove, run"}, ` +
	`"job_id": {"type": "string", "description": "The job to act on; required for update, pause, resume, remove and run"}, ` +
	`"prompt": {"type": "string", "description": "For create (required) and update: the job's self-contained instructions"}, ` +
	`"schedule": {"type": "string", "description": "For create (required) and update: 'every 30m', 'every 2h', 'in 45m' (once), a cron expression such as '0 9 * * *', or an ISO timestamp (once)"}, ` +
	`"name": {"type": "string", "description": "Optional short name"}, ` +
	`"repeat": {"type": "integer", "description": "Optional number of runs; omit for the default (once for one-shots, forever otherwise)"}, ` +
	`"deliver": {"type": "string", "description": "Where the output goes: 'origin', 'local', or 'platform:chat_id'"}, ` +
	`"skills": {"type": "array", "items": {"type": "string"}, "description": "Optional skills loaded before the prompt"}, ` +
	`"model": {"type": "string", "description": "Optional model for this job"}, ` +
	`"provider": {"type": "string", "description": "Optional provider for this job"}, ` +
	`"include_disabled": {"type": "boolean", "description": "For list: include paused and completed jobs (default false)"}, ` +
	`"reason": {"type": "string", "description": "For pause: why"}}, "required": ["action"]}`

// cronJob is one job of a rollout's store, with Hermes' job fields.
type cronJob struct {
	id, name, prompt, schedText, display, deliver string
	skills                                        []string
	model, provider                               *string
	times                                         *int // nil: forever
	enabled                                       bool
	state                                         string
	pausedAt, pausedReason, nextRunAt             *string
}

// cronStore is the job store of one rollout.
type cronStore struct {
	jobs    []*cronJob
	created int
}

// shownJob is a job as the tool shows it (Hermes' field names and order).
type shownJob struct {
	JobID         string   `json:"job_id"`
	Name          string   `json:"name"`
	Skills        []string `json:"skills"`
	PromptPreview string   `json:"prompt_preview"`
	Model         *string  `json:"model"`
	Provider      *string  `json:"provider"`
	Schedule      string   `json:"schedule"`
	Repeat        string   `json:"repeat"`
	Deliver       string   `json:"deliver"`
	NextRunAt     *string  `json:"next_run_at"`
	LastRunAt     *string  `json:"last_run_at"`
	LastStatus    *string  `json:"last_status"`
	Enabled       bool     `json:"enabled"`
	State         string   `json:"state"`
	PausedAt      *string  `json:"paused_at"`
	PausedReason  *string  `json:"paused_reason"`
}

func (j *cronJob) shown() shownJob {
	preview := j.prompt
	if r := []rune(preview); len(r) > 100 {
		preview = string(r[:100]) + "..."
	}
	skills := j.skills
	if skills == nil {
		skills = []string{}
	}
	return shownJob{JobID: j.id, Name: j.name, Skills: skills, PromptPreview: preview, Model: j.model, Provider: j.provider,
		Schedule: j.display, Repeat: j.repeatText(), Deliver: j.deliver, NextRunAt: j.nextRunAt,
		Enabled: j.enabled, State: j.state, PausedAt: j.pausedAt, PausedReason: j.pausedReason}
}

// repeatText is Hermes' repeat display: forever, once, or N times (no job
// of a rollout's store ever runs, so none has completed runs).
func (j *cronJob) repeatText() string {
	switch {
	case j.times == nil:
		return "forever"
	case *j.times == 1:
		return "once"
	}
	return strconv.Itoa(*j.times) + " times"
}

// cronjobTool answers one call of the cronjob tool against the rollout's
// store. A call the model got wrong (no action, an argument of the wrong
// type) is a bad call; an unknown job or a refused schedule is a failed
// result ("success": false), as Hermes answers them.
func (rt *rolloutTools) cronjobTool(args map[string]json.RawMessage) (string, error) {
	if rt.cron == nil {
		rt.cron = &cronStore{}
	}
	action, err := strArg(args, "cronjob", "action", true)
	if err != nil {
		return badCall(err)
	}
	a, err := cronArgsOf(args)
	if err != nil {
		return badCall(err)
	}
	now := rt.s.o.Now().UTC()
	switch act := strings.ToLower(strings.TrimSpace(action)); act {
	case "create":
		return rt.cronCreate(a, now), nil
	case "list":
		return rt.cron.list(boolArg(args, "include_disabled")), nil
	case "update", "pause", "resume", "remove", "delete", "run", "run_now", "trigger":
		if a.jobID == "" {
			return cronFail(fmt.Sprintf("job_id is required for action '%s'", act)), nil
		}
		j := rt.cron.find(a.jobID)
		if j == nil {
			return cronFail(fmt.Sprintf("Job with ID '%s' not found. List the jobs to find its ID.", a.jobID)), nil
		}
		return rt.cronAct(act, j, a, now), nil
	}
	return cronFail(fmt.Sprintf("Unknown cron action '%s'; use create, list, update, pause, resume, remove or run", action)), nil
}

// cronArgs are the optional arguments of a cronjob call; nil pointers were
// not given.
type cronArgs struct {
	jobID, reason                                 string
	prompt, schedule, name, deliver, model, provr *string
	repeat                                        *int
	skills                                        []string
}

func cronArgsOf(args map[string]json.RawMessage) (cronArgs, error) {
	var a cronArgs
	var err error
	if a.jobID, err = strArg(args, "cronjob", "job_id", false); err != nil {
		return a, err
	}
	if a.reason, err = strArg(args, "cronjob", "reason", false); err != nil {
		return a, err
	}
	for _, f := range []struct {
		key string
		dst **string
	}{{"prompt", &a.prompt}, {"schedule", &a.schedule}, {"name", &a.name}, {"deliver", &a.deliver}, {"model", &a.model}, {"provider", &a.provr}} {
		if v, ok := args[f.key]; ok && string(v) != "null" {
			s, err := strArg(args, "cronjob", f.key, false)
			if err != nil {
				return a, err
			}
			*f.dst = &s
		}
	}
	if v, ok := args["repeat"]; ok && string(v) != "null" {
		n, err := intArg(args, "cronjob", "repeat", 0)
		if err != nil {
			return a, err
		}
		a.repeat = &n
	}
	if v, ok := args["skills"]; ok && string(v) != "null" {
		if err := json.Unmarshal(v, &a.skills); err != nil {
			return a, &errBadCall{`invalid arguments for cronjob: "skills" must be an array of strings`}
		}
	}
	return a, nil
}

func cronFail(msg string) string {
	return schemas.ToolResultJSON(struct {
		Success bool   `json:"success"`
		Error   string `json:"error"`
	}{false, msg})
}

func cronJobResult(j *cronJob) string {
	return schemas.ToolResultJSON(struct {
		Success bool     `json:"success"`
		Job     shownJob `json:"job"`
	}{true, j.shown()})
}

// plan reads a schedule with Options.PlanSchedule; msg is the refusal.
func (rt *rolloutTools) plan(text string, now time.Time) (PlannedSchedule, string) {
	p, err := rt.s.o.PlanSchedule(text, now)
	if err != nil {
		return PlannedSchedule{}, "Invalid schedule: " + err.Error()
	}
	return p, ""
}

// guard checks a job's prompt with Options.GuardCronPrompt; msg is the
// refusal ("" when it passes or there is no guard).
func (rt *rolloutTools) guard(prompt string) string {
	if rt.s.o.GuardCronPrompt == nil {
		return ""
	}
	if err := rt.s.o.GuardCronPrompt(prompt); err != nil {
		return "Blocked: " + err.Error()
	}
	return ""
}

func (rt *rolloutTools) cronCreate(a cronArgs, now time.Time) string {
	if a.schedule == nil || strings.TrimSpace(*a.schedule) == "" {
		return cronFail("schedule is required for create")
	}
	if a.prompt == nil || strings.TrimSpace(*a.prompt) == "" {
		return cronFail("create requires a prompt")
	}
	if msg := rt.guard(*a.prompt); msg != "" {
		return cronFail(msg)
	}
	p, msg := rt.plan(*a.schedule, now)
	if msg != "" {
		return cronFail(msg)
	}
	st := rt.cron
	st.created++
	sum := sha256.Sum256([]byte(strconv.Itoa(st.created) + "\x00" + *a.schedule + "\x00" + *a.prompt))
	j := &cronJob{id: hex.EncodeToString(sum[:6]), prompt: *a.prompt, schedText: *a.schedule, display: p.Display,
		deliver: "local", skills: a.skills, model: a.model, provider: a.provr, enabled: true, state: "scheduled"}
	j.name = defaultCronName(a)
	if a.deliver != nil && *a.deliver != "" {
		j.deliver = *a.deliver
	}
	j.setRepeat(a.repeat, p.Once)
	next := p.Next.UTC().Format(time.RFC3339)
	j.nextRunAt = &next
	st.jobs = append(st.jobs, j)
	shown := j.shown()
	return schemas.ToolResultJSON(struct {
		Success   bool     `json:"success"`
		JobID     string   `json:"job_id"`
		Name      string   `json:"name"`
		Schedule  string   `json:"schedule"`
		Repeat    string   `json:"repeat"`
		Deliver   string   `json:"deliver"`
		NextRunAt *string  `json:"next_run_at"`
		Job       shownJob `json:"job"`
		Message   string   `json:"message"`
	}{true, j.id, j.name, j.display, shown.Repeat, j.deliver, j.nextRunAt, shown, fmt.Sprintf("Cron job '%s' created.", j.name)})
}

// defaultCronName is the name given, else the start of the prompt (at
// most 50 characters), as Hermes names a job.
func defaultCronName(a cronArgs) string {
	if a.name != nil && strings.TrimSpace(*a.name) != "" {
		return strings.TrimSpace(*a.name)
	}
	r := []rune(strings.TrimSpace(*a.prompt))
	if len(r) > 50 {
		r = r[:50]
	}
	return string(r)
}

// setRepeat sets the repeat count: the one given (0 or less: forever),
// else once for a one-shot and forever otherwise.
func (j *cronJob) setRepeat(n *int, once bool) {
	switch {
	case n != nil && *n > 0:
		v := *n
		j.times = &v
	case n != nil:
		j.times = nil
	case once:
		v := 1
		j.times = &v
	}
}

func (st *cronStore) find(id string) *cronJob {
	for _, j := range st.jobs {
		if j.id == id {
			return j
		}
	}
	return nil
}

func (st *cronStore) list(all bool) string {
	jobs := []shownJob{}
	for _, j := range st.jobs {
		if all || j.enabled {
			jobs = append(jobs, j.shown())
		}
	}
	return schemas.ToolResultJSON(struct {
		Success bool       `json:"success"`
		Count   int        `json:"count"`
		Jobs    []shownJob `json:"jobs"`
	}{true, len(jobs), jobs})
}

// cronAct applies a job-bound action to j.
func (rt *rolloutTools) cronAct(act string, j *cronJob, a cronArgs, now time.Time) string {
	stamp := now.Format(time.RFC3339)
	switch act {
	case "remove", "delete":
		st := rt.cron
		for i, x := range st.jobs {
			if x == j {
				st.jobs = append(st.jobs[:i], st.jobs[i+1:]...)
				break
			}
		}
		type removed struct {
			ID       string `json:"id"`
			Name     string `json:"name"`
			Schedule string `json:"schedule"`
		}
		return schemas.ToolResultJSON(struct {
			Success    bool    `json:"success"`
			Message    string  `json:"message"`
			RemovedJob removed `json:"removed_job"`
		}{true, fmt.Sprintf("Cron job '%s' removed.", j.name), removed{j.id, j.name, j.display}})
	case "pause":
		j.enabled, j.state, j.pausedAt = false, "paused", &stamp
		j.pausedReason = nil
		if a.reason != "" {
			r := a.reason
			j.pausedReason = &r
		}
	case "resume":
		p, msg := rt.plan(j.schedText, now)
		if msg != "" {
			return cronFail(msg)
		}
		next := p.Next.UTC().Format(time.RFC3339)
		j.enabled, j.state, j.pausedAt, j.pausedReason, j.nextRunAt = true, "scheduled", nil, nil, &next
	case "run", "run_now", "trigger":
		// Hermes' trigger: the job fires at the scheduler's next tick.
		j.enabled, j.state, j.pausedAt, j.pausedReason, j.nextRunAt = true, "scheduled", nil, nil, &stamp
	case "update":
		return rt.cronUpdate(j, a, now)
	}
	return cronJobResult(j)
}

func (rt *rolloutTools) cronUpdate(j *cronJob, a cronArgs, now time.Time) string {
	if a.prompt != nil {
		if msg := rt.guard(*a.prompt); msg != "" {
			return cronFail(msg)
		}
	}
	changed := false
	if a.schedule != nil {
		p, msg := rt.plan(*a.schedule, now)
		if msg != "" {
			return cronFail(msg)
		}
		next := p.Next.UTC().Format(time.RFC3339)
		j.schedText, j.display, j.nextRunAt, changed = *a.schedule, p.Display, &next, true
	}
	for _, f := range []struct {
		v   *string
		dst *string
	}{{a.prompt, &j.prompt}, {a.name, &j.name}, {a.deliver, &j.deliver}} {
		if f.v != nil {
			*f.dst, changed = *f.v, true
		}
	}
	if a.model != nil {
		j.model, changed = a.model, true
	}
	if a.provr != nil {
		j.provider, changed = a.provr, true
	}
	if a.repeat != nil {
		j.setRepeat(a.repeat, false)
		changed = true
	}
	if a.skills != nil {
		j.skills, changed = a.skills, true
	}
	if !changed {
		return cronFail("No updates provided.")
	}
	return cronJobResult(j)
}
