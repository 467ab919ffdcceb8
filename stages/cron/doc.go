// Package cron is hermes-pipe's scheduler: a jobs.json store that keeps
// Hermes' job fields, a schedule grammar with exact DST rules, a tick that
// claims each due occurrence exactly once, a daemon that sleeps until the next
// due instant, an SQLite execution ledger, guards against prompt injection and
// scheduler self-sabotage, script jobs and output delivery.
//
// Agent jobs are run through the AgentRunner interface; RolloutRunner is the
// implementation backed by the rollout stage (tests use a fake), so cron has
// no agent loop of its own. This package must not import anything under cmd.
package cron
