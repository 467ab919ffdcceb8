// Package objstore keeps output folders on object storage (s3:// and file://
// URLs through gocloud.dev/blob), where there is no append and no rename.
//
// A run writes to a local spool folder, an ordinary output folder; Push
// uploads what it has committed: every shard file the ledger names, whole,
// under its own name; the new ledger lines as the next numbered, immutable
// segment object (ledger/000001.jsonl, …); then the commit marker
// ledger/commit.json that lists the segments; then run.json, rejects.jsonl and
// statistics.json. Readers trust only what the marker lists, and check every
// SHA-256, so a crash at any point leaves nothing half-written that a reader
// believes: objects an interrupted push left behind are unreferenced or are
// overwritten by the next push with identical content. Pull rebuilds the local
// folder (a spool to resume in, or a read cache) from the marker.
//
// It must not import stages or cmd; it does not know about shards.
package objstore
