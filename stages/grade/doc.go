// Package grade computes a rollout's reward: it runs a row's verify command
// in the rollout's own sandbox session (the cmd grader), compares the model's
// final answer with the row's expected answer (exact, contains, regex,
// number), or hands the record to an executable on the host (exec). A Grader
// is one run's choice (--grader, --grader-timeout, --grader-exec); Grade
// judges one Subject and returns a schemas.Grade, whose Value the caller
// copies to the record's Reward. A grader that cannot give a verdict (it
// crashed, timed out, printed nothing usable, the session failed) returns
// Passed and Value nil with Error set: never a silent 0.
//
// The rollout stage calls it after the agent's turns and before the session
// closes; regrade calls it on stored records. It imports sandbox and schemas
// only, and must not import pipeline, other stages or cmd.
package grade
