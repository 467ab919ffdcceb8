// Package sandbox defines the Environment a rollout's tool calls run in and the
// registry of drivers (local, docker, ssh, fake) chosen by scheme. Drivers are
// registered explicitly by cmd (no init magic); callers open a Session per
// rollout and run shell commands through it.
//
// It must not import pipeline or stages.
package sandbox
