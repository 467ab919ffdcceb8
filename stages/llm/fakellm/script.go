package fakellm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Script is one scripted conversation. It applies to a request whose FIRST
// user message matches Match; the step replayed is the number of assistant
// messages already in the request. When the steps run out the server sends
// Final, or a plain "Done." answer when Final is nil.
type Script struct {
	Name  string `json:"name"`
	Match string `json:"match"`
	Steps []Step `json:"steps"`
	Final *Step  `json:"final,omitempty"`

	re *regexp.Regexp
}

// Step is one scripted assistant reply, or a fault to inject before it.
//
// Content, Reasoning and every tool call's arguments may use these templates:
// {{last_tool}} (content of the last tool message), {{last_tool_json}} (the same
// escaped for use inside a JSON string), {{user}} and {{user_json}} (the first
// user message), {{step}} (the step number), and {{m1}} … {{m9}} (capture
// groups of the script's Match).
type Step struct {
	Content   string `json:"content,omitempty"`
	Reasoning string `json:"reasoning,omitempty"`
	// ReasoningField overrides Config.ReasoningField for this step:
	// "reasoning_content", "reasoning", or "think" (a leading <think> block
	// in the content).
	ReasoningField string         `json:"reasoning_field,omitempty"`
	ToolCalls      []ToolCallSpec `json:"tool_calls,omitempty"`
	// FinishReason defaults to "tool_calls" when the step calls tools and to
	// "stop" otherwise.
	FinishReason string `json:"finish_reason,omitempty"`
	Fault        *Fault `json:"fault,omitempty"`
	// NoLogprobs sends the reply without logprobs even when the request
	// asks for them, as a server that ignores the parameter does.
	NoLogprobs bool `json:"no_logprobs,omitempty"`
}

