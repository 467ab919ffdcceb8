package rollout

import (
	"crypto/md5"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/sandbox/ssh/sshtest"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/docker"
	"github.com/hermes-pipe/hermes-pipe/sandbox/docker/dockertest"
	"github.com/hermes-pipe/hermes-pipe/sandbox/local"
	"github.com/hermes-pipe/hermes-pipe/sandbox/ssh"
	"github.com/hermes-pipe/hermes-pipe/schemas"
)

func TestMain(m *testing.M) {
	code := m.Run()
	dockertest.Done()
	os.Exit(code)
}

// TestFileToolsAcceptance is the acceptance run of the native file tools on
// every real driver: through the agent loop, the model writes a 300 KiB
// file and a 200 KiB one, makes a 20 MB log with a command, reads page 3 of
// it and patches the 200 KiB file, with the CLI's default output limit
// (64 KiB). The rollout must complete with exact tool results, and the page
// must cost the driver well under a MiB of reads.
func TestFileToolsAcceptance(t *testing.T) {
	drivers := map[string]func(t *testing.T) sandbox.Driver{
		"local": func(t *testing.T) sandbox.Driver {
			d, err := local.New(sandbox.Config{Local: sandbox.LocalConfig{BaseDir: t.TempDir()}})
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
		"docker": func(t *testing.T) sandbox.Driver {
			dockertest.Require(t)
			d, err := docker.New(sandbox.Config{RunID: "rollout-files", Docker: sandbox.DockerConfig{DefaultImage: dockertest.Image()}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.Release() })
			return d
		},
		"ssh": func(t *testing.T) sandbox.Driver {
			e := sshEnv(t)
			d, err := ssh.New(ssh.Options{Addr: e["HERMES_TEST_SSH_ADDR"], User: e["HERMES_TEST_SSH_USER"],
				KeyFiles: []string{e["HERMES_TEST_SSH_KEY"]}, KnownHosts: []string{e["HERMES_TEST_SSH_KNOWN_HOSTS"]}, NoAgent: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.Release() })
			return d
		},
	}
	for _, name := range []string{"local", "docker", "ssh"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			acceptance(t, drivers[name](t))
		})
	}
}

func acceptance(t *testing.T, d sandbox.Driver) {
	// 300 KiB with quotes, dollars, backslashes and non-ASCII: nothing may
	// be read by a shell.
	var b strings.Builder
	for i := 0; b.Len() < 300<<10; i++ {
		fmt.Fprintf(&b, "row %05d it's $HOME `x` \\n é €\n", i)
	}
	big := b.String()
	b.Reset()
	for i := 0; b.Len() < 200<<10; i++ {
		fmt.Fprintf(&b, "def f%05d(): return %d\n", i, i)
	}
	src := b.String() + "MARKER = 'old'\n"
	patched := strings.Replace(src, "MARKER = 'old'", "MARKER = 'new'", 1)
	const logLines = 204_800 // 100 bytes each: 20 MB
	makeLog := `awk 'BEGIN { x = sprintf("%82s", ""); gsub(/ /, "x", x); for (i = 1; i <= ` + fmt.Sprint(logLines) +
		`; i++) printf "log line %07d %s\n", i, x }' > logs/app.log && wc -c < logs/app.log`
	cd := &countingDriver{Driver: d}
	rec, res := runFiles(t, cd, 64<<10,
		[]call{
			{"terminal", map[string]any{"command": "mkdir -p work/logs && cd work"}},
			{"write_file", map[string]any{"path": "out/big.txt", "content": big}},
			{"write_file", map[string]any{"path": "src/app.py", "content": src}},
		},
		[]call{{"terminal", map[string]any{"command": makeLog}}},
		[]call{{"read_file", map[string]any{"path": "logs/app.log", "offset": 1001, "limit": 500}}},
		[]call{{"patch", map[string]any{"path": "src/app.py", "old_string": "MARKER = 'old'", "new_string": "MARKER = 'new'"}}},
		[]call{{"terminal", map[string]any{"command": "wc -c < out/big.txt; md5sum out/big.txt src/app.py | cut -d' ' -f1"}}},
	)
	if rec.Outcome != schemas.OutcomeCompleted {
		t.Fatalf("outcome %s (%s)", rec.Outcome, rec.Error)
	}
	if len(res) != 7 {
		t.Fatalf("%d tool results, want 7", len(res))
	}
	want := map[int]string{
		0: `{"output":"","exit_code":0,"error":null}`,
		1: fmt.Sprintf(`{"bytes_written":%d}`, len(big)),
		2: fmt.Sprintf(`{"bytes_written":%d}`, len(src)),
		3: fmt.Sprintf(`{"output":"%d\n","exit_code":0,"error":null}`, logLines*100),
		5: `{"success":true,"replacements":1}`,
		6: fmt.Sprintf(`{"output":"%d\n%x\n%x\n","exit_code":0,"error":null}`, len(big), md5.Sum([]byte(big)), md5.Sum([]byte(patched))),
	}
	for i, w := range want {
		if res[i] != w {
			t.Errorf("tool result %d = %.300s\nwant %s", i, res[i], w)
		}
	}
	var page []string
	for i := 1001; i <= 1500; i++ {
		page = append(page, fmt.Sprintf("%d|log line %07d %s", i, i, strings.Repeat("x", 82)))
	}
	got := decode[readResult](t, res[4])
	if got.Content != strings.Join(page, "\n") || got.TotalLines != logLines || !got.Truncated {
		t.Errorf("page 3 = %+v", abbrev(got))
	}
	// Page 3 needs its lines and the 1000 before: about 150 KB of the 20 MB
	// (the scan reads in growing chunks of 64 KiB and up); patch reads the
	// 200 KiB file once.
	if n := cd.read(); n > 1<<20 {
		t.Errorf("the driver read %d bytes for a 20 MB log's page and a 200 KiB patch", n)
	}
	for _, tool := range []string{"terminal", "write_file", "read_file", "patch"} {
		if st := rec.ToolStats[tool]; st.Failure != 0 || st.Success == 0 {
			t.Errorf("tool_stats[%s] = %+v", tool, st)
		}
	}
}

// sshEnv is the test sshd's settings (sshtest.Env).
func sshEnv(t *testing.T) map[string]string { return sshtest.Env(t) }
