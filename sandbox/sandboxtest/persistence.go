package sandboxtest

import (
	"strings"
	"testing"
	"time"
)

// runPersistence checks that shell state survives commands that end the
// shell or misbehave (exit, exec, kill of the shell, stdin readers, output
// that looks like an end marker, a timeout).
func (s *suite) runPersistence(t *testing.T) {
	t.Run("CdThenExit", func(t *testing.T) {
		t.Parallel()
		sess := s.session(t, s.spec(t))
		want(t, sess, "mkdir -p sub && cd sub && exit 3", 3, "")
		res := run(t, sess, "pwd", 0)
		if !strings.HasSuffix(strings.TrimSpace(res.Stdout), "/sub") {
			t.Fatalf("pwd after `cd sub && exit 3` = %q; want .../sub", res.Stdout)
		}
	})
	t.Run("ExportThenExit", func(t *testing.T) {
		t.Parallel()
		sess := s.session(t, s.spec(t))
		want(t, sess, "export A=1; exit", 0, "")
		want(t, sess, "echo $A", 0, "1")
	})
	if s.caps.LongLivedShell {
		// The fresh-shell design restores cwd and environment only.
		t.Run("Function", func(t *testing.T) {
			t.Parallel()
			sess := s.session(t, s.spec(t))
			want(t, sess, "hello() { echo hi-$1; }", 0, "")
			want(t, sess, "hello x", 0, "hi-x")
		})
	}
	if s.caps.Aliases {
		t.Run("Alias", func(t *testing.T) {
			t.Parallel()
			sess := s.session(t, s.spec(t))
			want(t, sess, "alias hh='echo aliased'", 0, "")
			want(t, sess, "hh", 0, "aliased")
		})
	}
	t.Run("StdinIsEmpty", func(t *testing.T) {
		t.Parallel()
		sess := s.session(t, s.spec(t))
		want(t, sess, "cat; echo done", 0, "done")
		want(t, sess, "read x; echo \"r=$? x=$x\"", 0, "r=1 x=")
	})
	t.Run("MarkerLookingOutput", func(t *testing.T) {
		t.Parallel()
		sess := s.session(t, s.spec(t))
		out := "__HERMES_END__ 0\n__HERMES_END__\n___END___ 0\n" + "\x00__END__ 0\n"
		res := run(t, sess, `printf '__HERMES_END__ 0\n__HERMES_END__\n___END___ 0\n\000__END__ 0\n'; exit 5`, 0)
		if res.ExitCode != 5 {
			t.Errorf("exit code %d; want 5", res.ExitCode)
		}
		if got := strings.ReplaceAll(res.Stdout, "\uFFFD", "\x00"); got != out {
			t.Errorf("stdout %q; want %q", res.Stdout, out)
		}
		want(t, sess, "echo ok", 0, "ok")
	})
	t.Run("AllBytes", func(t *testing.T) {
		t.Parallel()
		sess := s.session(t, s.spec(t))
		res := run(t, sess, `i=0; while [ $i -lt 256 ]; do printf "\\$(printf %o $i)"; i=$((i+1)); done; exit 4`, 0)
		if res.ExitCode != 4 || res.Stdout == "" {
			t.Errorf("all bytes: exit %d, %d bytes of stdout; want exit 4 and output", res.ExitCode, len(res.Stdout))
		}
		want(t, sess, "echo ok", 0, "ok")
	})
	t.Run("TenMegabytes", func(t *testing.T) {
		t.Parallel()
		sp := s.spec(t)
		sp.MaxOutput = 64 << 10
		sess := s.session(t, sp)
		res := run(t, sess, "head -c 10000000 /dev/zero | tr '\\0' x; exit 6", 0)
		if res.ExitCode != 6 || !res.Truncated || len(res.Stdout) > 4*sp.MaxOutput {
			t.Errorf("10 MB: exit %d truncated %v len %d; want exit 6, truncated, cut", res.ExitCode, res.Truncated, len(res.Stdout))
		}
		if !strings.HasPrefix(res.Stdout, "xxxx") || !strings.HasSuffix(res.Stdout, "xxxx") {
			t.Errorf("10 MB: head/tail not kept")
		}
		want(t, sess, "echo ok", 0, "ok")
	})
	t.Run("TimeoutKeepsState", func(t *testing.T) {
		t.Parallel()
		sess := s.session(t, s.spec(t))
		want(t, sess, "mkdir -p tdir && cd tdir && export TV=7", 0, "")
		res := run(t, sess, "sleep 100", 2*time.Second)
		if res.ExitCode != 124 || !res.TimedOut {
			t.Errorf("sleep 100 with 2 s timeout: exit %d timedOut %v; want 124, true", res.ExitCode, res.TimedOut)
		}
		res = run(t, sess, "echo $TV; pwd", 0)
		if !strings.HasPrefix(res.Stdout, "7\n") || !strings.HasSuffix(strings.TrimSpace(res.Stdout), "/tdir") {
			t.Errorf("after timeout: %q; want 7 and .../tdir", res.Stdout)
		}
	})
	// Commands that end the shell itself end only the command: the next
	// one runs in the folder and environment set before. code -1 means any
	// non-zero exit code (a shell killed by SIGKILL).
	for _, c := range []struct {
		name, cmd string
		code      int
	}{
		{"ExecTrue", "exec true", 0},
		{"ExecExit", "exec sh -c 'exit 7'", 7},
		{"KillShell", "kill -9 $$", -1},
	} {
		name, cmd := c.name, c.cmd
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sess := s.session(t, s.spec(t))
			want(t, sess, "mkdir -p kept && cd kept && export KV=9", 0, "")
			res := run(t, sess, cmd, 10*time.Second)
			if c.code >= 0 && res.ExitCode != c.code || c.code < 0 && res.ExitCode == 0 {
				t.Errorf("%s: exit %d; want %d (-1: non-zero)", cmd, res.ExitCode, c.code)
			}
			if res.TimedOut {
				t.Errorf("%s: timed out; want it to end the command", cmd)
			}
			res = run(t, sess, "echo $KV; pwd", 0)
			if !strings.HasPrefix(res.Stdout, "9\n") || !strings.HasSuffix(strings.TrimSpace(res.Stdout), "/kept") {
				t.Errorf("after %s: %q; want 9 and .../kept", cmd, res.Stdout)
			}
		})
	}
}
