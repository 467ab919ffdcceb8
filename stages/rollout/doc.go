// Package rollout is the agent-loop stage: for one record it opens a sandbox
// session, lets an OpenAI-compatible model call the terminal and file tools in
// it until the model answers without a tool call (or a limit ends the
// rollout), and fills the record with the ShareGPT trajectory, the outcome and
// per-tool statistics. Generate, cron agent jobs and SWE runs all use it.
//
// It must not import cmd.
package rollout
