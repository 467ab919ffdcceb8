// Command fakellm serves the deterministic OpenAI-compatible chat endpoint of
// package fakellm for the demo, manual testing and benchmarks:
//
//	fakellm --addr 127.0.0.1:0 --addr-file /tmp/fakellm.addr --scripts scripts.json \
//	        --latency 50ms --jitter 20ms --fail-429 0.05 --seed 7 \
//	        --batch-delay 2s --batch-fail 0.01 --batch-expire 3
//
// It prints "listening on http://ADDR" once ready (and writes ADDR to
// --addr-file), then serves until SIGTERM or SIGINT. See package fakellm for
// the script format.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline/atomicfile"
	"github.com/hermes-pipe/hermes-pipe/stages/llm/fakellm"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fakellm:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

// run parses args, starts the server and blocks until a signal arrives.
func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("fakellm", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address (port 0 picks a free port)")
	addrFile := fs.String("addr-file", "", "write the bound address to this file once listening")
	scripts := fs.String("scripts", "", "JSON script file (see package fakellm)")
	latency := fs.Duration("latency", 0, "fixed latency added to every reply")
	jitter := fs.Duration("jitter", 0, "extra latency of up to this much, chosen per request")
	fail429 := fs.Float64("fail-429", 0, "probability of a 429 per attempt")
	fail500 := fs.Float64("fail-500", 0, "probability of a 500 per attempt")
	malformed := fs.Float64("malformed", 0, "probability of a truncated JSON body per attempt")
	hang := fs.Float64("hang", 0, "probability of a hang per attempt")
	hangFor := fs.Duration("hang-for", 0, "how long a hang lasts (default 10m or until the client leaves)")
	maxFaults := fs.Int("max-faults", 0, "random faults per identical request before it succeeds (default 3, negative = no cap)")
	retryAfter := fs.Duration("retry-after", 0, "wait announced on 429 replies (default 200ms)")
	seed := fs.Uint64("seed", 0, "seed for generated text, ids, jitter and faults")
	summaryWords := fs.Int("summary-words", 0, "words in a default summariser reply (default 64)")
	reasoningField := fs.String("reasoning-field", "", "field for scripted reasoning: reasoning_content (default), reasoning or think")
	model := fs.String("model", "", "model name to report (default: echo the request)")
	batchDelay := fs.Duration("batch-delay", 0, "how long a Batch API batch stays in progress (default: answered when first read)")
	batchFail := fs.Float64("batch-fail", 0, "probability that one request inside a batch fails (error file)")
	batchExpire := fs.Int("batch-expire", 0, "the Nth batch created (1-based) expires with half its requests answered; 0 = none")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	for name, p := range map[string]float64{"fail-429": *fail429, "fail-500": *fail500, "malformed": *malformed, "hang": *hang, "batch-fail": *batchFail} {
		if p < 0 || p > 1 {
			return fmt.Errorf("%w: --%s %v: want a probability in [0, 1]", errUsage, name, p)
		}
	}
	switch *reasoningField {
	case "", "reasoning", "reasoning_content", "think":
	default:
		return fmt.Errorf("%w: --reasoning-field %q: want reasoning_content, reasoning or think", errUsage, *reasoningField)
	}

	cfg := fakellm.Config{
		Seed: *seed, Latency: *latency, Jitter: *jitter,
		Fail429: *fail429, Fail500: *fail500, Malformed: *malformed, Hang: *hang,
		HangFor: *hangFor, MaxFaults: *maxFaults, RetryAfter: *retryAfter,
		SummaryWords: *summaryWords, ReasoningField: *reasoningField, Model: *model,
		BatchDelay: *batchDelay, BatchFail: *batchFail, BatchExpire: *batchExpire,
	}
	if *scripts != "" {
		sc, err := fakellm.LoadScripts(*scripts)
		if err != nil {
			return err
		}
		cfg.Scripts = sc
	}

	// Catch signals before announcing the address, so a supervisor that
	// stops us right after reading it is handled gracefully.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: fakellm.New(cfg), ReadHeaderTimeout: 30 * time.Second}
	bound := ln.Addr().String()
	if *addrFile != "" {
		// Atomic, so a supervisor polling for the file never reads half of it.
		if err := atomicfile.Write(filepath.Dir(*addrFile), filepath.Base(*addrFile), []byte(bound+"\n")); err != nil {
			_ = ln.Close()
			return fmt.Errorf("write addr file: %w", err)
		}
	}
	fmt.Fprintf(stdout, "listening on http://%s\n", bound)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// Hanging requests keep connections busy; close them.
		_ = srv.Close()
	}
	return nil
}
