package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestGenerateFlagsHaveCategories: every generate flag is in a help group,
// every name the groups list is a generate flag, and `generate --help`
// prints each group as a heading with its flags under it.
func TestGenerateFlagsHaveCategories(t *testing.T) {
	cmd := generateCommand()
	declared := map[string]string{}
	for _, f := range cmd.Flags {
		c, ok := f.(cli.CategorizableFlag)
		name := f.Names()[0]
		if !ok || c.GetCategory() == "" {
			t.Errorf("generate flag --%s is in no help category", name)
			continue
		}
		declared[name] = c.GetCategory()
	}
	if len(declared) < 60 {
		t.Fatalf("only %d generate flags found", len(declared))
	}
	for _, g := range generateGroups {
		for _, n := range g.flags {
			if got, ok := declared[n]; !ok {
				t.Errorf("group %s lists --%s, which generate does not declare", g.name, n)
			} else if got != g.name {
				t.Errorf("--%s is in %q, its group says %q", n, got, g.name)
			}
		}
	}

	code, help, errs := hp(t, "generate", "--help")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	// The group headings, each followed by the flags it holds: the text
	// from one heading to the next names exactly that group's flags.
	heading := regexp.MustCompile(`(?m)^   ([A-Z][a-z]+(?: [a-z]+)?)\n\n`)
	locs := heading.FindAllStringSubmatchIndex(help, -1)
	seen := map[string]bool{}
	for i, l := range locs {
		group := help[l[2]:l[3]]
		end := len(help)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		block := help[l[1]:end]
		seen[group] = true
		for name, cat := range declared {
			in := regexp.MustCompile(`(?m)^\s+--` + regexp.QuoteMeta(name) + `(?:[ ,]|$)`).MatchString(block)
			if in != (cat == group) {
				t.Errorf("--%s (group %s) listed under %s: %v", name, cat, group, in)
			}
		}
	}
	for _, cat := range declared {
		if !seen[cat] {
			t.Errorf("generate --help has no heading %q:\n%s", cat, help)
		}
	}
	if !strings.Contains(help, "Sandbox") || len(seen) < 7 {
		t.Errorf("headings %v", seen)
	}
}
