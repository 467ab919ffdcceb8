package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// CwdRule decides which folders a row's (or a task's) cwd may name for a
// driver that binds a folder of a host into the sandbox: the local sandbox
// (a folder of this machine, read-write; swe: read-only, to clone it) and ssh
// (a folder of the remote host). Prompts and task files are untrusted input,
// so a cwd is a workspace the operator allowed, never a window onto the host:
// it must be one of the Roots (--cwd-root) or a folder under one, and it
// must neither be, nor be inside, nor hold a protected folder (the run's
// output folder, the viewer's cache, the hermes-pipe home). Docker needs no
// rule: its cwd is a path inside the container.
//
// A CwdRule is built once before a run (NewCwdRule), given its protected
// folders (Protect), then Check is called for every row from one goroutine
// at a time or several: it only reads the rule.
type CwdRule struct {
	remote    bool
	roots     []string // cleaned; resolved on this machine unless remote
	protected []protectedDir
}

// protectedDir is a folder no cwd may touch, under the name errors give it.
type protectedDir struct {
	label string
	paths []string // its cleaned absolute path and, when it differs, its resolved one
}

// NewCwdRule checks roots and returns the rule. For this machine (remote
// false) every root must be an existing folder; it is resolved through its
// symbolic links, so Check compares real paths. For a remote host (ssh)
// roots are only checked for form (absolute, no ".."), as nothing of the
// remote file system can be resolved from here. No roots means every cwd is
// refused. It costs one stat per root.
func NewCwdRule(roots []string, remote bool) (*CwdRule, error) {
	r := &CwdRule{remote: remote}
	for _, root := range roots {
		if problem := pathForm(root); problem != "" {
			return nil, fmt.Errorf("--cwd-root %q: %s", root, problem)
		}
		clean := filepath.Clean(root)
		if !remote {
			real, err := filepath.EvalSymlinks(clean)
			if err != nil {
				return nil, fmt.Errorf("--cwd-root %s: %w", root, unwrapPathError(err))
			}
			fi, err := os.Stat(real)
			if err != nil {
				return nil, fmt.Errorf("--cwd-root %s: %w", root, unwrapPathError(err))
			}
			if !fi.IsDir() {
				return nil, fmt.Errorf("--cwd-root %s: not a folder", root)
			}
			clean = real
		}
		r.roots = append(r.roots, clean)
	}
	return r, nil
}

// Protect adds a folder no cwd may be, be inside or hold, named label in
// errors ("the output folder"). The folder need not exist yet: the part of
// its path that exists is resolved through its links. It is an error when
// a root lies in the folder (every cwd under that root would be refused), so
// the caller reports a bad --cwd-root before any work starts.
func (r *CwdRule) Protect(label, dir string) error {
	if dir == "" {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("protect %s %s: %w", label, dir, err)
	}
	p := protectedDir{label: label, paths: []string{abs}}
	if real := resolveExisting(abs); real != abs {
		p.paths = append(p.paths, real)
	}
	r.protected = append(r.protected, p)
	for _, root := range r.roots {
		for _, q := range p.paths {
			if within(root, q) {
				return fmt.Errorf("--cwd-root %s: inside %s %s; give a project folder outside it", root, label, q)
			}
		}
	}
	return nil
}

// Check returns nil when dir may be a row's cwd, else an error saying why
// and what to do. On this machine it resolves dir's symbolic links first, so
// a link into a refused folder, or a path under a root that leaves it through
// a link, is refused; the folder must exist. For a remote host it checks the
// path's form only: absolute, no "..", under a root, clear of the protected
// folders (in case the host is this machine). It costs one path resolution.
func (r *CwdRule) Check(dir string) error {
	if problem := pathForm(dir); problem != "" {
		return fmt.Errorf("working folder refused: %q %s", dir, problem)
	}
	real := filepath.Clean(dir)
	if !r.remote {
		var err error
		if real, err = filepath.EvalSymlinks(real); err != nil {
			return fmt.Errorf("working folder unavailable: %s: %w", dir, unwrapPathError(err))
		}
		fi, err := os.Stat(real)
		if err != nil {
			return fmt.Errorf("working folder unavailable: %s: %w", dir, unwrapPathError(err))
		}
		if !fi.IsDir() {
			return fmt.Errorf("working folder unavailable: %s is not a folder", dir)
		}
	}
	shown := dir
	if real != filepath.Clean(dir) {
		shown = fmt.Sprintf("%s (a link to %s)", dir, real)
	}
	under := false
	for _, root := range r.roots {
		under = under || within(real, root)
	}
	if !under && len(r.roots) == 0 {
		return fmt.Errorf("working folder refused: %s is not under a --cwd-root (none given: give --cwd-root DIR to allow the folders under DIR)", shown)
	}
	if !under {
		return fmt.Errorf("working folder refused: %s is not under a --cwd-root (%s; give --cwd-root DIR to allow the folders under DIR)", shown, strings.Join(r.roots, ", "))
	}
	for _, p := range r.protected {
		for _, q := range p.paths {
			how := ""
			switch {
			case real == q:
				how = "is " + p.label
			case within(real, q):
				how = "is inside " + p.label + " " + q
			case within(q, real):
				how = "holds " + p.label + " " + q
			default:
				continue
			}
			return fmt.Errorf("working folder refused: %s %s (a row may not work in or above the run's output folder, the viewer's cache or the hermes-pipe home; give a project folder under a --cwd-root)", shown, how)
		}
	}
	return nil
}

// pathForm says what is wrong with the form of a cwd or root path, or "".
func pathForm(p string) string {
	switch {
	case p == "":
		return "is empty"
	case !strings.HasPrefix(p, "/"):
		return "is not an absolute path"
	case strings.IndexByte(p, 0) >= 0:
		return "contains a NUL character"
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return `holds ".." (give the folder's own path)`
		}
	}
	return ""
}

// within reports whether p is dir or a path under it; both are cleaned
// absolute paths. It compares whole path elements, never a string prefix
// (/rooted is not under /root).
func within(p, dir string) bool {
	if p == dir || dir == "/" {
		return true
	}
	return strings.HasPrefix(p, dir) && p[len(dir)] == '/'
}

// resolveExisting resolves the symbolic links of the longest part of the
// absolute path p that exists and appends the rest unchanged.
func resolveExisting(p string) string {
	rest := ""
	for cur := p; ; {
		if real, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(real, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// unwrapPathError drops the operation and path of a *fs.PathError (the
// caller names the path itself) and says "no such folder" for a missing one.
func unwrapPathError(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return errors.New("no such folder")
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
