// Command hermes-pipe is an offline factory for supervised-fine-tuning data
// from LLM agents. This package only parses flags into options structs, calls
// one library function per command, and maps errors to exit codes.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	// Imported for its init: the local sandbox's probe starts during
	// package initialisation when the arguments ask for generate.
	_ "github.com/hermes-pipe/hermes-pipe/cmd/hermes-pipe/internal/earlyprobe"
	"github.com/hermes-pipe/hermes-pipe/pipeline"
	"github.com/hermes-pipe/hermes-pipe/pipeline/cluster"
	"github.com/hermes-pipe/hermes-pipe/pipeline/cost"
	"github.com/hermes-pipe/hermes-pipe/stages/cron"
	"github.com/hermes-pipe/hermes-pipe/stages/swe"
	"github.com/urfave/cli/v2"
)

// Exit codes, mapped in exitCode only.
const (
	exitOK          = 0
	exitFatal       = 1
	exitUsage       = 2
	exitRowsFailed  = 3
	exitGate        = 4
	exitBudget      = pipeline.ExitBudget // --max-cost reached
	exitInterrupted = 130
)

// version is set by the linker for release builds
// (-ldflags "-X main.version=v1.2.3"); versionString adds what the build
// recorded.
var version = "dev"

// usageError marks a bad flag or argument (exit 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// exitStatus carries a non-error exit status out of an Action (rows failed,
// interrupted, gate failed) without calling os.Exit inside it.
type exitStatus struct {
	code int
	msg  string
}

func (e *exitStatus) Error() string { return e.msg }

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// run builds the app and runs it; tests call it directly.
func run(args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	args = reorderArgs(app, args)
	err := app.Run(args)
	code := exitCode(err)
	if err != nil {
		var st *exitStatus
		if !errors.As(err, &st) || st.msg != "" {
			fmt.Fprintf(stderr, "hermes-pipe: %v\n", err)
		}
		if code == exitUsage {
			fmt.Fprintln(stderr, usageHint(app, args))
		}
	}
	return code
}

// exitCode maps an error from a command to the process exit code. It is the
// only place exit codes are decided.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var st *exitStatus
	if errors.As(err, &st) {
		return st.code
	}
	var ue *usageError
	if errors.As(err, &ue) || isCLIUsage(err) || errors.Is(err, cron.ErrUsage) ||
		errors.Is(err, pipeline.ErrRefused) || errors.Is(err, swe.ErrInput) || errors.Is(err, cluster.ErrUsage) {
		return exitUsage
	}
	if errors.Is(err, cost.ErrBudget) {
		return exitBudget
	}
	if errors.Is(err, context.Canceled) {
		return exitInterrupted
	}
	return exitFatal
}

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:                 "hermes-pipe",
		Usage:                "an offline factory for SFT data from LLM agents",
		Version:              versionString(),
		Writer:               stdout,
		ErrWriter:            stderr,
		EnableBashCompletion: true,
		ExitErrHandler:       func(*cli.Context, error) {}, // never os.Exit inside Run
		Description: `Turns prompts into supervised-fine-tuning data: an agent loop per prompt
(an OpenAI-compatible model calling tools in a sandbox) writes Hermes-format
ShareGPT trajectories to crash-safe, resumable JSONL shards.

Exit codes: 0 all rows ok, 1 fatal error, 2 usage error, 3 finished with
rejected or failed rows, 4 evaluation gate failed (swe), 5 --max-cost
reached (continue with --resume --max-cost HIGHER), 130 interrupted.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "cpuprofile", Hidden: true, Usage: "write a CPU profile to this file"},
		},
		Before: func(c *cli.Context) error {
			if f := c.String("cpuprofile"); f != "" {
				return startCPUProfile(f)
			}
			return nil
		},
		After: func(*cli.Context) error { stopCPUProfile(); return nil },
		Commands: []*cli.Command{
			generateCommand(),
			catCommand(),
			statsCommand(),
			verifyCommand(),
			repairCommand(),
			sharegptCommand(),
			exportCommand(),
			regradeCommand(),
		},
	}
	app.Commands = append(app.Commands, extraCommands()...)
	addExamples("", app.Commands)
	setUsageHandlers(app)
	return app
}

// isCLIUsage recognises urfave/cli's own usage errors (unknown flag, missing
// required flag, `help` of no command), which it returns as plain errors.
func isCLIUsage(err error) bool {
	msg := strings.ToLower(err.Error())
	for _, p := range []string{"flag provided but not defined", "required flag", "invalid value", "flag needs an argument", "no help topic for"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// signalContext returns a soft-stop channel closed on the first SIGINT or
// SIGTERM, and a context cancelled on the second signal or when grace passes
// after the first (pipeline.ShutdownOnSignal); stop() releases the handler.
func signalContext(parent context.Context, grace time.Duration, stderr io.Writer) (ctx context.Context, soft <-chan struct{}, stop func()) {
	return pipeline.ShutdownOnSignal(parent, grace, func(msg string) {
		fmt.Fprintf(stderr, "\nhermes-pipe: %s\n", msg)
	})
}

var profileFile *os.File

// startCPUProfile starts the hidden --cpuprofile; used by the benchmarks.
func startCPUProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return usagef("--cpuprofile: %v", err)
	}
	profileFile = f
	return pprof.StartCPUProfile(f)
}

func stopCPUProfile() {
	if profileFile != nil {
		pprof.StopCPUProfile()
		profileFile.Close()
		profileFile = nil
	}
}
