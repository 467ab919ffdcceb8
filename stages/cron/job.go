package cron

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// NullString is a string that Hermes writes as null when empty.
type NullString string

// MarshalJSON writes "" as null.
func (n NullString) MarshalJSON() ([]byte, error) {
	if n == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(n))
}

// UnmarshalJSON accepts null, a string, or any scalar (stored as its text).
func (n *NullString) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		*n = ""
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		*n = NullString(strings.TrimSpace(string(b)))
		return nil
	}
	*n = NullString(s)
	return nil
}

// StringList is a list of strings that also accepts a single string or null,
// as hand-edited Hermes files contain all three.
type StringList []string

// UnmarshalJSON accepts null, "a" or ["a","b"].
func (l *StringList) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		*l = nil
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*l = StringList{s}
		return nil
	}
	var v []string
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*l = v
	return nil
}

// Repeat is Hermes' repeat counter: Times nil means forever.
type Repeat struct {
	Times     *int `json:"times"`
	Completed int  `json:"completed"`
}

// Overlap policies: what to do when an occurrence comes due while the
// previous run of the same job is still running.
const (
	OverlapForbid = "forbid" // skip the new occurrence and record it as skipped
	OverlapAllow  = "allow"  // run both
)

// DefaultInactivityTimeout is how long a run may show no progress when
// neither the job nor HERMES_CRON_TIMEOUT says otherwise (Hermes' default).
const DefaultInactivityTimeout = 600 * time.Second

// Policy holds hermes-pipe's per-job execution rules (absent from Hermes
// files; the zero value means the defaults).
type Policy struct {
	Overlap                 string   `json:"overlap,omitempty"`
	StartingDeadlineSeconds int      `json:"starting_deadline_seconds,omitempty"`
	TimeoutSeconds          *int     `json:"timeout_seconds,omitempty"`
	MaxRuntimeSeconds       int      `json:"max_runtime_seconds,omitempty"`
	EnvAllow                []string `json:"env_allow,omitempty"`
	// Agent settings of the job (0 or "": the cron command's defaults).
	MaxTurns              int    `json:"max_turns,omitempty"`
	CommandTimeoutSeconds int    `json:"command_timeout_seconds,omitempty"`
	APIKeyEnv             string `json:"api_key_env,omitempty"`
	// Sandbox is where the agent's commands run: "local" ("" too),
	// "docker:IMAGE" or "ssh:[USER@]HOST[:PORT]".
	Sandbox string `json:"sandbox,omitempty"`
	// MCPConfig is the absolute path of an MCP configuration (generate's
	// --mcp-config form) whose servers the job's agent executions may use
	// as toolsets mcp-<server>; "" = none.
	MCPConfig string `json:"mcp_config,omitempty"`
	// SkillsDir is the absolute folder the skills toolset reads; "" =
	// <home>/skills.
	SkillsDir string `json:"skills_dir,omitempty"`
	// ScriptIsolation "none" runs the job's script unconfined (the default,
	// "" or "bwrap", confines it: see runScript); ScriptNetwork "host"
	// gives the confined script the host's network (default none).
	ScriptIsolation string `json:"script_isolation,omitempty"`
	ScriptNetwork   string `json:"script_network,omitempty"`
	// Sampling is sent with every chat request of the job's agent
	// executions; nil = none (the server's defaults).
	Sampling *Sampling `json:"sampling,omitempty"`
}

// ParseSandbox splits a job's sandbox spec into the driver scheme and its
// target (the docker image, the ssh [user@]host[:port]).
func ParseSandbox(spec string) (scheme, target string, err error) {
	spec = strings.TrimSpace(spec)
	scheme, target, _ = strings.Cut(spec, ":")
	switch {
	case spec == "" || spec == "local":
		return "local", "", nil
	case scheme == "docker" && target != "":
		return scheme, target, nil
	case scheme == "ssh" && target != "" && !strings.ContainsAny(target, " /"):
		return scheme, target, nil
	}
	return "", "", fmt.Errorf("sandbox %q: use local, docker:IMAGE or ssh:[USER@]HOST[:PORT]", spec)
}

