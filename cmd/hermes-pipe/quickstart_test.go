package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README's Quickstart block, run as written with these substitutions
// (also said in the HTML comment above the block):
//
//   - `make build` is skipped: the test builds bin/hermes-pipe and bin/fakellm
//     into a temporary folder that also links the repository's datasets/, and
//     runs every line there;
//   - a line ending in `&` is started by the test, with `--addr 127.0.0.1:8000`
//     replaced by `--addr 127.0.0.1:0 --addr-file F`; the address it bound
//     replaces 127.0.0.1:8000 in every later line;
//   - `bin/hermes-pipe view ...` gets `--addr 127.0.0.1:0 --addr-file F`; the
//     test reads its record list over HTTP, then stops it with SIGINT;
//   - `kill %N` stops the N-th background line (the test's own process);
//   - generate gets --local-isolation none where `sandbox check` fails, as the
//     README says to do.
//
// Every other line runs in bash with -euo pipefail and must exit 0.

const quickstartFake = "127.0.0.1:8000"

// quickstartCommands returns the commands of README.md's Quickstart sh
// block: continuation lines joined, a here-document kept with its command.
func quickstartCommands(readme string) ([]string, error) {
	_, after, ok := strings.Cut(readme, "\n## Quickstart\n")
	if !ok {
		return nil, fmt.Errorf("README.md has no ## Quickstart section")
	}
	if i := strings.Index(after, "\n## "); i >= 0 {
		after = after[:i]
	}
	_, block, ok := strings.Cut(after, "\n```sh\n")
	if !ok {
		return nil, fmt.Errorf("the Quickstart has no sh block")
	}
	block, _, ok = strings.Cut(block, "\n```")
	if !ok {
		return nil, fmt.Errorf("the Quickstart's sh block is not closed")
	}
	var cmds []string
	var cur strings.Builder
	heredoc := ""
	for _, line := range strings.Split(block, "\n") {
		cur.WriteString(line)
		switch {
		case heredoc != "":
			if line == heredoc {
				heredoc = ""
			} else {
				cur.WriteString("\n")
				continue
			}
		case strings.Contains(line, "<<'"):
			_, tag, _ := strings.Cut(line, "<<'")
			heredoc, _, _ = strings.Cut(tag, "'")
			cur.WriteString("\n")
			continue
		case strings.HasSuffix(line, "\\"):
			cur.WriteString("\n")
			continue
		}
		if c := strings.TrimSpace(cur.String()); c != "" {
			cmds = append(cmds, c)
		}
		cur.Reset()
	}
	if heredoc != "" || cur.Len() > 0 {
		return nil, fmt.Errorf("the Quickstart's block ends inside a command: %q", cur.String())
	}
	return cmds, nil
}

// withoutComment drops a trailing `# comment` (the special lines hold no
// quoted #).
func withoutComment(cmd string) string {
	if i := strings.Index(cmd, " #"); i >= 0 {
		cmd = cmd[:i]
	}
	return strings.TrimSpace(cmd)
}

// waitAddrFile waits for a process to write its address file, or to exit.
func waitAddrFile(t *testing.T, path string, done <-chan struct{}, log *bytes.Buffer) string {
	t.Helper()
	for {
		if b, err := os.ReadFile(path); err == nil && len(bytes.TrimSpace(b)) > 0 {
			return strings.TrimSpace(string(b))
		}
		select {
		case <-done:
			t.Fatalf("exited before listening:\n%s", log)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

type quickstartProc struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  *bytes.Buffer
}

func startQuickstartProc(t *testing.T, dir, line string) *quickstartProc {
	t.Helper()
	p := &quickstartProc{cmd: exec.Command("bash", "-c", "exec "+line), done: make(chan struct{}), log: &bytes.Buffer{}}
	p.cmd.Dir = dir
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.done })
	return p
}

