package tokenizer

import (
	"fmt"
	"hash/fnv"
	"os"
	"strings"
	"testing"
	"time"
)

// docSeparator splits the documents of the file that scripts/bench-tokens.mjs
// generates.
const docSeparator = "\x1e"

// BenchmarkCountFile counts the tokens of every document of the file named
// by TOKENIZER_BENCH_FILE with TOKENIZER_BENCH_ENCODING (default
// cl100k_base) and prints one "BENCH_RESULT" line: bytes, tokens, a hash of
// the per-document counts, and MB/s of the best of TOKENIZER_BENCH_REPEAT
// passes, by wall time and by CPU time of the process (processCPU).
// scripts/bench-tokens.mjs runs it on one core next to npm tiktoken.
func BenchmarkCountFile(b *testing.B) {
	benchFile(b, "go", func(name string) func(string) int {
		tok, err := Load(name)
		if err != nil {
			b.Fatal(err)
		}
		return tok.Count
	})
}

// BenchmarkTiktokenGoFile is BenchmarkCountFile for
// github.com/pkoukk/tiktoken-go, for comparison.
func BenchmarkTiktokenGoFile(b *testing.B) {
	benchFile(b, "tiktoken-go", func(name string) func(string) int {
		enc := reference(b, name)
		return func(s string) int { return len(enc.EncodeOrdinary(s)) }
	})
}

func benchFile(b *testing.B, impl string, load func(name string) func(string) int) {
	path := os.Getenv("TOKENIZER_BENCH_FILE")
	if path == "" {
		b.Skip("TOKENIZER_BENCH_FILE not set (see scripts/bench-tokens.mjs)")
	}
	name := os.Getenv("TOKENIZER_BENCH_ENCODING")
	if name == "" {
		name = "cl100k_base"
	}
	repeat := 1
	if r := os.Getenv("TOKENIZER_BENCH_REPEAT"); r != "" {
		if _, err := fmt.Sscan(r, &repeat); err != nil || repeat < 1 {
			b.Fatalf("TOKENIZER_BENCH_REPEAT=%q", r)
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	docs := strings.Split(string(raw), docSeparator)
	count := load(name)
	b.ResetTimer()
	for b.Loop() {
		best := time.Duration(1<<63 - 1)
		bestCPU := best
		var total int
		var hash uint64
		for range repeat {
			h := fnv.New64a()
			total = 0
			start := time.Now()
			cpu0 := processCPU()
			var buf [8]byte
			for _, d := range docs {
				n := count(d)
				total += n
				for k := range buf {
					buf[k] = byte(n >> (8 * k))
				}
				h.Write(buf[:])
			}
			bestCPU = min(bestCPU, processCPU()-cpu0)
			best = min(best, time.Since(start))
			hash = h.Sum64()
		}
		mb := float64(len(raw)) / 1e6
		fmt.Printf("BENCH_RESULT impl=%s encoding=%s bytes=%d docs=%d tokens=%d hash=%016x seconds=%.3f mbps=%.2f cpu_seconds=%.3f cpu_mbps=%.2f\n",
			impl, name, len(raw), len(docs), total, hash, best.Seconds(), mb/best.Seconds(), bestCPU.Seconds(), mb/bestCPU.Seconds())
	}
}

func benchText(b *testing.B, kind string) string {
	_, inputs := corpus(b)
	var parts []string
	switch kind {
	case "english":
		parts = []string{inputs["english"], inputs["contractions"], inputs["case-mix"]}
	case "code":
		parts = []string{inputs["code-go"], inputs["code-python"], inputs["json"], inputs["shell"]}
	case "cjk":
		parts = []string{inputs["chinese"], inputs["japanese"], inputs["korean"], inputs["long-cjk"]}
	}
	return strings.Repeat(strings.Join(parts, "\n"), 200)
}

func BenchmarkCount(b *testing.B) {
	for _, name := range []string{"cl100k_base", "o200k_base"} {
		tok := ours(b, name)
		for _, kind := range []string{"english", "code", "cjk"} {
			text := benchText(b, kind)
			b.Run(name+"/"+kind, func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				b.ReportAllocs()
				for b.Loop() {
					tok.Count(text)
				}
			})
		}
	}
}

func BenchmarkTiktokenGo(b *testing.B) {
	enc := reference(b, "cl100k_base")
	for _, kind := range []string{"english", "code", "cjk"} {
		text := benchText(b, kind)
		b.Run(kind, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				enc.EncodeOrdinary(text)
			}
		})
	}
}
