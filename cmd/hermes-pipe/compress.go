package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline/cost"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/compress"
	"github.com/hermes-pipe/hermes-pipe/stages/llm"
	"github.com/hermes-pipe/hermes-pipe/stages/tokenizer"
	"github.com/urfave/cli/v2"
)

// compressLLMFlags are the llm flags, optional here because --dry-run calls
// no model, with a per-attempt timeout suited to summaries.
func compressLLMFlags() []cli.Flag {
	var out []cli.Flag
	for _, f := range llmFlags() {
		switch f := f.(type) {
		case *cli.StringFlag:
			if f.Name == "base-url" || f.Name == "model" {
				f.Required = false
				f.Usage += " (required unless --dry-run)"
			}
		case *cli.DurationFlag:
			if f.Name == "request-timeout" {
				f.Value = 2 * time.Minute
			}
		}
		out = append(out, f)
	}
	return out
}

func compressCommand() *cli.Command {
	flags := []cli.Flag{
		&cli.StringSliceFlag{Name: "in", Usage: "input: JSONL file (.gz and .zst too), Parquet file, folder of them, or a hermes-pipe output folder (repeatable)", Required: true},
		&cli.StringFlag{Name: "out", Usage: "output folder (required unless --dry-run)"},
		&cli.IntFlag{Name: "target-tokens", Value: compress.DefaultTargetTokens, Usage: "token budget of one row, turn overhead included"},
		&cli.IntFlag{Name: "summary-tokens", Value: compress.DefaultSummaryTokens, Usage: "expected summary length; requests allow twice as many (max_tokens)"},
		&cli.IntFlag{Name: "protect-last", Value: compress.DefaultProtectLast, Usage: "final turns never summarised"},
		&cli.BoolFlag{Name: "protect-first-system", Value: true, Usage: "never summarise the first system turn (--protect-first-system=false turns it off)"},
		&cli.BoolFlag{Name: "protect-first-human", Value: true, Usage: "never summarise the first human turn (=false turns it off)"},
		&cli.BoolFlag{Name: "protect-first-gpt", Value: true, Usage: "never summarise the first gpt turn (=false turns it off)"},
		&cli.BoolFlag{Name: "protect-first-tool", Value: true, Usage: "never summarise the first tool turn (=false turns it off)"},
		&cli.Float64Flag{Name: "temperature", Value: compress.DefaultTemperature, Usage: "sampling temperature sent with every summary request (Hermes' summariser uses 0.3)"},
		&cli.IntFlag{Name: "turn-overhead", Usage: "tokens the chat template adds per turn, counted against the budget"},
		&cli.StringFlag{Name: "summary-role", Value: "human", Usage: "\"from\" of the inserted summary turn"},
		&cli.BoolFlag{Name: "no-notice", Usage: "do not append the summarised-turns notice to the system turn"},
		&cli.IntFlag{Name: "max-passes", Value: compress.DefaultMaxPasses, Usage: "summaries per row at most, when one pass leaves it over budget"},
		&cli.StringFlag{Name: "over-limit", Value: compress.OverLimitKeep, Usage: "rows still over budget: keep (outcome still_over_limit), drop (counted), or quarantine (to quarantine.jsonl)"},
		&cli.DurationFlag{Name: "row-timeout", Value: 5 * time.Minute, Usage: "cap on all summary calls of one row; past it the row keeps its original text (summary_failed)"},
		&cli.BoolFlag{Name: "dry-run", Usage: "tokenise everything and report rows over budget, projected calls and tokens, and the length distribution; no API call, nothing written"},
		&cli.BoolFlag{Name: "json", Usage: "with --dry-run: print the report as JSON"},
		&cli.IntFlag{Name: "max-line-bytes", Value: compress.DefaultMaxLineBytes, Usage: "longest input row accepted"},
		&cli.IntFlag{Name: "max-bytes-in-flight", Value: compress.DefaultMaxBytesInFlight, Usage: "input bytes of the rows compressed at once; a longer row is compressed alone (bounds memory whatever --workers is)"},
		&cli.BoolFlag{Name: "batch", Usage: "send the summary requests through the OpenAI Batch API (about half price, results within 24h); rows waiting on a batch hold no worker (up to 4096 wait at once, their memory bounded by --max-bytes-in-flight): --workers then bounds only the direct calls of --batch-fallback direct"},
		&cli.StringFlag{Name: "batch-fallback", Usage: "requests that failed in --batch-attempts batches: \"\" fails the summary (summary_failed, --resume tries again), direct sends them as direct calls"},
		&cli.IntFlag{Name: "batch-attempts", Value: 3, Usage: "batches one request may fail in before --batch-fallback applies"},
		&cli.IntFlag{Name: "batch-max-requests", Value: llm.BatchMaxRequests, Usage: "requests per batch at most (the API's limit is 50,000)"},
		&cli.IntFlag{Name: "batch-max-bytes", Value: llm.BatchMaxBytes, Usage: "bytes of one batch input file at most (the API's limit is 200 MB)"},
		&cli.DurationFlag{Name: "batch-collect", Value: 2 * time.Second, Usage: "a batch is submitted once no new request came for this long (or once it is full)"},
		&cli.DurationFlag{Name: "batch-poll", Value: 5 * time.Second, Usage: "first interval between batch status polls; it doubles while nothing changes"},
		&cli.DurationFlag{Name: "batch-poll-max", Value: time.Minute, Usage: "longest interval between batch status polls"},
		&cli.StringFlag{Name: "batch-export", Usage: "write the summary requests that have no result yet to this file in the OpenAI batch input format (vllm run-batch reads it); their rows stay pending"},
		&cli.StringFlag{Name: "batch-import", Usage: "finish the rows whose requests are answered in this batch output file; the others stay pending (for the next import, --batch-export or a normal --resume)"},
	}
	flags = append(flags, tokenizerFlags()...)
	flags = append(flags, samplingFlags(false)...)
	flags = append(flags, allowChangeFlag())
	flags = append(flags, compressLLMFlags()...)
	flags = append(flags, rolloutCapFlags()...)
	flags = append(flags, runFlags()...)
	return &cli.Command{
		Name:      "compress",
		Usage:     "fit trajectories into a token budget by summarising their middle turns",
		UsageText: "hermes-pipe compress --in PATH... --out DIR --base-url URL --model NAME [options]\n   hermes-pipe compress --out DIR --resume [--allow-change ...]\n   hermes-pipe compress --in PATH... --dry-run [--tokenizer T]",
		Description: `Counts each row's tokens with an exact offline tokenizer (plus --turn-overhead
per turn). Rows within --target-tokens pass through byte-identical (outcome
under_target). For a longer row, the first system, human, gpt and tool turns
(each unless --protect-first-ROLE=false) and the last --protect-last turns are
kept; from the turns after the protected head, just enough are replaced by one
summary turn ("[CONTEXT SUMMARY]: ...") to fit, never separating a tool call
from its result. A row still over budget is widened or summarised again, up to
--max-passes; the last pass summarises every unprotected turn of its region,
so a row whose protected turns plus one summary fit ends within budget
(outcome compressed, or still_over_limit: see --over-limit). Summary requests
are sent with --temperature (0.3, as Hermes' summariser). A summary that fails (errors after
retries, timeouts, a reply cut at max_tokens) leaves the row as it was, with
outcome summary_failed, and the run exits 3.

Every other field of a record keeps its bytes and its place; compressed rows
get a compression_metrics object, and compression_metrics.json sums the run.
Output is crash-safe and --resume never pays twice for a finished row.
--out DIR --resume needs no other flag: the options run.json recorded (inputs,
endpoint, model, budget, tokenizer, sampling, ...) are taken from it; one given
that decides the records and differs from the run's is refused naming both
values, unless --allow-change (recorded in run.json).`,
		Flags:  flags,
		Action: runCompress,
	}
}

