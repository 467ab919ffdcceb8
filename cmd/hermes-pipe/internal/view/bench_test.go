package view

import (
	"context"
	"math"
	"os"
	"testing"
)

// BenchmarkOpen measures the index of the folder named by HP_VIEW_BENCH_DIR
// (scripts/bench-view.sh builds a 1M-row one): b.N cached opens followed by
// the first page and a filter by outcome.
func BenchmarkOpen(b *testing.B) {
	dir := os.Getenv("HP_VIEW_BENCH_DIR")
	if dir == "" {
		b.Skip("HP_VIEW_BENCH_DIR names no folder")
	}
	cache := os.Getenv("HP_VIEW_BENCH_CACHE")
	if cache == "" {
		cache = b.TempDir()
	}
	if _, _, _, err := OpenIndex([]string{dir}, cache); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		ix, built, _, err := OpenIndex([]string{dir}, cache)
		if err != nil || built {
			b.Fatal(built, err)
		}
		s := NewServer(ix, dir, "")
		for _, q := range []Query{{}, {Outcome: "completed"}} {
			q.Size, q.TurnsMin, q.TurnsMax, q.TokensMin, q.TokensMax = 50, -1, -1, -1, -1
			q.CostMin, q.CostMax = math.NaN(), math.NaN()
			q.RewardMin, q.RewardMax = math.NaN(), math.NaN()
			if _, err := s.Find(context.Background(), q); err != nil {
				b.Fatal(err)
			}
		}
		s.Close()
	}
}

// BenchmarkBuild reads every record of HP_VIEW_BENCH_DIR into an index.
func BenchmarkBuild(b *testing.B) {
	dir := os.Getenv("HP_VIEW_BENCH_DIR")
	if dir == "" {
		b.Skip("HP_VIEW_BENCH_DIR names no folder")
	}
	for range b.N {
		if _, err := BuildIndex([]string{dir}); err != nil {
			b.Fatal(err)
		}
	}
}
