package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/pipeline/outdir"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

// TestFolderFromSomeoneElse replays the adversarial run against the CLI: a
// ledger line whose shard is ../victimdir/victim.jsonl (a JSONL file outside
// the folder, its recorded size off by one, as a damaged shard's would be)
// is reported by verify, and neither generate --resume --prune, cat nor view
// reads or deletes the file; repair drops the path, after which verify
// passes and --resume redoes the line's record.
func TestFolderFromSomeoneElse(t *testing.T) {
	out, args, _ := healRun(t)
	want := catKeys(t, out)
	var key string
	for k := range want {
		key = k
		break
	}
	victim := filepath.Join(filepath.Dir(out), "victimdir", "victim.jsonl")
	content := []byte(`{"key":"` + key + `","prompt_index":0,"sample":0,"outcome":"completed","conversations":[{"from":"human","value":"SECRET"}]}` + "\n")
	if err := os.MkdirAll(filepath.Dir(victim), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(victim, content, 0o644); err != nil {
		t.Fatal(err)
	}
	intact := func(when string) {
		t.Helper()
		if b, err := os.ReadFile(victim); err != nil || string(b) != string(content) {
			t.Fatalf("%s: the outside file was touched: %q %v", when, b, err)
		}
	}
	sum := sha256.Sum256(content)
	line := outdir.AppendLine(nil, &outdir.Line{Shard: "../victimdir/victim.jsonl", Bytes: int64(len(content)) + 1, SHA256: hex.EncodeToString(sum[:]),
		Rows: []outdir.Row{{Key: key, Outcome: schemas.OutcomeCompleted, Len: int64(len(content))}}})
	ledger := filepath.Join(out, outdir.LedgerFile)
	f, err := os.OpenFile(ledger, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(line)
	f.Close()
	before, _ := os.ReadFile(ledger)
	n := strings.Count(string(before), "\n")

	code, stdout, errs := hp(t, "verify", out)
	if code != exitFatal || !strings.Contains(stdout, fmt.Sprintf("ledger.jsonl:%d: shard \"../victimdir/victim.jsonl\": not a shard of the output folder", n)) {
		t.Errorf("verify: exit %d:\n%s%s", code, stdout, errs)
	}
	code, _, errs = hp(t, append(args, "--resume", "--prune")...)
	if code != exitFatal || !strings.Contains(errs, fmt.Sprintf("ledger line %d", n)) || !strings.Contains(errs, "hermes-pipe repair "+out) {
		t.Errorf("generate --resume --prune: exit %d:\n%s", code, errs)
	}
	intact("resume --prune")
	code, stdout, errs = hp(t, "cat", out)
	if code != exitFatal || strings.Contains(stdout, "SECRET") || !strings.Contains(errs, "not a shard of the output folder") {
		t.Errorf("cat: exit %d:\n%s%s", code, stdout, errs)
	}
	base := startView(t, out)
	for _, p := range []string{"api/records", "raw/0", "raw/1", "raw/11", "api/record/0"} {
		code, body := httpGet(t, base+p, "")
		if strings.Contains(body, "SECRET") {
			t.Errorf("view /%s: %d served the outside file: %s", p, code, body)
		}
	}
	intact("view")
	if ledgerNow, _ := os.ReadFile(ledger); string(ledgerNow) != string(before) {
		t.Error("a refused command changed the ledger")
	}

	code, stdout, errs = hp(t, "repair", out)
	if code != 0 || !strings.Contains(stdout, fmt.Sprintf("ledger.jsonl:%d:", n)) || !strings.Contains(stdout, "rewrote 1 lines") {
		t.Fatalf("repair: exit %d:\n%s%s", code, stdout, errs)
	}
	mustVerify(t, out)
	if code, _, errs := hp(t, append(args, "--resume", "--prune")...); code != 0 {
		t.Fatalf("resume after repair: exit %d:\n%s", code, errs)
	}
	if got := catKeys(t, out); !maps.Equal(got, want) {
		t.Errorf("after repair and resume cat has %d keys, want %d", len(got), len(want))
	}
	mustVerify(t, out)
	intact("repair and resume")
}

// httpGet fetches u, with the Host header host when not empty.
func httpGet(t *testing.T, u, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestViewRefusesAForeignHost: `view` answers 421 to a Host that is not its
// loopback name (DNS rebinding: curl -H 'Host: attacker.example:PORT'), and
// serves the records to 127.0.0.1 and localhost on its port.
func TestViewRefusesAForeignHost(t *testing.T) {
	out, _, _ := healRun(t)
	base := startView(t, out)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	for host, want := range map[string]int{
		"attacker.example:" + port: http.StatusMisdirectedRequest,
		"attacker.example":         http.StatusMisdirectedRequest,
		"127.0.0.1:" + port:        http.StatusOK,
		"localhost:" + port:        http.StatusOK,
	} {
		code, body := httpGet(t, base+"api/records", host)
		if code != want {
			t.Errorf("Host %s: %d %s, want %d", host, code, body, want)
		}
		if want != http.StatusOK && strings.Contains(body, `"key"`) {
			t.Errorf("Host %s: refused but served records: %s", host, body)
		}
	}
}
