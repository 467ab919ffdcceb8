package main

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

// Every usage error exits 2 with two lines on stderr: the error (with the
// closest command or flag when one was misspelt) and where the help is;
// never the help itself. No output folder is made.
func TestUsageErrorsAreShortWithSuggestions(t *testing.T) {
	prompts := writePrompts(t, `{"prompt": "x"}`)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	gen := []string{"generate", "--prompts", prompts, "--out", out, "--base-url", "http://127.0.0.1:1/v1", "--model", "m"}
	for _, tc := range []struct {
		args []string
		want string
		help string
	}{
		{[]string{"genrate"}, `"genrate" is not a command of hermes-pipe; did you mean generate?`, "hermes-pipe"},
		{[]string{"cron", "ad"}, `"ad" is not a command of hermes-pipe cron; did you mean add?`, "hermes-pipe cron"},
		{[]string{"frobnicate"}, `"frobnicate" is not a command of hermes-pipe`, "hermes-pipe"},
		{append(gen, "--worker", "4"), "unknown flag --worker; did you mean --workers?", "hermes-pipe generate"},
		{append(gen, "--timeout", "30"), `--timeout "30": not a duration; write a unit: 30s, 5m, 1h`, "hermes-pipe generate"},
		{append(gen, "--workers", "four"), `--workers "four": not a whole number`, "hermes-pipe generate"},
		{[]string{"generate", "--out", out}, "missing required flags --prompts, --base-url, --model", "hermes-pipe generate"},
		{[]string{"--bogus"}, "unknown flag --bogus", "hermes-pipe"},
		{[]string{"cron", "add", "--nme", "x", "every 5m"}, "unknown flag --nme; did you mean --name?", "hermes-pipe cron add"},
	} {
		code, stdout, errs := hp(t, tc.args...)
		lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
		wantHelp := "Run '" + tc.help + " --help' for usage."
		if code != exitUsage || len(lines) != 2 || lines[0] != "hermes-pipe: "+tc.want && !strings.HasPrefix(lines[0], "hermes-pipe: "+tc.want) || lines[1] != wantHelp {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant exit 2 and\nhermes-pipe: %s\n%s", tc.args, code, errs, tc.want, wantHelp)
		}
		if strings.Contains(stdout, "USAGE:") || strings.Contains(errs, "USAGE:") {
			t.Errorf("%v: printed the help:\n%s", tc.args, stdout)
		}
	}
	if code, _, errs := hp(t, "help", "genrate"); code != exitUsage {
		t.Errorf("help genrate: exit %d, want 2: %s", code, errs)
	}
	if strings.Contains(mustRun(t, "frobnicate"), "did you mean") {
		t.Error("a name near no command got a suggestion")
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a usage error made the output folder (%v)", err)
	}
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	_, _, errs := hp(t, args...)
	return errs
}

// An empty --model or --base-url is a usage error, as a missing one.
func TestUsageEmptyModelOrBaseURL(t *testing.T) {
	prompts := writePrompts(t, `{"prompt": "x"}`)
	for _, tc := range [][]string{
		{"--base-url", "http://127.0.0.1:1/v1", "--model", ""},
		{"--base-url", "", "--model", "m"},
		{"--base-url=", "--model", "m"},
		{"--base-url", "http://127.0.0.1:1/v1", "--model", "  "},
	} {
		out := filepath.Join(t.TempDir(), "out")
		args := append([]string{"generate", "--prompts", prompts, "--out", out}, tc...)
		code, _, errs := hp(t, args...)
		if code != exitUsage || !strings.Contains(errs, "is empty") {
			t.Errorf("%v: exit %d: %s", tc, code, errs)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%v: the output folder was made", tc)
		}
	}
	in := writePrompts(t, `{"conversations": []}`)
	for _, flag := range []string{"--model", "--base-url"} {
		args := []string{"compress", "--in", in, "--out", filepath.Join(t.TempDir(), "o"), "--base-url", "http://127.0.0.1:1/v1", "--model", "m", flag, ""}
		if code, _, errs := hpc(t, args...); code != exitUsage || !strings.Contains(errs, flag+" is empty") {
			t.Errorf("compress %s \"\": exit %d: %s", flag, code, errs)
		}
	}
}

// Hermes' underscore spellings of shared flags are accepted; values,
// positional arguments and what follows "--" are left alone.
func TestUsageUnderscoreFlags(t *testing.T) {
	app := newApp(nil, nil)
	for in, want := range map[string]string{
		`hp generate --base_url u --max_turns=3 --model m`:          `hp generate --base-url u --max-turns=3 --model m`,
		`hp generate --system-prompt --max_turns --model m`:         `hp generate --system-prompt --max_turns --model m`,
		`hp generate --model m -- --base_url`:                       `hp generate --model m -- --base_url`,
		`hp cron add every_5m --no_agent --script w.sh`:             `hp cron add --no-agent --script w.sh every_5m`,
		`hp generate --not_a_flag x`:                                `hp generate --not_a_flag x`,
		`hp cat --final some_dir`:                                   `hp cat --final some_dir`,
		`hp compress --in a_b --protect_first_system=false --out o`: `hp compress --in a_b --protect-first-system=false --out o`,
	} {
		got := strings.Join(reorderArgs(app, strings.Fields(in)), " ")
		if got != want {
			t.Errorf("%s\n got %s\nwant %s", in, got, want)
		}
	}
	// Through the whole CLI: --max_turns is read as --max-turns.
	prompts := writePrompts(t, `{"prompt": "x"}`)
	code, _, errs := hp(t, "generate", "--prompts", prompts, "--out", filepath.Join(t.TempDir(), "o"), "--base_url", "http://127.0.0.1:1/v1", "--model", "m", "--max_turns", "0")
	if code != exitUsage || !strings.Contains(errs, "--max-turns must be at least 1") {
		t.Errorf("--max_turns 0: exit %d: %s", code, errs)
	}
}

// --version and `version` print the same line; the build's module version
// and VCS settings make it up, "dev" only when nothing is known.
func TestVersion(t *testing.T) {
	code1, out1, _ := hp(t, "--version")
	code2, out2, _ := hp(t, "version")
	if code1 != 0 || code2 != 0 || out1 != out2 || !regexp.MustCompile(`^hermes-pipe \S+( \(.+\))?\n$`).MatchString(out1) {
		t.Errorf("--version exit %d %q, version exit %d %q", code1, out1, code2, out2)
	}
	if code, _, _ := hp(t, "version", "x"); code != exitUsage {
		t.Errorf("version x: exit %d, want 2", code)
	}
	settings := []debug.BuildSetting{{Key: "vcs.revision", Value: "abcdef1234567890"}, {Key: "vcs.time", Value: "2026-12-04T10:11:12Z"}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		linked string
		bi     *debug.BuildInfo
		want   string
	}{
		{"dev", nil, "dev"},
		{"dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
		{"dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261204101112-abcdef123456+dirty"}, Settings: settings},
			"v0.0.0-20261204101112-abcdef123456+dirty (rev abcdef1, 2026-12-04, modified)"},
		{"dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: settings[:2]}, "dev (rev abcdef1, 2026-12-04)"},
		{"v1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-x"}, Settings: settings[:1]}, "v1.2.3 (rev abcdef1)"},
	} {
		if got := formatVersion(tc.linked, tc.bi); got != tc.want {
			t.Errorf("formatVersion(%q, %+v) = %q, want %q", tc.linked, tc.bi, got, tc.want)
		}
	}
}
