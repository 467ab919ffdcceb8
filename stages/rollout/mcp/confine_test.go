package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
)

// confinement returns the Confinement of this machine, or skips.
func confinement(t *testing.T) *Confinement {
	t.Helper()
	r := confine.Probe(context.Background())
	if err := r.Usable(); err != nil {
		t.Skipf("confinement unavailable here: %v", err)
	}
	return &Confinement{Bwrap: r.Bwrap}
}

// secretFolder makes a folder outside /tmp (which confined servers see a
// private one of) holding a file, as a folder of the invoking user would.
func secretFolder(t *testing.T) (dir, file string) {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "hermes-mcp-secret-*")
	if err != nil {
		home, herr := os.UserHomeDir()
		if herr != nil {
			t.Skipf("no folder outside /tmp to hide: %v", err)
		}
		if dir, err = os.MkdirTemp(home, ".hermes-mcp-secret-*"); err != nil {
			t.Skipf("no folder outside /tmp to hide: %v", err)
		}
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	file = filepath.Join(dir, "id_secret")
	if err := os.WriteFile(file, []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

// callTool calls a tool and returns its result text and whether it was an
// error.
func callTool(t *testing.T, s *Session, name string, args map[string]any) (string, bool) {
	t.Helper()
	out, err := s.Call(context.Background(), name, args)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("%s: %q is not a JSON object", name, out)
	}
	if e, ok := m["error"]; ok {
		return fmt.Sprint(e), true
	}
	return fmt.Sprint(m["result"]), false
}

// startServers starts the servers of the configuration text (no
// environment variables), confined by k when confined; they stop when the
// test ends.
func startServers(t *testing.T, text string, k *Confinement, confined bool) *Manager {
	t.Helper()
	cfg, err := Parse("cfg.json", []byte(text), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if confined {
		cfg.Confine(k)
	}
	m, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// TestConfinedStdioServer: a rollout's stdio server started confined works
// on ${workdir} but sees nothing of a folder outside its mounts, of the
// invoking user's home or of hermes-pipe's process; unconfined, the same
// server sees them (so the probes can fail).
func TestConfinedStdioServer(t *testing.T) {
	k := confinement(t)
	secret, _ := secretFolder(t)
	home, _ := os.UserHomeDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	text := `{"mcpServers": {"t": {"command": ` + q(exe) + `, "args": ["-test.run=^$"], "env": {"MCPTEST_SERVE": "t"}}}}`
	for _, confined := range []bool{true, false} {
		t.Run(fmt.Sprintf("confined=%v", confined), func(t *testing.T) {
			m := startServers(t, text, k, confined)
			work := t.TempDir()
			if err := os.WriteFile(filepath.Join(work, "notes.txt"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			s := m.NewSession(work)
			defer s.Close()
			if out, isErr := callTool(t, s, "mcp_t_ls", map[string]any{"path": work}); isErr || !strings.Contains(out, "notes.txt") {
				t.Fatalf("ls ${workdir}: %q", out)
			}
			out, isErr := callTool(t, s, "mcp_t_ls", map[string]any{"path": secret})
			if confined && (!isErr || strings.Contains(out, "id_secret")) {
				t.Errorf("confined server listed %s: %q", secret, out)
			}
			if !confined && (isErr || !strings.Contains(out, "id_secret")) {
				t.Errorf("unconfined server could not list %s: %q", secret, out)
			}
			self := fmt.Sprintf("/proc/%d", os.Getpid())
			out, isErr = callTool(t, s, "mcp_t_ls", map[string]any{"path": self})
			if confined == !isErr {
				t.Errorf("confined=%v: ls %s (hermes-pipe's process): %q, error %v", confined, self, out, isErr)
			}
			if home != "" && confined {
				if out, isErr := callTool(t, s, "mcp_t_ls", map[string]any{"path": home}); !isErr {
					t.Errorf("confined server listed the home folder %s: %q", home, out)
				}
			}
			if confined {
				if out, _ := callTool(t, s, "mcp_t_ls", nil); !strings.Contains(out, "notes.txt") {
					t.Errorf("confined server does not start in ${workdir}: %q", out)
				}
				if out, _ := callTool(t, s, "mcp_t_env", map[string]any{"name": "HOME"}); out != "/tmp" {
					t.Errorf("confined server's HOME: %q", out)
				}
			}
		})
	}
}

// TestConfinedServerArgv: the bwrap command line of a confined server
// shares the network only when asked, shows the server's code and its
// mounts read-only, and its cwd.
func TestConfinedServerArgv(t *testing.T) {
	k := &Confinement{Bwrap: "/usr/bin/bwrap"}
	work := t.TempDir()
	code := t.TempDir()
	js := filepath.Join(code, "node_modules", "@scope", "srv", "dist", "index.js")
	if err := os.MkdirAll(filepath.Dir(js), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(js, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	for _, tc := range []struct {
		text string
		want []string
		not  []string
	}{
		{`{"mcpServers": {"a": {"command": "/bin/sh", "args": [` + q(js) + `, "${workdir}"]}}}`,
			[]string{"--ro-bind " + filepath.Join(code, "node_modules") + " " + filepath.Join(code, "node_modules"), "--chdir " + work, "--setenv HOME /tmp"},
			[]string{"--share-net", "--bind " + data}},
		{`{"mcpServers": {"a": {"command": "/bin/sh", "network": true, "mounts": [` + q(data+":/data") + `], "cwd": ` + q(code) + `}}}`,
			[]string{"--share-net", "--bind " + data + " /data", "--ro-bind " + code + " " + code, "--chdir " + code},
			nil},
	} {
		cfg, err := Parse("cfg.json", []byte(tc.text), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		s := cfg.Servers[0]
		cmd := exec.Command(s.Command, s.Args...)
		cmd.Dir = s.Cwd
		cmd.Env = serverEnv(s, work)
		for i := range cmd.Args {
			cmd.Args[i] = expandWorkdir(cmd.Args[i], work)
		}
		if err := k.wrap(cmd, s, work); err != nil {
			t.Fatal(err)
		}
		a := strings.Join(cmd.Args, " ")
		if cmd.Path != k.Bwrap || !slices.Contains(cmd.Args, "--unshare-all") {
			t.Fatalf("not run by bwrap: %s %s", cmd.Path, a)
		}
		// The seccomp filter is bwrap's descriptor 3.
		if !strings.Contains(a, " --seccomp 3 ") || len(cmd.ExtraFiles) != 1 {
			t.Errorf("no seccomp filter: %s (%d extra files)", a, len(cmd.ExtraFiles))
		}
		for _, f := range cmd.ExtraFiles {
			f.Close()
		}
		for _, w := range tc.want {
			if !strings.Contains(a, w) {
				t.Errorf("argv lacks %q: %s", w, a)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(a, w) {
				t.Errorf("argv has %q: %s", w, a)
			}
		}
	}
	// A relative file argument (read against hermes-pipe's folder) is made
	// absolute, as the confined server starts in ${workdir}.
	t.Chdir(code)
	cmd := exec.Command("/bin/sh", "node_modules/@scope/srv/dist/index.js", "word")
	if err := k.wrap(cmd, &Server{Name: "a"}, work); err != nil {
		t.Fatal(err)
	}
	if a := strings.Join(cmd.Args, " "); !strings.HasSuffix(a, "-- /bin/sh "+js+" word") {
		t.Errorf("relative argument: %s", a)
	}
	if err := k.wrap(exec.Command("/bin/sh"), &Server{Name: "a"}, ""); err == nil {
		t.Errorf("a confined server without a rollout folder was started")
	}
}

func q(s string) string { b, _ := json.Marshal(s); return string(b) }

func TestParseConfineSettings(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{`{"mcpServers": {"a": {"command": "x", "network": "yes"}}}`, "mcpServers.a.network: must be true or false"},
		{`{"mcpServers": {"a": {"command": "x", "mounts": ["rel:/x"]}}}`, "mcpServers.a.mounts[0]:"},
		{`{"mcpServers": {"a": {"command": "x", "mounts": ["${workdir}/x"]}}}`, "mcpServers.a.mounts[0]: placeholders"},
		{`{"mcpServers": {"a": {"url": "http://127.0.0.1:1/mcp", "network": true}}}`, "only stdio servers take network"},
	} {
		_, err := Parse("cfg.json", []byte(c.text), func(string) (string, bool) { return "", false })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.text, err, c.want)
		}
	}
	cfg, err := Parse("cfg.json", []byte(`{"mcpServers": {"a": {"command": "x", "network": true, "mounts": ["/srv/d:ro"]}, "r": {"command": "x", "scope": "run"}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Servers[0]; !s.Network || len(s.Mounts) != 1 || !s.Mounts[0].ReadOnly || s.Mounts[0].Dst != "/srv/d" {
		t.Fatalf("settings: %+v", s)
	}
	k := &Confinement{Bwrap: "bwrap"}
	cfg.Confine(k)
	if cfg.Servers[0].confine != k || cfg.Servers[1].confine != nil {
		t.Errorf("Confine: rollout server %v, run server %v", cfg.Servers[0].confine, cfg.Servers[1].confine)
	}
}

// TestConfinedNpmFilesystemServer runs the reference filesystem server
// (node and its node_modules) confined and allowed the whole file system:
// it still works on ${workdir}, and what it cannot see is what confinement
// hides, not what the server refuses. Unconfined, the same server reads
// the secret file.
func TestConfinedNpmFilesystemServer(t *testing.T) {
	k := confinement(t)
	fs := npmServer(t, "server-filesystem")
	secretDir, secretFile := secretFolder(t)
	for _, confined := range []bool{true, false} {
		t.Run(fmt.Sprintf("confined=%v", confined), func(t *testing.T) {
			m := startServers(t, `{"mcpServers": {"fs": {"command": "node", "args": [`+q(fs)+`, "/"]}}}`, k, confined)
			work := t.TempDir()
			s := m.NewSession(work)
			defer s.Close()
			if out, isErr := callTool(t, s, "mcp_fs_write_file", map[string]any{"path": filepath.Join(work, "a.txt"), "content": "hello"}); isErr {
				t.Fatalf("write_file in ${workdir}: %s", out)
			}
			if b, err := os.ReadFile(filepath.Join(work, "a.txt")); err != nil || string(b) != "hello" {
				t.Fatalf("a.txt: %q %v", b, err)
			}
			if out, isErr := callTool(t, s, "mcp_fs_list_directory", map[string]any{"path": work}); isErr || !strings.Contains(out, "a.txt") {
				t.Fatalf("list_directory ${workdir}: %s", out)
			}
			out, isErr := callTool(t, s, "mcp_fs_read_text_file", map[string]any{"path": secretFile})
			if confined && (!isErr || strings.Contains(out, "SECRET")) {
				t.Errorf("confined server read %s: %s", secretFile, out)
			}
			if !confined && (isErr || !strings.Contains(out, "SECRET")) {
				t.Errorf("unconfined server could not read %s: %s", secretFile, out)
			}
			out, isErr = callTool(t, s, "mcp_fs_write_file", map[string]any{"path": filepath.Join(secretDir, "planted"), "content": "x"})
			if _, err := os.Stat(filepath.Join(secretDir, "planted")); confined && err == nil {
				t.Errorf("confined server wrote into %s: %s %v", secretDir, out, isErr)
			}
		})
	}
}
