package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/stages/cron"
)

// notTaken is the error of an import that left jobs out because their
// script is missing (exit 1): each is named with the script and where it
// was looked for; the other jobs were imported.
func notTaken(rep cron.ImportReport) error {
	if len(rep.NotTaken) == 0 {
		return nil
	}
	lines := make([]string, 0, len(rep.NotTaken))
	for id, why := range rep.NotTaken {
		lines = append(lines, id+": "+why)
	}
	slices.Sort(lines)
	return fmt.Errorf("cron import: %d job(s) not imported, their script is missing (the others were imported; copy the script in and import the job again):\n  %s", len(lines), strings.Join(lines, "\n  "))
}
