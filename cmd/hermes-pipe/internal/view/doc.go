// Package view is `hermes-pipe view`: a local, read-only web UI over an output
// folder (one folder or the shards of a sharded run). It reads the folder's
// ledgers once, streamed, into a plan (which rows are live records, and
// where each ledger line is), then every live record once, in ledger order,
// to build its index in the background; records are read again one at a
// time through pipeline.RecordReader (a text search reads the lines of
// JSONL shards by the index's offsets through one window). It summarises
// records with report.Summarize and a mode's own members through the mode
// (compress.ShownOf), so it decodes nothing of its own; swe's report is read
// through stages/swe (LoadReport). The index is a columnar file in a cache
// folder (by default under the user cache dir), never in the output folder,
// mapped into memory rather than read: opening a million-record index costs
// its header. Until it is built, the server answers from the folder through
// the plan: every query is written once over a recordSet, which the index
// or the plan serves (records.go). All assets are embedded; the pages load
// nothing from elsewhere.
//
// For a compressed record it also reads the record's original row again,
// from the inputs compress listed (compress.ReadInputs, or --original as
// compress.FindInputs finds them): an output folder through the same two
// readers, a JSONL file (plain, gzip or zstd) line by line. It never writes
// into those inputs either.
//
// It imports pipeline, pipeline/report, pipeline/outdir, stages/compress and
// stages/swe; only cmd/hermes-pipe imports it (internal: no API).
package view