func buildQuickstartBin(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(buildBinary(t), filepath.Join(dir, "bin", "hermes-pipe")); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "bin", "fakellm"), "../fakellm").CombinedOutput(); err != nil {
		t.Fatalf("build fakellm: %v\n%s", err, out)
	}
	abs, err := filepath.Abs("../../datasets")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(abs, filepath.Join(dir, "datasets")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// viewRecords asks a running view for its list and returns the ids shown.
func viewRecords(t *testing.T, addr string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/api/records", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("view: %v", err)
		}
		var page struct {
			Total    int              `json:"total"`
			Rows     []map[string]any `json:"rows"`
			Indexing *struct{}        `json:"indexing"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("view's /api/records: %v", err)
		}
		if page.Indexing == nil || len(page.Rows) >= 3 {
			return len(page.Rows)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("view still indexing")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestReadmeQuickstart runs README.md's Quickstart (see the substitutions
// above), so the README cannot drift from the commands.
func TestReadmeQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := quickstartCommands(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	dir := buildQuickstartBin(t)
	confined := exec.Command(filepath.Join(dir, "bin", "hermes-pipe"), "sandbox", "check").Run() == nil
	var background []*quickstartProc
	fakeAddr := ""
	ran := map[string]bool{}
	for _, cmd := range cmds {
		line := withoutComment(cmd)
		if fakeAddr != "" {
			line = strings.ReplaceAll(line, quickstartFake, fakeAddr)
		}
		switch {
		case line == "make build":
			ran["build"] = true
		case strings.HasSuffix(line, "&"):
			line = strings.TrimSpace(strings.TrimSuffix(line, "&"))
			addrFile := filepath.Join(t.TempDir(), "addr")
			if !strings.Contains(line, "--addr "+quickstartFake) {
				t.Fatalf("background line %q does not listen on %s", line, quickstartFake)
			}
			line = strings.Replace(line, "--addr "+quickstartFake, "--addr 127.0.0.1:0 --addr-file "+addrFile, 1)
			p := startQuickstartProc(t, dir, line)
			background = append(background, p)
			fakeAddr = waitAddrFile(t, addrFile, p.done, p.log)
		case strings.HasPrefix(line, "bin/hermes-pipe view "):
			addrFile := filepath.Join(t.TempDir(), "addr")
			line = strings.Replace(line, " view ", " view --addr 127.0.0.1:0 --addr-file "+addrFile+" ", 1)
			p := startQuickstartProc(t, dir, line)
			addr := waitAddrFile(t, addrFile, p.done, p.log)
			if n := viewRecords(t, addr); n != 3 {
				t.Errorf("view lists %d records, want 3", n)
			}
			_ = p.cmd.Process.Signal(syscall.SIGINT)
			<-p.done
			ran["view"] = true
		case strings.HasPrefix(line, "kill %"):
			var n int
			if _, err := fmt.Sscanf(line, "kill %%%d", &n); err != nil || n < 1 || n > len(background) {
				t.Fatalf("%q: no such background line", line)
			}
			p := background[n-1]
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			<-p.done
			ran["kill"] = true
		default:
			if strings.HasPrefix(line, "bin/hermes-pipe generate ") && !confined {
				line += " --local-isolation none"
			}
			c := exec.Command("bash", "-euo", "pipefail", "-c", line)
			c.Dir = dir
			out, err := c.CombinedOutput()
			if err != nil {
				t.Fatalf("README Quickstart: %s\n%v\n%s", cmd, err, out)
			}
			t.Logf("$ %s\n%s", line, out)
			if f := strings.Fields(line); len(f) > 1 && f[0] == "bin/hermes-pipe" {
				ran[f[1]] = true
			}
		}
	}
	for _, want := range []string{"build", "generate", "stats", "view", "export", "kill"} {
		if !ran[want] {
			t.Errorf("the Quickstart has no %s step", want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "quickstart", "sft", "export.json")); err != nil {
		t.Errorf("the Quickstart's export made no training set: %v", err)
	}
}

// TestQuickstartCommands: the block's parser joins continuations and keeps a
// here-document with its command, and refuses a block left open.
func TestQuickstartCommands(t *testing.T) {
	readme := "x\n## Quickstart\n\ntext\n```sh\na \\\n  b\ncat > f <<'EOF'\n1\n2\nEOF\nc & # bg\n```\n## next\n"
	got, err := quickstartCommands(readme)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a \\\n  b", "cat > f <<'EOF'\n1\n2\nEOF", "c & # bg"}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if _, err := quickstartCommands("## Quickstart\n```sh\ncat <<'EOF'\nx\n```\n"); err == nil {
		t.Error("an unterminated here-document was accepted")
	}
	if _, err := quickstartCommands("## generate\n"); err == nil {
		t.Error("a README without a Quickstart was accepted")
	}
	if withoutComment("c & # bg") != "c &" {
		t.Errorf("withoutComment = %q", withoutComment("c & # bg"))
	}
}
