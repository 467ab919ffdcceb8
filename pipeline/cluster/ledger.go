package cluster

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// unit is the latest ledger row of one key in a shard folder.
type unit struct {
	key     string
	pi      int64
	sample  int64
	outcome schemas.Outcome
	record  bool // false for a marker row (filtered, fanned out): no line of its own
}

// ledgerView is what a shard folder's ledger says, read without locking or
// repairing the folder.
type ledgerView struct {
	units []unit         // one per key, latest row wins, in (prompt_index, sample, key) order
	files map[string]int // committed shard file → rows it holds
}

// readLedger reads dir's ledger.jsonl through its documented line format
// ({"shard", "bytes", "sha256", "rows": [[key, outcome, prompt_index, sample,
// length], …]}). A torn or unparsable last line (a crash mid-append) is
// ignored, as the runtime does; an unparsable line before it is an error. It
// costs about 100 bytes per key.
func readLedger(dir string) (*ledgerView, error) {
	f, err := os.Open(filepath.Join(dir, pipeline.LedgerFile))
	if errors.Is(err, os.ErrNotExist) {
		return &ledgerView{files: map[string]int{}}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read ledger: %w", err)
	}
	defer f.Close()
	v := &ledgerView{files: map[string]int{}}
	pos := map[string]int{}
	r := bufio.NewReaderSize(f, 1<<20)
	var line struct {
		Shard string              `json:"shard"`
		Rows  [][]json.RawMessage `json:"rows"`
	}
	var units []unit // the rows of one line, applied once all of them parse
	for n := 1; ; n++ {
		b, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			break // no newline: a torn last line, or nothing
		}
		if err != nil {
			return nil, fmt.Errorf("read ledger: %w", err)
		}
		line.Shard, line.Rows, units = "", line.Rows[:0], units[:0]
		err = json.Unmarshal(b, &line)
		for i := 0; err == nil && i < len(line.Rows); i++ {
			var u unit
			var length int64
			u, length, err = parseRow(line.Rows[i])
			u.record = length > 0 && line.Shard != ""
			units = append(units, u)
		}
		if err != nil {
			if _, perr := r.Peek(1); errors.Is(perr, io.EOF) {
				break // an unparsable last line is torn too, as the runtime reads it
			}
			return nil, fmt.Errorf("ledger line %d: %w", n, err)
		}
		if line.Shard != "" {
			v.files[line.Shard] = len(line.Rows)
		}
		for _, u := range units {
			if i, ok := pos[u.key]; ok {
				v.units[i] = u
				continue
			}
			pos[u.key] = len(v.units)
			v.units = append(v.units, u)
		}
	}
	slices.SortFunc(v.units, func(a, b unit) int {
		return cmp.Or(cmp.Compare(a.pi, b.pi), cmp.Compare(a.sample, b.sample), strings.Compare(a.key, b.key))
	})
	return v, nil
}

func parseRow(row []json.RawMessage) (unit, int64, error) {
	if len(row) != 5 {
		return unit{}, 0, fmt.Errorf("row has %d fields, want 5", len(row))
	}
	key, err := rawString(row[0])
	if err != nil {
		return unit{}, 0, fmt.Errorf("row key: %w", err)
	}
	oc, err := rawString(row[1])
	if err != nil {
		return unit{}, 0, fmt.Errorf("row %s outcome: %w", key, err)
	}
	var nums [3]int64
	for i := range nums {
		if nums[i], err = strconv.ParseInt(string(bytes.TrimSpace(row[2+i])), 10, 64); err != nil {
			return unit{}, 0, fmt.Errorf("row %s: %w", key, err)
		}
	}
	return unit{key: key, outcome: schemas.Outcome(oc), pi: nums[0], sample: nums[1]}, nums[2], nil
}

// rawString decodes a JSON string, without the decoder when it has no escape.
func rawString(b json.RawMessage) (string, error) {
	b = bytes.TrimSpace(b)
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' && bytes.IndexByte(b[1:len(b)-1], '\\') < 0 && bytes.IndexByte(b[1:len(b)-1], '"') < 0 {
		return string(b[1 : len(b)-1]), nil
	}
	var s string
	err := json.Unmarshal(b, &s)
	return s, err
}
