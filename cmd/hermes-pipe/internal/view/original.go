package view

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/tidwall/gjson"

	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/stages/compress"
)

// Original is what the record page shows of a compressed record's original.
type Original struct {
	Found  bool            `json:"found"`
	Source string          `json:"source,omitempty"` // where it was read: file:line or folder
	Record json.RawMessage `json:"record,omitempty"`
	// Why says why it was not found, and how to point view at it.
	Why string `json:"why,omitempty"`
}

// originals finds original rows. Inputs (compress.Input: a hermes-pipe
// output folder, rows by their own key; or a JSONL file, plain or
// compressed, rows by compress's FileKey or by their own "key" member) come
// from each output folder's compress.InputsFile, or from SetOriginals (--original), which replaces
// them. A folder input is indexed (key hash → where) on first use, about
// 40 bytes per record; file inputs are read line by line per lookup.
type originals struct {
	mu       sync.Mutex
	override []compress.Input
	seed     maphash.Seed
	runs     map[string]*runKeys // by folder
}

type runKeys struct {
	rd     *pipeline.RecordReader
	shards []string
	at     map[uint64][]origRef
}

type origRef struct {
	shard int32
	n     int32
	off   int64
}

// SetOriginals makes the record page look for the originals of compressed
// records in paths (output folders, JSONL files or folders of them) instead
// of the inputs compress recorded. Call it before serving.
func (s *Server) SetOriginals(paths []string) error {
	var ins []compress.Input
	for _, p := range paths {
		got, err := expandOriginal(p)
		if err != nil {
			return err
		}
		ins = append(ins, got...)
	}
	s.orig.mu.Lock()
	s.orig.override = ins
	s.orig.mu.Unlock()
	return nil
}

// expandOriginal lists the inputs under p the way compress finds them
// (compress.FindInputs), with absolute paths.
func expandOriginal(p string) ([]compress.Input, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil, fmt.Errorf("--original %s: %w", p, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("--original %s: %w", p, err)
	}
	out, err := compress.FindInputs(abs, st.IsDir())
	if err != nil {
		return nil, fmt.Errorf("--original %s: %w", p, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--original %s: no output folder and no .jsonl, .ndjson or .json file (optionally .gz or .zst) in it", p)
	}
	return out, nil
}

// inputsOf returns where the originals of dir's records may be: the
// --original paths, or the entries of dir's compress.InputsFile that pass
// plausibleInput.
func (o *originals) inputsOf(dir string) ([]compress.Input, error) {
	o.mu.Lock()
	ov := o.override
	o.mu.Unlock()
	if ov != nil {
		return ov, nil
	}
	ins, err := compress.ReadInputs(dir)
	if err != nil {
		return nil, err
	}
	var ok []compress.Input
	var bad []string
	for _, in := range ins {
		if err := plausibleInput(in); err != nil {
			bad = append(bad, err.Error())
			continue
		}
		ok = append(ok, in)
	}
	if len(ok) == 0 && len(bad) > 0 {
		return nil, fmt.Errorf("%s: no input view follows (%s); start view with --original PATH", filepath.Join(dir, compress.InputsFile), strings.Join(bad, "; "))
	}
	return ok, nil
}

// plausibleInput checks an entry of compress.InputsFile before view reads
// the path it names. Those paths are absolute by design (a compress run's
// inputs live outside its folder), so they cannot be confined to the folder;
// but a folder may come from someone else, so view follows only an entry
// compress could have written: an absolute, clean path; a known kind; for a
// file, a regular file (never a device, a pipe or /proc, which could block
// or never end) whose path ends with the entry's name; for "run", a folder
// holding run.json. Anything else is not read; --original replaces the
// file's entries. What view then shows of such a file is only a line whose
// "key" or hash the record names, to the local user (see hostAllowed).
func plausibleInput(in compress.Input) error {
	p := in.Path
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return fmt.Errorf("input path %q is not absolute and clean", p)
	}
	switch in.Kind {
	case compress.KindRun:
		if st, err := os.Stat(filepath.Join(p, pipeline.ManifestFile)); err != nil || !st.Mode().IsRegular() {
			return fmt.Errorf("input %q: not an output folder", p)
		}
		return nil
	case compress.KindJSONL, compress.KindGzip, compress.KindZstd, compress.KindParquet:
	default:
		return fmt.Errorf("input %q: unknown kind %q", p, in.Kind)
	}
	if in.Name == "" || !(p == in.Name || strings.HasSuffix(filepath.ToSlash(p), "/"+in.Name)) {
		return fmt.Errorf("input %q: its name %q does not end its path", p, in.Name)
	}
	if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("input %q: not a regular file", p)
	}
	return nil
}

