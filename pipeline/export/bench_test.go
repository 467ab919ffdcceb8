package export

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// BenchmarkExport exports a generate folder of 20,000 small trajectories
// (the test records: a system turn of two tools, one to three exchanges)
// and reports rows/s, for Parquet and JSONL, messages and sharegpt.
func BenchmarkExport(b *testing.B) {
	const prompts, samples = 5000, 4
	recs := make([]*schemas.Record, 0, prompts*samples)
	for i := range prompts {
		for s := range samples {
			r := testRecord(i%10, s)
			r.PromptIndex, r.Key = i, "k"+strconv.Itoa(i)+"#"+strconv.Itoa(s)
			if r.ID != "" {
				r.ID = "p" + strconv.Itoa(i)
			}
			recs = append(recs, r)
		}
	}
	src := writeFolder(b, filepath.Join(b.TempDir(), "run"), "bench", "", 10000, recs)
	for _, c := range []struct {
		name string
		opts Options
	}{
		{"parquet/messages", Options{}},
		{"parquet/sharegpt", Options{Format: FormatShareGPT}},
		{"jsonl/sharegpt", Options{Format: FormatShareGPT, FileFormat: FileJSONL}},
		{"parquet/sharegpt/best-of-1+split", Options{Format: FormatShareGPT, BestOf: 1, Split: "train=0.9,test=0.1", Dedupe: "exact"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			n := 0
			for b.Loop() {
				o := c.opts
				o.To = filepath.Join(dir, strconv.Itoa(n))
				o.Sources = []Source{{Path: src, Dirs: []string{src}}}
				if _, err := Run(context.Background(), o); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(float64(len(recs)*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
