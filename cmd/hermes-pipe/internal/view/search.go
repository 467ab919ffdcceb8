package view

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// searchWindow is how much of a JSONL shard a text search reads at once
// when it walks records in file order.
const searchWindow = 1 << 20

// lineScanner reads the lines of records one after another for a text
// search, in whatever order the list walks them. JSONL lines are read from
// the shard through one shardWindow: records that follow each other in the
// file cost one read per window, others one read each; Parquet records go
// through the server's RecordReader. It holds one shard open at a time and
// its window, whatever the folder's size, and lower-cases each line into
// one reused buffer. Not safe for concurrent use.
type lineScanner struct {
	s     *Server
	code  int64 // dir<<32 | shard code of the open file; -1 = none
	w     shardWindow
	lower []byte
}

func newLineScanner(s *Server) *lineScanner { return &lineScanner{s: s, code: -1} }

func (ls *lineScanner) close() { ls.w.close() }

// line returns record i's line, valid until the next call.
func (ls *lineScanner) line(i int) ([]byte, error) {
	ix := ls.s.idx()
	shard := name(ix.Shards, int(ix.Shard[i]))
	if !strings.HasSuffix(shard, ".jsonl") {
		return ls.s.Line(i)
	}
	if code := int64(ix.Dir[i])<<32 | int64(ix.Shard[i]); code != ls.code {
		ls.code = -1
		if err := ls.w.open(name(ix.Dirs, int(ix.Dir[i])), shard); err != nil {
			return nil, err
		}
		ls.code = code
	}
	off, n := ix.Off[i], int64(ix.N[i])
	if n <= 0 {
		return nil, fmt.Errorf("%s: record %d has no line", ls.w.path, i)
	}
	line, err := ls.w.at(off, n)
	if errors.Is(err, errNotALine) {
		return nil, fmt.Errorf("%s: record at byte %d does not end a line: the folder changed since it was indexed", ls.w.path, off)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s at byte %d: %w", ls.w.path, off, err)
	}
	return line, nil
}

// contains reports whether needle (lower case) is in line, ignoring case
// (ASCII lines are lowered byte by byte into a reused buffer; others with
// bytes.ToLower).
func (ls *lineScanner) contains(line, needle []byte) bool {
	if bytes.Contains(line, needle) {
		return true
	}
	ls.lower = ls.lower[:0]
	for _, c := range line {
		if c >= utf8.RuneSelf {
			return bytes.Contains(bytes.ToLower(line), needle)
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		ls.lower = append(ls.lower, c)
	}
	return bytes.Contains(ls.lower, needle)
}
