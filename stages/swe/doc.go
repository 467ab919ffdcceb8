// Package swe is `hermes-pipe swe`: SWE-bench-style evaluation runs composed
// on the pipeline runtime. It parses task files (SWE-bench instances or the
// simple Hermes form), runs the rollout stage's agent loop in each task's
// image until the agent prints the MINI_SWE_AGENT_FINAL_OUTPUT sentinel as
// the first line of a successful command, takes the agent's patch with git,
// grades it in a fresh session of the same image (apply the patch and the
// task's test patch, run the tests with a timeout, read per-test results),
// and writes the trajectories through the runtime plus report.json,
// junit.xml and preds.json, rebuilt from the whole output folder at the end
// of every run. Gate turns a report into the CI verdict. The readers of
// report.json (report.html's SWE block, ReportSection; the viewer) read it
// through this package too (section.go), so its shape and the baseline rule
// live here once.
//
// Every task ends with one outcome: resolved, unresolved or empty_patch
// (final: the model's result), or a retryable infrastructure outcome
// (sandbox_error, api_error, internal_error), which the report counts as
// "error" and `--resume` runs again. It holds no worker pool, retry loop or
// writer of its own.
//
// It imports pipeline, stages/rollout, stages/preflight, sandbox and
// schemas; it must not import cmd or a sandbox driver.
package swe
