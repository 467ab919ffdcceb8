// Package outdir owns the on-disk format of an output folder: the names of
// its files, the ledger line (its type, encoding, parsing, the one rule for
// a live record, Line.Record, and the one rule for a torn last line,
// TornEnd), the manifest run.json, the append-only journal
// every mode's side files use, and the outcome sets each mode declares.
//
// The runtime (package pipeline), sharded runs (pipeline/cluster), object
// storage (pipeline/objstore) and the compress journals read and write the
// folder through this package only, so the format is spelled out once.
//
// It is a leaf: it imports schemas and pipeline/atomicfile, never package
// pipeline itself, stages or cmd.
package outdir
