// Package preflight checks, before the first LLM call, that every container
// image a batch needs is usable: distinct images are inspected once, missing
// ones pulled with bounded concurrency, platforms compared with the daemon's.
// Check is the plain function the generate source calls once per run; Stage
// is the same check as a pipeline stage that marks rows whose image is
// unavailable as sandbox_error ("image unavailable: ..."), so they cost no
// token and --resume retries them.
//
// It imports pipeline (the Stage interfaces), schemas and sandbox drivers; it
// must not import cmd or other stages.
package preflight
