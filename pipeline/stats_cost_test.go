package pipeline

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// An unpriced run's spend is unknown: statistics.json writes null, never 0;
// a priced run whose real spend is $0 writes 0; both read back the same.
func TestUnpricedCostIsNullNotZero(t *testing.T) {
	unpriced := NewStatistics()
	unpriced.Records, unpriced.Cost.UnpricedRecords = 3, 3
	unpriced.Finish()
	free := NewStatistics()
	free.Records, free.Cost.PricedRecords = 2, 2
	free.Cost.ByOutcomeUSD[schemas.OutcomeCompleted] = 0
	free.Finish()
	for _, c := range []struct {
		name string
		st   Statistics
		want []string
	}{
		{"unpriced", unpriced, []string{`"total_usd":null`, `"per_1k_rows_usd":null`, `"unpriced_records":3`}},
		{"priced at $0", free, []string{`"total_usd":0`, `"per_1k_rows_usd":0`, `"priced_records":2`}},
	} {
		b, err := json.Marshal(c.st)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s: statistics.json lacks %s:\n%s", c.name, w, b)
			}
		}
		var back Statistics
		if err := json.Unmarshal(b, &back); err != nil || back.Cost.PricedRecords != c.st.Cost.PricedRecords || back.Cost.TotalUSD != 0 {
			t.Errorf("%s: read back %+v (%v)", c.name, back.Cost, err)
		}
		if again, _ := json.Marshal(back); string(again) != string(b) {
			t.Errorf("%s: not stable through a read:\n%s\n%s", c.name, b, again)
		}
	}
	var text strings.Builder
	unpriced.WriteText(&text)
	if !strings.Contains(text.String(), "spend") || !strings.Contains(text.String(), "unknown") {
		t.Errorf("stats text does not say the spend is unknown:\n%s", text.String())
	}
	// Statistics written before this rule (0 for unknown) read as unpriced.
	var old Statistics
	if err := json.Unmarshal([]byte(`{"cost":{"total_usd":0,"priced_records":0,"unpriced_records":4,"by_outcome_usd":{},"per_1k_rows_usd":0}}`), &old); err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(old.Cost); !strings.Contains(string(b), `"total_usd":null`) {
		t.Errorf("an old statistics.json is written back as %s", b)
	}
}
