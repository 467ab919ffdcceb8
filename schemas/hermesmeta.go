package schemas

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// Members of a record's metadata that hermes-pipe fills as Hermes'
// batch_runner fills its trajectory entries' metadata.
const (
	MetaBatchNum  = "batch_num" // the record's prompt_index divided by the run's batch size
	MetaTimestamp = "timestamp" // when the record was finished (TimestampLayout)
	MetaModel     = "model"     // the model of the rollout; absent when none was called
)

// TimestampLayout is the form of metadata.timestamp: ISO 8601 in UTC with
// microseconds and an explicit offset, as Python's datetime.isoformat()
// writes an aware time, so datetime.fromisoformat, pandas and DuckDB read it.
// (Hermes writes the naive local time, which names no zone.)
const TimestampLayout = "2006-01-02T15:04:05.000000-07:00"

// HermesMetadata returns the metadata of a finished record: a JSON object
// whose first members are Hermes' batch_num, timestamp (at, in UTC) and
// model (left out when empty, as Hermes leaves it out of a failed prompt's
// entry), followed by the members of meta, the record's own metadata (an
// input row's "metadata", swe's task fields), byte for byte. A member of
// meta with one of Hermes' names keeps its value and Hermes' is not added,
// so nothing a row brought is lost. Empty or null meta gives Hermes'
// members alone; meta that is not a JSON object is returned unchanged.
// The runtime calls it once per finished record.
func HermesMetadata(meta json.RawMessage, batchNum int, at time.Time, model string) json.RawMessage {
	row := strings.TrimSpace(string(meta))
	if row == "" || row == "null" {
		row = "{}"
	}
	if row[0] != '{' || !json.Valid([]byte(row)) {
		return meta
	}
	var has map[string]bool
	EachMember(row, func(name, _ string) {
		if name == MetaBatchNum || name == MetaTimestamp || name == MetaModel {
			if has == nil {
				has = map[string]bool{}
			}
			has[name] = true
		}
	})
	b := make([]byte, 0, len(row)+96)
	b = append(b, '{')
	add := func(name string, value []byte) {
		if has[name] {
			return
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, name)
		b = append(b, ':')
		b = append(b, value...)
	}
	add(MetaBatchNum, strconv.AppendInt(nil, int64(batchNum), 10))
	add(MetaTimestamp, strconv.AppendQuote(nil, at.UTC().Format(TimestampLayout)))
	if model != "" {
		add(MetaModel, []byte(ToolResultJSON(model))) // encoded as a record's other strings: no HTML escaping
	}
	rest := strings.TrimSpace(row[1:]) // the row's members and its closing brace
	if rest != "}" && len(b) > 1 {
		b = append(b, ',')
	}
	return append(b, rest...)
}
