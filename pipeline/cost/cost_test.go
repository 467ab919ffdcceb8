package cost

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

func TestSampleFile(t *testing.T) {
	tab, err := Load(filepath.Join("..", "..", "datasets", "prices", "sample-2026-12-01.json"))
	if err != nil {
		t.Fatal(err)
	}
	if tab.Len() != 4 { // sample_spec and the image model are skipped
		t.Fatalf("%d models, want 4", tab.Len())
	}
	u := schemas.Usage{PromptTokens: 1_000_000, CompletionTokens: 100_000, CachedPromptTokens: 400_000, ReasoningTokens: 50_000}
	for _, c := range []struct {
		model       string
		batch       bool
		want        float64
		wantUnknown bool
	}{
		// 600k uncached × 2.5 + 400k cached × 1.25 + 100k × 10 (per 1M) = 1.5 + 0.5 + 1.0
		{model: "gpt-4o", want: 3.0},
		{model: "openai/gpt-4o", want: 3.0},
		// batch: 600k × 1.25 + 400k × 0.625 + 100k × 5
		{model: "gpt-4o", batch: true, want: 0.75 + 0.25 + 0.5},
		// own form: 600k × 0.5 + 400k × 0.25 + 100k × 1.5
		{model: "demo", want: 0.3 + 0.1 + 0.15},
		{model: "demo", batch: true, want: (0.3 + 0.1 + 0.15) / 2},
		// found by its name without the provider prefix; no cached price: cached at input
		{model: "hermes-4-70b", want: 1_000_000*1.3e-07 + 100_000*4e-07},
		{model: "nousresearch/hermes-4-70b", want: 1_000_000*1.3e-07 + 100_000*4e-07},
		{model: "no-such-model", wantUnknown: true},
		{model: "dall-e-3", wantUnknown: true},
	} {
		p, ok := tab.Lookup(c.model)
		if ok == c.wantUnknown {
			t.Errorf("%s: found %v, want %v", c.model, ok, !c.wantUnknown)
			continue
		}
		if ok && !near(p.Cost(u, c.batch), c.want) {
			t.Errorf("%s batch %v: cost %.9f, want %.9f", c.model, c.batch, p.Cost(u, c.batch), c.want)
		}
	}
}

func TestParseErrorsNameTheEntry(t *testing.T) {
	for _, c := range []struct{ json, want string }{
		{`[]`, "not a JSON object"},
		{`{"m": {"input": 1}}`, `model "m": want both input and output`},
		{`{"m": {"input_cost_per_token": "cheap"}}`, `model "m": input_cost_per_token`},
		{`{"m": {"input": -1, "output": 1}}`, `model "m": input`},
		{`{"m": {"input": 1, "output": 1, "batch_discount": 2}}`, `model "m": batch_discount`},
		{`{"m": 3}`, `model "m": not an object`},
	} {
		_, err := Parse([]byte(c.json))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want it to contain %q", c.json, err, c.want)
		}
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "p.json")
	if err := os.WriteFile(p, []byte(`{"m": {"input": 1}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("Load error %v does not name the file", err)
	}
}

func TestLookupAmbiguousPrefix(t *testing.T) {
	tab, err := Parse([]byte(`{"a/m": {"input": 1, "output": 2}, "b/m": {"input": 3, "output": 4}, "c/n": {"input": 1, "output": 1}, "d/n": {"input": 1, "output": 1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tab.Lookup("m"); ok {
		t.Error("m found although two providers price it differently")
	}
	if p, ok := tab.Lookup("a/m"); !ok || !near(p.Input, 1e-6) {
		t.Errorf("a/m: %+v %v", p, ok)
	}
	if _, ok := tab.Lookup("n"); !ok {
		t.Error("n not found although every provider prices it the same")
	}
}
