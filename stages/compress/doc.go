// Package compress is `hermes-pipe compress`: it fits ShareGPT trajectories
// into a token budget by replacing a middle region of each conversation with
// an LLM-written summary, on the pipeline runtime (one Source, this Stage,
// the shared Output), so it inherits the worker pool, the rate controller,
// atomic shards, the ledger and --resume.
//
// The algorithm keeps Hermes' trajectory_compressor idea and fixes its
// faults: protected turns (first system, human, gpt and tool turns, and the
// last N) are found explicitly; the region starts after the protected head
// and grows until it covers the overage plus the summary's own cost; a
// region never separates a gpt turn from the tool turn answering it; when one
// pass leaves the row over budget it widens or takes the next region
// (bounded), the last pass taking every unprotected turn of its run so a row
// whose protected turns plus one summary fit ends within budget; head
// protections can be turned off one by one; token counts include a per-turn template overhead; a summary
// cut at max_tokens, a timeout or a 5xx storm leaves the original row intact
// with outcome summary_failed, never a placeholder.
//
// Records are carried as their input line (schemas.Record.Raw) and edited in
// place, so every field keeps its bytes and its order; rows under budget are
// written byte-identical. Every written string is valid UTF-8 (JSONL and
// Parquet agree byte for byte), so a row that is not is rejected, naming the
// field, rather than rewritten with U+FFFD.
//
// The package must not import cmd.
package compress
