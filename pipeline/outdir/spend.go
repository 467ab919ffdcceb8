package outdir

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
)

// SpendFile is the spend journal: one line per priced model call, written
// as the call returns (before its row is committed), so what a run spent
// survives the run being killed. Lines:
//
//	{"run":3,"spent":1.25}                      a run's first line: what the folder had spent when it started
//	{"key":"…","call":2,"usd":0.0041}           call number call of the record key cost usd
//	{"key":"…","call":2,"id":"…","usd":0.0041}  the same for a call paid once however often its answer is read (a Batch API request)
//
// The journal is the source of truth for spend: what the folder's runs
// spent is the last run line's "spent" plus every call after it (a
// committed record's cost_usd is the sum of its calls, already counted; a
// retried row's earlier calls stay spent). A folder without the file (from
// before it existed) counts its ledger's cost_usd.
const SpendFile = "spend.jsonl"

// SpendLine is one line of the spend journal: a run line (Run > 0) or a
// call line.
type SpendLine struct {
	Run   int     `json:"run,omitempty"`
	Spent float64 `json:"spent,omitempty"`
	Key   string  `json:"key,omitempty"`
	Call  int     `json:"call,omitempty"`
	ID    string  `json:"id,omitempty"`
	USD   float64 `json:"usd,omitempty"`
}

// AppendSpendLine encodes l as one spend journal line ending in a newline.
func AppendSpendLine(b []byte, l SpendLine) []byte {
	if l.Run > 0 {
		b = append(b, `{"run":`...)
		b = strconv.AppendInt(b, int64(l.Run), 10)
		b = append(b, `,"spent":`...)
		b = strconv.AppendFloat(b, l.Spent, 'g', -1, 64)
		return append(b, "}\n"...)
	}
	b = append(b, `{"key":`...)
	b = appendJSONString(b, l.Key)
	b = append(b, `,"call":`...)
	b = strconv.AppendInt(b, int64(l.Call), 10)
	if l.ID != "" {
		b = append(b, `,"id":`...)
		b = appendJSONString(b, l.ID)
	}
	b = append(b, `,"usd":`...)
	b = strconv.AppendFloat(b, l.USD, 'g', -1, 64)
	return append(b, "}\n"...)
}

// Spend is what a folder's spend journal says.
type Spend struct {
	Found bool    // the folder has a spend journal with a run line
	USD   float64 // what the folder's runs spent
	Calls int     // call lines after the last run line
	// IDs are the named calls charged (SpendLine.ID), by every run.
	IDs map[string]bool
}

// ReadSpend reads the spend journal of the folder dir. A torn last line (a
// crash mid-write) is left out; any other line that does not parse, or
// whose amount is negative or not a number (a folder may come from someone
// else: a negative line would lower the spend a cap starts from), is an
// error naming the file, the line and the field. A journal that is a
// symbolic link is refused.
func ReadSpend(dir string) (Spend, error) {
	path := filepath.Join(dir, SpendFile)
	sp := Spend{IDs: map[string]bool{}}
	n := 0
	err := ScanJournal(path, func(line []byte) error {
		n++
		var l SpendLine
		if err := json.Unmarshal(line, &l); err != nil {
			return fmt.Errorf("%s line %d: %w", path, n, err)
		}
		switch {
		case l.Run < 0:
			return fmt.Errorf("%s line %d: field run: %d is negative", path, n, l.Run)
		case l.Call < 0:
			return fmt.Errorf("%s line %d: field call: %d is negative", path, n, l.Call)
		case !validUSD(l.Spent):
			return fmt.Errorf("%s line %d: field spent: %v is not an amount in US dollars", path, n, l.Spent)
		case !validUSD(l.USD):
			return fmt.Errorf("%s line %d: field usd: %v is not an amount in US dollars", path, n, l.USD)
		case l.Run > 0:
			sp.Found, sp.USD, sp.Calls = true, l.Spent, 0
		case l.Key == "":
			return fmt.Errorf("%s line %d: field key: missing (a call line names its record)", path, n)
		default:
			sp.USD += l.USD
			sp.Calls++
			if l.ID != "" {
				sp.IDs[l.ID] = true
			}
		}
		return nil
	})
	return sp, err
}

// validUSD reports whether v is a spend amount: finite and not negative.
func validUSD(v float64) bool { return v >= 0 && !math.IsInf(v, 0) }
