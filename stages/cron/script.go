package cron

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ScriptsDir is where script jobs' scripts must live: <home>/cron/scripts.
func ScriptsDir(home string) string { return filepath.Join(home, "cron", "scripts") }

// ResolveScript returns the absolute path of a script name, which must
// resolve (symlinks included) to a regular file inside <home>/cron/scripts.
// Errors wrap ErrUsage.
func ResolveScript(home, name string) (string, error) {
	if name == "" {
		return "", usagef("empty script name")
	}
	if filepath.IsAbs(name) || strings.HasPrefix(name, "~") {
		return "", usagef("script %q: give a name relative to %s", name, ScriptsDir(home))
	}
	dir, err := filepath.EvalSymlinks(ScriptsDir(home))
	if err != nil {
		return "", usagef("script %q: scripts folder %s: %v", name, ScriptsDir(home), err)
	}
	p, err := filepath.EvalSymlinks(filepath.Join(dir, filepath.Clean(name)))
	if err != nil {
		return "", usagef("script %q: %v", name, err)
	}
	rel, err := filepath.Rel(dir, p)
	if err != nil || rel == "." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || rel == ".." {
		return "", usagef("script %q resolves outside %s", name, dir)
	}
	st, err := os.Stat(p)
	if err != nil || !st.Mode().IsRegular() {
		return "", usagef("script %q is not a regular file", name)
	}
	return p, nil
}

// baseEnv is the environment allowlist of script jobs; the job's policy may
// add names (env_allow).
var baseEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SHELL"}

// ScriptResult is how one script run ended.
type ScriptResult struct {
	Stdout   string
	Stderr   string
	ExitCode int
	TimedOut bool   // wall-clock cap or inactivity timeout hit; the process group was killed
	Reason   string // why it was stopped, when TimedOut
	Err      error  // could not start
}

const maxScriptOutput = 1 << 20

type limitedBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	limit int
	last  *atomic.Int64
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.last.Store(time.Now().UnixNano())
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := l.limit - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// scriptRun describes one script execution.
type scriptRun struct {
	Path       string
	Workdir    string
	Env        []string // extra KEY=VALUE pairs
	EnvAllow   []string
	MaxRuntime time.Duration
	Inactivity time.Duration // 0 = none
	// Isolation is IsolationBwrap ("" too: confined, see newScriptBox) or
	// IsolationNone. Network (confined only) is confine.NetworkNone ("" too)
	// or NetworkHost; ReadOnly and ReadWrite are host folders shown to the
	// confined script at their own paths besides Workdir.
	Isolation           string
	Network             string
	ReadOnly, ReadWrite []string
}

// runScript runs a script in its own process group with an allowlisted
// environment, confined (newScriptBox) unless r.Isolation is none; where
// confinement cannot start, the script does not run and Err says why. When ctx ends, the wall-clock cap passes, or the script is
// silent for longer than the inactivity timeout, the whole process group is
// killed. It blocks until the script and its pipes are done.
func runScript(ctx context.Context, r scriptRun) ScriptResult {
	var args []string
	st, err := os.Stat(r.Path)
	if err != nil {
		return ScriptResult{ExitCode: -1, Err: err}
	}
	switch {
	case st.Mode()&0o111 != 0:
		args = []string{r.Path}
	case strings.HasSuffix(r.Path, ".sh"):
		args = []string{"/bin/sh", r.Path}
	case strings.HasSuffix(r.Path, ".py"):
		args = []string{"python3", r.Path}
	default:
		return ScriptResult{ExitCode: -1, Err: fmt.Errorf("script %s is not executable (chmod +x, or name it .sh or .py)", r.Path)}
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if r.MaxRuntime > 0 {
		var c2 context.CancelFunc
		runCtx, c2 = context.WithTimeoutCause(runCtx, r.MaxRuntime, fmt.Errorf("wall-clock cap of %s reached", r.MaxRuntime))
		defer c2()
	}
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	stdout := &limitedBuffer{limit: maxScriptOutput, last: &last}
	stderr := &limitedBuffer{limit: 64 << 10, last: &last}

	env, dir := scriptEnv(r.EnvAllow, r.Env), r.Workdir
	var box *scriptBox
	if r.Isolation != IsolationNone {
		var err error
		box, err = newScriptBox(r, args, env)
		if err != nil {
			return ScriptResult{ExitCode: -1, Err: err}
		}
		defer box.remove()
		// bwrap starts in the script's working folder itself (--chdir);
		// when bwrap dies its namespace's processes die with it.
		args, env, dir = box.argv, box.env, ""
	}
	cmd := exec.CommandContext(runCtx, args[0], args[1:]...)
	if box != nil {
		cmd.ExtraFiles = box.bw.Files // the seccomp filter bwrap reads
	}
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setParentDeathSignal(cmd.SysProcAttr)
	cmd.Cancel = func() error {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		return nil
	}
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		return ScriptResult{ExitCode: -1, Err: err}
	}
	done := make(chan struct{})
	if r.Inactivity > 0 {
		go func() {
			t := time.NewTicker(min(r.Inactivity/4+time.Millisecond, time.Second))
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					if time.Since(time.Unix(0, last.Load())) > r.Inactivity {
						cancel(fmt.Errorf("no output for %s (inactivity timeout)", r.Inactivity))
						return
					}
				}
			}
		}()
	}
	werr := cmd.Wait()
	close(done)
	// Reap anything the script left behind in its group.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	res := ScriptResult{Stdout: stdout.String(), Stderr: stderr.String(), ExitCode: cmd.ProcessState.ExitCode()}
	if cause := context.Cause(runCtx); cause != nil && runCtx.Err() != nil {
		res.TimedOut = true
		res.Reason = cause.Error()
		if errors.Is(cause, context.Canceled) && ctx.Err() != nil {
			res.Reason = "interrupted"
		}
	} else if werr != nil && res.ExitCode < 0 {
		res.Err = werr
	}
	return res
}

func scriptEnv(allow, extra []string) []string {
	var env []string
	for _, k := range append(append([]string{}, baseEnv...), allow...) {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, extra...)
}
