package export

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/pipeline/atomicfile"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// writeMeta writes export.json and README.md into dir. Both are functions
// of the manifest alone, with every map written in sorted order, so the
// same export gives the same bytes.
func writeMeta(dir string, man *Manifest, p *plan) error {
	if man.NotConvertible.Keys == nil {
		man.NotConvertible.Keys = []string{}
	}
	data, err := json.MarshalIndent(man, "", "  ")
	if err != nil {
		return fmt.Errorf("export: encode %s: %w", ManifestFile, err)
	}
	if err := atomicfile.WriteMode(dir, ManifestFile, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := atomicfile.WriteMode(dir, CardFile, []byte(card(man, p)), 0o644); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}

// feature is one entry of a dataset card's dataset_info features.
type feature struct {
	name  string
	dtype string    // a value
	list  []feature // a list of structs
	st    []feature // a struct
	seq   string    // a list of values of this dtype
}

func sf(name string) feature { return feature{name: name, dtype: "string"} }

func toolFeatures() []feature {
	return []feature{sf("type"), {name: "function", st: []feature{sf("name"), sf("description"), sf("parameters")}}}
}

// features are the columns of the export in Hugging Face's card form.
func features(format, arguments string) []feature {
	var fs []feature
	if format == FormatMessages {
		fn := []feature{sf("name")}
		if arguments == ArgumentsString {
			fn = append(fn, sf("arguments"))
		}
		fs = append(fs, feature{name: "messages", list: []feature{
			sf("role"), sf("content"), sf("reasoning_content"),
			{name: "tool_calls", list: []feature{sf("id"), sf("type"), {name: "function", st: fn}}},
			sf("tool_call_id"), sf("name"),
		}})
	} else {
		fs = append(fs, feature{name: schemas.MemberConversations, list: []feature{sf(schemas.TurnFrom), sf(schemas.TurnValue)}})
	}
	fs = append(fs, feature{name: "tools", list: toolFeatures()},
		sf(schemas.MemberKey), sf(schemas.MemberID),
		feature{name: schemas.MemberPromptIndex, dtype: "int64"}, feature{name: schemas.MemberSample, dtype: "int64"},
		sf(schemas.MemberOutcome), sf(schemas.MemberModel),
		feature{name: columnReward, dtype: "float64"}, sf(columnSource))
	return fs
}

func writeFeatures(b *strings.Builder, fs []feature, indent string) {
	for _, f := range fs {
		fmt.Fprintf(b, "%s- name: %s\n", indent, f.name)
		switch {
		case f.list != nil:
			fmt.Fprintf(b, "%s  list:\n", indent)
			writeFeatures(b, f.list, indent+"  ")
		case f.st != nil:
			fmt.Fprintf(b, "%s  struct:\n", indent)
			writeFeatures(b, f.st, indent+"  ")
		case f.seq != "":
			fmt.Fprintf(b, "%s  sequence: %s\n", indent, f.seq)
		default:
			fmt.Fprintf(b, "%s  dtype: %s\n", indent, f.dtype)
		}
	}
}

// splitNames are the splits with rows, in --split order.
func splitNames(man *Manifest, p *plan) []string {
	var names []string
	for _, s := range p.splits {
		if man.Splits[s.name].Rows > 0 {
			names = append(names, s.name)
		}
	}
	return names
}

// card is the dataset card: YAML front matter in the Hugging Face form
// (configs with data_files per split, dataset_info features and splits),
// then the sources, options, counts per step, rows per split and outcome,
// models, tool calls and tokens.
func card(man *Manifest, p *plan) string {
	var b strings.Builder
	names := splitNames(man, p)
	b.WriteString("---\nconfigs:\n- config_name: default\n  data_files:")
	if len(names) == 0 {
		b.WriteString(" []")
	}
	b.WriteString("\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  - split: %s\n    path: \"%s/%s-*\"\n", n, DataDir, n)
	}
	b.WriteString("dataset_info:\n  features:\n")
	fs := features(man.Format, man.Options.Arguments)
	if man.Options.Logprobs {
		fs = append(fs, logprobsFeature(man.Format))
	}
	writeFeatures(&b, fs, "  ")
	b.WriteString("  splits:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  - name: %s\n    num_examples: %d\n", n, man.Splits[n].Rows)
	}
	b.WriteString("---\n\n# Agent trajectories exported by hermes-pipe\n\n")
	fmt.Fprintf(&b, "%d rows in the `%s` format as %s files, from %d source(s).\n\n", man.Rows, man.Format, man.Files, len(man.Sources))
	cardFormat(&b, man)
	b.WriteString("## Sources\n\n| source | kind | run ids | folders | records |\n|---|---|---|---|---|\n")
	for _, s := range man.Sources {
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d |\n", cell(s.Path), cell(s.Kind), cell(strings.Join(s.RunIDs, ", ")), s.Folders, s.Records)
	}
	o := man.Options
	b.WriteString("\n## Options\n\n")
	fmt.Fprintf(&b, "- format: `%s`, files: `%s`, tool-call arguments: `%s`, at most %d rows a file\n", o.Format, o.FileFormat, o.Arguments, o.ShardRows)
	for _, w := range o.Where {
		fmt.Fprintf(&b, "- where `%s`\n", w)
	}
	if o.RequireReasoning {
		b.WriteString("- rows without reasoning left out\n")
	}
	if o.DropUnknownTools {
		b.WriteString("- rows calling a tool their system turn does not offer left out\n")
	}
	if o.Dedupe != "" {
		fmt.Fprintf(&b, "- dedupe: `%s` (one row per distinct conversation, the first in reading order)\n", o.Dedupe)
	}
	if o.BestOf > 0 {
		fmt.Fprintf(&b, "- best-of: at most %d sample(s) per prompt (higher reward, then completed, then fewer tokens, then key)\n", o.BestOf)
	}
	fmt.Fprintf(&b, "- split: `%s` by prompt, seed %d\n", o.Split, o.Seed)
	b.WriteString("\n## Counts per step\n\n| step | in | out |\n|---|---|---|\n")
	for _, s := range man.Steps {
		fmt.Fprintf(&b, "| %s | %d | %d |\n", cell(s.Name), s.In, s.Out)
	}
	if man.NotConvertible.Count > 0 {
		fmt.Fprintf(&b, "\n%d record(s) could not be converted exactly and were left out; the first: %s.\n",
			man.NotConvertible.Count, strings.Join(man.NotConvertible.Keys, ", "))
	}
	if man.ToolsUnread > 0 {
		fmt.Fprintf(&b, "\nThe tool list of %d row(s) could not be read back from their system turn: their `tools` is empty.\n", man.ToolsUnread)
	}
	cardLogprobs(&b, man)
	cardCounts(&b, man, names)
	return b.String()
}

