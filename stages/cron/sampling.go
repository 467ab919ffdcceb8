package cron

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/stages/llm"
)

// Sampling is a job's sampling parameters (cron add and edit --temperature,
// --top-p, --max-tokens, --sampling-seed, --extra-body), stored in its
// policy and sent with every chat request of its agent executions. An unset
// field is not sent: the server's default applies. ExtraBody is a JSON
// object merged into each request body as it is (top_k, min_p, ...).
type Sampling struct {
	Temperature *float64        `json:"temperature,omitempty"`
	TopP        *float64        `json:"top_p,omitempty"`
	MaxTokens   int             `json:"max_tokens,omitempty"`
	Seed        *int64          `json:"seed,omitempty"`
	ExtraBody   json.RawMessage `json:"extra_body,omitempty"`
}

// IsZero reports whether s sets nothing (a nil s too).
func (s *Sampling) IsZero() bool {
	return s == nil || s.Temperature == nil && s.TopP == nil && s.MaxTokens == 0 && s.Seed == nil && len(s.ExtraBody) == 0
}

// orNil is s, or nil when it sets nothing (so jobs.json leaves it out).
func (s *Sampling) orNil() *Sampling {
	if s.IsZero() {
		return nil
	}
	return s
}

// LLM is s as the llm client takes it (llm.Options.Sampling), checked as
// the client checks it; the error names the stored field. A nil s sets
// nothing.
func (s *Sampling) LLM() (llm.Sampling, error) {
	if s == nil {
		return llm.Sampling{}, nil
	}
	out := llm.Sampling{Temperature: s.Temperature, TopP: s.TopP, MaxTokens: s.MaxTokens, Seed: s.Seed}
	if len(s.ExtraBody) > 0 {
		extra, err := decodeExtraBody(s.ExtraBody)
		if err != nil {
			return out, err
		}
		out.Extra = extra
	}
	if err := out.Check(); err != nil {
		return out, fmt.Errorf("sampling: %w", err)
	}
	return out, nil
}

// decodeExtraBody reads a stored extra_body: one JSON object, its numbers
// kept as written (llm.DecodeExtraBody).
func decodeExtraBody(raw []byte) (map[string]any, error) {
	m, err := llm.DecodeExtraBody(raw)
	if err != nil {
		return nil, fmt.Errorf("sampling: extra_body is not one JSON object (give one such as '{\"top_k\": 20}')")
	}
	return m, nil
}

// ExtraBody is the stored form of an --extra-body value: the object
// compacted, or nil for "" (or blanks) and "{}" (none). Text that is not one JSON
// object is a usage error.
func ExtraBody(text string) (json.RawMessage, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	m, err := decodeExtraBody([]byte(text))
	if err != nil {
		return nil, usagef("%v", err)
	}
	if len(m) == 0 {
		return nil, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(text)); err != nil {
		return nil, usagef("sampling: extra_body: %v", err)
	}
	return buf.Bytes(), nil
}

// applySampling applies the sampling part of an edit: ClearSampling first
// drops the job's parameters, then each given one replaces the job's
// (MaxTokens 0 and ExtraBody "" or "{}" remove theirs). The result is
// checked by ValidateJob with the rest of the job.
func (e JobEdit) applySampling(j *Job) error {
	if !e.ClearSampling && e.Temperature == nil && e.TopP == nil && e.MaxTokens == nil && e.Seed == nil && e.ExtraBody == nil {
		return nil
	}
	var s Sampling
	if j.Policy.Sampling != nil && !e.ClearSampling {
		s = *j.Policy.Sampling
	}
	if e.Temperature != nil {
		v := *e.Temperature
		s.Temperature = &v
	}
	if e.TopP != nil {
		v := *e.TopP
		s.TopP = &v
	}
	setIf(&s.MaxTokens, e.MaxTokens)
	if e.Seed != nil {
		v := *e.Seed
		s.Seed = &v
	}
	if e.ExtraBody != nil {
		raw, err := ExtraBody(*e.ExtraBody)
		if err != nil {
			return err
		}
		s.ExtraBody = raw
	}
	j.Policy.Sampling = s.orNil()
	return nil
}
