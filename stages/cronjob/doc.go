// Package cronjob runs cron agent jobs through the rollout stage, so cron
// mode has no agent loop of its own. It adapts pipeline/cron's AgentRunner
// contract (narrowed toolsets, inactivity timeout, wall-clock cap) to one
// rollout in a sandbox session.
//
// It must not import cmd.
package cronjob
