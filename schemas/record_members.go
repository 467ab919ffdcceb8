package schemas

import (
	"encoding/json"
	"strings"
	"unsafe"
)

// JSON names of a record's top-level members, in the order Record writes
// them. With Record's tags (which a test holds equal to them, in order)
// they are the one declaration of a record's shape: the Parquet columns are
// named from Record's tags, and stats, summaries, verify, the runtime and
// compress name members through these constants.
const (
	MemberKey             = "key"
	MemberID              = "id"
	MemberPromptIndex     = "prompt_index"
	MemberSample          = "sample"
	MemberConversations   = "conversations"
	MemberOutcome         = "outcome"
	MemberSuccess         = "success"
	MemberCompleted       = "completed"
	MemberPartial         = "partial"
	MemberAPICalls        = "api_calls"
	MemberUsage           = "usage"
	MemberCostUSD         = "cost_usd"
	MemberToolsetsUsed    = "toolsets_used"
	MemberToolStats       = "tool_stats"
	MemberToolErrorCounts = "tool_error_counts"
	MemberReasoningStats  = "reasoning_stats"
	MemberModel           = "model"
	MemberDurationMS      = "duration_ms"
	MemberTimings         = "timings"
	MemberReward          = "reward"
	MemberGrade           = "grade"
	MemberError           = "error"
	MemberMetadata        = "metadata"
	MemberExtra           = "extra"
	MemberLogprobs        = "logprobs"
)

// JSON names of the members of a conversations turn (Turn's tags).
const (
	TurnFrom  = "from"
	TurnValue = "value"
)

// RecordMembers lists the members of a record in the order Record writes
// them.
var RecordMembers = [...]string{MemberKey, MemberID, MemberPromptIndex, MemberSample, MemberConversations, MemberOutcome,
	MemberSuccess, MemberCompleted, MemberPartial, MemberAPICalls, MemberUsage, MemberCostUSD, MemberToolsetsUsed, MemberToolStats,
	MemberToolErrorCounts, MemberReasoningStats, MemberModel, MemberDurationMS, MemberTimings, MemberReward, MemberGrade, MemberError, MemberMetadata, MemberExtra, MemberLogprobs}

// field returns a pointer to r's field of the JSON name, or nil.
func (r *Record) field(name string) any {
	switch name {
	case MemberKey:
		return &r.Key
	case MemberID:
		return &r.ID
	case MemberPromptIndex:
		return &r.PromptIndex
	case MemberSample:
		return &r.Sample
	case MemberConversations:
		return &r.Conversations
	case MemberOutcome:
		return &r.Outcome
	case MemberSuccess:
		return &r.Success
	case MemberCompleted:
		return &r.Completed
	case MemberPartial:
		return &r.Partial
	case MemberAPICalls:
		return &r.APICalls
	case MemberUsage:
		return &r.Usage
	case MemberCostUSD:
		return &r.CostUSD
	case MemberToolsetsUsed:
		return &r.ToolsetsUsed
	case MemberToolStats:
		return &r.ToolStats
	case MemberToolErrorCounts:
		return &r.ToolErrorCounts
	case MemberReasoningStats:
		return &r.ReasoningStats
	case MemberModel:
		return &r.Model
	case MemberDurationMS:
		return &r.DurationMS
	case MemberTimings:
		return &r.Timings
	case MemberReward:
		return &r.Reward
	case MemberGrade:
		return &r.Grade
	case MemberError:
		return &r.Error
	case MemberMetadata:
		return &r.Metadata
	case MemberExtra:
		return &r.Extra
	case MemberLogprobs:
		return &r.Logprobs
	}
	return nil
}

// DecodeMembers is json.Unmarshal(line, r) for the members names (Member
// constants) only: the same values and the same kind of error, at a fraction
// of the cost on agent trajectories. It validates the line, then decodes the
// members names lists and skips the others (the conversation) with a byte
// scan (EachMember). A line that is not an object, or has a member whose
// name matches one of names only case-insensitively, goes through
// json.Unmarshal into r whole.
func DecodeMembers(line []byte, r *Record, names ...string) error {
	return decodeMembers(line, json.Valid(line), r, names)
}

// DecodeValidMembers is DecodeMembers of a line known to be valid JSON (one
// this program encoded), which it does not check again: the check reads the
// whole line, the conversation included, and costs about as much as
// decoding the members.
func DecodeValidMembers(line []byte, r *Record, names ...string) error {
	return decodeMembers(line, true, r, names)
}

func decodeMembers(line []byte, valid bool, r *Record, names []string) error {
	s := strings.TrimSpace(unsafe.String(unsafe.SliceData(line), len(line)))
	if !valid || s == "" || s[0] != '{' {
		return json.Unmarshal(line, r)
	}
	var err error
	folded := false
	EachMember(s, func(name, raw string) {
		for _, n := range names {
			if n == name {
				if e := json.Unmarshal(unsafe.Slice(unsafe.StringData(raw), len(raw)), r.field(name)); e != nil && err == nil {
					err = e
				}
				return
			}
		}
		for _, n := range names {
			folded = folded || strings.EqualFold(name, n)
		}
	})
	if folded {
		*r = Record{}
		return json.Unmarshal(line, r)
	}
	return err
}

// RecordHead is the part of a record line the runtime reads back without
// its conversation: key, outcome, position and cost. A reader decodes into
// a type of its own defined on it (type recordHead schemas.RecordHead),
// which encoding/json then names in its errors.
type RecordHead struct {
	Key         string   `json:"key"`
	Outcome     Outcome  `json:"outcome"`
	PromptIndex int64    `json:"prompt_index"`
	Sample      int64    `json:"sample"`
	CostUSD     *float64 `json:"cost_usd"`
}

// RecordCheck is what verify reads of a record line: pointers, so an absent
// member is told from a zero one, and the conversations as JSON text ("null"
// when null, empty when absent). Readers use it as RecordHead.
type RecordCheck struct {
	Key           *string         `json:"key"`
	Outcome       *Outcome        `json:"outcome"`
	PromptIndex   *int64          `json:"prompt_index"`
	Sample        *int64          `json:"sample"`
	Conversations json.RawMessage `json:"conversations"`
}

// CallCount is the api_calls member of a record, or a sum of it over
// records under the same name (statistics.json, swe's report.json).
type CallCount struct {
	APICalls int64 `json:"api_calls"`
}

// ToolTally sums the tool_stats and tool_error_counts members of records
// under the same names (statistics.json); T is the sum of one tool's
// ToolStat.
type ToolTally[T any] struct {
	Tools      map[string]T   `json:"tool_stats"`
	ToolErrors map[string]int `json:"tool_error_counts"`
}
