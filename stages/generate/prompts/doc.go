// Package prompts reads a generate prompts file (JSONL) as a stream of work
// records, one per (row, sample), and turns every bad line into a reject that
// names the file, line and field. It is the Source of `hermes-pipe generate`.
//
// It must not import stages or cmd.
package prompts
