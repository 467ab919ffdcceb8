package rollout

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sort"
	"strings"
)

// Distribution gives each toolset an independent inclusion probability for a
// rollout (after Hermes' toolset distributions). When the draw includes none,
// the most likely toolset is used so every rollout has at least one tool.
type Distribution map[string]float64

// Distributions are the named distributions --distribution accepts.
var Distributions = map[string]Distribution{
	"default":       {"terminal": 1, "file": 1},
	"terminal_only": {"terminal": 1},
	"file_only":     {"file": 1},
	"balanced":      {"terminal": 0.5, "file": 0.5},
	"development":   {"terminal": 0.9, "file": 0.7},
	"minimal":       {"terminal": 0.3, "file": 0.3},
}

// DistributionNames lists the named distributions, sorted, for --help.
func DistributionNames() []string {
	names := make([]string, 0, len(Distributions))
	for n := range Distributions {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Sample draws the toolsets of one rollout. The draw depends only on seed and
// key, so a resumed or re-run rollout gets the same toolsets.
func (d Distribution) Sample(seed int64, key string) []string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d\x00%s", seed, key)
	rng := rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
	names := make([]string, 0, len(d))
	for n := range d {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []string
	best, bestP := "", -1.0
	for _, n := range names {
		p := d[n]
		if rng.Float64() < p {
			out = append(out, n)
		}
		if p > bestP {
			best, bestP = n, p
		}
	}
	if len(out) == 0 && best != "" {
		out = []string{best}
	}
	return out
}

// ParseToolsets splits and validates a comma-separated --toolsets value.
func ParseToolsets(s string, known []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" || seen[part] {
			continue
		}
		ok := false
		for _, k := range known {
			ok = ok || k == part
		}
		if !ok {
			return nil, fmt.Errorf("unknown toolset %q (known: %s)", part, strings.Join(known, ", "))
		}
		seen[part] = true
		out = append(out, part)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no toolset named")
	}
	return out, nil
}