func runCompress(c *cli.Context) error {
	if c.NArg() > 0 {
		return usagef("compress takes no arguments, got %q (inputs go after --in)", c.Args().First())
	}
	ins, err := localInputs(c, "in", c.StringSlice("in"))
	if err != nil {
		return err
	}
	inputs, err := compress.ExpandInputs(ins)
	if err != nil {
		return usagef("--in: %v", err)
	}
	cfg, workers, err := compressConfig(c)
	if err != nil {
		return err
	}
	temp := c.Float64("temperature")
	if temp < 0 || temp > 2 || temp != temp {
		return usagef("--temperature must be between 0 and 2, got %v", temp)
	}
	if _, err := samplingOf(c); err != nil {
		return err
	}
	if !c.Bool("dry-run") {
		if err := compressEndpoint(c); err != nil {
			return err
		}
	}
	tok, err := loadTokenizer(c)
	if err != nil {
		return err
	}
	if note := familyNote(tok, c.String("model")); note != "" {
		fmt.Fprintln(c.App.ErrWriter, "compress: note: "+note)
	}
	if c.Bool("dry-run") {
		price, err := priceOf(c, "compress")
		if err != nil {
			return err
		}
		return dryRunCompress(c, inputs, tok, cfg, workers, price)
	}
	batch, err := batchOptions(c)
	if err != nil {
		return err
	}

	format, err := checkFormat(c)
	if err != nil {
		return err
	}
	r, err := startRun(c, "compress", format, noSandbox)
	if err != nil {
		return err
	}
	defer r.close()
	if batch.API && c.String("progress") != "none" {
		batch.Status = c.App.ErrWriter
	}
	if batch.Client, err = batchClient(c, batch, r.retries); err != nil {
		return err
	}
	res, err := compress.Run(r.ctx, compress.Options{
		RunConfig: r.cfg,
		Inputs:    inputs,
		Tokenizer: tok,
		Config:    cfg,
		Summary: compress.SummaryOptions{Client: r.client, Model: c.String("model"), Temperature: &temp, Price: r.price,
			MaxCostPerRow: c.Float64("max-cost-per-rollout"), MaxTokensPerRow: c.Int64("max-tokens-per-rollout")},
		RowTimeout:   c.Duration("row-timeout"),
		OverLimit:    c.String("over-limit"),
		MaxLineBytes: c.Int("max-line-bytes"),
		Batch:        batch,

		MaxBytesInFlight: c.Int("max-bytes-in-flight"),
	})
	if err = r.finish(c, err); err != nil {
		return err
	}
	printCompressMetrics(c.App.ErrWriter, res, batch.Export)
	return reportCompress(c, res, r.retries)
}

