// Package report turns an output folder into figures people look at: the
// per-record Summary (the one decoding of a record's outcome, turns, tokens,
// tools, cost, compress and swe fields that `report` and `view` share), and
// the self-contained HTML report `hermes-pipe report` and `swe` write (inline
// CSS and SVG, no external URL). Its totals are cluster.StatsAll's, the same
// figures `stats --json` prints.
//
// It imports pipeline, pipeline/cluster, pipeline/outdir and schemas, never
// stages or cmd: mode files it shows (swe's report.json, compress's
// compression_metrics.json) are read as JSON by their documented names.
package report
