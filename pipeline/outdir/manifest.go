package outdir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// File and folder names inside an output folder.
const (
	ManifestFile   = "run.json"
	LedgerFile     = "ledger.jsonl"
	RejectsFile    = "rejects.jsonl"
	StatisticsFile = "statistics.json"
	DataDir        = "data"   // shards of records with a final outcome
	FailedDir      = "failed" // shards of records with a retryable outcome
	// ShardPrefix starts a shard's file name: ShardPrefix, the shard's
	// number (five digits at least), its format's extension
	// (shard-00012.jsonl).
	ShardPrefix = "shard-"
)

// FormatJSONL is the default shard format, assumed when run.json names none.
const FormatJSONL = "jsonl"

// Manifest is the content of run.json.
type Manifest struct {
	Kind        string            `json:"kind"`
	Format      string            `json:"format"`
	ToolVersion string            `json:"tool_version"`
	Options     json.RawMessage   `json:"options,omitempty"`
	Outcomes    []schemas.Outcome `json:"outcomes,omitempty"`
	Artifacts   []string          `json:"artifacts,omitempty"`
	// Retry lists final outcomes of the mode that --resume runs again (see
	// OutcomeSet.Retryable); a key may then hold more than one final record
	// over time, the latest live.
	Retry []schemas.Outcome `json:"retry_outcomes,omitempty"`
	// OutcomeField names the record member, as a dotted path, that holds the
	// mode's own outcome when it differs from "outcome" (a mode that keeps
	// the input's outcome, as compress does, declares where it puts its own);
	// stats count it.
	OutcomeField string `json:"outcome_field,omitempty"`
	// OutcomeDefault is the mode's outcome of a record without OutcomeField
	// (compress passes a row under its target through unchanged).
	OutcomeDefault schemas.Outcome `json:"outcome_default,omitempty"`
	// UsageField and CostField name the record members, as dotted paths,
	// that hold the mode's own token usage and cost when they differ from
	// "usage" and "cost_usd" (a mode that keeps the input's, as compress
	// does, declares where it puts what its own calls used and cost); stats
	// sum them. A record without either member
	// made no call of the mode and costs $0.
	UsageField string `json:"usage_field,omitempty"`
	CostField  string `json:"cost_field,omitempty"`
	// CallsField names the record member, as a dotted path, that holds how
	// many model calls the mode itself made for the record, when it differs
	// from "api_calls" (compress: its summary calls, not the input's
	// rollout calls); stats count it. A record without the member made no
	// call of the mode.
	CallsField string `json:"calls_field,omitempty"`
	// Retries counts the model requests tried again by cause, summed over
	// every run of the folder (nil: no run recorded any).
	Retries   *Retries  `json:"retries,omitempty"`
	Runs      int       `json:"runs"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Retries counts failed model requests that were tried again, by cause (the
// llm client's RetryCounts as a run hands them over).
type Retries struct {
	RateLimited int64 `json:"rate_limited"` // HTTP 429
	Server      int64 `json:"server_error"` // HTTP 5xx
	Timeout     int64 `json:"timeout"`      // request timeout
	Malformed   int64 `json:"malformed"`    // unreadable reply
	Other       int64 `json:"other"`        // connection failures, 408, 409
}

// Add adds o's counts to r.
func (r *Retries) Add(o Retries) {
	r.RateLimited += o.RateLimited
	r.Server += o.Server
	r.Timeout += o.Timeout
	r.Malformed += o.Malformed
	r.Other += o.Other
}

// Total is the number of retries of every cause.
func (r Retries) Total() int64 {
	return r.RateLimited + r.Server + r.Timeout + r.Malformed + r.Other
}

// Text is the total and each cause that happened, as the closing summary
// and stats print them: "none", or "5 (4 429 rate-limited, 1 timeout)".
func (r Retries) Text() string {
	if r.Total() == 0 {
		return "none"
	}
	return fmt.Sprintf("%d (%s)", r.Total(), r.Causes())
}

// Causes is each cause that happened with its count, "4 429 rate-limited,
// 1 timeout" ("" when none did).
func (r Retries) Causes() string {
	var parts []string
	for _, c := range []struct {
		name string
		n    int64
	}{
		{"429 rate-limited", r.RateLimited},
		{"5xx server error", r.Server},
		{"timeout", r.Timeout},
		{"malformed reply", r.Malformed},
		{"connection or other", r.Other},
	} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.name))
		}
	}
	return strings.Join(parts, ", ")
}

// ReadManifest reads dir's run.json. ok is false when the file does not
// exist; a missing format reads as FormatJSONL.
func ReadManifest(dir string) (m Manifest, ok bool, err error) {
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if errors.Is(err, os.ErrNotExist) {
		return m, false, nil
	}
	if err != nil {
		return m, false, fmt.Errorf("read %s: %w", ManifestFile, err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return m, false, fmt.Errorf("read %s in %s: %w", ManifestFile, dir, err)
	}
	if m.Format == "" {
		m.Format = FormatJSONL
	}
	return m, true, nil
}

// EncodeManifest returns the bytes of run.json for m: indented, ending in a
// newline.
func EncodeManifest(m *Manifest) ([]byte, error) {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", ManifestFile, err)
	}
	return append(data, '\n'), nil
}
