package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
)

// StatusOptions configure Status. The zero value counts remaining rows
// against the prompts file recorded in run.json when it can be read.
type StatusOptions struct {
	Prompts string        // generate input; "" = the one run.json records
	Window  time.Duration // rate window; default 5 minutes
	Now     func() time.Time
	// InputKeys lists the prompts file's keys (prompts.EachKey); nil leaves
	// Expected and Remaining unknown.
	InputKeys KeyLister
	// Commits, when it holds a shard's folder name (shard-0-of-4), gives
	// that shard's commit history as its store recorded it (the ledger
	// segments of an s3:// run); rate and last commit then come from it,
	// not from the local files' times, which in a read cache are download
	// times (or absent: status pulls no shard file).
	Commits map[string][]Commit
}

// Commit is one commit of a shard's records: when and how many.
type Commit struct {
	At   time.Time
	Rows int
}

// ShardStatus is the progress of one shard.
type ShardStatus struct {
	Index      int       `json:"index"`
	Dir        string    `json:"dir"`
	Started    bool      `json:"started"`
	Done       int       `json:"done"`      // keys with a final OK outcome (or a marker)
	Failed     int       `json:"failed"`    // keys with a final outcome that is not OK
	Retryable  int       `json:"retryable"` // keys waiting for a retry
	Expected   int       `json:"expected"`  // input keys owned by the shard; -1 unknown
	Remaining  int       `json:"remaining"` // Expected - Done - Failed; -1 unknown
	Rate       float64   `json:"rate"`      // records committed per second over the window
	LastCommit time.Time `json:"last_commit,omitzero"`
}

// Status reports the progress of every shard of the run in out, for a run in
// flight or finished. It reads each shard's ledger (not the records) and, to
// know what remains, the prompts file once; it takes no lock and writes
// nothing. The rate counts the records of shard files committed within the
// window (by Commits, else by the files' modification times), divided by the
// window.
func Status(ctx context.Context, out string, opts StatusOptions) ([]ShardStatus, error) {
	if opts.Window <= 0 {
		opts.Window = 5 * time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	parts, n, err := statusParts(out)
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	now := opts.Now()
	sts := make([]ShardStatus, n)
	for i := range sts {
		sts[i] = ShardStatus{Index: i, Dir: Spec{Index: i, Count: n}.Name(), Expected: -1, Remaining: -1}
	}
	path := opts.Prompts
	for _, sp := range parts {
		st := &sts[sp.index]
		dir := sp.dir
		st.Dir = sp.name
		st.Started = true
		if path == "" {
			if man, err := readManifestFile(dir); err == nil && man.Kind == "generate" {
				path = recordedPrompts(man)
			}
		}
		lv, err := readLedger(dir)
		if err != nil {
			return nil, fmt.Errorf("status %s: %w", sp.name, err)
		}
		for _, u := range lv.units {
			switch {
			case u.outcome.Retryable():
				st.Retryable++
			case !u.record || u.outcome.OK():
				st.Done++
			default:
				st.Failed++
			}
		}
		recent := 0
		if commits, ok := opts.Commits[sp.name]; ok {
			for _, c := range commits {
				if c.At.After(st.LastCommit) {
					st.LastCommit = c.At
				}
				if now.Sub(c.At) <= opts.Window {
					recent += c.Rows
				}
			}
			st.Rate = float64(recent) / opts.Window.Seconds()
			continue
		}
		for name, rows := range lv.files {
			fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(name)))
			if err != nil {
				continue
			}
			if fi.ModTime().After(st.LastCommit) {
				st.LastCommit = fi.ModTime()
			}
			if now.Sub(fi.ModTime()) <= opts.Window {
				recent += rows
			}
		}
		st.Rate = float64(recent) / opts.Window.Seconds()
	}
	if path != "" && opts.InputKeys != nil {
		samples, maxLine := 1, 0
		if len(parts) > 0 {
			if man, err := readManifestFile(parts[0].dir); err == nil {
				o := recordedOptions(man)
				samples, maxLine = intOption(o, "samples", 1), intOption(o, "max-line-bytes", 0)
			}
		}
		for i := range sts {
			sts[i].Expected = 0
		}
		if err := opts.InputKeys(ctx, path, samples, maxLine, func(key string) { sts[Of(key, n)].Expected++ }); err != nil {
			return nil, fmt.Errorf("status: %w", err)
		}
		for i := range sts {
			sts[i].Remaining = max(0, sts[i].Expected-sts[i].Done-sts[i].Failed)
		}
	}
	return sts, nil
}

// statusPart is one folder status reads: a shard folder, or the whole
// output folder of a run that was not sharded.
type statusPart struct {
	index     int
	name, dir string
}

// statusParts lists the folders of the run in out and their count: its
// shard folders, or out itself as the one shard of a plain run (named "."),
// so status works on any output folder. A folder that is neither is a
// usage error.
func statusParts(out string) ([]statusPart, int, error) {
	if !IsSharded(out) {
		if _, ok, err := outdir.ReadManifest(out); err != nil || !ok {
			if err == nil {
				err = fmt.Errorf("%s: not an output folder (no %s, no shard-I-of-N folder)", out, outdir.ManifestFile)
			}
			return nil, 0, usage(err)
		}
		return []statusPart{{index: 0, name: ".", dir: out}}, 1, nil
	}
	specs, n, err := layout(out)
	if err != nil {
		return nil, 0, err
	}
	parts := make([]statusPart, len(specs))
	for i, sp := range specs {
		parts[i] = statusPart{index: sp.Index, name: sp.Name(), dir: sp.Dir(out)}
	}
	return parts, n, nil
}

// WriteStatus prints sts as an aligned table with a total line.
func WriteStatus(w io.Writer, sts []ShardStatus, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "shard\tdone\tfailed\tretry\tremaining\trate/s\tlast commit\t")
	var done, failed, retry, remaining int
	var rate float64
	unknown := false
	for _, s := range sts {
		rem, last := "?", "-"
		if s.Remaining >= 0 {
			rem = fmt.Sprint(s.Remaining)
			remaining += s.Remaining
		} else {
			unknown = true
		}
		if !s.Started {
			last = "not started"
		} else if !s.LastCommit.IsZero() {
			last = now.Sub(s.LastCommit).Round(time.Second).String() + " ago"
		}
		done, failed, retry, rate = done+s.Done, failed+s.Failed, retry+s.Retryable, rate+s.Rate
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%.1f\t%s\t\n", s.Dir, s.Done, s.Failed, s.Retryable, rem, s.Rate, last)
	}
	rem := fmt.Sprint(remaining)
	if unknown {
		rem = "?"
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t%s\t%.1f\t\t\n", done, failed, retry, rem, rate)
	return tw.Flush()
}
