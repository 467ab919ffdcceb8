package compress

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/hermes-pipe/hermes-pipe/stages/tokenizer"
)

// tokenChunk is the text size CountTokens hands to the tokenizer at once.
const tokenChunk = 1 << 20

// CountTokens returns the number of tokens of the whole text of r (a file's
// bytes, decompressed when Kind says so), as tok.Count of the whole text
// would. It reads in chunks of about 1 MiB cut just after a newline that is
// followed by an ASCII letter: no pre-tokenizer piece of the supported
// encodings spans such a point, so the sum of the chunk counts is exact.
// Text without such a point is counted in one piece. The `tokens` command
// calls it once per file.
func CountTokens(tok tokenizer.Tokenizer, r io.Reader) (int64, error) {
	br := bufio.NewReaderSize(r, 256<<10)
	var (
		total int64
		buf   []byte
		tmp   = make([]byte, 256<<10)
	)
	for {
		n, err := br.Read(tmp)
		buf = append(buf, tmp[:n]...)
		if len(buf) >= tokenChunk {
			if cut := safeCut(buf); cut > 0 {
				total += int64(tok.Count(string(buf[:cut])))
				buf = append(buf[:0], buf[cut:]...)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return total, fmt.Errorf("count tokens: %w", err)
		}
	}
	total += int64(tok.Count(string(buf)))
	return total, nil
}

// safeCut returns the last index i of buf with buf[i-1] == '\n' and buf[i] an
// ASCII letter, or 0.
func safeCut(buf []byte) int {
	for end := len(buf) - 1; end > 0; {
		i := bytes.LastIndexByte(buf[:end], '\n')
		if i < 0 {
			return 0
		}
		if c := buf[i+1]; (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') {
			return i + 1
		}
		end = i
	}
	return 0
}

// OpenText opens a file for CountTokens, decompressing .gz and .zst files.
// The caller closes the result.
func OpenText(path string) (io.ReadCloser, error) {
	k := fileKind(path, true)
	if k == KindParquet {
		k = KindJSONL // counted as bytes
	}
	r, err := openStream(path, k)
	if err != nil {
		return nil, err
	}
	return r, nil
}
