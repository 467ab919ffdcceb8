// Package pipeline is the runtime every mode of hermes-pipe runs on: Run pulls
// records from a Source, passes each through the Stages in a bounded worker
// pool, and hands finished records to the output folder (Output), which
// commits shards atomically and records every terminal outcome in a resume
// ledger. It also owns progress reporting, run statistics, Cat, Stats and
// Verify.
//
// An output folder holds run.json (the manifest), data/shard-NNNNN.jsonl
// (records with a final outcome), failed/shard-NNNNN.jsonl (records with a
// retryable outcome), ledger.jsonl (one fsynced line per committed shard
// listing its keys and outcomes; the latest line for a key wins),
// rejects.jsonl (bad input rows of the latest run) and statistics.json.
// A shard is written to a temp file, fsynced, renamed into place and the
// folder fsynced before its ledger line is appended, so a kill at any moment
// followed by a resume leaves exactly one live record per key: OpenOutput
// removes temp files, truncates a torn ledger line and adopts a shard that
// was renamed but not journalled.
//
// It must not import package stages or anything under cmd: stages plug in
// through the Stage interface.
package pipeline