func cardFormat(b *strings.Builder, man *Manifest) {
	if man.Format == FormatMessages {
		b.WriteString("Each row holds `messages` (OpenAI chat messages: `role` user/assistant/tool; an assistant's `content`, " +
			"`reasoning_content` (its think text) and `tool_calls` with `id`, `type` \"function\" and `function` {`name`, `arguments`}; " +
			"a tool message's `tool_call_id`, `name` and `content`), `tools` (the OpenAI tool schemas offered in that rollout; " +
			"Hermes' system turn is made from them, so there is no system message but, in a compressed record, a first one holding the notice compress added) and the record's columns. ")
		if man.Options.Arguments == ArgumentsString {
			b.WriteString("Tool-call `arguments` are JSON text (the OpenAI form). ")
		} else {
			b.WriteString("Tool-call `arguments` are JSON objects (the Hugging Face chat-template form). ")
		}
	} else {
		b.WriteString("Each row holds `conversations`, the record's turns exactly as Hermes writes them (ShareGPT: `from` system/human/gpt/tool, `value`), " +
			"`tools` (the OpenAI tool schemas of its system turn) and the record's columns. ")
	}
	b.WriteString("A tool's `parameters` is its JSON Schema as JSON text. `reward` is the record's reward (null when it was not graded or its grader failed); `source` is the run id.\n\n")
}

func cardCounts(b *strings.Builder, man *Manifest, names []string) {
	b.WriteString("\n## Rows per split and outcome\n\n")
	outcomes := map[string]bool{}
	for _, m := range man.Outcomes {
		for o := range m {
			outcomes[o] = true
		}
	}
	cols := slices.Sorted(maps.Keys(outcomes))
	b.WriteString("| split | rows | files |")
	for _, c := range cols {
		fmt.Fprintf(b, " %s |", cell(c))
	}
	b.WriteString("\n|---|---|---|" + strings.Repeat("---|", len(cols)) + "\n")
	for _, n := range names {
		fmt.Fprintf(b, "| %s | %d | %d |", n, man.Splits[n].Rows, len(man.Splits[n].Files))
		for _, c := range cols {
			fmt.Fprintf(b, " %d |", man.Outcomes[n][c])
		}
		b.WriteString("\n")
	}
	writeCounts(b, "Models", "model", "rows", man.Models)
	writeCounts(b, "Tools", "tool", "calls", man.Tools)
	fmt.Fprintf(b, "\n## Tokens\n\n%d tokens in all (usage.total_tokens of the exported rows).\n", man.Tokens)
}

// writeCounts writes a table of m, the largest count first.
func writeCounts(b *strings.Builder, title, what, unit string, m map[string]int64) {
	fmt.Fprintf(b, "\n## %s\n\n", title)
	if len(m) == 0 {
		b.WriteString("None.\n")
		return
	}
	keys := slices.SortedFunc(maps.Keys(m), func(x, y string) int { return cmp.Or(cmp.Compare(m[y], m[x]), strings.Compare(x, y)) })
	fmt.Fprintf(b, "| %s | %s |\n|---|---|\n", what, unit)
	for _, k := range keys {
		fmt.Fprintf(b, "| %s | %d |\n", cell(k), m[k])
	}
}

// cell makes s safe in a Markdown table cell.
func cell(s string) string {
	return strings.NewReplacer("|", "\\|", "\n", " ").Replace(s)
}
