package mcp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/hermes-pipe/hermes-pipe/sandbox/confine"
)

// Confinement runs rollout-scoped stdio servers under bubblewrap, as the
// confined local sandbox runs the rollout's commands: the host system
// read-only (secrets in /etc masked), the rollout's folder (${workdir})
// read-write at its own path, a private /tmp (also the server's HOME),
// the server's own code readable, a PID namespace of its own (no view of
// hermes-pipe's /proc/<pid>/environ; every process it starts dies with
// it), no view of the invoking user's home, and no network unless the
// server says network: true (or Network is host).
type Confinement struct {
	Bwrap   string          // bubblewrap's path (confine.Probe)
	Mounts  []confine.Mount // shown to every confined server (--local-mount)
	Network string          // confine.NetworkNone ("" too) or NetworkHost, for every server
}

// NewConfinement probes this machine's bubblewrap and returns the
// confinement of servers beside a confined local sandbox with those extra
// mounts (SRC:DST[:ro]) and network; an error says why confinement cannot
// start here.
func NewConfinement(ctx context.Context, mounts []string, network string) (*Confinement, error) {
	r := confine.Probe(ctx)
	if err := r.Usable(); err != nil {
		return nil, err
	}
	k := &Confinement{Bwrap: r.Bwrap, Network: network}
	for _, m := range mounts {
		mt, err := confine.ParseMount(m)
		if err != nil {
			return nil, err
		}
		k.Mounts = append(k.Mounts, mt)
	}
	return k, nil
}

// Confine makes the configuration's rollout-scoped stdio servers start
// confined by k (nil: unconfined); call it before Start, which starts
// them for the pre-flight. Run-scoped servers are shared by the rollouts
// and have no rollout folder: they are left as they are.
func (c *Config) Confine(k *Confinement) {
	if c == nil {
		return
	}
	for _, s := range c.Servers {
		if s.Transport == TransportStdio && s.Scope == ScopeRollout {
			s.confine = k
		}
	}
}

// confineSettings reads a stdio server's network (a boolean) and mounts
// ("SRC[:DST][:ro]" strings, as --local-mount) settings, used when the
// server runs confined.
func (p *parser) confineSettings(s *Server, get func(string) *yaml.Node, field string) error {
	if v := get("network"); v != nil {
		b, err := strconv.ParseBool(v.Value)
		if v.Kind != yaml.ScalarNode || v.Tag == "!!str" || err != nil {
			return p.errf(v, field+".network", "must be true or false")
		}
		s.Network = b
	}
	if v := get("mounts"); v != nil {
		list, err := p.strList(v, field+".mounts")
		if err != nil {
			return err
		}
		for i, m := range list {
			f := field + ".mounts[" + strconv.Itoa(i) + "]"
			if strings.Contains(m, "${") {
				return p.errf(v.Content[i], f, "placeholders are not expanded in mounts")
			}
			mt, err := confine.ParseMount(m)
			if err != nil {
				return p.errf(v.Content[i], f, "%v", err)
			}
			s.Mounts = append(s.Mounts, mt)
		}
	}
	return nil
}

