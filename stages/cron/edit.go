package cron

import (
	"context"
	"strings"
	"time"
)

// JobEdit is a change to an existing job (`cron edit`): each non-nil field
// replaces the job's value, nil fields keep it. Durations are stored in whole
// seconds, as Hermes' jobs.json keeps them.
type JobEdit struct {
	Name, Schedule, Timezone, Prompt, Script *string
	NoAgent                                  *bool
	Model, Provider, BaseURL                 *string
	Skills, ContextFrom, Toolsets, EnvAllow  *[]string
	Deliver, Workdir, Overlap                *string
	// Repeat: 0 or less means forever.
	Repeat *int
	// Timeout is the inactivity timeout; 0 means none.
	StartingDeadline, Timeout, MaxRuntime *time.Duration
	// Agent settings: 0 or "" returns to the cron command's defaults.
	MaxTurns       *int
	CommandTimeout *time.Duration
	APIKeyEnv      *string
	Sandbox        *string
	// MCPConfig and SkillsDir: "" removes the job's own (no MCP servers;
	// the skills toolset reads <home>/skills); a path is made absolute.
	MCPConfig, SkillsDir *string
	// Sampling parameters of the job's agent executions: ClearSampling
	// drops the job's own first; a given one replaces the job's (MaxTokens
	// 0 and ExtraBody "" or "{}" remove theirs). See Sampling.
	ClearSampling bool
	Temperature   *float64
	TopP          *float64
	MaxTokens     *int
	Seed          *int64
	ExtraBody     *string
}

// Apply copies the edit onto j. The zone is applied before the schedule, so a
// new schedule is read in the new zone; a new one-shot schedule on a job
// without a repeat count runs once. Errors wrap ErrUsage and say what to
// change; j may be partly changed when Apply fails, so callers apply it
// inside ModifyJob, which discards a failed edit.
func (e JobEdit) Apply(j *Job, now time.Time) error {
	if err := e.applyWhen(j, now); err != nil {
		return err
	}
	e.applyAgent(j)
	if err := e.applyToolsets(j); err != nil {
		return err
	}
	e.applyPolicy(j)
	if err := e.applySampling(j); err != nil {
		return err
	}
	if e.Deliver != nil {
		if err := ValidateDeliver(*e.Deliver); err != nil {
			return err
		}
		j.Deliver = *e.Deliver
	}
	return nil
}

// applyWhen applies the time zone, then the schedule read in it; a new
// one-shot must not be in the past and, without a repeat count, runs once.
func (e JobEdit) applyWhen(j *Job, now time.Time) error {
	if e.Timezone != nil {
		tz := *e.Timezone
		if tz == "" {
			tz = LocalZone()
		}
		if _, err := time.LoadLocation(tz); err != nil {
			return usagef("time zone %q: %v", tz, err)
		}
		j.Timezone = tz
	}
	if e.Schedule == nil {
		return nil
	}
	s, err := ParseSchedule(*e.Schedule, j.Location(), now)
	if err != nil {
		return err
	}
	if s.Kind == KindOnce {
		if at, err := parseTimestamp(s.RunAt, j.Location()); err == nil && now.Sub(at) > minGrace {
			return usagef("one-shot time %s is in the past", at.In(j.Location()).Format(time.RFC3339))
		}
	}
	j.Schedule = s
	if s.Kind == KindOnce && j.Repeat.Times == nil {
		one := 1
		j.Repeat.Times = &one
	}
	return nil
}

// applyAgent applies what the job runs and with which agent: name, prompt,
// script, model and endpoint, skills, context jobs, sandbox, MCP
// configuration and skills folder.
func (e JobEdit) applyAgent(j *Job) {
	setIf(&j.Name, e.Name)
	setIf(&j.Prompt, e.Prompt)
	setNull(&j.Script, e.Script)
	setIf(&j.NoAgent, e.NoAgent)
	setNull(&j.Model, e.Model)
	setNull(&j.Provider, e.Provider)
	if e.BaseURL != nil {
		j.BaseURL = NullString(strings.TrimRight(*e.BaseURL, "/"))
	}
	if e.Skills != nil {
		// Hermes keeps the first skill in the legacy "skill" field too.
		j.Skills, j.Skill = *e.Skills, ""
		if len(j.Skills) > 0 {
			j.Skill = NullString(j.Skills[0])
		}
	}
	setIf((*[]string)(&j.ContextFrom), e.ContextFrom)
	setIf(&j.Policy.Sandbox, e.Sandbox)
	if e.MCPConfig != nil {
		j.Policy.MCPConfig = absPath(*e.MCPConfig)
	}
	if e.SkillsDir != nil {
		j.Policy.SkillsDir = absPath(*e.SkillsDir)
	}
}

// applyToolsets applies new toolsets, checked against the job's MCP
// configuration (already edited); a new configuration alone must still
// serve the job's mcp-<server> toolsets.
func (e JobEdit) applyToolsets(j *Job) error {
	switch {
	case e.Toolsets != nil:
		if err := checkToolsets(*e.Toolsets, mustToolsets(jobMCP(j))); err != nil {
			return usagef("%v", err)
		}
		j.EnabledToolsets = *e.Toolsets
	case e.MCPConfig != nil:
		// The job's mcp-<server> toolsets must be in its new configuration.
		if _, err := jobMCP(j); err == nil {
			if err := checkMCPToolsets(j); err != nil {
				return usagef("%v; give --toolsets too", err)
			}
		}
	}
	return nil
}

// applyPolicy applies the run policy: environment, workdir, overlap, the
// timeouts and caps (whole seconds), the API key variable and the repeat
// count.
func (e JobEdit) applyPolicy(j *Job) {
	setIf(&j.Policy.EnvAllow, e.EnvAllow)
	setNull(&j.Workdir, e.Workdir)
	setIf(&j.Policy.Overlap, e.Overlap)
	setSeconds(&j.Policy.StartingDeadlineSeconds, e.StartingDeadline)
	if e.Timeout != nil {
		n := int(*e.Timeout / time.Second)
		j.Policy.TimeoutSeconds = &n
	}
	setSeconds(&j.Policy.MaxRuntimeSeconds, e.MaxRuntime)
	setIf(&j.Policy.MaxTurns, e.MaxTurns)
	setSeconds(&j.Policy.CommandTimeoutSeconds, e.CommandTimeout)
	setIf(&j.Policy.APIKeyEnv, e.APIKeyEnv)
	if e.Repeat != nil {
		if n := *e.Repeat; n > 0 {
			j.Repeat.Times = &n
		} else {
			j.Repeat.Times = nil
		}
	}
}

// setIf sets *dst to *v when v is given.
func setIf[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// setNull sets *dst to *v when v is given.
func setNull(dst *NullString, v *string) {
	if v != nil {
		*dst = NullString(*v)
	}
}

// setSeconds sets *dst to v in whole seconds when v is given.
func setSeconds(dst *int, v *time.Duration) {
	if v != nil {
		*dst = int(*v / time.Second)
	}
}

// EditJob applies e to the job id under the store lock (ModifyJob): the job
// is revalidated and, when its schedule or zone changed, re-armed from now.
func EditJob(ctx context.Context, st *Store, home, id string, e JobEdit, now time.Time) (*Job, error) {
	return ModifyJob(ctx, st, home, id, now, func(j *Job) error { return e.Apply(j, now) })
}
