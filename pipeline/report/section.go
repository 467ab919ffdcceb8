package report

import (
	"encoding/json"
	"fmt"
	"html/template"
	"strings"
	"time"
)

// A Section is one mode's part of the report: what it shows of the mode's
// own members of the records and of the mode's own files in the run's
// folder, as a block of report.html. The mode's package implements it
// (stages/compress, stages/swe) and owns those names; whoever knows the
// modes passes the sections in (Options.Sections: cmd/hermes-pipe, a mode's
// run), so this package reads no mode's file or member itself.
type Section interface {
	// Tally starts the section's part of one Build.
	Tally() Tally
}

// A Tally is a Section's part of one Build.
type Tally interface {
	// Record is given each record line Build reads, in Build's order.
	Record(line []byte)
	// Block reads the mode's files in the run's folder root, after every
	// record, and renders the section's block of the page: "" when the run
	// has nothing of the mode. An error fails the report.
	Block(root string) (template.HTML, error)
}

// Funcs are the template functions of the page, for the blocks of the
// sections: pct and ratio (shares), usd, hist (a Histogram as inline SVG),
// indent (JSON indented), cls (an outcome's colour class), add, join, width,
// num (a number in at most three significant digits).
func Funcs() template.FuncMap {
	return template.FuncMap{
		"pct":      func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
		"ratio":    ratio,
		"usd":      func(f float64) string { return fmt.Sprintf("$%.4f", f) },
		"hist":     histSVG,
		"outcomes": sortedOutcomes,
		"tools":    sortedTools,
		"failing":  failingTools,
		"date":     func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
		"json":     func(v any) (template.JS, error) { b, err := json.Marshal(v); return template.JS(b), err },
		"css":      func() template.CSS { return template.CSS(Style) },
		"indent":   indentJSON,
		"join":     strings.Join,
		"width":    func(n, total int) int { return barWidth(float64(n), float64(total)) },
		"cls":      outcomeClass,
		"add":      func(a, b int) int { return a + b },
		"num":      num,
	}
}
