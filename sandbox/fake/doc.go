// Package fake is an in-memory sandbox driver for unit tests of the stages
// that run tools (rollout, SWE grading): results are scripted per command,
// every call is recorded, and open sessions are counted so a test can prove
// each was closed. It runs no process. Files live in memory per session;
// relative paths resolve against Spec.Cwd (else /sandbox), and FailFiles
// injects driver failures into file operations.
//
// It imports only sandbox and the standard library; it must not import
// pipeline, stages or another driver.
package fake
