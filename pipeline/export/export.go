// Package export turns output folders into a training set in the Hugging
// Face dataset layout: `DIR/data/<split>-<i>-of-<n>.<ext>`, a dataset card
// (README.md) and a machine-readable manifest (export.json).
//
// Run reads the sources twice, in the same order (sources in the order
// given, each in cat's order: (prompt_index, sample, key), a sharded run's
// folders merged). Pass 1 checks every shard as verify does (size and
// SHA-256 against the ledger), reads each record's small facts and applies
// the selection (--where, the shortcuts, dedupe, best-of, split), keeping one
// byte per record and per-prompt state only; it knows every split's row
// count before anything is written. Pass 2 writes the kept records into a
// temporary folder beside DIR, which is renamed into place at the end. No
// step holds record text beyond the record being read; two runs over the
// same inputs with the same options give byte-identical folders.
package export

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
)

// Formats of the exported rows.
const (
	FormatMessages = "messages" // OpenAI chat messages + tools + the record's columns
	FormatShareGPT = "sharegpt" // the record's conversations exactly + tools + columns
)

// File formats.
const (
	FileParquet = "parquet"
	FileJSONL   = "jsonl"
)

// How tool-call arguments are written in the messages format.
const (
	ArgumentsString = "string" // JSON text, the OpenAI form (default)
	ArgumentsObject = "object" // a JSON object, the Hugging Face chat-template form (JSONL only)
)

// DefaultShardRows is the default of Options.ShardRows.
const DefaultShardRows = 100000

// Files of an export folder.
const (
	CardFile     = "README.md"
	ManifestFile = "export.json"
	DataDir      = "data"
)

// Source is one SRC argument: the path as given and its output folders.
type Source struct {
	// Path is the SRC as the user gave it (a folder or a URL); it is
	// shown in the card and the manifest.
	Path string
	// Dirs are the local output folders to read, in order: the folder
	// itself, or the shard folders of a sharded run (merged in cat's
	// order).
	Dirs []string
}

// Options configure Run. The zero value of a field means its default.
type Options struct {
	Sources    []Source
	To         string // the export folder
	Overwrite  bool   // replace a non-empty To
	Format     string // FormatMessages (default) or FormatShareGPT
	FileFormat string // FileParquet (default) or FileJSONL
	Arguments  string // ArgumentsString (default) or ArgumentsObject

	Where            []string // each "FIELD OP VALUE"; all must hold
	RequireReasoning bool     // drop rows without reasoning
	DropUnknownTools bool     // drop rows calling a tool their system turn does not offer
	Dedupe           string   // "" or "exact"
	BestOf           int      // 0: keep every sample
	Split            string   // "train=0.95,validation=0.05"; "" is train=1
	Seed             int64
	ShardRows        int // default DefaultShardRows
	// Logprobs adds the logprobs column: the records' token logprobs,
	// aligned to the assistant messages (logprobs.go).
	Logprobs bool

	// Progress, when set, is called now and then during each pass with the
	// pass (1 or 2), the records read so far and the pass's total (0 in
	// pass 1 when unknown).
	Progress func(pass int, done, total int64)
}

// ErrUsage marks an error in the options (the CLI's exit 2): a bad --where,
// an unknown format, an existing --to without --overwrite.
var ErrUsage = errors.New("usage")

// usageError is an ErrUsage with its message.
type usageError struct{ msg string }

func (e *usageError) Error() string        { return e.msg }
func (e *usageError) Is(target error) bool { return target == ErrUsage }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// Manifest is export.json: where the rows came from, every option, the
// counts in and out of each step and what was written.
type Manifest struct {
	Version  int                         `json:"version"`
	Format   string                      `json:"format"`
	Files    string                      `json:"file_format"`
	Sources  []SourceInfo                `json:"sources"`
	Options  OptionsInfo                 `json:"options"`
	Steps    []Step                      `json:"steps"`
	Splits   map[string]Out              `json:"splits"`
	Rows     int64                       `json:"rows"`
	Outcomes map[string]map[string]int64 `json:"outcomes_per_split"`
	Models   map[string]int64            `json:"models"`
	Tools    map[string]int64            `json:"tool_calls"`
	Tokens   int64                       `json:"tokens"`
	// NotConvertible counts the records left out because the format
	// cannot hold them exactly (FromShareGPT's ErrNotInvertible), with the
	// first few keys.
	NotConvertible Dropped `json:"not_convertible"`
	// ToolsUnread counts sharegpt rows whose system turn's tool list could
	// not be read back (their tools column is empty).
	ToolsUnread int64 `json:"tools_unread,omitempty"`
	// LogprobsDropped counts the logprobs entries (Options.Logprobs) left
	// out because their turn is no gpt turn of the record's conversations.
	LogprobsDropped int64 `json:"logprobs_dropped,omitempty"`
}

