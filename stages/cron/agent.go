package cron

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
	"github.com/hermes-pipe/hermes-pipe/stages/rollout/mcp"
)

// AgentJob is what an agent job asks the runner to do. The prompt already
// carries the outputs named by context_from; the toolsets are narrowed by the
// cron policy (see NarrowToolsets).
type AgentJob struct {
	JobID       string
	ExecutionID string
	Name        string
	ScheduledAt time.Time
	// Prompt is the user message: the cron preamble, context_from outputs,
	// script output and the job's prompt, with its skills placed before it
	// as Hermes places them.
	Prompt string
	// SystemPrompt is SOUL.md and the workdir's project context files
	// (AGENTS.md, CLAUDE.md or .cursorrules), as Hermes' system prompt
	// carries them; "" when there are none.
	SystemPrompt string
	Model        string
	Provider     string
	BaseURL      string
	Skills       []string
	Toolsets     []string
	Workdir      string
	// MCP is the job's MCP configuration (its stored mcp_config, already
	// read and checked); nil = none. The runner starts its servers before
	// the first model call and stops them with the execution.
	MCP *mcp.Config
	// SkillsDir is the folder the skills toolset reads: the job's own
	// skills_dir, else <home>/skills (where the job's skills are loaded
	// from).
	SkillsDir string
	// InactivityTimeout ends the run when neither the model nor a tool made
	// progress for this long; 0 means none. The runner enforces it.
	InactivityTimeout time.Duration
	// MaxTurns and CommandTimeout are the job's own agent settings (0: the
	// runner's defaults); APIKeyEnv names the variable holding its API key
	// ("": the runner's key).
	MaxTurns       int
	CommandTimeout time.Duration
	APIKeyEnv      string
	// Sandbox is the job's sandbox spec (see ParseSandbox); "" = the
	// runner's driver.
	Sandbox string
	// Sampling is sent with every chat request of the execution (the
	// job's stored sampling parameters); the zero value sends none.
	Sampling llm.Sampling
	// MaxRuntime is the wall-clock cap (0: none, the default); when set, the
	// context passed to RunAgent also carries it as a deadline.
	MaxRuntime time.Duration
	// OutDir is the output folder where the runner keeps the execution's
	// trajectory as a record (generate's record format, so `hermes-pipe cat`,
	// `stats` and `verify` read it); the scheduler sets it to RunDir. ""
	// keeps nothing.
	OutDir string
}

// AgentResult is the final text of an agent run and how it ended.
type AgentResult struct {
	Output  string
	Outcome schemas.Outcome
	Error   string
}

// AgentRunner runs one agent job to completion. The command layer provides
// an implementation backed by the rollout stage; tests use a fake. RunAgent
// blocks until the run ends or ctx is done. A returned error is an
// infrastructure fault; a run that merely failed reports it in the result.
type AgentRunner interface {
	RunAgent(ctx context.Context, job AgentJob) (AgentResult, error)
}

// DefaultToolset is the only toolset an agent job gets unless it asks for others.
const DefaultToolset = "terminal"

// forbiddenToolsets are never given to unattended jobs: nothing that
// schedules jobs, sends messages or asks the user a question.
var forbiddenToolsets = []string{"cronjob", "cron", "schedule", "messaging", "send_message", "message", "clarify", "ask_user", "delegation"}

// cronToolsets are the built-in toolsets agent jobs may use. Besides them a
// job may name the toolsets of its MCP servers (mcp-<server>, from its
// stored mcp_config); nothing else is known to the runner.
var cronToolsets = []string{"terminal", "file", "todo", "skills", "execute_code"}

// checkToolsets refuses toolsets the agent does not have, naming the known
// ones: a job asking for a toolset it would silently run without (Hermes'
// web or browser, say) is refused instead. mcpToolsets are those of the
// job's MCP configuration.
func checkToolsets(requested, mcpToolsets []string) error {
	var unknown []string
	for _, t := range requested {
		t = strings.TrimSpace(t)
		if t == "" || slices.Contains(forbiddenToolsets, strings.ToLower(t)) || slices.Contains(cronToolsets, t) || slices.Contains(mcpToolsets, t) {
			continue
		}
		unknown = append(unknown, t)
	}
	if len(unknown) > 0 {
		known := append(append([]string(nil), cronToolsets...), mcpToolsets...)
		msg := fmt.Sprintf("unknown toolsets %s (known: %s)", strings.Join(unknown, ", "), strings.Join(known, ", "))
		for _, u := range unknown {
			if strings.HasPrefix(u, schemas.MCPToolsetPrefix) {
				msg += "; an mcp-<server> toolset needs that server in the job's --mcp-config"
				break
			}
		}
		return errors.New(msg)
	}
	return nil
}

// NarrowToolsets applies the cron policy to requested toolsets: forbidden
// ones are removed (and returned in refused); an empty result becomes the
// default toolset.
func NarrowToolsets(requested []string) (allowed, refused []string) {
	for _, t := range requested {
		t = strings.TrimSpace(t)
		if t == "" || slices.Contains(allowed, t) {
			continue
		}
		if slices.Contains(forbiddenToolsets, strings.ToLower(t)) {
			refused = append(refused, t)
			continue
		}
		allowed = append(allowed, t)
	}
	if len(allowed) == 0 {
		allowed = []string{DefaultToolset}
	}
	return allowed, refused
}

const cronPreamble = "[You are running as a scheduled job; nobody is watching. Do not ask questions " +
	"or wait for confirmation. Your final answer is delivered as the job's output; " +
	"answer with nothing at all if there is nothing worth reporting.]\n\n"

// buildPrompt assembles an agent prompt: the cron preamble, the latest
// outputs of context_from jobs, a pre-run script's output, then the prompt.
func buildPrompt(job *Job, contexts []contextOutput, scriptOut string) string {
	var b strings.Builder
	b.WriteString(cronPreamble)
	for _, c := range contexts {
		fmt.Fprintf(&b, "## Latest output of job %q (%s, %s)\n\n%s\n\n", c.name, c.id, c.at.Format(time.RFC3339), strings.TrimSpace(c.text))
	}
	if scriptOut != "" {
		fmt.Fprintf(&b, "## Output of the job's script\n\n%s\n\n", strings.TrimSpace(scriptOut))
	}
	b.WriteString(job.Prompt)
	return b.String()
}

// jobSkills is the job's skills, with Hermes' legacy single "skill" field
// when "skills" is empty, without blanks or repeats.
func jobSkills(job *Job) []string {
	src := []string(job.Skills)
	if len(src) == 0 && job.Skill != "" {
		src = []string{string(job.Skill)}
	}
	var out []string
	for _, s := range src {
		if s = strings.TrimSpace(s); s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

type contextOutput struct {
	id, name, text string
	at             time.Time
}
