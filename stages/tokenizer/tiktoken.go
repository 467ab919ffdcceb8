package tokenizer

import (
	"fmt"

	loader "github.com/pkoukk/tiktoken-go-loader"
)

// loadTiktoken builds cl100k_base or o200k_base from the rank files embedded
// in tiktoken-go-loader. Nothing is fetched over the network.
func loadTiktoken(name string) (*encoder, error) {
	ranks, err := loader.NewOfflineLoader().LoadTiktokenBpe(name + ".tiktoken")
	if err != nil {
		return nil, fmt.Errorf("read embedded ranks: %w", err)
	}
	m := &bpeModel{vocab: ranks, direct: true}
	for b := range 256 {
		id, ok := ranks[string([]byte{byte(b)})]
		if !ok {
			return nil, fmt.Errorf("embedded ranks lack the one-byte token %#x", b)
		}
		m.byteID[b] = int32(id)
	}
	pat := patCL100K
	if name == "o200k_base" {
		pat = patO200K
	}
	return &encoder{name: name, model: m, split: knownSplitter(pat)}, nil
}
