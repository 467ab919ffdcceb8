package confine

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Mapper resolves a path as a confined command sees it to the host folder
// of the mount behind it and the path inside that mount. Symbolic links are
// followed as the command would see them (an absolute target is looked up
// in the sandbox's view, not the host's), and every host access goes through
// an os.Root per mount, so a link planted by a command cannot lead a
// host-side read or write outside the mounts.
type Mapper struct {
	binds    []bind            // in mount order; a later one hides an earlier one at the same or a deeper path
	links    map[string]string // sandbox path → link target (merged /usr: /bin → usr/bin)
	masked   map[string]bool
	maskDirs []string
}

type bind struct {
	src, dst string
	ro       bool
}

// Location is where a sandbox path lives on the host.
type Location struct {
	Root     string // host folder of the mount (open it with os.OpenRoot)
	Rel      string // path inside Root, slash-separated, "." for Root itself
	ReadOnly bool
}

// Mapper returns the path mapper of the policy: the same mounts Args makes.
func (p Policy) Mapper() *Mapper {
	m := &Mapper{links: map[string]string{}, masked: map[string]bool{}}
	for _, d := range HostDirs {
		fi, err := os.Lstat(d)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			if t, err := os.Readlink(d); err == nil {
				m.links[d] = t
			}
			continue
		}
		m.binds = append(m.binds, bind{src: d, dst: d, ro: true})
	}
	for _, k := range maskedExisting() {
		m.masked[k.Path] = true
		if k.Dir {
			m.maskDirs = append(m.maskDirs, k.Path)
		}
	}
	if p.TmpDir != "" {
		m.binds = append(m.binds, bind{src: p.TmpDir, dst: "/tmp"})
	}
	m.binds = append(m.binds, bind{src: p.SessionDir, dst: p.SessionDir})
	if p.WorkDir != "" && p.WorkDir != p.SessionDir {
		m.binds = append(m.binds, bind{src: p.WorkDir, dst: p.WorkDir})
	}
	for _, b := range p.Mounts {
		m.binds = append(m.binds, bind{src: b.Src, dst: b.Dst, ro: b.ReadOnly})
	}
	return m
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// find returns the mount that shows p: the deepest, the later of equals.
func (m *Mapper) find(p string) (bind, bool) {
	best, ok := bind{}, false
	for _, b := range m.binds {
		if within(p, b.dst) && (!ok || len(b.dst) >= len(best.dst)) {
			best, ok = b, true
		}
	}
	return best, ok
}

func (m *Mapper) isMasked(p string) bool {
	if m.masked[p] {
		return true
	}
	for _, d := range m.maskDirs {
		if within(p, d) {
			return true
		}
	}
	return false
}

// Resolve maps the absolute sandbox path p. With follow, a symbolic link in
// the last component is followed too (Stat, read, write through a link);
// links in earlier components always are. Missing trailing components are
// kept as they are (a file about to be created). A path outside every
// mount (or past too many links) gives fs.ErrNotExist; a masked secret
// gives fs.ErrPermission.
func (m *Mapper) Resolve(p string, follow bool) (Location, error) {
	if !path.IsAbs(p) {
		return Location{}, &fs.PathError{Op: "resolve", Path: p, Err: errors.New("not an absolute path")}
	}
	orig := p
	for hops := 0; hops < 40; hops++ {
		next, done, err := m.step(path.Clean(p), follow)
		if err != nil {
			return Location{}, &fs.PathError{Op: "resolve", Path: orig, Err: err}
		}
		if done != nil {
			return *done, nil
		}
		p = next
	}
	return Location{}, &fs.PathError{Op: "resolve", Path: orig, Err: fs.ErrNotExist}
}

// step walks p from the root; it returns either the final location, or the
// path with the first symbolic link met replaced by its target.
func (m *Mapper) step(p string, follow bool) (string, *Location, error) {
	comps := strings.Split(strings.TrimPrefix(p, "/"), "/")
	if p == "/" {
		comps = nil
	}
	cur := "/"
	for i, c := range comps {
		last := i == len(comps)-1
		next := path.Join(cur, c)
		rest := path.Join(comps[i+1:]...)
		if m.isMasked(next) {
			return "", nil, fs.ErrPermission
		}
		if t, ok := m.links[next]; ok && (!last || follow) {
			return joinLink(cur, t, rest), nil, nil
		}
		b, ok := m.find(next)
		if !ok {
			if m.parentOfMount(next) && last {
				return "", nil, fs.ErrPermission // a folder the sandbox sees but that holds no files of its own
			}
			if m.parentOfMount(next) {
				cur = next
				continue
			}
			return "", nil, fs.ErrNotExist
		}
		rel := relTo(b.dst, next)
		root, err := os.OpenRoot(b.src)
		if err != nil {
			return "", nil, fs.ErrNotExist
		}
		fi, err := root.Lstat(rel)
		if err != nil {
			root.Close()
			if errors.Is(err, fs.ErrNotExist) && m.parentOfMount(next) {
				cur = next // a mount point bwrap creates on the way to a deeper mount
				continue
			}
			if errors.Is(err, fs.ErrNotExist) {
				// The rest does not exist yet: a file or folders to create.
				return "", &Location{Root: b.src, Rel: path.Join(rel, rest), ReadOnly: b.ro}, nil
			}
			return "", nil, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 && (!last || follow) {
			t, err := root.Readlink(rel)
			root.Close()
			if err != nil {
				return "", nil, err
			}
			return joinLink(cur, t, rest), nil, nil
		}
		root.Close()
		if last {
			return "", &Location{Root: b.src, Rel: rel, ReadOnly: b.ro}, nil
		}
		cur = next
	}
	if b, ok := m.find("/"); ok {
		return "", &Location{Root: b.src, Rel: ".", ReadOnly: b.ro}, nil
	}
	return "", nil, fs.ErrPermission
}

// parentOfMount reports whether p is a folder above some mount point (it
// exists in the sandbox only as the path to the mount).
func (m *Mapper) parentOfMount(p string) bool {
	for _, b := range m.binds {
		if strings.HasPrefix(b.dst, p+"/") {
			return true
		}
	}
	for l := range m.links {
		if strings.HasPrefix(l, p+"/") {
			return true
		}
	}
	return false
}

func joinLink(dir, target, rest string) string {
	if !path.IsAbs(target) {
		target = path.Join(dir, target)
	}
	return path.Join(target, rest)
}

func relTo(dst, p string) string {
	if p == dst {
		return "."
	}
	r, err := filepath.Rel(dst, p)
	if err != nil {
		return "."
	}
	return filepath.ToSlash(r)
}
