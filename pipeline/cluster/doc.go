// Package cluster splits one run across machines and puts it back together.
//
// A run of N shards writes N ordinary output folders, OUT/shard-I-of-N, one
// per shard index I in [0, N). Every input unit belongs to exactly one shard:
// the one Of(key, N) names, a stable hash of its resume key that never
// changes between releases. A batch scheduler (a Kubernetes Indexed Job, a
// Slurm job array) starts one process per index; a retried index resumes its
// own folder. Prepare refuses a shard whose N differs from the run already in
// OUT.
//
// Merge proves the shards add up to the whole run (every folder verifies, no
// key in a shard that does not own it and so in two shards, and, given the
// input, the union of keys equals the input's keys) and writes OUT/merged.json
// and the merged OUT/statistics.json without copying data. CatAll streams the
// records of all shards in (prompt_index, sample, key) order; Status shows
// per-shard progress of a run in flight.
//
// It reads the ledger of each shard folder through its documented line format
// (pipeline/ledger.go) and never writes inside a shard folder.
//
// It must not import stages or cmd.
package cluster
