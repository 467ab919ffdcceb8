package pipeline

import (
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// TestTallyCountsWrittenRecords: outcomes, tokens and spend of written
// records; error texts of the records that did not end OK only, cut to
// their first line; markers (no line) are not records.
func TestTallyCountsWrittenRecords(t *testing.T) {
	var c tallyOf
	cost := 0.25
	row := func(o schemas.Outcome, tokens int64, price *float64, msg string) pending {
		return pending{outcome: o, line: []byte("{}"), rec: &schemas.Record{Outcome: o, Usage: schemas.Usage{TotalTokens: tokens}, CostUSD: price, Error: msg}}
	}
	c.add([]pending{row(schemas.OutcomeCompleted, 100, &cost, ""), row(schemas.OutcomeMaxTurns, 50, nil, "turn limit")})
	c.add([]pending{row(schemas.OutcomeAPIError, 0, nil, "http 500\nbody"), row(schemas.OutcomeAPIError, 0, nil, "http 500"), {key: "marker"}})
	got := c.get()
	if got.Records != 4 || got.Tokens != 150 || got.Priced != 1 || got.CostUSD != 0.25 ||
		got.Outcomes[schemas.OutcomeAPIError] != 2 || got.Errors["http 500"] != 2 || len(got.Errors) != 1 {
		t.Fatalf("tally %+v", got)
	}
	top := Top(got.Outcomes, 2)
	if len(top) != 2 || top[0] != (Counted{"api_error", 2}) || top[1] != (Counted{"completed", 1}) {
		t.Fatalf("top %+v", top)
	}
	if long := errText(strings.Repeat("é", 200)); len(long) > errTextMax+len("…") || !strings.HasSuffix(long, "é…") {
		t.Fatalf("cut %q", long)
	}
}
