package main

import (
	"fmt"
	"reflect"

	"github.com/urfave/cli/v2"
)

// flagGroup is a help category and the flags listed under it.
type flagGroup struct {
	name  string
	flags []string
}

// generateGroups names the group each generate flag is listed under in
// `generate --help` (urfave/cli's flag categories, printed in name order);
// the sandbox flags are all "Sandbox" (inCategory in generateCommand).
// TestGenerateFlagsHaveCategories fails for a flag in none.
var generateGroups = []flagGroup{
	{"Input", []string{"prompts", "max-line-bytes", "system-prompt"}},
	{"Model", []string{"base-url", "model", "api-key-env", "request-timeout", "max-retries", "stream", "max-concurrent-requests"}},
	{"Sampling", []string{"temperature", "top-p", "sampling-seed", "extra-body", "max-tokens", "samples", "logprobs", "logprob-token-ids"}},
	{"Agent", []string{"max-turns", "timeout", "toolsets", "distribution", "distribution-file", "seed", "mcp-config", "skills-dir"}},
	{"Grading", []string{"grader", "grader-timeout", "grader-exec", "grader-tolerance"}},
	{"Cost", []string{"prices", "price-in", "price-out", "max-cost", "max-cost-per-rollout", "max-tokens-per-rollout"}},
	{"Output", []string{"out", "format", "shard-rows", "commit-interval", "shard", "shard-count", "spool", "upload-interval", "batch-size", "keep-workspace", "keep-workspace-max"}},
	{"Run control", []string{"workers", "resume", "overwrite", "allow-change", "redo-changed", "prune", "verify-shards", "progress", "grace"}},
}

// inCategory sets the help category of each of flags and returns them.
func inCategory(name string, flags ...cli.Flag) []cli.Flag {
	for _, f := range flags {
		setCategory(f, name)
	}
	return flags
}

// setCategory sets the Category field every flag type of urfave/cli has; a
// flag type without one is a programming error, found by the help test.
func setCategory(f cli.Flag, name string) {
	v := reflect.ValueOf(f)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	field := v.FieldByName("Category")
	if !field.IsValid() || field.Kind() != reflect.String || !field.CanSet() {
		panic(fmt.Sprintf("flag %v has no Category field", f.Names()))
	}
	field.SetString(name)
}

// groupFlags puts each of flags not yet in a category into the one groups
// names it in, and returns flags.
func groupFlags(flags []cli.Flag, groups []flagGroup) []cli.Flag {
	of := map[string]string{}
	for _, g := range groups {
		for _, n := range g.flags {
			of[n] = g.name
		}
	}
	for _, f := range flags {
		if c, ok := f.(cli.CategorizableFlag); ok && c.GetCategory() != "" {
			continue
		}
		if name, ok := of[f.Names()[0]]; ok {
			setCategory(f, name)
		}
	}
	return flags
}
