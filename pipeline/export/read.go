package export

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"path/filepath"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// checkShards holds every shard of s's folders to its latest ledger line
// as verify does: its size, then its SHA-256 (the whole file is read). The
// first damaged shard is an error naming it.
func checkShards(s Source) error {
	for _, dir := range s.Dirs {
		data, ok, err := outdir.ReadLedger(filepath.Join(dir, outdir.LedgerFile))
		if err != nil {
			return fmt.Errorf("export %s: %w", dir, err)
		}
		if !ok {
			continue
		}
		type want struct {
			size int64
			sum  string
		}
		shards := map[string]want{}
		var order []string
		_, err = outdir.Scan(data, func(_ int, l *outdir.Line) error {
			if l.Shard == "" {
				return nil
			}
			if _, seen := shards[l.Shard]; !seen {
				order = append(order, l.Shard)
			}
			shards[l.Shard] = want{l.Bytes, l.SHA256}
			return nil
		})
		if err != nil {
			return fmt.Errorf("export %s: %w", dir, err)
		}
		for _, name := range order {
			w := shards[name]
			if _, err := pipeline.CheckShardSize(dir, name, w.size); err != nil {
				return fmt.Errorf("export %s: %w", dir, err)
			}
			if err := pipeline.CheckShardHash(dir, name, w.sum); err != nil {
				return fmt.Errorf("export %s: %w", dir, err)
			}
		}
	}
	return nil
}

// eachLine calls fn with every live record line of s in cat's order: one
// folder's through pipeline.EachRecord, a sharded run's folders merged by
// (prompt_index, sample, key). line is valid only during the call.
func eachLine(s Source, fn func(line []byte) error) error {
	if len(s.Dirs) == 1 {
		return pipeline.EachRecord(s.Dirs[0], func(_ pipeline.RecordRef, line []byte) error { return fn(line) })
	}
	type head struct {
		next func() ([]byte, error, bool)
		stop func()
		line []byte
		pi   int64
		smp  int64
		key  string
	}
	heads := make([]*head, 0, len(s.Dirs))
	defer func() {
		for _, h := range heads {
			h.stop()
		}
	}()
	advance := func(h *head) (bool, error) {
		line, err, ok := h.next()
		if !ok {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		h.line = line
		h.pi, h.smp, h.key = orderOf(line)
		return true, nil
	}
	live := make([]*head, 0, len(s.Dirs))
	for _, dir := range s.Dirs {
		next, stop := iter.Pull2(records(dir))
		h := &head{next: next, stop: stop}
		heads = append(heads, h)
		ok, err := advance(h)
		if err != nil {
			return err
		}
		if ok {
			live = append(live, h)
		}
	}
	for len(live) > 0 {
		best := 0
		for i := 1; i < len(live); i++ {
			a, b := live[i], live[best]
			if cmp.Or(cmp.Compare(a.pi, b.pi), cmp.Compare(a.smp, b.smp), strings.Compare(a.key, b.key)) < 0 {
				best = i
			}
		}
		h := live[best]
		if err := fn(h.line); err != nil {
			return err
		}
		ok, err := advance(h)
		if err != nil {
			return err
		}
		if !ok {
			live = append(live[:best], live[best+1:]...)
		}
	}
	return nil
}

// errStop ends a records iteration its consumer left early.
var errStop = errors.New("stopped")

// records is pipeline.EachRecord of dir as an iterator of (line, error).
func records(dir string) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		err := pipeline.EachRecord(dir, func(_ pipeline.RecordRef, line []byte) error {
			if !yield(line, nil) {
				return errStop
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			yield(nil, err)
		}
	}
}

// orderOf reads a record line's place in cat's order.
func orderOf(line []byte) (pi, sample int64, key string) {
	s := string(line)
	schemas.EachMember(s, func(name, raw string) {
		switch name {
		case schemas.MemberPromptIndex:
			pi, _ = schemas.JSONInt(raw)
		case schemas.MemberSample:
			sample, _ = schemas.JSONInt(raw)
		case schemas.MemberKey:
			key, _ = schemas.JSONString(raw)
		}
	})
	return pi, sample, key
}
