// Package cost owns model prices and what token usage costs: a price table
// read from LiteLLM's model_prices_and_context_window.json or from a small
// own form, the lookup of a model in it (with or without a provider prefix),
// and the cost of a schemas.Usage in US dollars. A model without a price has
// no cost (nil), never a cost of 0.
//
// It imports only schemas.
package cost

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// Price is what one model's tokens cost, in US dollars per token. Zero
// CachedInput means cached prompt tokens cost Input; zero Batch rates mean
// batch requests cost the direct rates.
type Price struct {
	Input       float64
	Output      float64
	CachedInput float64
	BatchInput  float64
	BatchOutput float64
}

// Cost is what usage costs at p; batch selects the batch rates. Cached
// prompt tokens are part of the prompt tokens and reasoning tokens part of
// the completion tokens (OpenAI's usage), so neither is counted twice.
func (p Price) Cost(u schemas.Usage, batch bool) float64 {
	in, out, cached := p.Input, p.Output, p.CachedInput
	if cached == 0 {
		cached = in
	}
	if batch {
		if p.BatchInput > 0 {
			// The batch discount applies to cached tokens in proportion.
			if p.Input > 0 {
				cached *= p.BatchInput / p.Input
			}
			in = p.BatchInput
		}
		if p.BatchOutput > 0 {
			out = p.BatchOutput
		}
	}
	c := min(u.CachedPromptTokens, u.PromptTokens)
	return float64(u.PromptTokens-c)*in + float64(c)*cached + float64(u.CompletionTokens)*out
}

// Table maps model names to prices.
type Table struct {
	prices map[string]Price
	source string
}

// Len is the number of models in the table.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return len(t.prices)
}

// Set adds or replaces the price of model.
func (t *Table) Set(model string, p Price) {
	if t.prices == nil {
		t.prices = map[string]Price{}
	}
	t.prices[model] = p
}

// Lookup finds model's price: the exact name, then the name without a
// provider prefix ("openai/gpt-4o" → "gpt-4o"), then a table entry whose
// name without its prefix equals the model ("gpt-4o" finds "openai/gpt-4o"
// when only one such entry exists, or the same price under every prefix).
func (t *Table) Lookup(model string) (Price, bool) {
	if t == nil || model == "" {
		return Price{}, false
	}
	if p, ok := t.prices[model]; ok {
		return p, true
	}
	base := model[strings.LastIndexByte(model, '/')+1:]
	if p, ok := t.prices[base]; ok {
		return p, true
	}
	var found []Price
	for name, p := range t.prices {
		if i := strings.LastIndexByte(name, '/'); i >= 0 && name[i+1:] == base {
			found = append(found, p)
		}
	}
	if len(found) == 0 {
		return Price{}, false
	}
	for _, p := range found[1:] {
		if p != found[0] {
			return Price{}, false // ambiguous: different providers, different prices
		}
	}
	return found[0], true
}

// Load reads a price file: LiteLLM's model_prices_and_context_window.json
// (entries with input_cost_per_token, output_cost_per_token,
// cache_read_input_token_cost, input_cost_per_token_batches,
// output_cost_per_token_batches, in US dollars per token) or the own form
// {"model": {"input": USD per 1M tokens, "output": ..., "cached_input": ...,
// "batch_discount": 0.5}}; one file may mix both. Entries of LiteLLM's file
// without token prices (images, audio, its "sample_spec") are skipped.
// Errors name the file and the entry.
func Load(path string) (*Table, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("prices: %w", err)
	}
	t, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("prices %s: %w", path, err)
	}
	t.source = path
	return t, nil
}

// Parse reads the contents of a price file (see Load).
func Parse(b []byte) (*Table, error) {
	var raw map[string]json.RawMessage
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&raw); err != nil {
		return nil, fmt.Errorf("not a JSON object of models: %w", err)
	}
	t := &Table{prices: map[string]Price{}}
	names := make([]string, 0, len(raw))
	for n := range raw {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		var e map[string]any
		if err := json.Unmarshal(raw[name], &e); err != nil {
			if name == "sample_spec" {
				continue
			}
			return nil, fmt.Errorf("model %q: not an object: %w", name, err)
		}
		p, ok, err := entryPrice(e)
		if err != nil {
			return nil, fmt.Errorf("model %q: %w", name, err)
		}
		if ok {
			t.prices[name] = p
		}
	}
	return t, nil
}

// entryPrice reads one entry; ok is false for an entry with no token price.
func entryPrice(e map[string]any) (Price, bool, error) {
	num := func(key string) (float64, bool, error) {
		v, present := e[key]
		if !present || v == nil {
			return 0, false, nil
		}
		f, isNum := v.(float64)
		if !isNum || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
			return 0, false, fmt.Errorf("%s: want a non-negative number, got %v", key, v)
		}
		return f, true, nil
	}
	var p Price
	var err error
	var hasIn, hasOut bool
	if _, lite := e["input_cost_per_token"]; lite || e["output_cost_per_token"] != nil {
		if p.Input, hasIn, err = num("input_cost_per_token"); err != nil {
			return p, false, err
		}
		if p.Output, hasOut, err = num("output_cost_per_token"); err != nil {
			return p, false, err
		}
		if p.CachedInput, _, err = num("cache_read_input_token_cost"); err != nil {
			return p, false, err
		}
		if p.BatchInput, _, err = num("input_cost_per_token_batches"); err != nil {
			return p, false, err
		}
		if p.BatchOutput, _, err = num("output_cost_per_token_batches"); err != nil {
			return p, false, err
		}
		return p, hasIn || hasOut, nil
	}
	if _, own := e["input"]; !own && e["output"] == nil {
		return p, false, nil // not a chat model's entry (images, audio, sample_spec)
	}
	const perM = 1e-6
	var in, out, cached, discount float64
	if in, hasIn, err = num("input"); err != nil {
		return p, false, err
	}
	if out, hasOut, err = num("output"); err != nil {
		return p, false, err
	}
	if !hasIn || !hasOut {
		return p, false, fmt.Errorf("want both input and output (USD per 1M tokens)")
	}
	if cached, _, err = num("cached_input"); err != nil {
		return p, false, err
	}
	var hasDiscount bool
	if discount, hasDiscount, err = num("batch_discount"); err != nil {
		return p, false, err
	}
	if hasDiscount && discount > 1 {
		return p, false, fmt.Errorf("batch_discount %v: want a fraction of the price in [0, 1]", discount)
	}
	p = Price{Input: in * perM, Output: out * perM, CachedInput: cached * perM}
	if hasDiscount {
		p.BatchInput, p.BatchOutput = p.Input*discount, p.Output*discount
	}
	return p, true, nil
}

// PerMillion returns a Price from US dollars per million tokens, as the
// --price-in and --price-out flags give them.
func PerMillion(in, out float64) Price { return Price{Input: in * 1e-6, Output: out * 1e-6} }