// wrap turns cmd, the server's command as dial built it, into the same
// command run by bwrap under k. workdir is the rollout's folder.
func (k *Confinement) wrap(cmd *exec.Cmd, s *Server, workdir string) error {
	if cmd.Err != nil {
		return cmd.Err
	}
	if workdir == "" || !filepath.IsAbs(workdir) {
		return errors.New("a confined server needs the rollout's folder on this machine")
	}
	if filepath.Clean(workdir) == "/tmp" {
		return errors.New("the rollout's folder is /tmp, which a confined server has a private one of")
	}
	if fi, err := os.Stat(workdir); err != nil || !fi.IsDir() {
		return fmt.Errorf("rollout folder %s is not a folder", workdir)
	}
	env := cmd.Env
	if !hasVar(env, "HOME") {
		env = append(env, "HOME=/tmp")
	}
	if !hasVar(env, "TMPDIR") {
		env = append(env, "TMPDIR=/tmp")
	}
	pol := confine.Policy{
		SessionDir: workdir,
		WorkDir:    workdir,
		Network:    k.Network,
		Env:        env,
		Chdir:      workdir,
		Mounts:     append([]confine.Mount(nil), k.Mounts...),
	}
	if s.Network {
		pol.Network = confine.NetworkHost
	}
	code := append([]string{cmd.Path}, cmd.Args[1:]...)
	mounts, code := codeMounts(code, cmd.Dir, workdir)
	for _, m := range mounts {
		pol.Mounts = append(pol.Mounts, confine.Mount{Src: m, Dst: m, ReadOnly: true})
	}
	if d := cmd.Dir; d != "" {
		if !filepath.IsAbs(d) {
			return fmt.Errorf("cwd %q must be an absolute path when the server runs confined", d)
		}
		if !within(d, workdir) {
			pol.Mounts = append(pol.Mounts, confine.Mount{Src: d, Dst: d, ReadOnly: true})
		}
		pol.Chdir = d
	}
	pol.Mounts = append(pol.Mounts, s.Mounts...)
	bw, err := pol.Args(k.Bwrap, code)
	if err != nil {
		return err
	}
	// bwrap reads the seccomp filter from cmd.ExtraFiles; the descriptor is
	// closed here once the server started (guardedTransport.Connect).
	bw.Apply(cmd)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Dir = ""
	return nil
}

func hasVar(env []string, k string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, k+"=") {
			return true
		}
	}
	return false
}

// codeMounts lists the host paths that hold the server's code, to show
// read-only: the command and every argument naming an existing file (its
// symbolic links followed), relative ones read against dir (hermes-pipe's
// own folder when ""). A file inside a node_modules folder brings the
// outermost such folder (its dependencies are looked up there); any other
// file outside the system folders comes alone. Folders given as arguments
// are not mounted: a server's data folders other than ${workdir} go in its
// mounts setting. argv comes back with those relative file arguments made
// absolute, as the confined server starts in another folder.
func codeMounts(argv []string, dir, workdir string) ([]string, []string) {
	seen := map[string]bool{}
	var out []string
	argv = append([]string(nil), argv...)
	for i, a := range argv {
		if a == "" || (i > 0 && strings.HasPrefix(a, "-")) {
			continue
		}
		p := a
		if !filepath.IsAbs(p) {
			if !strings.ContainsRune(p, '/') && (i == 0 || !fileExists(filepath.Join(dir, p))) {
				continue // a command looked up on PATH, or a word
			}
			base := dir
			if base == "" {
				base, _ = os.Getwd()
			}
			p = filepath.Join(base, p)
			if fileExists(p) {
				argv[i] = p
			}
		}
		for _, q := range []string{filepath.Clean(p), realPath(p)} {
			fi, err := os.Stat(q)
			if err != nil || fi.IsDir() || systemPath(q) || within(q, workdir) {
				continue
			}
			m := q
			if nm := outermost(q, "node_modules"); nm != "" {
				m = nm
			}
			if !seen[m] {
				seen[m] = true
				out = append(out, m)
			}
		}
	}
	return out, argv
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

func realPath(p string) string {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return filepath.Clean(p)
	}
	return r
}

// systemPath reports whether p is under a folder every confined command
// sees already.
func systemPath(p string) bool {
	for _, d := range confine.HostDirs {
		if within(p, d) {
			return true
		}
	}
	return false
}

// outermost returns the outermost ancestor folder of p named name, or "".
func outermost(p, name string) string {
	parts := strings.Split(filepath.Clean(p), string(filepath.Separator))
	for i, c := range parts[:len(parts)-1] {
		if c == name {
			return string(filepath.Separator) + filepath.Join(parts[:i+1]...)
		}
	}
	return ""
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	p, dir = filepath.Clean(p), filepath.Clean(dir)
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}
