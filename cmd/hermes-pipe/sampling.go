package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/hermes-pipe/hermes-pipe/stages/llm"
	"github.com/urfave/cli/v2"
)

// samplingFlags are the sampling parameters generate and swe send with every
// chat request (--max-tokens is declared by each command; the request's seed
// is --sampling-seed, as --seed already seeds the toolset draws); compress takes
// them without --temperature, which it declares with Hermes' summariser
// default. An unset flag sends nothing: the server's default applies.
func samplingFlags(temperature bool) []cli.Flag {
	var fs []cli.Flag
	if temperature {
		fs = append(fs, &cli.Float64Flag{Name: "temperature", Usage: "sampling temperature sent with every chat request (unset: the server's default)"})
	}
	return append(fs,
		&cli.Float64Flag{Name: "top-p", Usage: "nucleus sampling top_p in (0, 1] sent with every chat request (unset: the server's default)"},
		&cli.Int64Flag{Name: "sampling-seed", Usage: "seed sent with every chat request (the request's \"seed\"; unset: none; --seed is the seed of the toolset draws)"},
		&cli.StringFlag{Name: "extra-body", Usage: "`JSON` object merged into every chat request body, for server parameters without a flag, e.g. '{\"top_k\": 20, \"min_p\": 0, \"repetition_penalty\": 1.05, \"chat_template_kwargs\": {\"enable_thinking\": false}}' (vLLM, SGLang)"},
	)
}

// logprobsFlags ask the endpoint of an agent mode (generate, swe) for the
// token logprobs of every reply, kept per assistant turn in the records'
// logprobs member (rollout.Options.Logprobs).
func logprobsFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "logprobs", Usage: "ask for the token log-probabilities of every completion (\"logprobs\": true) and keep them per assistant turn in the records' logprobs (turn: its gpt turn in conversations; tokens, logprobs, one per completion token), for RL trainers; replies without them are counted in a closing warning"},
		&cli.BoolFlag{Name: "logprob-token-ids", Usage: "with --logprobs, also ask for the tokens as their ids (\"return_tokens_as_token_ids\": true, a vLLM extension other servers may refuse): records get token_ids"},
	}
}

// samplingFlagOf names the flag of each of llm.SamplingFields, and of the
// logprobs fields.
var samplingFlagOf = map[string]string{"temperature": "temperature", "top_p": "top-p", "max_tokens": "max-tokens", "seed": "sampling-seed",
	llm.FieldLogprobs: "logprobs", llm.FieldLogprobTokenIDs: "logprob-token-ids"}

// hasFlag reports whether the running command declares flag name.
func hasFlag(c *cli.Context, name string) bool {
	if c.Command == nil {
		return false
	}
	for _, f := range c.Command.Flags {
		if slices.Contains(f.Names(), name) {
			return true
		}
	}
	return false
}

// samplingOf reads the sampling flags the running command declares.
// compress's --temperature is its summary requests' own, not read here.
func samplingOf(c *cli.Context) (llm.Sampling, error) {
	var s llm.Sampling
	if hasFlag(c, "temperature") && c.IsSet("temperature") && c.Command.Name != "compress" {
		t := c.Float64("temperature")
		if t < 0 || math.IsNaN(t) || math.IsInf(t, 0) {
			return s, usagef("--temperature must be a number >= 0, got %v", t)
		}
		s.Temperature = &t
	}
	if hasFlag(c, "top-p") && c.IsSet("top-p") {
		p := c.Float64("top-p")
		if !(p > 0 && p <= 1) {
			return s, usagef("--top-p must be in (0, 1], got %v", p)
		}
		s.TopP = &p
	}
	if hasFlag(c, "max-tokens") {
		if s.MaxTokens = c.Int("max-tokens"); s.MaxTokens < 0 {
			return s, usagef("--max-tokens must not be negative (0 = not sent), got %d", s.MaxTokens)
		}
	}
	if hasFlag(c, "sampling-seed") && c.IsSet("sampling-seed") {
		seed := c.Int64("sampling-seed")
		s.Seed = &seed
	}
	if err := logprobsOf(c, &s); err != nil {
		return s, err
	}
	// cron edit's empty --extra-body removes the job's (editSampling); every
	// other command takes an object only.
	if hasFlag(c, "extra-body") && c.IsSet("extra-body") && !(c.Command.Name == "edit" && strings.TrimSpace(c.String("extra-body")) == "") {
		extra, err := parseExtraBody(c.String("extra-body"))
		if err != nil {
			return s, err
		}
		s.Extra = extra
	}
	for k := range s.Extra {
		flag := samplingFlagOf[k]
		switch {
		case slices.Contains(llm.ReservedFields, k):
			return s, usagef("--extra-body: %q is written by hermes-pipe itself; leave it out", k)
		case slices.Contains(llm.SamplingFields, k) && c.Command.Name == "compress" && k != "top_p" && k != "seed":
			return s, usagef("--extra-body: compress sends %q itself (from --temperature and --summary-tokens); leave it out", k)
		case flag != "" && hasFlag(c, flag) && c.IsSet(flag):
			return s, usagef("--extra-body: %q is also given by --%s; give it once", k, flag)
		}
	}
	return s, nil
}

// logprobsOf reads --logprobs and --logprob-token-ids, where the running
// command declares them, into s.
func logprobsOf(c *cli.Context, s *llm.Sampling) error {
	if !hasFlag(c, "logprobs") {
		return nil
	}
	s.Logprobs, s.LogprobTokenIDs = c.Bool("logprobs"), c.Bool("logprob-token-ids")
	if s.LogprobTokenIDs && !s.Logprobs {
		return usagef("--logprob-token-ids needs --logprobs")
	}
	return nil
}

// parseExtraBody reads --extra-body: one JSON object (llm.DecodeExtraBody).
func parseExtraBody(v string) (map[string]any, error) {
	m, err := llm.DecodeExtraBody([]byte(v))
	if err != nil {
		what := strings.TrimPrefix(err.Error(), llm.ErrExtraBody.Error()+": ")
		return nil, usagef("--extra-body: %s; give one object such as '{\"top_k\": 20}' (got %s)", what, quoteShort(v))
	}
	return m, nil
}

// quoteShort quotes v, cut to 80 bytes.
func quoteShort(v string) string {
	if len(v) > 80 {
		v = v[:80] + "..."
	}
	return fmt.Sprintf("%q", v)
}

// extraBodyRecord is --extra-body as run.json records it: the object itself.
func extraBodyRecord(v string) any {
	var buf bytes.Buffer
	if json.Compact(&buf, []byte(v)) != nil {
		return v
	}
	return json.RawMessage(buf.Bytes())
}