// find returns the original of the record key written into dir. It blocks
// for the reads it needs: one indexing pass over an input folder the first
// time, a scan of a file input each time.
func (o *originals) find(dir, key string) Original {
	ins, err := o.inputsOf(dir)
	if errors.Is(err, os.ErrNotExist) {
		return Original{Why: "this folder does not say where its input was (" + compress.InputsFile + " is missing: the run predates it); start view with --original PATH"}
	}
	if err != nil {
		return Original{Why: err.Error()}
	}
	name, line, sum, fileKey := compress.ParseFileKey(key)
	var problems []string
	// A key NAME:LINE:HASH names its file and line.
	if fileKey {
		for _, in := range ins {
			if in.Name != name || in.Kind == compress.KindRun {
				continue
			}
			got, err := readLine(in, line)
			if err != nil {
				problems = append(problems, err.Error())
				continue
			}
			if compress.RowHash(bytes.TrimSpace(got)) != sum {
				problems = append(problems, fmt.Sprintf("%s line %d has changed since the run (its hash differs)", in.Path, line))
				continue
			}
			return Original{Found: true, Source: fmt.Sprintf("%s:%d", in.Path, line), Record: bytes.TrimSpace(got)}
		}
	}
	// A record's own key: in an output folder, or a "key" member of a line.
	for _, in := range ins {
		var (
			got []byte
			src string
			err error
		)
		switch in.Kind {
		case compress.KindRun:
			got, err = o.inRun(in.Path, key)
			src = in.Path
		case compress.KindParquet:
			problems = append(problems, in.Path+": view does not read Parquet inputs; convert it to JSONL and give --original")
			continue
		default:
			var n int
			got, n, err = scanKey(in, key)
			src = fmt.Sprintf("%s:%d", in.Path, n)
		}
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if got != nil {
			return Original{Found: true, Source: src, Record: got}
		}
	}
	why := fmt.Sprintf("no input of this folder holds key %q", key)
	if len(problems) > 0 {
		why += " (" + strings.Join(problems, "; ") + ")"
	}
	return Original{Why: why + "; start view with --original PATH to name the input"}
}

// inRun reads the record key of the output folder dir, indexing the folder
// on first use.
func (o *originals) inRun(dir, key string) ([]byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.runs == nil {
		o.runs = map[string]*runKeys{}
		o.seed = maphash.MakeSeed()
	}
	rk := o.runs[dir]
	if rk == nil {
		rk = &runKeys{rd: pipeline.NewRecordReader(dir), at: map[uint64][]origRef{}}
		shard := map[string]int32{}
		err := pipeline.EachRecord(dir, func(ref pipeline.RecordRef, _ []byte) error {
			si, ok := shard[ref.Shard]
			if !ok {
				si = int32(len(rk.shards))
				shard[ref.Shard] = si
				rk.shards = append(rk.shards, ref.Shard)
			}
			h := maphash.String(o.seed, ref.Key)
			rk.at[h] = append(rk.at[h], origRef{shard: si, n: ref.N, off: ref.Off})
			return nil
		})
		if err != nil {
			rk.rd.Close()
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
		o.runs[dir] = rk
	}
	refs := rk.at[maphash.String(o.seed, key)]
	for _, r := range refs {
		line, err := rk.rd.Read(pipeline.RecordRef{Key: key, Shard: rk.shards[r.shard], Off: r.off, N: r.n})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
		// A line without its own key (a generic row compressed before) is
		// taken when the hash names only it.
		if k := gjson.GetBytes(line, "key"); k.String() == key || !k.Exists() && len(refs) == 1 {
			return bytes.TrimSpace(line), nil
		}
	}
	return nil, nil
}

func (o *originals) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, rk := range o.runs {
		rk.rd.Close()
	}
	o.runs = nil
}

// eachLine calls fn with each line of a file input (1-based numbers, blank
// lines counted, as compress numbers them) until fn returns false.
func eachLine(in compress.Input, fn func(n int, line []byte) bool) error {
	f, err := os.Open(in.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	var r io.Reader = f
	switch in.Kind {
	case compress.KindGzip:
		zr, err := gzip.NewReader(bufio.NewReaderSize(f, 256<<10))
		if err != nil {
			return fmt.Errorf("%s: gzip: %w", in.Path, err)
		}
		defer zr.Close()
		r = zr
	case compress.KindZstd:
		zr, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return fmt.Errorf("%s: zstd: %w", in.Path, err)
		}
		defer zr.Close()
		r = zr
	}
	br := bufio.NewReaderSize(r, 256<<10)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && !fn(n, bytes.TrimRight(line, "\r\n")) {
			return nil
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", in.Path, err)
		}
	}
}

// readLine returns line n of a file input.
func readLine(in compress.Input, n int) ([]byte, error) {
	var got []byte
	err := eachLine(in, func(k int, line []byte) bool {
		if k == n {
			got = append([]byte(nil), line...)
			return false
		}
		return true
	})
	if err == nil && got == nil {
		err = fmt.Errorf("%s has no line %d", in.Path, n)
	}
	return got, err
}

// scanKey returns the line of a file input whose "key" member is key, and
// its number.
func scanKey(in compress.Input, key string) ([]byte, int, error) {
	var got []byte
	at := 0
	needle := []byte(strconv.Quote(key))
	err := eachLine(in, func(n int, line []byte) bool {
		if bytes.Contains(line, needle) && gjson.GetBytes(line, "key").String() == key {
			got, at = bytes.TrimSpace(append([]byte(nil), line...)), n
			return false
		}
		return true
	})
	return got, at, err
}

// original serves the original row of compressed record i.
func (s *Server) original(w http.ResponseWriter, r *http.Request) {
	i, ok := s.index(w, r)
	if !ok {
		return
	}
	dir, key, err := s.keyOf(r.Context(), i)
	if err != nil {
		httpError(w, err)
		return
	}
	writeJSON(w, s.orig.find(dir, key))
}
