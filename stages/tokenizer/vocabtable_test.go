package tokenizer

import (
	"testing"

	loader "github.com/pkoukk/tiktoken-go-loader"
)

// TestVocabTableMatchesMap looks up every token of both built-in encodings,
// and strings next to them that are not tokens (a byte added, a byte
// dropped, the last byte changed), in the vocabTable and in the map it
// was built from: the answers must be the same.
func TestVocabTableMatchesMap(t *testing.T) {
	for _, name := range []string{"cl100k_base", "o200k_base"} {
		ranks, err := loader.NewOfflineLoader().LoadTiktokenBpe(name + ".tiktoken")
		if err != nil {
			t.Fatal(err)
		}
		tab := newVocabTable(ranks)
		check := func(s string) {
			want, wantOK := ranks[s]
			got, ok := tab.get(s)
			if ok != wantOK || got != want {
				t.Fatalf("%s: get(%q) = %d, %v; want %d, %v", name, s, got, ok, want, wantOK)
			}
		}
		check("")
		for tok := range ranks {
			check(tok)
			check(tok + "x")
			check(tok[:len(tok)-1])
			check(tok[:len(tok)-1] + string(tok[len(tok)-1]^0x40))
		}
	}
}