// compressConfig checks the flags that shape the compression of a row
// (budgets, protected turns, over-limit policy, summary role) and --workers,
// in that order, and binds them.
func compressConfig(c *cli.Context) (compress.Config, int, error) {
	for _, name := range []string{"target-tokens", "summary-tokens"} {
		if c.Int(name) < 1 {
			return compress.Config{}, 0, usagef("--%s must be at least 1, got %d", name, c.Int(name))
		}
	}
	if c.Int("summary-tokens") >= c.Int("target-tokens") {
		return compress.Config{}, 0, usagef("--summary-tokens (%d) must be below --target-tokens (%d)", c.Int("summary-tokens"), c.Int("target-tokens"))
	}
	if c.Int("turn-overhead") < 0 || c.Int("max-passes") < 1 {
		return compress.Config{}, 0, usagef("--turn-overhead must not be negative and --max-passes must be at least 1")
	}
	switch c.String("over-limit") {
	case compress.OverLimitKeep, compress.OverLimitDrop, compress.OverLimitQuarantine:
	default:
		return compress.Config{}, 0, usagef("--over-limit: %q is not keep, drop or quarantine", c.String("over-limit"))
	}
	switch c.String("summary-role") {
	case "human", "gpt", "system":
	default:
		return compress.Config{}, 0, usagef("--summary-role: %q is not human, gpt or system", c.String("summary-role"))
	}
	workers := c.Int("workers")
	if workers < 1 {
		return compress.Config{}, 0, usagef("--workers must be at least 1, got %d", workers)
	}
	protect := c.Int("protect-last")
	if protect < 0 {
		return compress.Config{}, 0, usagef("--protect-last must not be negative")
	}
	if protect == 0 {
		protect = -1 // the library's "protect none"
	}
	return compress.Config{
		TargetTokens:  c.Int("target-tokens"),
		SummaryTokens: c.Int("summary-tokens"),
		ProtectLast:   protect,
		TurnOverhead:  c.Int("turn-overhead"),
		SummaryRole:   c.String("summary-role"),
		NoNotice:      c.Bool("no-notice"),
		MaxPasses:     c.Int("max-passes"),

		NoProtectFirstSystem: !c.Bool("protect-first-system"),
		NoProtectFirstHuman:  !c.Bool("protect-first-human"),
		NoProtectFirstGPT:    !c.Bool("protect-first-gpt"),
		NoProtectFirstTool:   !c.Bool("protect-first-tool"),
	}, workers, nil
}