// KeyEnv is the environment variable holding the job's API key: the one
// set with --api-key-env, else the provider's conventional one
// (PROVIDER_API_KEY, as Hermes names them: openrouter → OPENROUTER_API_KEY),
// else "" (the cron command's default key).
func (j *Job) KeyEnv() string {
	if j.Policy.APIKeyEnv != "" {
		return j.Policy.APIKeyEnv
	}
	p := strings.TrimSpace(string(j.Provider))
	if p == "" {
		return ""
	}
	var b strings.Builder
	for _, r := range strings.ToUpper(p) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String() + "_API_KEY"
}

// Inactivity is the inactivity timeout: default 600 s, 0 means none.
func (p Policy) Inactivity() time.Duration {
	if p.TimeoutSeconds == nil {
		return DefaultInactivityTimeout
	}
	return time.Duration(*p.TimeoutSeconds) * time.Second
}

// MaxRuntime is the wall-clock cap of one run; 0, the default, means none:
// as in Hermes, a run that keeps making progress is only bounded by the
// inactivity timeout.
func (p Policy) MaxRuntime() time.Duration {
	if p.MaxRuntimeSeconds <= 0 {
		return 0
	}
	return time.Duration(p.MaxRuntimeSeconds) * time.Second
}

// StartingDeadline is the explicit grace window, or 0 for the default rule.
func (p Policy) StartingDeadline() time.Duration {
	return time.Duration(p.StartingDeadlineSeconds) * time.Second
}

// OverlapMode returns the overlap policy with its default applied.
func (p Policy) OverlapMode() string {
	if p.Overlap == "" {
		return OverlapForbid
	}
	return p.Overlap
}

// Job states as shown by `cron list` (Hermes' values).
const (
	StateScheduled = "scheduled"
	StatePaused    = "paused"
	StateCompleted = "completed"
)

// Job is one entry of jobs.json. Field names and JSON shapes are Hermes' so a
// Hermes jobs file imports as is; Timezone and Policy are hermes-pipe's
// additions. Fields this type does not know are kept in Extra and written back
// unchanged.
type Job struct {
	ID              string     `json:"id"`
	Name            string     `json:"name"`
	Prompt          string     `json:"prompt"`
	Skills          StringList `json:"skills"`
	Skill           NullString `json:"skill"`
	Model           NullString `json:"model"`
	Provider        NullString `json:"provider"`
	BaseURL         NullString `json:"base_url"`
	Script          NullString `json:"script"`
	NoAgent         bool       `json:"no_agent"`
	ContextFrom     StringList `json:"context_from"`
	Schedule        Schedule   `json:"schedule"`
	ScheduleDisplay string     `json:"schedule_display"`
	Repeat          Repeat     `json:"repeat"`
	Enabled         bool       `json:"enabled"`
	State           string     `json:"state"`
	PausedAt        NullString `json:"paused_at"`
	PausedReason    NullString `json:"paused_reason"`
	CreatedAt       string     `json:"created_at"`
	NextRunAt       NullString `json:"next_run_at"`
	LastRunAt       NullString `json:"last_run_at"`
	LastStatus      NullString `json:"last_status"`
	LastError       NullString `json:"last_error"`
	Deliver         string     `json:"deliver"`
	EnabledToolsets StringList `json:"enabled_toolsets"`
	Workdir         NullString `json:"workdir"`
	Timezone        string     `json:"timezone"`
	// TriggeredAt is when `cron trigger` asked for a run at the next tick
	// ("": none pending). The tick that claims it clears it in the same
	// store write; the run is its own occurrence in the ledger (trigger
	// "trigger", keyed by this instant), so it runs at most once.
	TriggeredAt NullString `json:"triggered_at,omitempty"`
	Policy      Policy     `json:"policy"`

	// Extra holds fields of the stored object this type does not model
	// (Hermes' origin, monitor_*, snapshots...), written back verbatim.
	Extra map[string]json.RawMessage `json:"-"`
}

type jobAlias Job

