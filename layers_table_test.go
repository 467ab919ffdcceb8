package hermespipe_test

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The Layout table of ARCHITECTURE.md is the one source of truth for which
// package of the module may import which. TestLayoutTable reads it and holds
// every package's direct imports of the module to its row. How a row reads:
//
//   - The "package" cell names one or more packages in backquotes, each a
//     module-relative path; "." is the module root. Every package go list
//     finds must be named by exactly one row, and every name must exist.
//   - The "may import (of ours)" cell lists what the row's packages' non-test
//     files may import, each in backquotes: `x` allows the package x only,
//     `x/*` every package below x (not x itself). Text in parentheses is a
//     comment and is skipped; other text outside backquotes is ignored.
//   - A cell without backquoted items reads "everything" (any package of the
//     module) or starts with "nothing" ("nothing of ours", "nothing above
//     it": no package of the module).
//   - After "tests also", the items the row's _test.go files may import in
//     addition (test helpers, fakes, drivers); tests may import everything
//     the row allows its other files. A test import covered by a test-only
//     layerException (layers_test.go) is allowed too.
//   - Every listed item is needed: an item no package of the row imports (in
//     non-test files for the first list, in tests for the "tests also" list)
//     fails, so the table says what is, not what once was.

// layoutRow is one row of the Layout table.
type layoutRow struct {
	line     int      // 1-based line in ARCHITECTURE.md
	text     string   // the "may import (of ours)" cell as written
	pkgs     []string // module-relative; "" is the module root
	all      bool     // "everything"
	allow    []string // what non-test files may import: paths or "x/*"
	testOnly []string // what test files may import in addition
}

func (r layoutRow) String() string {
	names := make([]string, len(r.pkgs))
	for i, p := range r.pkgs {
		names[i] = "`" + displayPkg(p) + "`"
	}
	return fmt.Sprintf("ARCHITECTURE.md:%d (%s | %s)", r.line, strings.Join(names, ", "), r.text)
}

func displayPkg(p string) string {
	if p == "" {
		return "."
	}
	return p
}

var (
	backquoted = regexp.MustCompile("`([^`]*)`")
	pkgItem    = regexp.MustCompile(`^(\.|[a-z0-9_.-]+(/[a-z0-9_.-]+)*(/\*)?)$`)
)

// parseLayoutTable reads the first table under the "## Layout" heading of
// markdown and returns its rows keyed by package.
func parseLayoutTable(markdown string) (map[string]*layoutRow, error) {
	lines := strings.Split(markdown, "\n")
	i := 0
	for i < len(lines) && strings.TrimSpace(lines[i]) != "## Layout" {
		i++
	}
	if i == len(lines) {
		return nil, fmt.Errorf(`no "## Layout" heading`)
	}
	for i < len(lines) && !strings.HasPrefix(lines[i], "|") {
		i++
	}
	if i+1 >= len(lines) {
		return nil, fmt.Errorf("no table under the Layout heading")
	}
	header := splitRow(lines[i])
	pkgCol, allowCol := -1, -1
	for c, h := range header {
		switch strings.TrimSpace(h) {
		case "package":
			pkgCol = c
		case "may import (of ours)":
			allowCol = c
		}
	}
	if pkgCol < 0 || allowCol < 0 {
		return nil, fmt.Errorf(`line %d: the Layout table needs columns "package" and "may import (of ours)", has %q`, i+1, header)
	}
	rows := map[string]*layoutRow{}
	for i += 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
		cells := splitRow(lines[i])
		if len(cells) != len(header) {
			return nil, fmt.Errorf("line %d: %d cells, the header has %d (a | inside a cell?)", i+1, len(cells), len(header))
		}
		row, err := parseRow(i+1, cells[pkgCol], cells[allowCol])
		if err != nil {
			return nil, err
		}
		for _, p := range row.pkgs {
			if prev, dup := rows[p]; dup {
				return nil, fmt.Errorf("line %d: `%s` already has a row (line %d)", i+1, displayPkg(p), prev.line)
			}
			rows[p] = row
		}
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("the Layout table has no rows")
	}
	return rows, nil
}

// splitRow splits "| a | b |" into its cells.
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	return strings.Split(line, "|")
}