// compressEndpoint checks that a run that is not a dry run has --out, and
// --base-url and --model unless it only writes or reads batch files.
func compressEndpoint(c *cli.Context) error {
	for _, name := range []string{"out", "base-url", "model"} {
		if c.IsSet(name) && strings.TrimSpace(c.String(name)) == "" {
			return usagef("--%s is empty; give a value", name)
		}
		if c.String(name) != "" || name == "base-url" && offlineBatch(c) {
			continue
		}
		if name == "base-url" {
			return usagef("--base-url is required (unless --dry-run, or --batch-export/--batch-import without --batch)")
		}
		return usagef("--%s is required (unless --dry-run)", name)
	}
	if offlineBatch(c) && c.String("base-url") == "" && c.String("batch-fallback") == string(compress.BatchFallbackDirect) {
		return usagef("--batch-fallback direct needs --base-url")
	}
	return nil
}

// printCompressMetrics writes to w the lines that sum a finished run's
// compression_metrics.json, its summaries' cost, and what an export wrote
// to the file export or left pending.
func printCompressMetrics(w io.Writer, res compress.Result, export string) {
	m := res.Metrics
	fmt.Fprintf(w, "compress: %d rows: %d under target, %d compressed, %d still over limit (%d dropped, %d quarantined), %d summary failed; tokens %d -> %d; %d summary calls, %d errors\n",
		m.Summary.TotalTrajectories, m.Outcomes[string(compress.OutcomeUnderTarget)], m.Outcomes[string(compress.OutcomeCompressed)],
		m.Outcomes[string(compress.OutcomeStillOverLimit)], m.Outcomes[compress.DisposalDropped], m.Outcomes[compress.DisposalQuarantined],
		m.Outcomes[string(compress.OutcomeSummaryFailed)], m.Tokens.TotalBefore, m.Tokens.TotalAfter,
		m.Summarization.TotalAPICalls, m.Summarization.TotalErrors)
	if cu := m.Summarization.CostUSD; cu != nil {
		fmt.Fprintf(w, "compress: summaries cost $%.4f (%d prompt, %d completion tokens; %d cached)\n", *cu,
			m.Summarization.Usage.PromptTokens, m.Summarization.Usage.CompletionTokens, m.Summarization.Usage.CachedPromptTokens)
	}
	if res.Exported > 0 {
		fmt.Fprintf(w, "compress: %d requests written to %s; run them (e.g. vllm run-batch) and finish with --resume --batch-import RESULTS\n", res.Exported, export)
	}
	if res.Pending > 0 {
		fmt.Fprintf(w, "compress: %d rows pending: their summary requests have no batch result yet\n", res.Pending)
	}
}

// offlineBatch reports whether the run only writes and reads batch files
// (--batch-export, --batch-import without --batch): it needs no endpoint.
func offlineBatch(c *cli.Context) bool {
	return !c.Bool("batch") && (c.String("batch-export") != "" || c.String("batch-import") != "")
}

// batchOptions binds and checks the --batch* flags, before any I/O; the
// Batch API client is made by batchClient once the run has started.
func batchOptions(c *cli.Context) (compress.BatchOptions, error) {
	o := compress.BatchOptions{
		API: c.Bool("batch"), Export: c.String("batch-export"), Import: c.String("batch-import"),
		Fallback: c.String("batch-fallback"), Attempts: c.Int("batch-attempts"),
		MaxRequests: c.Int("batch-max-requests"), MaxBytes: c.Int("batch-max-bytes"),
		Collect: c.Duration("batch-collect"), PollMin: c.Duration("batch-poll"), PollMax: c.Duration("batch-poll-max"),
	}
	switch o.Fallback {
	case compress.BatchFallbackNone, compress.BatchFallbackDirect:
	default:
		return o, usagef("--batch-fallback: %q is not direct", o.Fallback)
	}
	if o.API && o.Export != "" {
		return o, usagef("--batch and --batch-export do not go together: one sends the requests, the other writes them")
	}
	if o.MaxRequests < 1 || o.MaxRequests > llm.BatchMaxRequests || o.MaxBytes < 1 || o.MaxBytes > llm.BatchMaxBytes {
		return o, usagef("--batch-max-requests must be 1..%d and --batch-max-bytes 1..%d", llm.BatchMaxRequests, llm.BatchMaxBytes)
	}
	if o.Attempts < 1 {
		return o, usagef("--batch-attempts must be at least 1")
	}
	if o.Import != "" {
		if _, err := os.Stat(o.Import); err != nil {
			return o, usagef("--batch-import: %v", err)
		}
	}
	return o, nil
}

