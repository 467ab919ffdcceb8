package web

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// searchWindow is how much of a JSONL shard a text search reads at once
// when it walks records in file order.
const searchWindow = 1 << 20

// lineScanner reads the lines of records one after another for a text
// search, in whatever order the list walks them. JSONL lines are read from
// the shard through one window of at most searchWindow bytes: records that
// follow each other in the file cost one read per window, others one read
// each; Parquet records go through the server's RecordReader. It holds one
// shard open at a time and its window, whatever the folder's size, and
// lower-cases each line into one reused buffer. Not safe for concurrent use.
type lineScanner struct {
	s      *Server
	code   int64 // dir<<32 | shard code of the open file; -1 = none
	path   string
	f      *os.File
	win    []byte // bytes of f from winOff
	winOff int64
	next   int64 // where the previous line ended
	lower  []byte
}

func newLineScanner(s *Server) *lineScanner { return &lineScanner{s: s, code: -1} }

func (ls *lineScanner) close() {
	if ls.f != nil {
		ls.f.Close()
		ls.f = nil
	}
}

// line returns record i's line, valid until the next call.
func (ls *lineScanner) line(i int) ([]byte, error) {
	ix := ls.s.idx()
	shard := name(ix.Shards, int(ix.Shard[i]))
	if !strings.HasSuffix(shard, ".jsonl") {
		return ls.s.Line(i)
	}
	off, n := ix.Off[i], int64(ix.N[i])
	if code := int64(ix.Dir[i])<<32 | int64(ix.Shard[i]); code != ls.code {
		ls.close()
		ls.code, ls.win, ls.next = -1, ls.win[:0], -1
		ls.path = filepath.Join(name(ix.Dirs, int(ix.Dir[i])), shard)
		f, err := os.Open(ls.path)
		if err != nil {
			return nil, err
		}
		ls.f, ls.code = f, code
	}
	if n <= 0 {
		return nil, fmt.Errorf("%s: record %d has no line", ls.path, i)
	}
	if off < ls.winOff || off+n > ls.winOff+int64(len(ls.win)) {
		size := n
		if off == ls.next {
			size = max(n, searchWindow) // reading on in file order
		}
		if int64(cap(ls.win)) < size {
			ls.win = make([]byte, size)
		}
		got, err := ls.f.ReadAt(ls.win[:size], off)
		if err != nil && !errors.Is(err, io.EOF) || int64(got) < n {
			return nil, fmt.Errorf("read %s at byte %d: %v", ls.path, off, err)
		}
		ls.win, ls.winOff = ls.win[:got], off
	}
	line := ls.win[off-ls.winOff : off-ls.winOff+n]
	if line[n-1] != '\n' {
		return nil, fmt.Errorf("%s: record at byte %d does not end a line: the folder changed since it was indexed", ls.path, off)
	}
	ls.next = off + n
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
