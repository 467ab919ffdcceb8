package cron

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/stages/rollout/mcp"
)

func TestLoadConfig(t *testing.T) {
	home := t.TempDir()
	if cfg, err := LoadConfig(home); err != nil || len(cfg.DisabledToolsets) != 0 {
		t.Fatalf("missing file: %+v %v", cfg, err)
	}
	os.MkdirAll(filepath.Join(home, "cron"), 0o700)
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(ConfigPath(home), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("")
	if cfg, err := LoadConfig(home); err != nil || len(cfg.DisabledToolsets) != 0 {
		t.Fatalf("empty file: %+v %v", cfg, err)
	}
	write("disabled_toolsets: [file, ' todo ']\n")
	cfg, err := LoadConfig(home)
	if err != nil || !slices.Equal(cfg.DisabledToolsets, []string{"file", "todo"}) {
		t.Fatalf("good file: %+v %v", cfg, err)
	}
	job := &Job{EnabledToolsets: StringList{"terminal", "file", "cronjob"}}
	if got, off := cfg.JobToolsets(job); !slices.Equal(got, []string{"terminal"}) || !slices.Equal(off, []string{"file"}) {
		t.Fatalf("JobToolsets: %v, disabled %v", got, off)
	}
	if got, off := (Config{DisabledToolsets: []string{"terminal"}}).JobToolsets(&Job{}); len(got) != 0 || !slices.Equal(off, []string{"terminal"}) {
		t.Fatalf("default toolset disabled: %v, disabled %v", got, off)
	}
	for _, c := range []struct{ text, want string }{
		{"disabled_toolsets: [file]\nmax_parallel: 3\n", "line 2: field max_parallel not found"},
		{"disabled_toolsets: file\n", "line 1: cannot unmarshal"},
		{"disabled_toolsets:\n  - file\n  - ''\n", "line 3: disabled_toolsets[1] is blank"},
		{"disabled_toolsets: [file\n", "cron config " + ConfigPath(home)},
	} {
		write(c.text)
		if _, err := LoadConfig(home); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), ConfigPath(home)) {
			t.Errorf("%q: err %v, want %q and the path", c.text, err, c.want)
		}
	}
}

// The MCP servers of a disabled mcp- toolset are not even started.
func TestDisabledMCPServersAreDropped(t *testing.T) {
	cfg := &mcp.Config{Servers: []*mcp.Server{{Name: "a", Toolset: "mcp-a"}, {Name: "b", Toolset: "mcp-b"}}}
	if got := withoutServers(cfg, []string{"mcp-a", "file"}); got == nil || len(got.Servers) != 1 || got.Servers[0].Name != "b" {
		t.Fatalf("kept %+v", got)
	}
	if got := withoutServers(cfg, []string{"mcp-b"}); got != nil {
		t.Fatalf("every server disabled, kept %+v", got)
	}
}