func parseRow(line int, pkgCell, allowCell string) (*layoutRow, error) {
	row := &layoutRow{line: line, text: strings.TrimSpace(allowCell)}
	for _, m := range backquoted.FindAllStringSubmatch(pkgCell, -1) {
		if !pkgItem.MatchString(m[1]) || strings.HasSuffix(m[1], "/*") {
			return nil, fmt.Errorf("line %d: package cell: %q is not a package path", line, m[1])
		}
		p := m[1]
		if p == "." {
			p = ""
		}
		row.pkgs = append(row.pkgs, p)
	}
	if len(row.pkgs) == 0 {
		return nil, fmt.Errorf("line %d: the package cell %q names no package in backquotes", line, strings.TrimSpace(pkgCell))
	}
	cell := stripParens(allowCell)
	prod, tests, _ := strings.Cut(cell, "tests also")
	items := func(part string) ([]string, error) {
		var out []string
		for _, m := range backquoted.FindAllStringSubmatch(part, -1) {
			if !pkgItem.MatchString(m[1]) || m[1] == "." {
				return nil, fmt.Errorf("line %d: may-import cell: %q is not a package path or `folder/*`", line, m[1])
			}
			out = append(out, m[1])
		}
		return out, nil
	}
	var err error
	if row.allow, err = items(prod); err != nil {
		return nil, err
	}
	if row.testOnly, err = items(tests); err != nil {
		return nil, err
	}
	if len(row.allow) == 0 {
		word := strings.ToLower(strings.Trim(strings.TrimSpace(prod), ";,. "))
		switch {
		case word == "everything":
			row.all = true
		case strings.HasPrefix(word, "nothing"):
		default:
			return nil, fmt.Errorf("line %d: may-import cell %q: list packages in backquotes, or say everything or nothing", line, row.text)
		}
	}
	return row, nil
}