// batchClient makes the Batch API client of a run that uses one (--batch,
// --batch-export, --batch-import; nil otherwise). It shares the llm flags'
// base URL, key, timeout and retry policy, and counts its retries into
// retries, the run's counts the closing summary prints (as the direct
// client does: startRun).
func batchClient(c *cli.Context, o compress.BatchOptions, retries *llm.RetryCounts) (*llm.BatchClient, error) {
	if !o.API && o.Export == "" && o.Import == "" {
		return nil, nil
	}
	base := c.String("base-url")
	if base == "" {
		// --batch-export/--batch-import with no endpoint: the client only
		// writes request bodies and reads result lines, it sends nothing.
		base = "http://127.0.0.1/v1"
	}
	sampling, err := samplingOf(c)
	if err != nil {
		return nil, err
	}
	maxRetries, err := maxRetriesOf(c)
	if err != nil {
		return nil, err
	}
	bc, err := llm.NewBatch(llm.Options{
		Sampling:       sampling,
		BaseURL:        base,
		APIKey:         os.Getenv(c.String("api-key-env")),
		Model:          c.String("model"),
		RequestTimeout: c.Duration("request-timeout"),
		MaxRetries:     maxRetries,
		Retries:        retries,
	})
	if err != nil {
		return nil, usagef("%v", err)
	}
	return bc, nil
}

// reportCompress prints the end-of-run line and maps the summary to the exit
// status, as generate does.
func reportCompress(c *cli.Context, res compress.Result, retries *llm.RetryCounts) error {
	s, out, w := res.Summary, c.String("out"), c.App.ErrWriter
	if res.NothingToDo {
		fmt.Fprintf(w, "nothing to do: all %d rows in %s are already done\n", res.PreviouslyDone, out)
	} else {
		fmt.Fprintf(w, "%s: %d written (%d ok, %d failed), %d left out by --over-limit, %d rejected, %d already done, in %s\n",
			out, s.Written, s.OK, s.Failed, s.Filtered, s.Rejected, s.Skipped, s.Duration.Round(time.Millisecond))
		printRunSummary(w, out, s, retries)
	}
	return exitFor(s, out, " (summary_failed rows keep their original text)")
}

func dryRunCompress(c *cli.Context, inputs []compress.Input, tok tokenizer.Tokenizer, cfg compress.Config, workers int, price *cost.Price) error {
	rejected := 0
	rep, err := compress.DryRun(c.Context, compress.DryRunOptions{
		Inputs: inputs, Tokenizer: tok, Config: cfg, Workers: min(workers, 8), MaxLineBytes: c.Int("max-line-bytes"),
		Price: price, Batch: c.Bool("batch") || c.String("batch-export") != "",
		Reject: func(r schemas.Reject) {
			if rejected < 5 {
				fmt.Fprintf(c.App.ErrWriter, "dry run: %s:%d: %s\n", r.File, r.Line, r.Reason)
			}
			rejected++
		},
	})
	if err != nil {
		return err
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else if err := writeDryRun(c.App.Writer, rep); err != nil {
		return err
	}
	if rep.Rejected > 0 {
		return &exitStatus{code: exitRowsFailed, msg: fmt.Sprintf("dry run: %d rows would be rejected", rep.Rejected)}
	}
	return nil
}

func writeDryRun(w io.Writer, r compress.DryRunReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "tokenizer\t%s (+%d per turn), target %d tokens\n", r.Tokenizer, r.TurnOverhead, r.TargetTokens)
	fmt.Fprintf(tw, "rows\t%d (%d rejected)\n", r.Rows, r.Rejected)
	fmt.Fprintf(tw, "under target\t%d\n", r.UnderTarget)
	fmt.Fprintf(tw, "over target\t%d (%d cannot be summarised, %d would still be over after every pass)\n", r.OverTarget, r.Unfixable, r.ProjectedOver)
	fmt.Fprintf(tw, "projected summary calls\t%d\n", r.ProjectedCalls)
	fmt.Fprintf(tw, "projected tokens\t%d prompt, %d completion (at most %d)\n", r.ProjectedPromptTokens, r.ProjectedCompletionTokens, r.MaxCompletionTokens)
	rates := "direct prices"
	if r.BatchPrices {
		rates = "batch prices"
	}
	if r.ProjectedCostUSD != nil {
		fmt.Fprintf(tw, "projected spend\t$%.4f (%s; at most $%.4f if every summary uses max_tokens)\n", *r.ProjectedCostUSD, rates, *r.MaxCostUSD)
	} else {
		fmt.Fprintf(tw, "projected spend\tunknown (no price for the model: --prices or --price-in/--price-out)\n")
	}
	d := r.Distribution
	fmt.Fprintf(tw, "row length\tmin %d, mean %d, p50 %d, p90 %d, p99 %d, max %d (total %d)\n", d.Min, d.Mean, d.P50, d.P90, d.P99, d.Max, r.TotalTokens)
	prev := 0
	for _, b := range r.Buckets {
		label := fmt.Sprintf("  %d-%d", prev+1, b.UpTo)
		if b.UpTo == 0 {
			label = fmt.Sprintf("  >%d", prev)
		}
		fmt.Fprintf(tw, "%s\t%d\n", label, b.Rows)
		prev = b.UpTo
	}
	return tw.Flush()
}

