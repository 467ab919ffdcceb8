package cron

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
)

// Script isolation modes (Scheduler.ScriptIsolation, a job's
// policy.script_isolation).
const (
	IsolationBwrap = "bwrap" // the default: bubblewrap, as the local sandbox confines commands
	IsolationNone  = "none"  // the script runs as this user with everything in reach
)

// ScriptOptOut names the ways to run a script unconfined, for messages.
const ScriptOptOut = `the job's policy "script_isolation": "none", or cron --script-isolation none`

// CheckScriptPolicy checks a job's script_isolation and script_network.
func CheckScriptPolicy(p Policy) error {
	switch p.ScriptIsolation {
	case "", IsolationBwrap, IsolationNone:
	default:
		return fmt.Errorf("policy.script_isolation %q: want bwrap or none", p.ScriptIsolation)
	}
	switch p.ScriptNetwork {
	case "", confine.NetworkNone, confine.NetworkHost:
	default:
		return fmt.Errorf("policy.script_network %q: want none or host", p.ScriptNetwork)
	}
	return nil
}

// CheckScriptIsolation checks a scheduler-wide script isolation mode
// (--script-isolation).
func CheckScriptIsolation(mode string) error {
	switch mode {
	case "", IsolationBwrap, IsolationNone:
		return nil
	}
	return fmt.Errorf("script isolation %q: want bwrap or none", mode)
}

// scriptIsolation is the mode one execution runs in: none when the
// scheduler or the job opts out, else bwrap.
func scriptIsolation(scheduler string, p Policy) string {
	if scheduler == IsolationNone || p.ScriptIsolation == IsolationNone {
		return IsolationNone
	}
	return IsolationBwrap
}

// probeConfinement is what this machine supports, probed once per process
// (it runs bwrap once); tests replace it.
var probeConfinement = sync.OnceValue(func() confine.Report { return confine.Probe(context.Background()) })

// scriptBox is the confinement of one script execution: a private folder
// (the script's home and /tmp) removed afterwards, and the bubblewrap
// command line.
type scriptBox struct {
	dir  string
	argv []string
	env  []string     // bwrap's own environment (the script's is in argv)
	bw   *confine.Cmd // argv and the descriptors bwrap reads (its seccomp filter)
}

// newScriptBox prepares the confined run of argv. The script sees the host
// system read-only (as sandbox/local's commands do, secrets in /etc
// masked), a private /tmp and home, its working folder read-write at its
// own path, the scripts folder read-only, the job's own delivered outputs
// read-only, no other process (a PID namespace that dies with the run),
// and no network unless r.Network is host. env is the script's
// environment; HOME and TMPDIR are replaced by the private ones.
func newScriptBox(r scriptRun, argv, env []string) (*scriptBox, error) {
	rep := probeConfinement()
	if err := rep.Usable(); err != nil {
		return nil, fmt.Errorf("cannot confine the script: %v (%s runs it unconfined, as this user)", err, ScriptOptOut)
	}
	dir, err := os.MkdirTemp("", "hermes-cron-script-*")
	if err != nil {
		return nil, fmt.Errorf("cannot confine the script: %w", err)
	}
	b := &scriptBox{dir: dir}
	home, tmp := filepath.Join(dir, "home"), filepath.Join(dir, "tmp")
	for _, d := range []string{home, tmp} {
		if err := os.Mkdir(d, 0o700); err != nil {
			b.remove()
			return nil, fmt.Errorf("cannot confine the script: %w", err)
		}
	}
	var senv []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k != "HOME" && k != "TMPDIR" {
			senv = append(senv, kv)
		}
	}
	senv = append(senv, "HOME="+home, "TMPDIR=/tmp")
	p := confine.Policy{
		SessionDir: dir,
		TmpDir:     tmp,
		WorkDir:    r.Workdir,
		Network:    r.Network,
		Env:        senv,
		Chdir:      r.Workdir,
	}
	for _, m := range r.ReadOnly {
		if _, err := os.Stat(m); err == nil {
			p.Mounts = append(p.Mounts, confine.Mount{Src: m, Dst: m, ReadOnly: true})
		}
	}
	for _, m := range r.ReadWrite {
		p.Mounts = append(p.Mounts, confine.Mount{Src: m, Dst: m})
	}
	b.bw, err = p.Args(rep.Bwrap, argv)
	if err != nil {
		b.remove()
		return nil, fmt.Errorf("cannot confine the script: %w", err)
	}
	b.argv = b.bw.Args
	b.env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	return b, nil
}

// remove deletes the private folder, making folders writable again first
// in case the script removed their permissions.
func (b *scriptBox) remove() {
	b.bw.Close()
	if err := os.RemoveAll(b.dir); err == nil {
		return
	}
	_ = filepath.WalkDir(b.dir, func(p string, e os.DirEntry, err error) error {
		if e != nil && e.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(b.dir)
}

// scriptFolders says where a confined script runs and what it sees of the
// cron home: its working folder is the job's workdir when it has one, else
// the folder holding the script; that folder is read-write unless it is
// the scripts folder itself (shared with other jobs' scripts, which a
// script must not rewrite), which is read-only like the rest of it. The
// job's own delivered outputs (<home>/cron/output/<job>) are readable.
func scriptFolders(home, jobID, scriptPath, workdir string) (wd string, ro, rw []string, err error) {
	scripts, err := filepath.EvalSymlinks(ScriptsDir(home))
	if err != nil {
		return "", nil, nil, err
	}
	ro = []string{scripts, OutputDir(home, jobID)}
	if workdir != "" {
		return workdir, ro, nil, nil
	}
	own := filepath.Dir(scriptPath)
	if own == scripts {
		// The working folder must exist in the sandbox: the scripts
		// folder, read-only (its mount comes after the working folder's).
		return own, ro, nil, nil
	}
	return own, ro, []string{own}, nil
}
