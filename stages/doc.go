// Package stages is the home of the per-record stages every mode composes:
// rollout (the agent loop), preflight (container images), tokenizer and
// compress, and SWE grading, one sub-package each. Stages implement
// pipeline.Stage and must not import cmd.
package stages