// ToolCallSpec is one scripted tool call. Arguments is either a JSON object
// (sent compacted, key order kept) or a JSON string sent verbatim as the
// arguments text, which may therefore be invalid JSON on purpose.
type ToolCallSpec struct {
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`

	args string // resolved arguments text (before templates)
}

// Fault kinds a Step (or the global fail rates) can inject.
const (
	Fault429        = "429"           // HTTP 429 with Retry-After and retry-after-ms
	Fault500        = "500"           // HTTP 500 with a JSON error body
	FaultMalformed  = "malformed"     // HTTP 200 with a truncated JSON body
	FaultEmpty      = "empty"         // HTTP 200 with "choices": []
	FaultBadToolArg = "bad_tool_args" // the step's tool-call arguments are cut in half
	FaultHang       = "hang"          // no answer for Hang (or until the client goes away)
	FaultCutStream  = "cut_stream"    // the body is cut off mid-way (stream or not)
)

// Fault injects a failure into the first Times attempts of an identical
// request (default 1), so a client that retries eventually gets the step's
// reply. Times < 0 means every attempt fails.
type Fault struct {
	Kind       string   `json:"kind"`
	RetryAfter Duration `json:"retry_after,omitempty"` // 429 only; default Config.RetryAfter
	Hang       Duration `json:"hang,omitempty"`        // hang only; default Config.HangFor
	Times      int      `json:"times,omitempty"`
}

// Duration is a time.Duration that reads from JSON as a Go duration string
// ("1.5s", "200ms") or as a number of seconds.
type Duration time.Duration

// UnmarshalJSON accepts "2s"-style strings and plain seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return fmt.Errorf("duration %s: want a string like \"2s\" or seconds", b)
	}
	*d = Duration(f * float64(time.Second))
	return nil
}

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

type scriptFile struct {
	Scripts []Script `json:"scripts"`
}

// ParseScripts reads scripts from JSON: either {"scripts": [...]} or a bare
// array. It validates every script (regex, fault kinds) so a bad file fails
// before the server starts.
func ParseScripts(data []byte) ([]Script, error) {
	data = bytes.TrimSpace(data)
	var scripts []Script
	if len(data) > 0 && data[0] == '[' {
		if err := json.Unmarshal(data, &scripts); err != nil {
			return nil, fmt.Errorf("parse scripts: %w", err)
		}
	} else {
		var f scriptFile
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			return nil, fmt.Errorf("parse scripts: %w", err)
		}
		scripts = f.Scripts
	}
	for i := range scripts {
		if err := scripts[i].compile(); err != nil {
			return nil, fmt.Errorf("parse scripts: %w", err)
		}
	}
	return scripts, nil
}

// LoadScripts reads and validates a script file (see ParseScripts).
func LoadScripts(path string) ([]Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load scripts: %w", err)
	}
	return ParseScripts(data)
}

// clone returns a copy of s that shares no mutable memory with it.
func (s Script) clone() Script {
	s.Steps = append([]Step(nil), s.Steps...)
	for i := range s.Steps {
		s.Steps[i] = s.Steps[i].clone()
	}
	if s.Final != nil {
		f := s.Final.clone()
		s.Final = &f
	}
	return s
}

func (st Step) clone() Step {
	st.ToolCalls = append([]ToolCallSpec(nil), st.ToolCalls...)
	if st.Fault != nil {
		f := *st.Fault
		st.Fault = &f
	}
	return st
}

// compile checks the script and prepares its regex and arguments.
func (s *Script) compile() error {
	name := s.Name
	if name == "" {
		name = s.Match
	}
	re, err := regexp.Compile(s.Match)
	if err != nil {
		return fmt.Errorf("script %q: match: %w", name, err)
	}
	s.re = re
	for i := range s.Steps {
		if err := s.Steps[i].compile(); err != nil {
			return fmt.Errorf("script %q step %d: %w", name, i, err)
		}
	}
	if s.Final != nil {
		if err := s.Final.compile(); err != nil {
			return fmt.Errorf("script %q final: %w", name, err)
		}
	}
	return nil
}

func (st *Step) compile() error {
	switch st.ReasoningField {
	case "", "reasoning", "reasoning_content", "think":
	default:
		return fmt.Errorf("reasoning_field %q: want reasoning, reasoning_content or think", st.ReasoningField)
	}
	if st.Fault != nil {
		switch st.Fault.Kind {
		case Fault429, Fault500, FaultMalformed, FaultEmpty, FaultBadToolArg, FaultHang, FaultCutStream:
		default:
			return fmt.Errorf("fault kind %q unknown", st.Fault.Kind)
		}
	}
	for i := range st.ToolCalls {
		tc := &st.ToolCalls[i]
		if tc.Name == "" {
			return fmt.Errorf("tool call %d: name is empty", i)
		}
		raw := bytes.TrimSpace(tc.Arguments)
		switch {
		case len(raw) == 0 || string(raw) == "null":
			tc.args = "{}"
		case raw[0] == '"':
			if err := json.Unmarshal(raw, &tc.args); err != nil {
				return fmt.Errorf("tool call %d arguments: %w", i, err)
			}
		default:
			var buf bytes.Buffer
			if err := json.Compact(&buf, raw); err != nil {
				return fmt.Errorf("tool call %d arguments: %w", i, err)
			}
			tc.args = buf.String()
		}
	}
	return nil
}

// templateVars holds the values a step's templates may refer to.
type templateVars struct {
	lastTool string
	user     string
	step     int
	groups   []string
}

// expand replaces the {{...}} templates in s. It costs nothing when s holds
// no template.
func (v *templateVars) expand(s string) string {
	if !strings.Contains(s, "{{") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "{{")
		if i < 0 {
			b.WriteString(s)
			break
		}
		j := strings.Index(s[i:], "}}")
		if j < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		name := s[i+2 : i+j]
		if val, ok := v.lookup(name); ok {
			b.WriteString(val)
		} else {
			b.WriteString(s[i : i+j+2])
		}
		s = s[i+j+2:]
	}
	return b.String()
}

func (v *templateVars) lookup(name string) (string, bool) {
	switch name {
	case "last_tool":
		return v.lastTool, true
	case "last_tool_json":
		return jsonEscape(v.lastTool), true
	case "user":
		return v.user, true
	case "user_json":
		return jsonEscape(v.user), true
	case "step":
		return strconv.Itoa(v.step), true
	}
	if len(name) == 2 && name[0] == 'm' && name[1] >= '1' && name[1] <= '9' {
		k := int(name[1] - '0')
		if k < len(v.groups) {
			return v.groups[k], true
		}
		return "", true
	}
	return "", false
}

// jsonEscape returns s as it would appear between the quotes of a JSON string.
func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}
