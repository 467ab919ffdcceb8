// Package hermespipe_test holds the layering tests: they read the module's
// import graph with `go list` and fail when a package imports what
// ARCHITECTURE.md's Layout table does not let it import (its "may import (of
// ours)" column, layers_table_test.go), or what a folder rule below forbids
// (its "Import rules" section), so the map stays true without anyone
// remembering it.
package hermespipe_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

// layerRule says what the packages of one top-level folder (and its
// sub-packages) must not import, directly or through other packages of the
// module. Paths are relative to the module root; "" names the whole module.
type layerRule struct {
	layer  string   // folder the rule applies to, e.g. "pipeline"
	forbid []string // folders it must not import; "" is every package of the module
	allow  []string // folders exempt from forbid (used by the "nothing internal" rule)
}

// layerRules is the "must not import" column of the layout table.
var layerRules = []layerRule{
	{layer: "schemas", forbid: []string{""}, allow: []string{"schemas"}},
	{layer: "sandbox", forbid: []string{"pipeline", "stages", "cmd"}},
	{layer: "pipeline", forbid: []string{"stages", "cmd"}},
	{layer: "stages", forbid: []string{"cmd"}},
}

// topLevel is the fixed top level: the only folders whose packages hold Go
// code (the viewer lives in cmd/hermes-pipe/internal/view, the model client
// in stages/llm).
var topLevel = []string{"cmd", "pipeline", "stages", "sandbox", "schemas", "datasets", "scripts", "examples"}

// layerException lets one package import one forbidden package. Each entry
// needs a reason, and an entry that no longer matches anything fails the test
// so the list cannot go stale.
type layerException struct {
	from, to string // module-relative import paths
	testOnly bool   // the import is made by the package's tests only
	reason   string
}

// layerExceptions lists the imports the rules allow against their letter.
var layerExceptions = []layerException{
	{
		from: "pipeline/cluster", to: "stages/generate/prompts", testOnly: true,
		reason: "the merge tests build real sharded generate runs and pass the prompts source's " +
			"key lister as MergeOptions.InputKeys, as cmd does; copying the key rule into the " +
			"test would let the two drift apart. The production package takes the lister from " +
			"its caller and imports nothing from stages.",
	},
}

// pkgImports is what the checker needs to know about one package.
type pkgImports struct {
	Imports     []string // imports of the package's non-test files
	TestImports []string // imports of its _test.go files (in-package and external)
}

// layerViolation is one forbidden import, with the chain that leads to it.
type layerViolation struct {
	from, to string
	testOnly bool
	chain    []string // from … to, module-relative
}

func (v layerViolation) String() string {
	kind := "imports"
	if v.testOnly {
		kind = "imports in its tests"
	}
	return fmt.Sprintf("%s %s %s: %s", v.from, kind, v.to, strings.Join(v.chain, " -> "))
}

// inFolder reports whether the module-relative path rel is folder or one of
// its sub-packages; the folder "" holds every package of the module.
func inFolder(rel, folder string) bool {
	return folder == "" || rel == folder || strings.HasPrefix(rel, folder+"/")
}

// forbidden reports whether a package of rule's layer may not import rel.
func (r layerRule) forbidden(rel string) bool {
	for _, a := range r.allow {
		if inFolder(rel, a) {
			return false
		}
	}
	for _, f := range r.forbid {
		if inFolder(rel, f) {
			return true
		}
	}
	return false
}