// stripParens drops text in (possibly nested) parentheses.
func stripParens(s string) string {
	var b strings.Builder
	depth := 0
	for _, r := range s {
		switch {
		case r == '(':
			depth++
		case r == ')' && depth > 0:
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// allows reports whether item (a path or "x/*") admits the package imp.
func allows(item, imp string) bool {
	if folder, ok := strings.CutSuffix(item, "/*"); ok {
		return strings.HasPrefix(imp, folder+"/")
	}
	return item == imp
}

func allowedBy(items []string, imp string) bool {
	for _, it := range items {
		if allows(it, imp) {
			return true
		}
	}
	return false
}

// checkLayoutTable holds every package's direct imports to its row and
// returns the problems found, sorted: an import the row does not allow, a
// package without a row, a row naming no package go list finds, an item no
// import needs.
func checkLayoutTable(pkgs map[string]pkgImports, rows map[string]*layoutRow, exc []layerException) []string {
	var out []string
	testExc := func(from, to string) bool {
		for _, e := range exc {
			if e.testOnly && e.from == from && e.to == to {
				return true
			}
		}
		return false
	}
	usedProd := map[*layoutRow]map[string]bool{}
	usedTest := map[*layoutRow]map[string]bool{}
	mark := func(m map[*layoutRow]map[string]bool, row *layoutRow, items []string, imp string) {
		for _, it := range items {
			if allows(it, imp) {
				if m[row] == nil {
					m[row] = map[string]bool{}
				}
				m[row][it] = true
			}
		}
	}
	names := make([]string, 0, len(pkgs))
	for name := range pkgs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		row := rows[name]
		if row == nil {
			out = append(out, fmt.Sprintf("package `%s` has no row in ARCHITECTURE.md's Layout table: add one (package | owns | may import (of ours))", displayPkg(name)))
			continue
		}
		p := pkgs[name]
		for _, imp := range p.Imports {
			mark(usedProd, row, row.allow, imp)
			if !row.all && !allowedBy(row.allow, imp) {
				out = append(out, fmt.Sprintf("%s imports %s, which its row does not allow: %s", displayPkg(name), imp, row))
			}
		}
		for _, imp := range p.TestImports {
			mark(usedTest, row, row.testOnly, imp)
			if !row.all && !allowedBy(row.allow, imp) && !allowedBy(row.testOnly, imp) && !testExc(name, imp) {
				out = append(out, fmt.Sprintf("%s imports %s in its tests, which its row does not allow (add it after \"tests also\" if only tests need it): %s", displayPkg(name), imp, row))
			}
		}
	}
	seen := map[*layoutRow]bool{}
	var ordered []*layoutRow
	for _, row := range rows {
		if !seen[row] {
			seen[row] = true
			ordered = append(ordered, row)
		}
	}
	sort.Slice(ordered, func(i, j int) bool { return ordered[i].line < ordered[j].line })
	for _, row := range ordered {
		for _, p := range row.pkgs {
			if _, ok := pkgs[p]; !ok {
				out = append(out, fmt.Sprintf("`%s` is not a package go list finds (moved or removed?): %s", displayPkg(p), row))
			}
		}
		for _, it := range row.allow {
			if !usedProd[row][it] {
				out = append(out, fmt.Sprintf("`%s` is allowed but no non-test file of the row's packages imports it: %s", it, row))
			}
		}
		for _, it := range row.testOnly {
			if !usedTest[row][it] {
				out = append(out, fmt.Sprintf("`%s` is allowed to tests but no test of the row's packages imports it: %s", it, row))
			}
		}
	}
	sort.Strings(out)
	return out
}

func readLayoutTable(t *testing.T) (string, map[string]*layoutRow) {
	t.Helper()
	b, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := parseLayoutTable(string(b))
	if err != nil {
		t.Fatalf("ARCHITECTURE.md: %v", err)
	}
	return string(b), rows
}

// TestLayoutTable fails when a package's direct imports of the module (tests
// included) differ from what its row of ARCHITECTURE.md's Layout table says.
func TestLayoutTable(t *testing.T) {
	pkgs := modulePackages(t)
	_, rows := readLayoutTable(t)
	for _, p := range checkLayoutTable(pkgs, rows, layerExceptions) {
		t.Error(p)
	}
}

// TestLayoutTableEveryItemCounts drops each item of each row of the real
// table in turn and checks that the tree then fails: no entry is decoration.
func TestLayoutTableEveryItemCounts(t *testing.T) {
	pkgs := modulePackages(t)
	text, rows := readLayoutTable(t)
	lines := strings.Split(text, "\n")
	rowLines := map[int]bool{}
	for _, r := range rows {
		rowLines[r.line] = true
	}
	checked := 0
	for n := range rowLines {
		cells := splitRow(lines[n-1])
		last := cells[len(cells)-1]
		// Remove each backquoted item of the cell, outside parentheses.
		for _, item := range backquoted.FindAllString(stripParens(last), -1) {
			mutated := append([]string(nil), lines...)
			cut := append(cells[:len(cells)-1:len(cells)-1], strings.Replace(last, item, "", 1))
			mutated[n-1] = "|" + strings.Join(cut, "|") + "|"
			checked++
			rows, err := parseLayoutTable(strings.Join(mutated, "\n"))
			if err != nil {
				continue // a cell left without items reads as an error: that fails too
			}
			if len(checkLayoutTable(pkgs, rows, layerExceptions)) == 0 {
				t.Errorf("ARCHITECTURE.md:%d without %s still passes", n, item)
			}
		}
	}
	if checked < 30 {
		t.Errorf("only %d items checked: is the table read?", checked)
	}
}

// TestLayoutTableParser checks the reading rules on a small table, and that
// a changed row, a forbidden import or a missing row fails.
func TestLayoutTableParser(t *testing.T) {
	const doc = "# x\n\n## Layout\n\n" +
		"| package | owns | may import (of ours) |\n" +
		"|---|---|---|\n" +
		"| `cmd/tool` | the CLI | everything |\n" +
		"| `pipeline` | the runtime | `schemas`, `pipeline/*` leaves |\n" +
		"| `pipeline/outdir` | the folder | `schemas` (its `Record`) |\n" +
		"| `sandbox/a`, `sandbox/b` | drivers | `sandbox`; tests also `sandbox/sandboxtest` |\n" +
		"| `sandbox`, `sandbox/sandboxtest`, `schemas` | bottom | nothing of ours |\n" +
		"| `.` | the root | nothing |\n" +
		"\n## Next\n\n| a | b |\n|---|---|\n| `stray` | x |\n"
	rows, err := parseLayoutTable(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 9 || !rows["cmd/tool"].all || rows[""] == nil || rows["stray"] != nil {
		t.Fatalf("rows %v", rows)
	}
	if got := rows["pipeline/outdir"].allow; len(got) != 1 || got[0] != "schemas" {
		t.Fatalf("parenthesised text read as items: %q", got)
	}
	if r := rows["sandbox/b"]; r != rows["sandbox/a"] || len(r.allow) != 1 || len(r.testOnly) != 1 || r.line != 10 {
		t.Fatalf("shared row %+v", r)
	}
	clean := map[string]pkgImports{
		"cmd/tool":            {Imports: []string{"pipeline", "sandbox/a"}},
		"pipeline":            {Imports: []string{"schemas", "pipeline/outdir"}},
		"pipeline/outdir":     {Imports: []string{"schemas"}},
		"sandbox/a":           {Imports: []string{"sandbox"}, TestImports: []string{"sandbox/sandboxtest"}},
		"sandbox/b":           {Imports: []string{"sandbox"}},
		"sandbox":             {},
		"sandbox/sandboxtest": {},
		"schemas":             {},
		"":                    {},
	}
	if p := checkLayoutTable(clean, rows, nil); len(p) != 0 {
		t.Fatalf("clean tree: %q", p)
	}

	clone := func(m map[string]pkgImports) map[string]pkgImports {
		out := map[string]pkgImports{}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	cases := []struct {
		name string
		doc  string
		pkgs map[string]pkgImports
		exc  []layerException
		want []string // substrings of the one problem expected
	}{
		{
			name: "a row loses an import its package makes",
			doc:  strings.Replace(doc, "| `schemas` (its `Record`) |", "| nothing of ours |", 1),
			want: []string{"pipeline/outdir imports schemas, which its row does not allow", "ARCHITECTURE.md:9"},
		},
		{
			name: "a row gains an import nobody makes",
			doc:  strings.Replace(doc, "| `schemas`, `pipeline/*` leaves |", "| `schemas`, `sandbox`, `pipeline/*` leaves |", 1),
			want: []string{"`sandbox` is allowed but no non-test file", "ARCHITECTURE.md:8"},
		},
		{
			name: "a forbidden import is added",
			pkgs: func() map[string]pkgImports {
				m := clone(clean)
				m["sandbox/b"] = pkgImports{Imports: []string{"sandbox", "pipeline"}}
				return m
			}(),
			want: []string{"sandbox/b imports pipeline, which its row does not allow", "ARCHITECTURE.md:10"},
		},
		{
			name: "a production file imports what only tests may",
			pkgs: func() map[string]pkgImports {
				m := clone(clean)
				m["sandbox/b"] = pkgImports{Imports: []string{"sandbox", "sandbox/sandboxtest"}}
				return m
			}(),
			want: []string{"sandbox/b imports sandbox/sandboxtest, which its row does not allow"},
		},
		{
			name: "a test import outside the row",
			pkgs: func() map[string]pkgImports {
				m := clone(clean)
				m["pipeline"] = pkgImports{Imports: []string{"schemas", "pipeline/outdir"}, TestImports: []string{"cmd/tool"}}
				return m
			}(),
			want: []string{"pipeline imports cmd/tool in its tests"},
		},
		{
			name: "a test import covered by a test-only exception",
			pkgs: func() map[string]pkgImports {
				m := clone(clean)
				m["pipeline"] = pkgImports{Imports: []string{"schemas", "pipeline/outdir"}, TestImports: []string{"cmd/tool"}}
				return m
			}(),
			exc: []layerException{{from: "pipeline", to: "cmd/tool", testOnly: true}},
		},
		{
			name: "a package without a row",
			pkgs: func() map[string]pkgImports {
				m := clone(clean)
				m["stages/new"] = pkgImports{}
				return m
			}(),
			want: []string{"package `stages/new` has no row"},
		},
		{
			name: "a row naming a package that is gone",
			pkgs: func() map[string]pkgImports {
				m := clone(clean)
				delete(m, "sandbox/b")
				return m
			}(),
			want: []string{"`sandbox/b` is not a package go list finds"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, pk := doc, clean
			if tc.doc != "" {
				d = tc.doc
			}
			if tc.pkgs != nil {
				pk = tc.pkgs
			}
			rows, err := parseLayoutTable(d)
			if err != nil {
				t.Fatal(err)
			}
			got := checkLayoutTable(pk, rows, tc.exc)
			if len(tc.want) == 0 {
				if len(got) != 0 {
					t.Fatalf("problems %q, want none", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("problems %q, want one", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got[0], w) {
					t.Errorf("problem %q lacks %q", got[0], w)
				}
			}
		})
	}

	for _, bad := range []string{
		strings.Replace(doc, "| everything |", "| whatever it needs |", 1),
		strings.Replace(doc, "| `.` | the root |", "| the root | the root |", 1),
		strings.Replace(doc, "`schemas` (its `Record`)", "`schemas` its `Record`", 1),
		strings.Replace(doc, "| `sandbox/a`, `sandbox/b` |", "| `sandbox/a`, `sandbox` |", 1),
		strings.Replace(doc, "## Layout", "## Map", 1),
	} {
		if _, err := parseLayoutTable(bad); err == nil {
			t.Errorf("no parse error for\n%s", bad)
		}
	}
}
