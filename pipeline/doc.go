// Package pipeline is the runtime every mode of hermes-pipe runs on: Run pulls
// records from a Source, passes each through the Stages in a bounded worker
// pool, and hands finished records to the output folder writer, which commits
// shards atomically and records every terminal outcome in a resume ledger.
// It also owns progress reporting, run statistics, `cat`, `stats` and `verify`.
//
// It must not import package stages or anything under cmd: stages plug in
// through the Stage interface.
package pipeline
