package report

import (
	"strconv"
	"strings"
	"unsafe"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// PromptRunes is the most of a prompt's first line a Summary keeps.
const PromptRunes = 120

// Summary is what report and view know of one record without its
// conversation text (but the first line of its prompt).
type Summary struct {
	Key           string
	ID            string
	Prompt        string // the first line of the first human turn (read in its first 2 KiB), cut to PromptRunes runes ("…" when cut)
	PromptIndex   int64
	Sample        int64
	Outcome       string // the mode's own outcome (run.json's OutcomeField, when the mode names one)
	RecordOutcome string // the record's "outcome" member
	Turns         int
	Tokens        int64 // usage.total_tokens
	DurationMS    int64
	CostUSD       float64
	Priced        bool // cost_usd is a number
	Toolsets      []string
	Tools         []string // tools called at least once
	ToolFailures  int
	Reasoning     bool // reasoning_stats.has_any_reasoning
	Model         string
	Reward        float64 // the record's reward, when Rewarded
	Rewarded      bool    // reward is a number
	Grade         Grade   // what the grader said, by pipeline.Stats' rule
}

// Grade is a record's grading as pipeline.Stats counts it: ungraded (no
// grade and no reward), passed (grade.passed true), errored (graded, reward
// null: the grader failed) or failed.
type Grade uint8

// The grades of a record.
const (
	Ungraded Grade = iota
	Passed
	Failed
	Errored
)

// String is the grade's name: "", "passed", "failed", "errored".
func (g Grade) String() string {
	return [...]string{"", "passed", "failed", "errored"}[g]
}

// Summarize decodes the Summary of one record line in one walk over its
// members (schemas.EachMember); the first member of a name counts, and
// values of another JSON type are read as they always were (see
// schemas.LooseInt). man is the folder's run.json: the Summary's Outcome is the
// mode's own (Manifest.ModeOutcome, as pipeline.Stats counts it). A line
// that is not a JSON object gives a Summary with only Outcome (the caller
// falls back to the ledger's outcome when it is ""). The Summary shares no
// memory with line.
func Summarize(line []byte, man *outdir.Manifest) Summary {
	var s Summary
	obj := strings.TrimSpace(unsafe.String(unsafe.SliceData(line), len(line)))
	if obj != "" && obj[0] == '{' {
		var seen uint32
		schemas.EachMember(obj, func(name, raw string) {
			if bit, ok := summaryMembers[name]; ok && seen&bit == 0 && s.member(name, raw) {
				seen |= bit
			}
		})
	}
	// The strings read point into line, which the caller may reuse.
	for _, p := range []*string{&s.Key, &s.ID, &s.Prompt, &s.RecordOutcome, &s.Model} {
		*p = strings.Clone(*p)
	}
	for _, l := range [][]string{s.Toolsets, s.Tools} {
		for i := range l {
			l[i] = strings.Clone(l[i])
		}
	}
	s.Outcome = string(man.ModeOutcome(line, schemas.Outcome(s.RecordOutcome)))
	s.grade()
	return s
}

// grade sets Grade from what member read of reward and grade (in either
// order): passed marks Grade Passed, a grade member Failed until then.
func (s *Summary) grade() {
	switch {
	case s.Grade == Passed:
	case s.Grade == Ungraded && !s.Rewarded:
	case !s.Rewarded:
		s.Grade = Errored
	default:
		s.Grade = Failed
	}
}

// summaryMembers are the members Summarize reads, each with its bit.
var summaryMembers = func() map[string]uint32 {
	m := map[string]uint32{}
	for i, name := range []string{schemas.MemberKey, schemas.MemberID, schemas.MemberPromptIndex, schemas.MemberSample,
		schemas.MemberOutcome, schemas.MemberConversations, schemas.MemberUsage, schemas.MemberDurationMS, schemas.MemberCostUSD,
		schemas.MemberToolsetsUsed, schemas.MemberToolStats, schemas.MemberReasoningStats, schemas.MemberModel,
		schemas.MemberReward, schemas.MemberGrade} {
		m[name] = 1 << i
	}
	return m
}()

// member reads the record member name of the raw JSON value raw into s.
// It returns false when a member read by a path below it (usage's
// total_tokens) does not have it: a later member of the same name may.
func (s *Summary) member(name, raw string) bool {
	switch name {
	case schemas.MemberKey:
		s.Key = schemas.LooseText(raw)
	case schemas.MemberID:
		s.ID = schemas.LooseText(raw)
	case schemas.MemberPromptIndex:
		s.PromptIndex = schemas.LooseInt(raw)
	case schemas.MemberSample:
		s.Sample = schemas.LooseInt(raw)
	case schemas.MemberOutcome:
		s.RecordOutcome = schemas.LooseText(raw)
	case schemas.MemberConversations:
		if raw[0] != '[' {
			n := firstOf(raw, "#")
			s.Turns = int(schemas.LooseInt(n))
			return n != ""
		}
		human := false
		schemas.EachElement(raw, func(turn string) {
			s.Turns++
			if !human && schemas.LooseText(firstOf(turn, "from")) == "human" {
				human = true
				s.Prompt = promptLine(schemas.LooseText(promptHead(firstOf(turn, "value"))))
			}
		})
	case schemas.MemberUsage:
		n := firstOf(raw, "total_tokens")
		s.Tokens = schemas.LooseInt(n)
		return n != ""
	case schemas.MemberDurationMS:
		s.DurationMS = schemas.LooseInt(raw)
	case schemas.MemberCostUSD:
		if schemas.IsJSONNumber(raw) {
			s.CostUSD, _ = strconv.ParseFloat(raw, 64)
			s.Priced = true
		}
	case schemas.MemberToolsetsUsed:
		switch {
		case raw == "null":
		case raw[0] == '[':
			schemas.EachElement(raw, func(v string) { s.Toolsets = append(s.Toolsets, schemas.LooseText(v)) })
		default:
			s.Toolsets = append(s.Toolsets, schemas.LooseText(raw))
		}
	case schemas.MemberToolStats:
		tool := func(name, v string) {
			if schemas.LooseInt(firstOf(v, "count")) > 0 {
				s.Tools = append(s.Tools, name)
			}
			s.ToolFailures += int(schemas.LooseInt(firstOf(v, "failure")))
		}
		switch raw[0] {
		case '{':
			schemas.EachMember(raw, tool)
		case '[':
			i := 0
			schemas.EachElement(raw, func(v string) { tool(strconv.Itoa(i), v); i++ })
		}
	case schemas.MemberReasoningStats:
		b := firstOf(raw, "has_any_reasoning")
		s.Reasoning = schemas.LooseBool(b)
		return b != ""
	case schemas.MemberModel:
		s.Model = schemas.LooseText(raw)
	case schemas.MemberReward:
		if schemas.IsJSONNumber(raw) {
			s.Reward, _ = strconv.ParseFloat(raw, 64)
			s.Rewarded = true
		}
	case schemas.MemberGrade:
		if raw[0] != '{' {
			return true
		}
		s.Grade = Failed
		if firstOf(raw, "passed") == "true" {
			s.Grade = Passed
		}
	}
	return true
}

// promptHeadBytes bounds the part of a prompt Summarize decodes: enough for
// PromptRunes runes after some leading blank space, even as \u escapes.
const promptHeadBytes = 2048

// promptHead is the JSON string raw cut, between two characters, to about
// promptHeadBytes and closed again, so a long prompt costs no more to
// summarise than a short one; other values are returned as they are.
func promptHead(raw string) string {
	if len(raw) <= promptHeadBytes || raw[0] != '"' {
		return raw
	}
	i := 1
	for i < promptHeadBytes && i < len(raw)-1 {
		switch {
		case raw[i] == '\\' && i+1 < len(raw) && raw[i+1] == 'u':
			i += 6
		case raw[i] == '\\':
			i += 2
		default:
			i++
		}
	}
	if i >= len(raw)-1 {
		return raw
	}
	for i > 1 && raw[i]&0xc0 == 0x80 { // not inside a UTF-8 sequence
		i--
	}
	return raw[:i] + `"`
}

// promptLine is the first non-blank line of a prompt, cut to PromptRunes
// runes.
func promptLine(v string) string {
	v = strings.TrimSpace(v)
	if i := strings.IndexByte(v, '\n'); i >= 0 {
		v = strings.TrimSpace(v[:i])
	}
	n := 0
	for i := range v {
		if n == PromptRunes {
			return v[:i] + "…"
		}
		n++
	}
	return v
}

// firstOf is the raw value of the first member name of the JSON value raw,
// or "" when raw is no object or has none.
func firstOf(raw, name string) string {
	v, _, _ := schemas.FirstMember(raw, name)
	return v
}
