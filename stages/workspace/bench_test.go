package workspace_test

import (
	"context"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/stages/workspace"
)

// BenchmarkKeepLocal is what --keep-workspace adds to a row in the confined
// local sandbox: archiving a folder of 200 files (about 2 MB: 1 MB of text,
// 1 MB of random bytes) and writing it atomically.
//
//	go test -run XXX -bench KeepLocal -benchtime 20x ./stages/workspace
func BenchmarkKeepLocal(b *testing.B) {
	s := openLocalB(b)
	runB(b, s, `mkdir -p w && cd w && for i in $(seq 100); do seq 1500 >t$i.txt; head -c 10000 /dev/urandom >r$i.bin; done`)
	k := &workspace.Keeper{Out: b.TempDir()}
	var bytes int64
	b.ResetTimer()
	for b.Loop() {
		info, err := k.Keep(context.Background(), s, "k", "")
		if err != nil || !info.Kept() {
			b.Fatal(err, info)
		}
		bytes = info.TarBytes
	}
	b.ReportMetric(float64(bytes), "tar-bytes")
}

// BenchmarkRestoreLocal is regrade's cost per record before its grader
// runs: the archive checked and cleaned, and unpacked in a fresh session
// (the session's open included).
func BenchmarkRestoreLocal(b *testing.B) {
	s := openLocalB(b)
	runB(b, s, `mkdir -p w && cd w && for i in $(seq 100); do seq 1500 >t$i.txt; head -c 10000 /dev/urandom >r$i.bin; done`)
	out := b.TempDir()
	k := &workspace.Keeper{Out: out}
	info, err := k.Keep(context.Background(), s, "k", "")
	if err != nil || !info.Kept() {
		b.Fatal(err, info)
	}
	d := newLocal(b)
	b.ResetTimer()
	for b.Loop() {
		clean, err := workspace.Load(out, info, 0)
		if err != nil {
			b.Fatal(err)
		}
		s2 := openInB(b, d)
		if err := workspace.Restore(context.Background(), s2, clean); err != nil {
			b.Fatal(err)
		}
		s2.Close(context.Background())
	}
}
