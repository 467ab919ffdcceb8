package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hermes-pipe/hermes-pipe/cmd/hermes-pipe/internal/view"
	"github.com/hermes-pipe/hermes-pipe/pipeline/atomicfile"
	"github.com/urfave/cli/v2"
)

func viewCommand() *cli.Command {
	return &cli.Command{
		Name:      "view",
		Usage:     "browse the records of an output folder in a local, read-only web UI",
		UsageText: "hermes-pipe view [--addr 127.0.0.1:8080] [--open] DIR",
		Description: `Serves a list of the folder's records (filters by outcome, toolset, tool
used, tool failures, turns, tokens, cost, compress outcome, grade and reward;
free-text search; sort; paging) and a page per record (the conversation turn
by turn, think blocks, tool calls paired with their responses, diffs, its
reward and grade, metadata, raw JSON).
A compressed record is shown beside its original, with the tokens of each
turn: the original row is read again from the inputs the compress run
recorded (compress_inputs.json), or from --original. A swe record shows its
patch, its FAIL_TO_PASS and PASS_TO_PASS results, the gate's verdict and its
change against the gate's --baseline.
Every asset is inside the binary: nothing is loaded from the network.

The first view of a folder reads every record once and keeps an index under
--cache-dir (default: hermes-pipe/view in the user cache dir); later views of
the folder in the same state open from it, and the index of an older state
is then removed. While the index is built the page is served at once from
the folder, in ledger order: filters read records until a page is full
(totals are then lower bounds), sorts wait for the index; the page shows
the build's progress and switches to the index when it is ready. The output
folder is only read.

It listens on loopback only unless --addr names another address, which also
needs --allow-remote; a random token is then printed and required.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "addr", Value: "127.0.0.1:8080", Usage: "address to listen on (port 0 = any free port)"},
			&cli.BoolFlag{Name: "open", Usage: "open the page in the default browser (xdg-open)"},
			&cli.BoolFlag{Name: "allow-remote", Usage: "allow a non-loopback --addr (a token is then required)"},
			&cli.StringFlag{Name: "cache-dir", Usage: "where the record index is kept (default: the user cache dir)"},
			&cli.StringFlag{Name: "addr-file", Hidden: true, Usage: "write the listening address here once serving (tests)"},
			&cli.StringFlag{Name: "cache", Usage: "local read cache when DIR is an s3:// or file:// URL (default: under the temp dir)"},
			&cli.StringSliceFlag{Name: "original", Usage: "compress output: where the original rows are (an output folder, a JSONL file or a folder of them; repeatable), instead of the inputs the run recorded in compress_inputs.json"},
		},
		Action: func(c *cli.Context) error {
			// The index build reports from a goroutine of its own while this
			// one prints: one lock keeps their lines whole (and a test's
			// buffer safe).
			errw := &lockedWriter{w: c.App.ErrWriter}
			root, dirs, err := runFolder(c)
			if err != nil {
				return err
			}
			addr := c.String("addr")
			loop, err := view.IsLoopback(addr)
			if err != nil {
				return usagef("--addr %q: %v", addr, err)
			}
			token := ""
			if !loop {
				if !c.Bool("allow-remote") {
					return usagef("--addr %s is not a loopback address: anyone who reaches it could read the records; add --allow-remote to allow it (a token will be required)", addr)
				}
				token = view.Token()
			}
			cacheDir := c.String("cache-dir")
			if cacheDir == "" {
				if cacheDir, err = view.DefaultCacheDir(); err != nil {
					return usagef("%v", err)
				}
			}
			start := time.Now()
			srv, err := view.Open(dirs, cacheDir, root, token)
			if err != nil {
				return err
			}
			// The build's report is written before the command returns
			// (Close ends a build still running).
			reported := make(chan struct{})
			defer func() {
				srv.Close()
				<-reported
			}()
			if srv.Built() {
				fmt.Fprintf(errw, "view: first view of this folder state: served at once from the folder while its index is built (kept in %s)\n", cacheDir)
				go func() {
					defer close(reported)
					took, warn, err := srv.BuildResult()
					if warn != nil {
						fmt.Fprintf(errw, "view: warning: %v (the index is rebuilt next time)\n", warn)
					}
					if errors.Is(err, view.ErrClosed) {
						return
					}
					if err != nil {
						fmt.Fprintf(errw, "view: %v; the list stays served from the folder, in ledger order\n", err)
						return
					}
					fmt.Fprintf(errw, "view: index ready: %d records read once in %s\n", srv.Records(), took.Round(time.Millisecond))
				}()
			} else {
				close(reported)
				fmt.Fprintf(errw, "view: %d records (from the index in %s) in %s\n", srv.Records(), cacheDir, time.Since(start).Round(time.Millisecond))
			}
			if orig := c.StringSlice("original"); len(orig) > 0 {
				if err := srv.SetOriginals(orig); err != nil {
					return usagef("%v", err)
				}
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("view: %w", err)
			}
			url := "http://" + ln.Addr().String() + "/"
			if token != "" {
				url += "?token=" + token
				fmt.Fprintf(errw, "view: listening on %s, reachable from other machines: the token %s is required\n", ln.Addr(), token)
			} else {
				fmt.Fprintf(errw, "view: listening on %s (loopback only: other machines cannot reach it)\n", ln.Addr())
			}
			fmt.Fprintln(c.App.Writer, url)
			if f := c.String("addr-file"); f != "" {
				if err := writeAddrFile(f, ln.Addr().String()); err != nil {
					ln.Close()
					return err
				}
			}
			if c.Bool("open") {
				if err := exec.Command("xdg-open", url).Start(); err != nil {
					fmt.Fprintf(errw, "view: --open: %v; open %s yourself\n", err, url)
				}
			}
			ctx, stop := signal.NotifyContext(cmdContext(c), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
			go func() {
				<-ctx.Done()
				sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				hs.Shutdown(sctx)
			}()
			if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("view: %w", err)
			}
			return nil
		},
	}
}

// writeAddrFile writes addr to path atomically, so a reader never sees half
// of it.
func writeAddrFile(path, addr string) error {
	if err := atomicfile.Write(filepath.Dir(path), filepath.Base(path), []byte(addr)); err != nil {
		return fmt.Errorf("view: --addr-file: %w", err)
	}
	return nil
}

// lockedWriter serialises the writes of several goroutines to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
