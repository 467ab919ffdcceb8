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
}

// Apply copies the edit onto j. The zone is applied before the schedule, so a
// new schedule is read in the new zone; a new one-shot schedule on a job
// without a repeat count runs once. Errors wrap ErrUsage and say what to
// change; j may be partly changed when Apply fails, so callers apply it
// inside ModifyJob, which discards a failed edit.
func (e JobEdit) Apply(j *Job, now time.Time) error {
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
	if e.Schedule != nil {
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
	}
	setStr := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	setNull := func(dst *NullString, v *string) {
		if v != nil {
			*dst = NullString(*v)
		}
	}
	setList := func(dst *[]string, v *[]string) {
		if v != nil {
			*dst = *v
		}
	}
	setStr(&j.Name, e.Name)
	setStr(&j.Prompt, e.Prompt)
	setNull(&j.Script, e.Script)
	if e.NoAgent != nil {
		j.NoAgent = *e.NoAgent
	}
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
	setList((*[]string)(&j.ContextFrom), e.ContextFrom)
	setStr(&j.Policy.Sandbox, e.Sandbox)
	if e.MCPConfig != nil {
		j.Policy.MCPConfig = absPath(*e.MCPConfig)
	}
	if e.SkillsDir != nil {
		j.Policy.SkillsDir = absPath(*e.SkillsDir)
	}
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
	setList(&j.Policy.EnvAllow, e.EnvAllow)
	setNull(&j.Workdir, e.Workdir)
	setStr(&j.Policy.Overlap, e.Overlap)
	if e.StartingDeadline != nil {
		j.Policy.StartingDeadlineSeconds = int(*e.StartingDeadline / time.Second)
	}
	if e.Timeout != nil {
		n := int(*e.Timeout / time.Second)
		j.Policy.TimeoutSeconds = &n
	}
	if e.MaxRuntime != nil {
		j.Policy.MaxRuntimeSeconds = int(*e.MaxRuntime / time.Second)
	}
	if e.MaxTurns != nil {
		j.Policy.MaxTurns = *e.MaxTurns
	}
	if e.CommandTimeout != nil {
		j.Policy.CommandTimeoutSeconds = int(*e.CommandTimeout / time.Second)
	}
	setStr(&j.Policy.APIKeyEnv, e.APIKeyEnv)
	if e.Repeat != nil {
		if n := *e.Repeat; n > 0 {
			j.Repeat.Times = &n
		} else {
			j.Repeat.Times = nil
		}
	}
	if e.Deliver != nil {
		if err := ValidateDeliver(*e.Deliver); err != nil {
			return err
		}
		j.Deliver = *e.Deliver
	}
	return nil
}

// EditJob applies e to the job id under the store lock (ModifyJob): the job
// is revalidated and, when its schedule or zone changed, re-armed from now.
func EditJob(ctx context.Context, st *Store, home, id string, e JobEdit, now time.Time) (*Job, error) {
	return ModifyJob(ctx, st, home, id, now, func(j *Job) error { return e.Apply(j, now) })
}
