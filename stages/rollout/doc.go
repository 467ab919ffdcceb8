// Package rollout is the agent-loop stage: for one record it opens a sandbox
// session, lets an OpenAI-compatible model call the terminal and file tools in
// it until the model answers without a tool call (or a limit ends the
// rollout), and fills the record with the ShareGPT trajectory, the outcome and
// per-tool statistics. Generate, cron agent jobs and SWE runs all use it.
//
// The file tools (read_file, write_file, patch) move bytes through the
// session's native file operations (sandbox.Files), never through a shell
// command line: read_file scans forward only as far as its page and asks the
// sandbox for the line count of the rest. A file error (missing, permission,
// a folder) is a tool error the model sees and tool_stats counts; only a
// driver failure ends the rollout as sandbox_error. search_files runs
// find and grep through the terminal, where the file contents stay.
//
// When the agent has ended (completed, max_turns, partial, budget_exceeded:
// see graded) and before its session closes, the run's grader (stages/grade)
// judges the rollout: the row's verify command in the same session, or the
// final answer against the row's answer; the record gets reward and grade.
//
// It must not import cmd.
package rollout
