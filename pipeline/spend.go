package pipeline

import (
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/hermes-pipe/hermes-pipe/pipeline/cost"
	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
)

// spendSyncEvery is how often the spend journal is fsynced while calls are
// charged (and at every commit, before the ledger line).
const spendSyncEvery = time.Second

// spendLog is the output folder's spend journal (outdir.SpendFile) as the
// run's cost.Budget writes it (cost.Journal): every priced call is one line
// written with its own write(2) as the call returns, so a run killed (even
// by SIGKILL) loses none that returned; the file is fsynced at least every
// second (a machine crash loses at most the last second of calls) and
// before every ledger line, so a committed record's calls are always in
// it. The run's first line says what the folder had spent when the run
// started; it is written with the first call, so a run that spends
// nothing leaves no file.
type spendLog struct {
	j *outdir.Journal

	mu    sync.Mutex
	run   int     // the run's number (run.json's runs)
	start float64 // what the folder had spent when the run started
	began bool    // the run line is written
	dirty bool    // lines written since the last fsync
	err   error   // the first write error; the run fails with it at the end
	buf   []byte

	stop chan struct{}
	done chan struct{}
}

var _ cost.Journal = (*spendLog)(nil)

// openSpend prepares the spend journal of dir (a torn last line cut) and
// reads it.
func openSpend(dir string) (*spendLog, outdir.Spend, error) {
	j, err := outdir.OpenJournal(filepath.Join(dir, outdir.SpendFile), false)
	if err != nil {
		return nil, outdir.Spend{}, err
	}
	sp, err := outdir.ReadSpend(dir)
	if err != nil {
		return nil, sp, err
	}
	return &spendLog{j: j}, sp, nil
}

// Reserved implements cost.Journal: the reservation line is written with
// its own write(2) before Reserved returns, so it is in the page cache
// (which a SIGKILL keeps) before the call it projects is sent.
func (s *spendLog) Reserved(key string, call int, res int64, usd float64) error {
	return s.write(outdir.SpendLine{Key: key, Call: call, Reserve: res, USD: usd})
}

// Charged implements cost.Journal.
func (s *spendLog) Charged(key string, call int, id string, res int64, usd float64) {
	_ = s.write(outdir.SpendLine{Key: key, Call: call, ID: id, Settles: res, USD: usd}) // kept in s.err
}

// Capped implements cost.Journal.
func (s *spendLog) Capped(max float64) {
	_ = s.write(outdir.SpendLine{Capped: max}) // kept in s.err
}

// write appends l, after the run line if it is the run's first line, with
// one write(2). The first error is kept: the run fails with it at the end.
func (s *spendLog) write(l outdir.SpendLine) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return fmt.Errorf("spend journal: %w", s.err)
	}
	s.buf = s.buf[:0]
	if !s.began {
		s.buf = outdir.AppendSpendLine(s.buf, outdir.SpendLine{Run: s.run, Spent: s.start})
	}
	s.buf = outdir.AppendSpendLine(s.buf, l)
	if err := s.j.Append(s.buf, false); err != nil {
		s.err = err
		return fmt.Errorf("spend journal: %w", err)
	}
	s.began, s.dirty = true, true
	return nil
}

// begin makes b write to the journal as run number run, which starts from
// start (what the folder had spent when it was opened: Output.Spent), and
// fsyncs it every spendSyncEvery until end. It is called before any stage
// has b.
func (s *spendLog) begin(b *cost.Budget, run int, start float64, ids map[string]bool) {
	s.mu.Lock()
	s.run, s.start = run, start
	s.mu.Unlock()
	b.Keep(s, ids)
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.done)
		t := time.NewTicker(spendSyncEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				_ = s.sync() // a failure shows at the next commit or at end
			case <-s.stop:
				return
			}
		}
	}()
}

// sync fsyncs the lines written since the last fsync.
func (s *spendLog) sync() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	dirty, err := s.dirty, s.err
	s.dirty = false
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("spend journal: %w", err)
	}
	if !dirty {
		return nil
	}
	return s.j.Sync()
}

// end stops the periodic fsync and fsyncs what is left; it returns the
// first write error. Safe to call when begin was not.
func (s *spendLog) end() error {
	if s == nil {
		return nil
	}
	if s.stop != nil {
		close(s.stop)
		<-s.done
		s.stop = nil
	}
	return s.sync()
}

// close closes the journal's file.
func (s *spendLog) close() error {
	if s == nil {
		return nil
	}
	return s.j.Close()
}
