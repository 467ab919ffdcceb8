//go:build race

package tokenizer

// raceEnabled is set under -race, where sync.Pool drops items on purpose.
const raceEnabled = true
