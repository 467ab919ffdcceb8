// Package report turns an output folder into figures people look at: the
// per-record Summary (the one decoding of a record's outcome, turns, tokens,
// tools and cost that `report` and `view` share), and the self-contained HTML
// report `hermes-pipe report` and `swe` write (inline CSS and SVG, no
// external URL). Its totals are cluster.StatsAll's, the same figures
// `stats --json` prints.
//
// It imports pipeline, pipeline/cluster, pipeline/outdir and schemas, never
// stages or cmd: a mode's own files and record members are shown by the
// mode's Section (stages/compress, stages/swe), which the callers that know
// the modes pass in.
package report
