package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	tiktoken "github.com/pkoukk/tiktoken-go"
	loader "github.com/pkoukk/tiktoken-go-loader"
)

// Differential tests against github.com/pkoukk/tiktoken-go, which runs the
// original regexes (through regexp2) over the same rank files.

var (
	refMu   sync.Mutex
	refEncs = map[string]*tiktoken.Tiktoken{}
)

// reference returns tiktoken-go's encoding, built once per name (building
// it sorts the whole vocabulary).
func reference(t testing.TB, name string) *tiktoken.Tiktoken {
	t.Helper()
	refMu.Lock()
	defer refMu.Unlock()
	if enc, ok := refEncs[name]; ok {
		return enc
	}
	tiktoken.SetBpeLoader(loader.NewOfflineLoader())
	enc, err := tiktoken.GetEncoding(name)
	if err != nil {
		t.Fatal(err)
	}
	refEncs[name] = enc
	return enc
}

var loaded sync.Map // name → Tokenizer

func ours(t testing.TB, name string) Tokenizer {
	t.Helper()
	if v, ok := loaded.Load(name); ok {
		return v.(Tokenizer)
	}
	tok, err := Load(name)
	if err != nil {
		t.Fatal(err)
	}
	loaded.Store(name, tok)
	return tok
}

// comparable reports whether the regexp2 reference can judge s: .NET case
// folding does not map U+017F (long s) to s, while the Rust regex behind
// the official tiktoken does (the golden corpus covers that case).
func comparable(s string) bool { return !strings.Contains(s, "ſ") }

// fuzzAtoms are fragments chosen to hit every branch of the pre-tokenizers.
var fuzzAtoms = []string{
	"a", "Z", "é", "ß", "ǅ", "Ω", "ω", "Я", "ʰ", "ª", "中", "の", "カ", "한", "ก", "क", "\u0301", "\u093f", "\u200d",
	"0", "7", "٣", "²", "½", "Ⅻ", "𝟘", "𝓗", "𠀀", "😀", "👍🏽", "'", "’", "s", "t", "re", "VE", "ll", "M", "d",
	" ", " ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2028", "\u0085", "\v", "\f",
	".", ",", "!", "-", "/", "\\", "(", "{", "<", "\"", "#", "$", "%", "&", "*", "_", "`", "~", ":", "，", "。", "…", "€",
	"\x00", "\x7f", "\xff", "\xe2\x82", "\xc0\xaf", "\xed\xa0\x80", "<|endoftext|>",
}

func randomText(r *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		if r.IntN(8) == 0 {
			b.WriteByte(byte(r.IntN(256)))
			continue
		}
		b.WriteString(fuzzAtoms[r.IntN(len(fuzzAtoms))])
	}
	return b.String()
}

func checkDifferential(t *testing.T, name, s string) {
	t.Helper()
	if !comparable(s) {
		return
	}
	want := reference(t, name).EncodeOrdinary(s)
	tok := ours(t, name)
	got := tok.Encode(s)
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %q\n got %v\nwant %v", name, s, got, want)
	}
	if n := tok.Count(s); n != len(want) {
		t.Fatalf("%s: %q: Count = %d, want %d", name, s, n, len(want))
	}
}

// TestDifferentialRandom compares both encodings with tiktoken-go on a few
// thousand random strings from a fixed seed.
func TestDifferentialRandom(t *testing.T) {
	for _, name := range []string{"cl100k_base", "o200k_base"} {
		r := rand.New(rand.NewPCG(1, uint64(len(name))))
		for i := range 1500 {
			checkDifferential(t, name, randomText(r, 1+i%60))
		}
	}
}

// FuzzDifferential runs its seeds in every go test run; run it longer with
// go test -fuzz FuzzDifferential ./stages/tokenizer/.
func FuzzDifferential(f *testing.F) {
	r := rand.New(rand.NewPCG(7, 7))
	for range 40 {
		f.Add(randomText(r, 30))
	}
	f.Add("Hello world's  \n\n  x 12345 don't 你好 😀")
	f.Fuzz(func(t *testing.T, s string) {
		checkDifferential(t, "cl100k_base", s)
		checkDifferential(t, "o200k_base", s)
	})
}

// TestLongPieceHeapMatchesLinear checks the heap merge used for long pieces
// against the linear merge on the same pieces.
func TestLongPieceHeapMatchesLinear(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for _, name := range []string{"cl100k_base", "o200k_base"} {
		m := ours(t, name).(*encoder).model
		sc := m.getScratch()
		for range 200 {
			var b strings.Builder
			for b.Len() < 100+r.IntN(400) {
				b.WriteString([]string{"的", "一", "是", "a", "b", "ab", "xyz", "é", "ー", "😀"}[r.IntN(10)])
			}
			piece := b.String()
			syms := func() []symbol {
				var s []symbol
				for i := range len(piece) {
					s = append(s, symbol{start: int32(i), end: int32(i + 1), id: m.byteID[piece[i]]})
				}
				return s
			}
			lin := m.mergeLinear(syms(), piece, sc)
			hp := m.mergeHeap(syms(), piece, sc)
			if !slices.Equal(lin, hp) {
				t.Fatalf("%s: heap and linear merges differ on %q", name, piece)
			}
		}
		m.putScratch(sc)
	}
}

// TestConcurrent encodes from many goroutines at once (run with -race).
func TestConcurrent(t *testing.T) {
	tok := ours(t, "cl100k_base")
	r := rand.New(rand.NewPCG(5, 5))
	texts := make([]string, 64)
	want := make([]int, len(texts))
	for i := range texts {
		texts[i] = randomText(r, 200)
		want[i] = len(tok.Encode(texts[i]))
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 50 {
				i := (g*7 + k) % len(texts)
				if n := tok.Count(texts[i]); n != want[i] {
					t.Errorf("Count = %d, want %d", n, want[i])
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestCountDoesNotAllocate checks that Count on text whose pieces are
// cached builds no id slice.
func TestCountDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("under -race sync.Pool drops scratch space (and its cache) on purpose")
	}
	_, inputs := corpus(t)
	text := inputs["english"] + inputs["code-go"] + inputs["chinese"]
	for _, name := range []string{"cl100k_base", "o200k_base"} {
		tok := ours(t, name)
		want := len(tok.Encode(text))
		allocs := testing.AllocsPerRun(50, func() {
			if n := tok.Count(text); n != want {
				t.Fatalf("Count = %d, want %d", n, want)
			}
		})
		if allocs > 0.5 {
			t.Errorf("%s: Count allocates %.1f times per call", name, allocs)
		}
	}
}
