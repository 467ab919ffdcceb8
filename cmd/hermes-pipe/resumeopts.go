package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/urfave/cli/v2"
)

// changesKey is where applyRecorded leaves, in the App's Metadata, the
// option changes run.json keeps (its previous ones and this run's), for
// startRun to record.
const changesKey = "run-option-changes"

// guardedFlags are the options that decide what a run's records are: on
// --resume one given on the command line must equal the value run.json
// recorded, unless --allow-change.
var guardedFlags = []string{"prompts", "tasks", "task", "samples", "base-url", "model",
	"temperature", "top-p", "max-tokens", "sampling-seed", "extra-body",
	"toolsets", "distribution", "distribution-file", "seed", "mcp-config", "system-prompt",
	"grader", "grader-exec", "grader-tolerance", // what a reward means
	// compress: its input, budget, tokenizer and what a summary replaces
	"in", "target-tokens", "summary-tokens", "tokenizer", "tokenizer-pattern", "turn-overhead", "protect-last",
	"protect-first-system", "protect-first-human", "protect-first-gpt", "protect-first-tool",
	"summary-role", "no-notice", "max-passes", "over-limit"}

// notCarried are recorded flags of one invocation that --resume does not
// take from run.json.
var notCarried = []string{"out", "resume", "overwrite", "allow-change", "progress",
	"verify-shards", "redo-changed", "prune", "shard", "shard-count",
	"min-resolved", "baseline", "summary-rows", // swe's gate judges each invocation anew
	"dry-run", "json", "batch-export", "batch-import"} // compress's one-off rounds

// allowChangeFlag lets --resume change a recorded option.
func allowChangeFlag() cli.Flag {
	return &cli.BoolFlag{Name: "allow-change", Usage: "with --resume, accept options that decide the records (model, base URL, sampling, input, samples, toolsets, grader; compress's budget, tokenizer and protected turns) that differ from the ones run.json recorded; the change is recorded in run.json"}
}

// optionChange is one entry of run.json's options.changes: a recorded
// option --resume --allow-change replaced.
type optionChange struct {
	Run  int             `json:"run"`
	Flag string          `json:"flag"`
	From json.RawMessage `json:"from"`
	To   json.RawMessage `json:"to"`
}

// applyRecorded makes `--resume --out DIR` continue the run in DIR with the
// options its run.json recorded: every recorded flag not given on the
// command line is set from the record; a guarded flag given with another
// value is a usage error unless --allow-change. The API key is never in
// run.json (only the name of its variable, --api-key-env): it still comes
// from the environment. Without --resume, or without a run.json, it does
// nothing.
func applyRecorded(c *cli.Context) error {
	if !hasFlag(c, "allow-change") || !c.Bool("resume") || c.String("out") == "" || strings.Contains(c.String("out"), "://") {
		return nil
	}
	man, ok, err := outdir.ReadManifest(c.String("out"))
	if err != nil || !ok || len(man.Options) == 0 {
		return nil // the output folder's own checks report it
	}
	var rec map[string]json.RawMessage
	if err := json.Unmarshal(man.Options, &rec); err != nil {
		return usagef("--resume: options in %s/%s: %v", c.String("out"), outdir.ManifestFile, err)
	}
	var changes []optionChange
	if prev, ok := rec["changes"]; ok {
		_ = json.Unmarshal(prev, &changes)
	}
	now := map[string]json.RawMessage{}
	for k, v := range flagRecord(c) {
		if b, err := json.Marshal(v); err == nil {
			now[k] = b
		}
	}
	for _, f := range c.Command.Flags {
		ch, err := applyOne(c, f, rec, now, man.Runs+1)
		if err != nil {
			return err
		}
		if ch != nil {
			changes = append(changes, *ch)
		}
	}
	if len(changes) > 0 {
		if c.App.Metadata == nil {
			c.App.Metadata = map[string]any{}
		}
		c.App.Metadata[changesKey] = changes
	}
	return nil
}