func tokensCommand() *cli.Command {
	return &cli.Command{
		Name:      "tokens",
		Usage:     "print the token count of each file and the total",
		UsageText: "hermes-pipe tokens [--tokenizer T [--tokenizer-pattern P]] FILE...",
		Description: `Counts the tokens of each file's whole text (.gz and .zst files are
decompressed first) with an exact offline tokenizer: cl100k_base, o200k_base,
a tiktoken-format file (its split pattern from its family, or
--tokenizer-pattern) or a Hugging Face tokenizer.json given by path.`,
		Flags: tokenizerFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return usagef("tokens needs at least one FILE")
			}
			tok, err := loadTokenizer(c)
			if err != nil {
				return err
			}
			var total int64
			for _, path := range c.Args().Slice() {
				f, err := compress.OpenText(path)
				if err != nil {
					return usagef("%v", err)
				}
				n, err := compress.CountTokens(tok, f)
				f.Close()
				if err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
				total += n
				fmt.Fprintf(c.App.Writer, "%d\t%s\n", n, path)
			}
			fmt.Fprintf(c.App.Writer, "%d\ttotal\n", total)
			return nil
		},
	}
}

// tokenizerFlags are --tokenizer and --tokenizer-pattern (the split
// pattern of a tiktoken-format file that no rank count names), read by
// loadTokenizer; compress and tokens take them.
func tokenizerFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "tokenizer", Value: "cl100k_base", Usage: "cl100k_base, o200k_base, the path of a tiktoken-format file (*.tiktoken, tiktoken.model: Kimi K2, Llama 3; see --tokenizer-pattern) or of a Hugging Face tokenizer.json (byte-level BPE, or SentencePiece-style BPE: Llama 2, Gemma, Mistral)"},
		&cli.StringFlag{Name: "tokenizer-pattern", Usage: "split pattern of a tiktoken-format --tokenizer file: " +
			strings.Join(tokenizer.PatternNames(), ", ") + " or a regex (default: the file's family, known by its rank count)"},
	}
}

// loadTokenizer loads --tokenizer, a tiktoken-format file with
// --tokenizer-pattern when given; errors are usage errors naming the flags.
func loadTokenizer(c *cli.Context) (tokenizer.Tokenizer, error) {
	tok, err := tokenizer.LoadWith(c.String("tokenizer"), tokenizer.TiktokenSpec{Pattern: c.String("tokenizer-pattern")})
	switch {
	case errors.Is(err, tokenizer.ErrNoPattern):
		return nil, usagef("--tokenizer: %v with --tokenizer-pattern: %s or a regex", err, strings.Join(tokenizer.PatternNames(), ", "))
	case err != nil && c.String("tokenizer-pattern") != "":
		return nil, usagef("--tokenizer %s --tokenizer-pattern: %v", c.String("tokenizer"), err)
	case err != nil:
		return nil, usagef("--tokenizer: %v", err)
	}
	return tok, nil
}

// familyNote says when the tokenizer's family and the model's disagree, so
// budgets are counted in other tokens than the model's; "" when they agree
// or either is unknown.
func familyNote(tok tokenizer.Tokenizer, model string) string {
	tf, mf := tokenizer.Family(tok), tokenizer.ModelFamily(model)
	if tf == "" || mf == "" || tf == mf {
		return ""
	}
	return fmt.Sprintf("--tokenizer %s is a %s tokenizer but --model %s is a %s model: token counts may differ from the model's (give its tokenizer file with --tokenizer)", tok.Name(), tf, model, mf)
}