// SourceInfo describes one source.
type SourceInfo struct {
	Path    string   `json:"path"`
	Kind    string   `json:"kind"`
	RunIDs  []string `json:"run_ids"`
	Folders int      `json:"folders"`
	Records int64    `json:"records"`
}

// OptionsInfo is every option of the export, as applied.
type OptionsInfo struct {
	Format           string   `json:"format"`
	FileFormat       string   `json:"file_format"`
	Arguments        string   `json:"arguments"`
	Where            []string `json:"where"`
	RequireReasoning bool     `json:"require_reasoning"`
	DropUnknownTools bool     `json:"drop_unknown_tools"`
	Dedupe           string   `json:"dedupe"`
	BestOf           int      `json:"best_of"`
	Split            string   `json:"split"`
	Seed             int64    `json:"seed"`
	ShardRows        int      `json:"shard_rows"`
	Logprobs         bool     `json:"logprobs,omitempty"`
}

// Step counts the rows into and out of one selection step.
type Step struct {
	Name string `json:"name"`
	In   int64  `json:"in"`
	Out  int64  `json:"out"`
}

// Out is what was written of one split.
type Out struct {
	Rows  int64    `json:"rows"`
	Files []string `json:"files"`
}

// Dropped counts rows left out for one reason, with the first keys.
type Dropped struct {
	Count int64    `json:"count"`
	Keys  []string `json:"first_keys"`
}

// maxDroppedKeys bounds Dropped.Keys.
const maxDroppedKeys = 10

func (d *Dropped) add(key string) {
	d.Count++
	if len(d.Keys) < maxDroppedKeys {
		d.Keys = append(d.Keys, key)
	}
}

// check validates and defaults opts.
func (o *Options) check() (*plan, error) {
	if o.Format == "" {
		o.Format = FormatMessages
	}
	if o.FileFormat == "" {
		o.FileFormat = FileParquet
	}
	if o.Arguments == "" {
		o.Arguments = ArgumentsString
	}
	if o.ShardRows == 0 {
		o.ShardRows = DefaultShardRows
	}
	switch {
	case o.Format != FormatMessages && o.Format != FormatShareGPT:
		return nil, usagef("--format %q: must be %s or %s", o.Format, FormatMessages, FormatShareGPT)
	case o.FileFormat != FileParquet && o.FileFormat != FileJSONL:
		return nil, usagef("--file-format %q: must be %s or %s", o.FileFormat, FileParquet, FileJSONL)
	case o.Arguments != ArgumentsString && o.Arguments != ArgumentsObject:
		return nil, usagef("--arguments %q: must be %s or %s", o.Arguments, ArgumentsString, ArgumentsObject)
	case o.Arguments == ArgumentsObject && o.FileFormat == FileParquet:
		return nil, usagef("--arguments object needs --file-format jsonl: a Parquet column has one type, and tool-call arguments differ in shape from call to call, so Parquet holds them as JSON text")
	case o.Arguments == ArgumentsObject && o.Format != FormatMessages:
		return nil, usagef("--arguments applies to --format messages only")
	case o.Dedupe != "" && o.Dedupe != "exact":
		return nil, usagef("--dedupe %q: the one mode is exact", o.Dedupe)
	case o.BestOf < 0:
		return nil, usagef("--best-of %d: must be at least 1", o.BestOf)
	case o.ShardRows < 1:
		return nil, usagef("--shard-rows %d: must be at least 1", o.ShardRows)
	case o.To == "":
		return nil, usagef("--to is required")
	case len(o.Sources) == 0:
		return nil, usagef("export needs at least one source folder")
	}
	p := &plan{opts: o}
	for _, w := range o.Where {
		c, err := parseWhere(w)
		if err != nil {
			return nil, err
		}
		p.where = append(p.where, c)
	}
	var err error
	if p.splits, err = parseSplit(o.Split); err != nil {
		return nil, err
	}
	return p, nil
}

