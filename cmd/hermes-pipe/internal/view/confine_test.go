package view

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
	"github.com/hermes-pipe/hermes-pipe/stages/compress"
)

// TestHostAndOriginChecked: without a token (loopback) the viewer answers
// only to 127.0.0.1, localhost and [::1] on its own port, so a page whose
// name is rebound to 127.0.0.1 reads nothing (421); a request carrying
// another origin is refused whatever its method (403). With a token
// (--allow-remote) any Host is served, the Origin is still checked.
func TestHostAndOriginChecked(t *testing.T) {
	dir := folder(t)
	ix, _, _, err := OpenIndex([]string{dir}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	do := func(srv *httptest.Server, method, host, origin, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	local := NewServer(ix, dir, "")
	srv := httptest.NewServer(local.Handler())
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port := u.Port()
	for _, c := range []struct {
		method, host, origin string
		want                 int
	}{
		{"GET", "attacker.example:" + port, "", http.StatusMisdirectedRequest},
		{"GET", "attacker.example", "", http.StatusMisdirectedRequest},
		{"GET", "127.0.0.2:" + port, "", http.StatusMisdirectedRequest},
		{"GET", "127.0.0.1:1", "", http.StatusMisdirectedRequest},
		{"GET", "localhost.attacker.example:" + port, "", http.StatusMisdirectedRequest},
		{"GET", "", "", http.StatusOK},
		{"GET", "127.0.0.1:" + port, "", http.StatusOK},
		{"GET", "localhost:" + port, "", http.StatusOK},
		{"GET", "LOCALHOST", "", http.StatusOK},
		{"GET", "[::1]:" + port, "", http.StatusOK},
		{"GET", "[::1]", "", http.StatusOK},
		{"GET", "", "http://attacker.example:" + port, http.StatusForbidden},
		{"GET", "", "null", http.StatusForbidden},
		{"GET", "", "http://127.0.0.1:" + port, http.StatusOK},
		{"POST", "", "http://attacker.example", http.StatusForbidden},
		{"POST", "", "", http.StatusMethodNotAllowed},
		{"POST", "", "http://127.0.0.1:" + port, http.StatusMethodNotAllowed},
		{"DELETE", "attacker.example:" + port, "", http.StatusMisdirectedRequest},
	} {
		code, body := do(srv, c.method, c.host, c.origin, "/api/records")
		if code != c.want {
			t.Errorf("%s Host %q Origin %q: %d %s, want %d", c.method, c.host, c.origin, code, body, c.want)
		}
		if code != http.StatusOK && strings.Contains(body, `"key"`) {
			t.Errorf("%s Host %q Origin %q: refused but served records", c.method, c.host, c.origin)
		}
	}

	remote := NewServer(ix, dir, "sesame")
	rsrv := httptest.NewServer(remote.Handler())
	defer rsrv.Close()
	if code, body := do(rsrv, "GET", "viewer.example:8080", "", "/api/records?token=sesame"); code != http.StatusOK {
		t.Errorf("remote with its token, another Host: %d %s", code, body)
	}
	if code, _ := do(rsrv, "GET", "viewer.example:8080", "", "/api/records"); code != http.StatusUnauthorized {
		t.Errorf("remote without the token: %d", code)
	}
	if code, _ := do(rsrv, "GET", "viewer.example:8080", "http://attacker.example", "/api/records?token=sesame"); code != http.StatusForbidden {
		t.Errorf("remote from another origin: %d", code)
	}
	if code, _ := do(rsrv, "GET", "viewer.example:8080", "http://viewer.example:8080", "/api/records?token=sesame"); code != http.StatusOK {
		t.Errorf("remote from its own origin: %d", code)
	}
}

// outsideLine appends to dir's ledger a line naming a shard outside the
// folder whose bytes are a record (so only the confinement keeps it out),
// and returns the outside file's path and content.
func outsideLine(t *testing.T, dir string) (string, []byte) {
	t.Helper()
	content := []byte(`{"key":"kB","prompt_index":1,"sample":0,"outcome":"completed","conversations":[{"from":"human","value":"SECRET"}]}` + "\n")
	p := filepath.Join(filepath.Dir(dir), "outside.jsonl")
	if err := os.WriteFile(p, content, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	l := outdir.AppendLine(nil, &outdir.Line{Shard: "../outside.jsonl", Bytes: int64(len(content)), SHA256: hex.EncodeToString(sum[:]),
		Rows: []outdir.Row{{Key: "kB", Outcome: schemas.OutcomeCompleted, PromptIndex: 1, Len: int64(len(content))}}})
	f, err := os.OpenFile(filepath.Join(dir, outdir.LedgerFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(l)
	f.Close()
	return p, content
}

// TestViewRefusesALedgerLineOutsideTheFolder: view does not read a folder
// whose ledger names a shard outside it (as its last line: not taken for a
// torn end), neither through the index nor while building: the build fails
// and says why, and no answer holds the outside file's bytes.
func TestViewRefusesALedgerLineOutsideTheFolder(t *testing.T) {
	dir := folder(t)
	outsideLine(t, dir)
	if _, _, _, err := OpenIndex([]string{dir}, t.TempDir()); !errors.Is(err, outdir.ErrShardPath) {
		t.Errorf("OpenIndex: %v", err)
	}
	s, base := builtServer(t, dir)
	if _, _, berr := s.BuildResult(); !errors.Is(berr, outdir.ErrShardPath) {
		t.Errorf("build: %v", berr)
	}
	for _, path := range []string{"/api/records", "/raw/0", "/raw/1", "/api/record/1"} {
		if b := get(t, base+path); bytes.Contains(b, []byte("SECRET")) {
			t.Errorf("%s served the outside file: %s", path, b)
		}
	}
}

// builtServer opens the viewer on dir, serves it and waits for its build;
// both are closed when the test ends.
func builtServer(t *testing.T, dir string) (*Server, string) {
	t.Helper()
	s, err := Open([]string{dir}, t.TempDir(), dir, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	<-s.Ready()
	return s, srv.URL
}

// get returns the body of a GET of addr, whatever its status.
func get(t *testing.T, addr string) []byte {
	t.Helper()
	resp, err := http.Get(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b
}

// TestViewDoesNotFollowAShardLink: a shard replaced by a symbolic link to a
// file outside the folder with the very same bytes is not served by /raw
// (the build fails and says why; the record's raw line is an error).
func TestViewDoesNotFollowAShardLink(t *testing.T) {
	dir := folder(t)
	shards, _ := filepath.Glob(filepath.Join(dir, "data", "shard-*.jsonl"))
	if len(shards) == 0 {
		t.Fatal("no data shards")
	}
	content, _ := os.ReadFile(shards[0])
	marked := bytes.Replace(content, []byte(`"question"`), []byte(`"SECRET!!"`), -1) // same size
	if len(marked) != len(content) || bytes.Equal(marked, content) {
		t.Fatal("the marker must keep the size and change the bytes")
	}
	outside := filepath.Join(t.TempDir(), "copy.jsonl")
	os.WriteFile(outside, marked, 0o644)
	os.Remove(shards[0])
	if err := os.Symlink(outside, shards[0]); err != nil {
		t.Fatal(err)
	}
	s, base := builtServer(t, dir)
	if _, _, berr := s.BuildResult(); berr == nil || !errors.Is(berr, outdir.ErrShardLink) && !strings.Contains(berr.Error(), "symbolic link") {
		t.Errorf("build: %v", berr)
	}
	for i := range 30 {
		if b := get(t, fmt.Sprintf("%s/raw/%d", base, i)); bytes.Contains(b, []byte("SECRET")) {
			t.Fatalf("/raw/%d served the linked file: %s", i, b)
		}
	}
}

// TestOriginalInputsChecked: an entry of compress_inputs.json that compress
// could not have written (relative, a device, a name that does not end the
// path, an unknown kind) is not read; a plausible one is.
func TestOriginalInputsChecked(t *testing.T) {
	d := t.TempDir()
	good := filepath.Join(d, "in.jsonl")
	os.WriteFile(good, []byte(`{"key":"a"}`+"\n"), 0o644)
	for _, c := range []struct {
		in origInput
		ok bool
	}{
		{origInput{Path: good, Name: "in.jsonl", Kind: "jsonl"}, true},
		{origInput{Path: "in.jsonl", Name: "in.jsonl", Kind: "jsonl"}, false},
		{origInput{Path: d + "/x/../in.jsonl", Name: "in.jsonl", Kind: "jsonl"}, false},
		{origInput{Path: "/dev/zero", Name: "zero", Kind: "jsonl"}, false},
		{origInput{Path: good, Name: "other.jsonl", Kind: "jsonl"}, false},
		{origInput{Path: good, Name: "in.jsonl", Kind: "exe"}, false},
		{origInput{Path: d, Name: filepath.Base(d), Kind: "run"}, false},
	} {
		if err := plausibleInput(compress.Input(c.in)); (err == nil) != c.ok {
			t.Errorf("%+v: %v, want ok %v", c.in, err, c.ok)
		}
	}
}