// applyOne applies the record rec of one flag f: it sets f from rec when the
// command line leaves it out and checks a guarded one given there (now is
// flagRecord of the command line), returning the change --allow-change
// accepted, if any. run is the number of this run.
func applyOne(c *cli.Context, f cli.Flag, rec, now map[string]json.RawMessage, run int) (*optionChange, error) {
	name := f.Names()[0]
	raw, recorded := rec[name]
	guarded := slices.Contains(guardedFlags, name)
	switch {
	case !recorded && c.IsSet(name) && guarded:
		return changedFromDefault(c, f, name, run) // the run had the default
	case !recorded || slices.Contains(notCarried, name):
		return nil, nil
	case !c.IsSet(name):
		return nil, setRecorded(c, f, name, raw)
	case !guarded:
		return nil, nil
	}
	cur := now[name]
	if sameJSON(cur, raw) {
		return nil, nil
	}
	if !c.Bool("allow-change") {
		return nil, usagef("--%s %s differs from the run's %s (%s); pass --allow-change to change it",
			name, shown(cur), shown(raw), outdir.ManifestFile)
	}
	return &optionChange{Run: run, Flag: name, From: raw, To: cur}, nil
}

// changedFromDefault checks a guarded flag given on the command line that
// run.json does not record, so the run had its default: the same value is
// no change; another is refused unless --allow-change, and then returned.
func changedFromDefault(c *cli.Context, f cli.Flag, name string, run int) (*optionChange, error) {
	g, ok := f.(interface{ GetValue() string })
	if !ok {
		return nil, nil
	}
	def, cur := g.GetValue(), fmt.Sprint(c.Value(name))
	if def == cur {
		return nil, nil
	}
	if !c.Bool("allow-change") {
		was := "default " + def
		if def == "" {
			was = "default (unset)"
		}
		return nil, usagef("--%s %s differs from the run's %s (%s records no --%s); pass --allow-change to change it",
			name, cur, was, outdir.ManifestFile, name)
	}
	from := json.RawMessage("null")
	if def != "" {
		from, _ = json.Marshal(def)
	}
	to, _ := json.Marshal(flagRecord(c)[name])
	return &optionChange{Run: run, Flag: name, From: from, To: to}, nil
}

// recordChanges adds run.json's option changes to a run's record.
func recordChanges(c *cli.Context, record map[string]any) {
	if v, ok := c.App.Metadata[changesKey]; ok {
		record["changes"] = v
	}
}

func sameJSON(a, b []byte) bool {
	var x, y bytes.Buffer
	if json.Compact(&x, a) != nil || json.Compact(&y, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(x.Bytes(), y.Bytes())
}

// shown is a recorded value as the user would type it: a string unquoted,
// a list of strings (--in, --toolsets) joined by commas, other JSON on one
// line.
func shown(raw []byte) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return strings.Join(list, ",")
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) == nil {
		return b.String()
	}
	return string(raw)
}

// setRecorded sets flag f of c to its value recorded in run.json.
func setRecorded(c *cli.Context, f cli.Flag, name string, raw json.RawMessage) error {
	bad := func(err error) error {
		return usagef("--resume: --%s in %s/%s: %v", name, c.String("out"), outdir.ManifestFile, err)
	}
	switch f.(type) {
	case *cli.StringSliceFlag:
		var vs []string
		if err := json.Unmarshal(raw, &vs); err != nil {
			return bad(err)
		}
		for _, v := range vs {
			if err := c.Set(name, v); err != nil {
				return bad(err)
			}
		}
		return nil
	case *cli.DurationFlag:
		var ns int64
		if err := json.Unmarshal(raw, &ns); err != nil {
			return bad(err)
		}
		return setOne(c, name, time.Duration(ns).String(), bad)
	case *cli.StringFlag:
		var s string
		if json.Unmarshal(raw, &s) != nil {
			s = string(raw) // --extra-body is recorded as its JSON object
		}
		if name == "base-url" && strings.Contains(s, "***") {
			return usagef("--resume: %s/%s records --base-url with its credentials hidden (%s): give --base-url again", c.String("out"), outdir.ManifestFile, s)
		}
		return setOne(c, name, s, bad)
	case *cli.BoolFlag:
		var b bool
		if err := json.Unmarshal(raw, &b); err != nil {
			return bad(err)
		}
		return setOne(c, name, strconv.FormatBool(b), bad)
	case *cli.IntFlag, *cli.Int64Flag, *cli.Float64Flag, *cli.UintFlag, *cli.Uint64Flag:
		return setOne(c, name, string(bytes.TrimSpace(raw)), bad)
	}
	return nil // a kind of flag run.json cannot give back: the default stands
}

func setOne(c *cli.Context, name, v string, bad func(error) error) error {
	if err := c.Set(name, v); err != nil {
		return bad(err)
	}
	return nil
}
