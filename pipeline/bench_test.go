package pipeline

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// writeBigLedger writes a folder whose ledger holds keys finished keys in
// shards of 1000 rows, keyed like schemas.RowKey does.
func writeBigLedger(b *testing.B, dir string, keys int) []string {
	b.Helper()
	out, err := OpenOutput(dir, OutputOptions{Kind: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	out.Close()
	f, err := os.OpenFile(filepath.Join(dir, LedgerFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	all := make([]string, 0, keys)
	var buf []byte
	for s := 0; s*1000 < keys; s++ {
		l := ledgerLine{Shard: fmt.Sprintf("data/shard-%05d.jsonl", s+1), Bytes: 1 << 20, SHA256: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
		for i := s * 1000; i < min(keys, (s+1)*1000); i++ {
			k := fmt.Sprintf("row:%d:%012x#0", i, uint64(i)*0x9e3779b97f4a7c15>>16)
			all = append(all, k)
			l.Rows = append(l.Rows, ledgerRow{Key: k, Outcome: schemas.OutcomeCompleted, PromptIndex: int64(i), Len: 2400})
		}
		buf = appendLedgerLine(buf[:0], &l)
		w.Write(buf)
		// Opening checks each live shard's size: a sparse file of that size.
		sf, err := os.Create(filepath.Join(dir, filepath.FromSlash(l.Shard)))
		if err != nil {
			b.Fatal(err)
		}
		if err := errors.Join(sf.Truncate(l.Bytes), sf.Close()); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	return all
}

// BenchmarkResumeOpen1M measures the "nothing to do" resume path: open a
// folder whose ledger holds 1,000,000 finished keys and check every key.
func BenchmarkResumeOpen1M(b *testing.B) {
	dir := b.TempDir()
	keys := writeBigLedger(b, dir, 1_000_000)
	fi, _ := os.Stat(filepath.Join(dir, LedgerFile))
	b.ReportMetric(float64(fi.Size())/(1<<20), "ledger-MiB")
	b.ResetTimer()
	for range b.N {
		cpu0 := cpuTime()
		out, err := OpenOutput(dir, OutputOptions{Mode: ModeResume, Kind: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		for _, k := range keys {
			if !out.Done(k) {
				b.Fatalf("key %s not done", k)
			}
		}
		out.Close()
		b.ReportMetric(float64((cpuTime() - cpu0).Milliseconds()), "cpu-ms/op")
	}
}

// BenchmarkResumeNothingToDo1M is the whole library side of a resume that
// finds all 1,000,000 keys done: open, Run skipping every record, close.
func BenchmarkResumeNothingToDo1M(b *testing.B) {
	dir := b.TempDir()
	keys := writeBigLedger(b, dir, 1_000_000)
	os.WriteFile(filepath.Join(dir, StatisticsFile), []byte("{}\n"), 0o644)
	recs := make([]*schemas.Record, len(keys))
	for i, k := range keys {
		recs[i] = &schemas.Record{Key: k, PromptIndex: i}
	}
	b.ResetTimer()
	for range b.N {
		cpu0 := cpuTime()
		out, err := OpenOutput(dir, OutputOptions{Mode: ModeResume, Kind: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		sum, err := Run(context.Background(), Options{}, SliceSource(recs), []Stage{completeStage()}, out)
		if err != nil || sum.Skipped != len(keys) {
			b.Fatalf("%+v %v", sum, err)
		}
		out.Close()
		b.ReportMetric(float64((cpuTime() - cpu0).Milliseconds()), "cpu-ms/op")
	}
}

// BenchmarkLedgerPhases splits BenchmarkResumeOpen1M into loading the
// ledger and checking the keys.
func BenchmarkLedgerPhases(b *testing.B) {
	dir := b.TempDir()
	keys := writeBigLedger(b, dir, 1_000_000)
	path := filepath.Join(dir, LedgerFile)
	b.Run("load", func(b *testing.B) {
		for range b.N {
			if _, err := loadLedger(path); err != nil {
				b.Fatal(err)
			}
		}
	})
	ld, _ := loadLedger(path)
	for _, order := range []string{"input-order", "shuffled"} {
		ks := keys
		if order == "shuffled" {
			ks = append([]string(nil), keys...)
			rand.New(rand.NewPCG(1, 1)).Shuffle(len(ks), func(i, j int) { ks[i], ks[j] = ks[j], ks[i] })
		}
		b.Run("check-"+order, func(b *testing.B) {
			for range b.N {
				for _, k := range ks {
					if _, ok := ld.ix.lookup(k); !ok {
						b.Fatal(k)
					}
				}
			}
		})
	}
}

// BenchmarkRunPerRecord measures the runtime's cost per record with a
// trivial stage: scheduling, encoding, shard commits and the ledger.
func BenchmarkRunPerRecord(b *testing.B) {
	dir := b.TempDir()
	recs := records(b.N)
	out, err := OpenOutput(dir, OutputOptions{Kind: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	b.ResetTimer()
	cpu0 := cpuTime()
	sum, err := Run(context.Background(), Options{Workers: 4}, SliceSource(recs), []Stage{completeStage()}, out)
	if err != nil || sum.Written != b.N {
		b.Fatalf("%+v %v", sum, err)
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/rec")
}

// cpuTime is the process's user and system CPU time: on a shared machine it
// is steadier than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCat100k measures Cat over a folder of 100,000 records that were
// committed out of order across many shards.
func BenchmarkCat100k(b *testing.B) {
	dir := b.TempDir()
	out, err := OpenOutput(dir, OutputOptions{Kind: "bench", MaxShardRows: 500})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := Run(context.Background(), Options{Workers: 8}, SliceSource(records(100_000)), []Stage{completeStage()}, out); err != nil {
		b.Fatal(err)
	}
	out.Close()
	b.ResetTimer()
	for range b.N {
		if err := Cat(dir, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStatsDecode measures the decoding statistics do of each record
// line (its counters, not its conversation); MB/s counts JSON text in.
func BenchmarkStatsDecode(b *testing.B) {
	_, lines, total := benchRecords(b, 2000)
	b.SetBytes(total)
	b.ResetTimer()
	for range b.N {
		for _, line := range lines {
			var r schemas.Record
			if err := schemas.DecodeMembers(line, &r, statMembers[:]...); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkParquetRow measures building a Parquet row from a record line
// alone (no column buffers, no compression); MB/s counts JSON text in.
func BenchmarkParquetRow(b *testing.B) {
	recs, lines, total := benchRecords(b, 2000)
	b.SetBytes(total)
	b.ResetTimer()
	var row parquetRecord
	var sc parquetScratch
	for range b.N {
		for i, line := range lines {
			parquetRowOf(&row, &sc, recs[i].Key, string(recs[i].Outcome), int64(i), 0, string(line))
		}
	}
}

// BenchmarkMergeShards100k measures what the end-of-run merge adds to a run
// of 100,000 records of about 6 KB (benchRecords' lines, cycled) that
// commits every 100 records (as --commit-interval does on a slow run): 1,000
// small shards merged into 100 of 1,000 records. The setup (the commits) is
// not timed; its time is reported as commit-s for comparison.
func BenchmarkMergeShards100k(b *testing.B) {
	for _, format := range []string{FormatJSONL, FormatParquet} {
		b.Run(format, func(b *testing.B) {
			_, lines, _ := benchRecords(b, 2000)
			for range b.N {
				b.StopTimer()
				dir := b.TempDir()
				out, err := OpenOutput(dir, OutputOptions{Kind: "bench", Format: format, MaxShardRows: 1000})
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				var size int64
				for s := range 1000 {
					bt := &batch{sub: DataDir}
					for i := s * 100; i < (s+1)*100; i++ {
						key := fmt.Sprintf("row:%d", i)
						rec := &schemas.Record{Key: key, PromptIndex: i, Outcome: schemas.OutcomeCompleted}
						line := lines[i%len(lines)]
						size += int64(len(line))
						bt.rows = append(bt.rows, pending{key: key, outcome: rec.Outcome, pi: int64(i), rec: rec, line: line})
					}
					if err := out.commit(bt); err != nil {
						b.Fatal(err)
					}
				}
				commit := time.Since(start)
				b.StartTimer()
				st, err := out.mergeShards(nil)
				b.StopTimer()
				if err != nil || st.Written != 100 || st.Records != 100_000 {
					b.Fatalf("merge %+v, %v", st, err)
				}
				b.ReportMetric(commit.Seconds(), "commit-s")
				b.ReportMetric(float64(size)/1e6, "MB")
				out.Close()
				os.RemoveAll(dir)
				b.StartTimer()
			}
		})
	}
}

// BenchmarkWriteShard commits 1000 records (the default MaxShardRows) as one
// JSONL shard through writeShard, fsyncs included: the work a run's last
// commit waits for (these records are larger than most: 13 MB). Its SHA-256
// runs beside the write and the fsync (asyncHash): 15.9-17.6 ms a shard
// here; this benchmark copied into ef871e3^, whose writeShard hashed in
// line, measures 19.8-20.4 ms.
func BenchmarkWriteShard(b *testing.B) {
	recs, lines, total := benchRecords(b, 1000)
	rows := make([]pending, len(recs))
	for i, rec := range recs {
		rows[i] = pending{key: rec.Key, pi: int64(rec.PromptIndex), rec: rec, line: lines[i]}
	}
	format, err := formatByName(FormatJSONL)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	b.SetBytes(total)
	b.ResetTimer()
	for i := range b.N {
		name := fmt.Sprintf("shard-%05d.jsonl", i)
		if _, _, err := writeShard(format, dir, name, rows, nil); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = os.Remove(filepath.Join(dir, name)) // b.N shards of 13 MB would fill the disk
		b.StartTimer()
	}
}
