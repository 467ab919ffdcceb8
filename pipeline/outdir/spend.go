package outdir

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
)

// SpendFile is the spend journal: a priced model call's projected cost,
// written before the call is sent, and what it cost, written as it returns
// (before its row is committed), so what a run spent, and what it had sent
// when it was killed, survives it. Lines:
//
//	{"run":3,"spent":1.25}                        a run's first line: what the folder had spent when it started
//	{"key":"…","call":2,"reserve":7,"usd":0.05}   reservation 7 of the run: call number call of the record key may cost usd (written before it is sent)
//	{"key":"…","call":2,"settles":7,"usd":0.0041} that call cost usd (0: it failed, not billed); reservation 7 ends
//	{"key":"…","call":2,"usd":0.0041}             call number call of the record key cost usd (no reservation: from before reservations, or a Batch API reply)
//	{"key":"…","call":2,"id":"…","usd":0.0041}    the same for a call paid once however often its answer is read (a Batch API request)
//	{"capped":2.5}                                a run reached its --max-cost of 2.5 (a call did not fit): a later run capped at 2.5 or less makes no call
//
// The journal is the source of truth for spend: what the folder's runs
// spent is the last run line's "spent" plus every call after it plus every
// reservation after it that no line settles (a call in flight when the run
// was killed: billed, never answered, counted at its projected cost; the
// next run line's "spent" includes it). Reservation numbers count from 1
// in each run and are settled at most once, by a later line of the same
// run. A committed record's cost_usd is the sum of its calls, already
// counted; a retried row's earlier calls stay spent. A folder without the
// file (from before it existed) counts its ledger's cost_usd; a journal
// from before reservations has none and reads as it always did.
const SpendFile = "spend.jsonl"

// SpendLine is one line of the spend journal: a run line (Run > 0) or a
// call line.
type SpendLine struct {
	Run   int     `json:"run,omitempty"`
	Spent float64 `json:"spent,omitempty"`
	Key   string  `json:"key,omitempty"`
	Call  int     `json:"call,omitempty"`
	ID    string  `json:"id,omitempty"`
	// Reserve numbers a reservation line (USD is the call's projected
	// cost); Settles names the reservation a call line ends.
	Reserve int64   `json:"reserve,omitempty"`
	Settles int64   `json:"settles,omitempty"`
	USD     float64 `json:"usd,omitempty"`
	// Capped marks a line saying a run reached its cap of that many US
	// dollars.
	Capped float64 `json:"capped,omitempty"`
}

// AppendSpendLine encodes l as one spend journal line ending in a newline.
func AppendSpendLine(b []byte, l SpendLine) []byte {
	if l.Capped > 0 {
		b = append(b, `{"capped":`...)
		b = strconv.AppendFloat(b, l.Capped, 'g', -1, 64)
		return append(b, "}\n"...)
	}
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
	if l.Reserve > 0 {
		b = append(b, `,"reserve":`...)
		b = strconv.AppendInt(b, l.Reserve, 10)
	}
	if l.Settles > 0 {
		b = append(b, `,"settles":`...)
		b = strconv.AppendInt(b, l.Settles, 10)
	}
	b = append(b, `,"usd":`...)
	b = strconv.AppendFloat(b, l.USD, 'g', -1, 64)
	return append(b, "}\n"...)
}

// Spend is what a folder's spend journal says.
type Spend struct {
	Found bool    // the folder has a spend journal with a run line
	USD   float64 // what the folder's runs spent, open reservations included
	Calls int     // call lines after the last run line
	// Open is how many reservations after the last run line no line
	// settles (calls in flight when the run was killed), OpenUSD their
	// projected cost (part of USD).
	Open    int
	OpenUSD float64
	// Capped is the highest cap a run of the folder reached ("capped"
	// lines; 0: none): a run capped at no more makes no call.
	Capped float64
	// IDs are the named calls charged (SpendLine.ID), by every run.
	IDs map[string]bool
}

// ReadSpend reads the spend journal of the folder dir. A torn last line (a
// crash mid-write) is left out; any other line that does not parse, or
// whose amount is negative or not a number (a folder may come from someone
// else: a negative line would lower the spend a cap starts from), or that
// settles a reservation its run did not open or one already settled, is
// an error naming the file, the line and the field. A journal that is a
// symbolic link is refused.
func ReadSpend(dir string) (Spend, error) {
	path := filepath.Join(dir, SpendFile)
	r := spendReader{sp: Spend{IDs: map[string]bool{}}, open: map[int64]float64{}}
	n := 0
	err := ScanJournal(path, func(line []byte) error {
		n++
		var l SpendLine
		if err := json.Unmarshal(line, &l); err != nil {
			return fmt.Errorf("%s line %d: %w", path, n, err)
		}
		if err := r.add(l); err != nil {
			return fmt.Errorf("%s line %d: %w", path, n, err)
		}
		return nil
	})
	for _, usd := range r.open {
		r.sp.USD += usd
		r.sp.OpenUSD += usd
	}
	r.sp.Open = len(r.open)
	return r.sp, err
}

// spendReader sums a spend journal line by line.
type spendReader struct {
	sp   Spend
	open map[int64]float64 // the reservations of the last run not settled yet
}

// add counts one line.
func (r *spendReader) add(l SpendLine) error {
	switch {
	case l.Run < 0:
		return fmt.Errorf("field run: %d is negative", l.Run)
	case l.Call < 0:
		return fmt.Errorf("field call: %d is negative", l.Call)
	case l.Reserve < 0:
		return fmt.Errorf("field reserve: %d is negative", l.Reserve)
	case l.Settles < 0:
		return fmt.Errorf("field settles: %d is negative", l.Settles)
	case !validUSD(l.Spent):
		return fmt.Errorf("field spent: %v is not an amount in US dollars", l.Spent)
	case !validUSD(l.USD):
		return fmt.Errorf("field usd: %v is not an amount in US dollars", l.USD)
	case !validUSD(l.Capped):
		return fmt.Errorf("field capped: %v is not an amount in US dollars", l.Capped)
	case l.Capped > 0:
		r.sp.Capped = max(r.sp.Capped, l.Capped)
		return nil
	case l.Run > 0:
		// The run line's spent counts every earlier reservation left open.
		r.sp.Found, r.sp.USD, r.sp.Calls = true, l.Spent, 0
		clear(r.open)
		return nil
	case l.Key == "":
		return errors.New("field key: missing (a call line names its record)")
	case l.Reserve > 0 && l.Settles > 0:
		return errors.New("field settles: a reservation line settles nothing")
	case l.Reserve > 0:
		if _, dup := r.open[l.Reserve]; dup {
			return fmt.Errorf("field reserve: reservation %d is already open", l.Reserve)
		}
		r.open[l.Reserve] = l.USD
		return nil
	case l.Settles > 0:
		if _, ok := r.open[l.Settles]; !ok {
			return fmt.Errorf("field settles: reservation %d is not open in this run", l.Settles)
		}
		delete(r.open, l.Settles)
	}
	r.sp.USD += l.USD
	r.sp.Calls++
	if l.ID != "" {
		r.sp.IDs[l.ID] = true
	}
	return nil
}

// validUSD reports whether v is a spend amount: finite and not negative.
func validUSD(v float64) bool { return v >= 0 && !math.IsInf(v, 0) }