// checkLayers walks the import graph of the module's packages (keyed by
// module-relative path; packages outside the module are absent from pkgs and
// ignored) and returns every forbidden import it reaches, sorted. A walk stops
// at the first forbidden package on each path, so one bad import is reported
// once rather than once per package behind it.
func checkLayers(pkgs map[string]pkgImports, rules []layerRule) []layerViolation {
	var out []layerViolation
	names := make([]string, 0, len(pkgs))
	for name := range pkgs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, rule := range rules {
			if !inFolder(name, rule.layer) {
				continue
			}
			p := pkgs[name]
			out = append(out, walkForbidden(pkgs, rule, name, p.Imports, false)...)
			out = append(out, walkForbidden(pkgs, rule, name, p.TestImports, true)...)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// walkForbidden runs a breadth-first search from the direct imports roots of
// package from, so each reported chain is a shortest one.
func walkForbidden(pkgs map[string]pkgImports, rule layerRule, from string, roots []string, testOnly bool) []layerViolation {
	var out []layerViolation
	parent := map[string]string{from: ""}
	var queue []string
	for _, r := range roots {
		if _, ok := pkgs[r]; !ok {
			continue
		}
		if _, seen := parent[r]; seen {
			continue
		}
		parent[r] = from
		queue = append(queue, r)
	}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if rule.forbidden(cur) {
			var chain []string
			for n := cur; n != ""; n = parent[n] {
				chain = append([]string{n}, chain...)
			}
			out = append(out, layerViolation{from: from, to: cur, testOnly: testOnly, chain: chain})
			continue
		}
		for _, next := range pkgs[cur].Imports {
			if _, ok := pkgs[next]; !ok {
				continue
			}
			if _, seen := parent[next]; seen {
				continue
			}
			parent[next] = cur
			queue = append(queue, next)
		}
	}
	return out
}

// applyExceptions removes the violations an exception covers and returns the
// rest, plus the exceptions that matched nothing.
func applyExceptions(vs []layerViolation, exc []layerException) (left []layerViolation, unused []layerException) {
	used := make([]bool, len(exc))
	for _, v := range vs {
		covered := false
		for i, e := range exc {
			if e.from == v.from && e.to == v.to && e.testOnly == v.testOnly {
				used[i], covered = true, true
			}
		}
		if !covered {
			left = append(left, v)
		}
	}
	for i, e := range exc {
		if !used[i] {
			unused = append(unused, e)
		}
	}
	return left, unused
}

// listedPackage is the part of `go list -json` output the test reads.
type listedPackage struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Error        *struct{ Err string }
}

// listed caches the module's packages, so TestLayers and TestLayoutTable
// share one `go list` run.
var listed struct {
	once sync.Once
	pkgs map[string]pkgImports
	err  error
}

// modulePackages runs `go list` over the module (once per test binary) and
// returns its packages keyed by module-relative path, with imports outside
// the module dropped.
func modulePackages(t *testing.T) map[string]pkgImports {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("the layering tests need the go command on PATH: %v", err)
	}
	listed.once.Do(func() { listed.pkgs, listed.err = listModule() })
	if listed.err != nil {
		t.Fatal(listed.err)
	}
	return listed.pkgs
}

// listModule is modulePackages' one `go list` run.
func listModule() (map[string]pkgImports, error) {
	modOut, err := exec.Command("go", "list", "-m").Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m: %w", exitDetail(err))
	}
	module := strings.TrimSpace(string(modOut))
	// ./... names every package of the module, so the graph below is whole
	// without -deps (which would add the standard library's packages).
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports,Error", "./...")
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list ./...: %w", exitDetail(err))
	}
	rel := func(path string) (string, bool) {
		if path == module {
			return "", true
		}
		r, ok := strings.CutPrefix(path, module+"/")
		return r, ok
	}
	pkgs := map[string]pkgImports{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decode go list output: %w", err)
		}
		name, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list %s: %s", p.ImportPath, p.Error.Err)
		}
		var info pkgImports
		for _, imp := range p.Imports {
			if r, ok := rel(imp); ok {
				info.Imports = append(info.Imports, r)
			}
		}
		for _, imp := range append(p.TestImports, p.XTestImports...) {
			if r, ok := rel(imp); ok && r != name {
				info.TestImports = append(info.TestImports, r)
			}
		}
		pkgs[name] = info
	}
	return pkgs, nil
}

// exitDetail adds the command's standard error to an exec error.
func exitDetail(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
	}
	return err
}

// TestLayers fails when a package of the module imports, directly or through
// other packages, what the layout table forbids its folder to import.
func TestLayers(t *testing.T) {
	pkgs := modulePackages(t)
	for _, layer := range []string{"schemas", "sandbox", "pipeline", "stages", "cmd"} {
		found := false
		for name := range pkgs {
			found = found || inFolder(name, layer)
		}
		if !found {
			t.Errorf("go list found no package under %s/: the test would check nothing there", layer)
		}
	}
	for name := range pkgs {
		if name == "" {
			continue // the module root: only these tests
		}
		top, _, _ := strings.Cut(name, "/")
		if !slices.Contains(topLevel, top) {
			t.Errorf("package %s is in a top-level folder the layout does not have (%s): move it under one of them", name, strings.Join(topLevel, ", "))
		}
	}
	left, unused := applyExceptions(checkLayers(pkgs, layerRules), layerExceptions)
	for _, v := range left {
		t.Errorf("layering: %s", v)
	}
	for _, e := range unused {
		t.Errorf("layering exception %s -> %s (tests only: %v) matches no import any more: remove it", e.from, e.to, e.testOnly)
	}
}