// knownJobKeys are the JSON keys of a Job, read at their first use.
var knownJobKeys = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{}
	b, _ := json.Marshal(jobAlias{TriggeredAt: "x"}) // every key, omitempty ones too
	var probe map[string]json.RawMessage
	_ = json.Unmarshal(b, &probe)
	for k := range probe {
		m[k] = true
	}
	return m
})

// UnmarshalJSON decodes a job and keeps unknown fields in Extra. A missing
// "enabled" means true, as in Hermes.
func (j *Job) UnmarshalJSON(b []byte) error {
	a := jobAlias{Enabled: true}
	if err := json.Unmarshal(b, &a); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	for k, v := range all {
		if !knownJobKeys()[k] {
			if a.Extra == nil {
				a.Extra = map[string]json.RawMessage{}
			}
			a.Extra[k] = v
		}
	}
	*j = Job(a)
	return nil
}

// MarshalJSON writes the known fields in Hermes' order followed by Extra's
// keys in sorted order, compact.
func (j Job) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(jobAlias(j))
	if err != nil || len(j.Extra) == 0 {
		return b, err
	}
	keys := make([]string, 0, len(j.Extra))
	for k := range j.Extra {
		if !knownJobKeys()[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var buf bytes.Buffer
	buf.Write(b[:len(b)-1])
	for _, k := range keys {
		kb, _ := json.Marshal(k)
		buf.WriteByte(',')
		buf.Write(kb)
		buf.WriteByte(':')
		var compact bytes.Buffer
		if err := json.Compact(&compact, j.Extra[k]); err != nil {
			return nil, fmt.Errorf("job %s field %s: %w", j.ID, k, err)
		}
		buf.Write(compact.Bytes())
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// Location returns the job's time zone (UTC when unset or unknown).
func (j *Job) Location() *time.Location {
	if j.Timezone == "" {
		return time.UTC
	}
	return loadLocation(j.Timezone)
}

var locCache sync.Map // zone name -> *time.Location

var zoneErrs sync.Map // zone name -> error (nil for a known zone)

// zoneError is time.LoadLocation's error for name, cached: checking every
// job of a large store must not read the zone database once per job.
func zoneError(name string) error {
	if v, ok := zoneErrs.Load(name); ok {
		err, _ := v.(error)
		return err
	}
	_, err := time.LoadLocation(name)
	zoneErrs.Store(name, err)
	return err
}

// loadLocation is time.LoadLocation with a cache (parsing tzdata costs tens
// of microseconds); unknown zones give UTC.
func loadLocation(name string) *time.Location {
	if v, ok := locCache.Load(name); ok {
		return v.(*time.Location)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return time.UTC
	}
	locCache.Store(name, loc)
	return loc
}

// NextRun parses next_run_at; ok is false when there is none.
func (j *Job) NextRun() (time.Time, bool) {
	if j.NextRunAt == "" {
		return time.Time{}, false
	}
	t, err := parseTimestamp(string(j.NextRunAt), j.Location())
	if err != nil {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// Triggered is the instant of the job's pending trigger; ok is false when
// there is none (or it does not parse, which validateStored reports).
func (j *Job) Triggered() (time.Time, bool) {
	if j.TriggeredAt == "" {
		return time.Time{}, false
	}
	t, err := parseTimestamp(string(j.TriggeredAt), time.UTC)
	if err != nil {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// ShownState is the job's state as `cron list` and error messages name it:
// completed; paused when disabled or paused; scheduled when the file leaves
// it out (Hermes files may); any other stored value as it is.
func (j *Job) ShownState() string {
	switch {
	case j.State == StateCompleted:
		return StateCompleted
	case !j.Enabled || j.State == StatePaused:
		return StatePaused
	case j.State == "":
		return StateScheduled
	}
	return j.State
}

// Runnable reports whether the scheduler may fire the job.
func (j *Job) Runnable() bool {
	return j.Enabled && j.State != StatePaused && j.State != StateCompleted
}

// NewJobID returns a 12-hex-digit id like Hermes'.
func NewJobID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }
