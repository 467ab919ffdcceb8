package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRefreshSafe(t *testing.T) {
	safe := []string{
		"ls -la", "cd /tmp && python3 x.py", "export A=1; f() { echo $A; }; f", "find . -name '*.go' | head",
		"cd .. && ls", "alias ll='ls -l'", "git config --global user.name x", "pip install setuptools",
		"echo reset; python3 -c 'x.set()'", "unset A", "cat settings.py", "command -v python3",
	}
	unsafe := []string{
		"trap 'echo x' DEBUG", "source venv/bin/activate", ". venv/bin/activate", "cd x && . ./env.sh",
		"if true; then . ./env.sh; fi", "eval \"$(ssh-agent)\"", "exec 3>/tmp/x", "readonly A=1", "declare -r A=1",
		"set -e", "shopt -s extglob", "ulimit -n 64", "umask 077", "enable -n echo", "builtin cd /",
		"POSIXLY_CORRECT=1", "BASH_ENV=/x bash", "f() { local -r x=1; }", "renice -n 5 $$", "x=$( . ./y )",
	}
	for _, c := range safe {
		if !RefreshSafe(c) {
			t.Errorf("RefreshSafe(%q) = false, want true", c)
		}
	}
	for _, c := range unsafe {
		if RefreshSafe(c) {
			t.Errorf("RefreshSafe(%q) = true, want false", c)
		}
	}
}

// refreshShell returns a Shell over a plain bash, set up for Refresh (its
// scripts sourced from files in the state folder).
func refreshShell(t *testing.T) *Shell {
	t.Helper()
	sh, _ := bashShell(t, "bash")
	sh.cfg.Refresh = true
	sh.cfg.WriteFile = func(name string, data []byte) (string, error) {
		p := filepath.Join(sh.cfg.StateDir, name)
		return p, os.WriteFile(p, data, 0o600)
	}
	return sh
}

// TestRefreshQuickThenWhole: a row of ordinary commands (a folder change,
// hashed programs) needs only the quick script; a row that defined a
// function and set variables, or changed options, gets the whole refresh
// script; a row that unset RANDOM cannot be refreshed. The refreshed shells
// show what the new one showed.
func TestRefreshQuickThenWhole(t *testing.T) {
	const probe = `declare -F; alias; echo "$PWD|${OLDPWD-unset}|${X-unset}|${RANDOM:+random}|$-"; hash -l 2>&1; shopt -p expand_aliases extglob`
	for _, c := range []struct {
		name, row string
		quick     bool
		err       error
	}{
		{"ordinary commands", "cd / && ls >/dev/null && cat /dev/null; echo hi", true, nil},
		{"function and variables", "f() { echo f; }; X=1; export Y=2; alias l=ls; cd /", false, nil},
		{"RANDOM unset", "unset RANDOM", false, ErrNotFresh},
		// The compared report leaves out the option lines: SHELLOPTS and
		// BASHOPTS must show the change.
		{"options", "shopt -s extglob", false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			sh := refreshShell(t)
			want := mustExec(t, sh, probe, 0).Stdout
			mustExec(t, sh, c.row, 0)
			if got := mustExec(t, sh, probe, 0).Stdout; got == want {
				t.Fatalf("the row changed nothing the probe sees:\n%s", got)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			alone := func(string) (bool, error) { return false, nil }
			ok := func() error { return nil }
			err := sh.Refresh(ctx, alone, ok, ok)
			if !errors.Is(err, c.err) || (err == nil) != (c.err == nil) {
				t.Fatalf("Refresh: %v, want %v", err, c.err)
			}
			if err != nil {
				return
			}
			if sh.quickOnly != c.quick {
				t.Errorf("only the quick script = %v, want %v", sh.quickOnly, c.quick)
			}
			if got := mustExec(t, sh, probe, 0).Stdout; got != want {
				t.Errorf("refreshed shell shows\n%s\nwant what the new one showed\n%s", got, want)
			}
		})
	}
}

// TestRefreshHostIPC: with ShellConfig.HostIPC the state report leaves the
// System V IPC objects to the driver (no look at /proc/sysvipc in the
// shell), the new shell's report and the refreshed one's agree, and the
// driver's check still decides: a failing one is ErrNotFresh.
func TestRefreshHostIPC(t *testing.T) {
	for _, host := range []bool{false, true} {
		sh := refreshShell(t)
		sh.cfg.HostIPC = host
		sh.reportText("m", false) // written to the file "r" (refreshShell's WriteFile)
		if got := sh.files["r"].data; strings.Contains(got, "sysvipc") == host || !strings.Contains(got, "declare -p") {
			t.Errorf("HostIPC %v: the report looks at /proc/sysvipc = %v", host, !host)
		}
		mustExec(t, sh, "cd / && true", 0)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		alone := func(string) (bool, error) { return false, nil }
		ok := func() error { return nil }
		if err := sh.Refresh(ctx, alone, ok, ok); err != nil {
			t.Errorf("HostIPC %v: Refresh: %v", host, err)
		}
		left := func() error { return errors.New("IPC objects left") }
		if err := sh.Refresh(ctx, alone, left, ok); !errors.Is(err, ErrNotFresh) {
			t.Errorf("HostIPC %v: Refresh with a failing check: %v, want ErrNotFresh", host, err)
		}
		cancel()
	}
}
