package main

import (
	"strings"

	"github.com/hermes-pipe/hermes-pipe/stages/grade"
	"github.com/urfave/cli/v2"
)

// graderFlags choose how generate grades its rollouts (stages/grade).
func graderFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "grader", Usage: "`NAME` of the grader of every rollout: " + strings.Join(grade.Kinds, ", ") +
			"; default: cmd for a row with verify, else for a row with answer number when the answer is a number and exact otherwise; a row with nothing to check keeps reward null"},
		&cli.DurationFlag{Name: "grader-timeout", Value: grade.DefaultTimeout, Usage: "bound of one grading (a verify command, a --grader-exec run); past it the record gets reward null and the error"},
		&cli.StringFlag{Name: "grader-exec", Usage: "`PATH` of an executable on this machine that grades every record: the record JSON on stdin (the row's answer and verify in $HERMES_PIPE_ANSWER, $HERMES_PIPE_VERIFY), its last stdout line {\"reward\": number, \"passed\"?: bool}; implies --grader exec"},
		&cli.Float64Flag{Name: "grader-tolerance", Value: grade.DefaultTolerance, Usage: "the number grader's tolerance: a pass when |got-want| <= tolerance*max(1, |want|)"},
	}
}

// graderOf reads the grader flags; a bad one is a usage error, found before
// any output folder is made.
func graderOf(c *cli.Context) (grade.Grader, error) {
	kind, err := grade.Parse(c.String("grader"))
	if err != nil {
		return grade.Grader{}, usagef("--grader: %v", err)
	}
	if c.Duration("grader-timeout") <= 0 {
		return grade.Grader{}, usagef("--grader-timeout must be positive, got %s", c.Duration("grader-timeout"))
	}
	if c.Float64("grader-tolerance") < 0 {
		return grade.Grader{}, usagef("--grader-tolerance must not be negative, got %g", c.Float64("grader-tolerance"))
	}
	g := grade.Grader{Kind: kind, Timeout: c.Duration("grader-timeout"), Exec: c.String("grader-exec"), Tolerance: c.Float64("grader-tolerance")}
	if err := g.Check(); err != nil {
		return grade.Grader{}, usagef("%v", err)
	}
	return g, nil
}