// Run exports opts.Sources to opts.To and returns the manifest it wrote.
// An error of the options wraps ErrUsage; a damaged source is an error
// naming the shard, and then nothing is written.
func Run(ctx context.Context, opts Options) (Manifest, error) {
	p, err := opts.check()
	if err != nil {
		return Manifest{}, err
	}
	if err := checkTarget(opts.To, opts.Overwrite); err != nil {
		return Manifest{}, err
	}
	man := Manifest{Version: 1, Format: opts.Format, Files: opts.FileFormat, Options: OptionsInfo{
		Format: opts.Format, FileFormat: opts.FileFormat, Arguments: opts.Arguments, Where: append([]string{}, opts.Where...),
		RequireReasoning: opts.RequireReasoning, DropUnknownTools: opts.DropUnknownTools, Dedupe: opts.Dedupe,
		BestOf: opts.BestOf, Split: p.splitText(), Seed: opts.Seed, ShardRows: opts.ShardRows, Logprobs: opts.Logprobs,
	}}
	for _, s := range opts.Sources {
		info, err := describeSource(s)
		if err != nil {
			return Manifest{}, err
		}
		if err := checkShards(s); err != nil {
			return Manifest{}, err
		}
		man.Sources = append(man.Sources, info)
	}
	if err := p.pass1(ctx, &man); err != nil {
		return Manifest{}, err
	}
	parent := filepath.Dir(filepath.Clean(opts.To))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return Manifest{}, fmt.Errorf("export: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, filepath.Base(filepath.Clean(opts.To))+".tmp-")
	if err != nil {
		return Manifest{}, fmt.Errorf("export: %w", err)
	}
	done := false
	defer func() {
		if !done {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return Manifest{}, fmt.Errorf("export: %w", err)
	}
	if err := p.pass2(ctx, tmp, &man); err != nil {
		return Manifest{}, err
	}
	if err := writeMeta(tmp, &man, p); err != nil {
		return Manifest{}, err
	}
	if err := moveIntoPlace(tmp, opts.To); err != nil {
		return Manifest{}, err
	}
	done = true
	return man, nil
}

// checkTarget refuses an existing non-empty folder without overwrite, and
// any path that is not a folder.
func checkTarget(to string, overwrite bool) error {
	fi, err := os.Lstat(to)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if !fi.IsDir() {
		return usagef("--to %s exists and is not a folder", to)
	}
	ents, err := os.ReadDir(to)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if len(ents) > 0 && !overwrite {
		return usagef("--to %s exists and is not empty: pass --overwrite to replace it", to)
	}
	return nil
}

// moveIntoPlace renames the finished tmp to to: an existing to is renamed
// away first and removed after, so to is at every moment either the old
// export or the new one.
func moveIntoPlace(tmp, to string) error {
	if err := syncDir(tmp); err != nil {
		return err
	}
	parent := filepath.Dir(filepath.Clean(to))
	old := ""
	if _, err := os.Lstat(to); err == nil {
		o, err := os.MkdirTemp(parent, filepath.Base(filepath.Clean(to))+".old-")
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if err := os.Remove(o); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if err := os.Rename(to, o); err != nil {
			return fmt.Errorf("export: move the old %s away: %w", to, err)
		}
		old = o
	}
	if err := os.Rename(tmp, to); err != nil {
		if old != "" {
			_ = os.Rename(old, to)
		}
		return fmt.Errorf("export: %w", err)
	}
	if err := syncDir(parent); err != nil {
		return err
	}
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("export: remove the old export %s: %w", old, err)
		}
	}
	return nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("export: sync %s: %w", dir, err)
	}
	return nil
}

// describeSource reads the kind and run ids of a source's folders.
func describeSource(s Source) (SourceInfo, error) {
	info := SourceInfo{Path: s.Path, Folders: len(s.Dirs), RunIDs: []string{}}
	if len(s.Dirs) == 0 {
		return info, usagef("%s holds no output folder", s.Path)
	}
	for _, d := range s.Dirs {
		m, ok, err := outdir.ReadManifest(d)
		if err != nil {
			return info, err
		}
		if !ok {
			return info, usagef("%s is not an output folder: no %s", d, outdir.ManifestFile)
		}
		if info.Kind == "" {
			info.Kind = m.Kind
		}
		var o struct {
			RunID string `json:"run_id"`
		}
		_ = json.Unmarshal(m.Options, &o)
		if o.RunID != "" && !slices.Contains(info.RunIDs, o.RunID) {
			info.RunIDs = append(info.RunIDs, o.RunID)
		}
	}
	return info, nil
}

// runID is the source column of a source's rows: its first run id, else
// its path.
func (s *SourceInfo) runID() string {
	if len(s.RunIDs) > 0 {
		return s.RunIDs[0]
	}
	return s.Path
}

// hash16 is the 128-bit hash export uses for prompts and conversations.
func hash16(parts ...string) [16]byte {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	var out [16]byte
	copy(out[:], h.Sum(nil))
	return out
}
