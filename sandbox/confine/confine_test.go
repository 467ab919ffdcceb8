package confine

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseMount(t *testing.T) {
	for in, want := range map[string]Mount{
		"/a:/b":    {Src: "/a", Dst: "/b"},
		"/a:/b:ro": {Src: "/a", Dst: "/b", ReadOnly: true},
		"/a:ro":    {Src: "/a", Dst: "/a", ReadOnly: true},
		"/a":       {Src: "/a", Dst: "/a"},
	} {
		got, err := ParseMount(in)
		if err != nil || got != want {
			t.Errorf("ParseMount(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"a:/b", "/a:b", "/a:/b:x", "/a:/", ""} {
		if _, err := ParseMount(bad); err == nil {
			t.Errorf("ParseMount(%q) accepted", bad)
		}
	}
}

func TestArgs(t *testing.T) {
	dir := t.TempDir()
	p := Policy{SessionDir: dir, TmpDir: filepath.Join(dir, "tmp"), WorkDir: "/srv/w",
		Mounts: []Mount{{Src: "/data", Dst: "/mnt/data", ReadOnly: true}},
		Env:    []string{"PATH=/usr/bin", "A=b=c"}}
	c, err := p.Args("/usr/bin/bwrap", []string{"bash", "-c", "x"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a := c.Args
	s := strings.Join(a, " ")
	// The filter is the last descriptor: 3 without extra files.
	if !strings.HasPrefix(s, "/usr/bin/bwrap --seccomp 3 ") || len(c.Files) != 1 {
		t.Errorf("no seccomp filter on descriptor 3: %s (%d files)", s, len(c.Files))
	}
	for _, w := range []string{"--unshare-all", "--die-with-parent", "--new-session", "--clearenv",
		"--proc /proc", "--dev /dev", "--bind " + dir + " " + dir, "--bind " + dir + "/tmp /tmp",
		"--bind /srv/w /srv/w", "--ro-bind /data /mnt/data", "--setenv A b=c", "--chdir /srv/w -- bash -c x"} {
		if !strings.Contains(s, w) {
			t.Errorf("argv lacks %q: %s", w, s)
		}
	}
	if slices.Contains(a, "--share-net") {
		t.Errorf("network none but --share-net in %s", s)
	}
	for _, bad := range []string{"/root", "/home", "/var/run/docker.sock", "/run"} {
		if slices.Contains(a, bad) {
			t.Errorf("argv exposes %s: %s", bad, s)
		}
	}
	if _, err := os.Stat("/etc/shadow"); err == nil && !strings.Contains(s, "--ro-bind /dev/null /etc/shadow") {
		t.Errorf("/etc/shadow not masked: %s", s)
	}
	p.Network = NetworkHost
	if c, _ := p.Args("bwrap", []string{"true"}); !slices.Contains(c.Args, "--share-net") {
		t.Errorf("network host without --share-net")
	}
	p.Network = "bridge"
	if _, err := p.Args("bwrap", []string{"true"}); err == nil {
		t.Errorf("network bridge accepted")
	}
}

func TestShellLimits(t *testing.T) {
	if s := (Limits{}).ShellLimits(); s != "" {
		t.Errorf("no limits gave %q", s)
	}
	s := Limits{FileSizeBytes: 1 << 20, Processes: 64}.ShellLimits()
	if !strings.Contains(s, "ulimit -f 1024") || !strings.Contains(s, "ulimit -u 64") {
		t.Errorf("limits: %q", s)
	}
}

// TestConfinedView runs a command through bwrap and checks what it sees.
func TestConfinedView(t *testing.T) {
	r := Probe(context.Background())
	if err := r.Usable(); err != nil {
		t.Skipf("confinement unavailable here: %v", err)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	p := Policy{SessionDir: dir, TmpDir: filepath.Join(dir, "tmp"), Env: []string{"PATH=/usr/bin:/bin"}}
	c, err := p.Args(r.Bwrap, []string{"/bin/sh", "-c", `
echo tmp > /tmp/x
test -e /root/. && echo ROOT
test -e /var/run/docker.sock && echo DOCKER
test -s /etc/shadow && echo SHADOW
touch /usr/hermes-x 2>/dev/null && echo USRW
echo pid $$
env | grep -c . `})
	if err != nil {
		t.Fatal(err)
	}
	s := bwrapOutput(t, c)
	for _, bad := range []string{"ROOT", "DOCKER", "SHADOW", "USRW"} {
		if strings.Contains(s, bad) {
			t.Errorf("confined command saw %s:\n%s", bad, s)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "tmp", "x")); err != nil || string(b) != "tmp\n" {
		t.Errorf("/tmp is not the session's tmp folder: %q, %v", b, err)
	}
	if !strings.Contains(s, "pid 2\n") && !strings.Contains(s, "pid 1\n") {
		t.Errorf("no fresh pid namespace: %s", s)
	}
}

func TestMapper(t *testing.T) {
	dir := t.TempDir()
	tmp := filepath.Join(dir, "tmp")
	ro := t.TempDir()
	outside := t.TempDir()
	for _, d := range []string{tmp, filepath.Join(dir, "w")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(outside, "id_rsa")
	if err := os.WriteFile(secret, []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(secret, filepath.Join(dir, "k")))                       // absolute, outside every mount
	must(os.Symlink("../../../../../../"+secret, filepath.Join(dir, "k2"))) // relative, climbing out
	must(os.Symlink("/tmp/f", filepath.Join(dir, "intmp")))                 // sandbox view: /tmp is the session tmp
	must(os.WriteFile(filepath.Join(tmp, "f"), []byte("x"), 0o600))
	must(os.Symlink(outside, filepath.Join(dir, "dirlink")))
	p := Policy{SessionDir: dir, TmpDir: tmp, Mounts: []Mount{{Src: ro, Dst: "/mnt/ro", ReadOnly: true}}}
	m := p.Mapper()

	for _, c := range []string{dir + "/k", dir + "/k2", dir + "/dirlink/id_rsa", secret, "/root/.ssh/id_rsa", "/proc/1/environ"} {
		loc, err := m.Resolve(c, true)
		if err == nil {
			// Only acceptable when it lands inside a mount and the file is not the secret.
			if b, rerr := readVia(loc); rerr == nil && string(b) == "SECRET" {
				t.Errorf("Resolve(%s) reached the secret through %+v", c, loc)
			}
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) {
			t.Errorf("Resolve(%s): %v, want not-exist or permission", c, err)
		}
	}
	loc, err := m.Resolve(dir+"/intmp", true)
	if err != nil || loc.Root != tmp || loc.Rel != "f" {
		t.Errorf("Resolve(intmp) = %+v, %v; want %s f", loc, err, tmp)
	}
	loc, err = m.Resolve("/tmp/new/file", true)
	if err != nil || loc.Root != tmp || loc.Rel != "new/file" || loc.ReadOnly {
		t.Errorf("Resolve(/tmp/new/file) = %+v, %v", loc, err)
	}
	loc, err = m.Resolve("/mnt/ro/a", true)
	if err != nil || !loc.ReadOnly || loc.Root != ro {
		t.Errorf("Resolve(/mnt/ro/a) = %+v, %v", loc, err)
	}
	loc, err = m.Resolve(dir+"/k", false)
	if err != nil || loc.Root != dir || loc.Rel != "k" {
		t.Errorf("Resolve(k, no follow) = %+v, %v", loc, err)
	}
	if _, err := os.Stat("/etc/shadow"); err == nil {
		if _, err := m.Resolve("/etc/shadow", true); !errors.Is(err, fs.ErrPermission) {
			t.Errorf("Resolve(/etc/shadow): %v, want permission", err)
		}
	}
	if loc, err := m.Resolve("/etc/hostname", true); err == nil && !loc.ReadOnly {
		t.Errorf("/etc is writable: %+v", loc)
	}
}

func readVia(loc Location) ([]byte, error) {
	r, err := os.OpenRoot(loc.Root)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.ReadFile(loc.Rel)
}

// TestArgsWithLayout: a policy for another machine mounts what that machine
// has and masks its secrets, whatever this one holds.
func TestArgsWithLayout(t *testing.T) {
	l := &Layout{
		Dirs:   map[string]bool{"/usr": true, "/etc": true},
		Links:  map[string]string{"/bin": "usr/bin"},
		Masked: []MaskedPath{{Path: "/etc/remote-secret"}, {Path: "/etc/remote-keys", Dir: true}},
	}
	if _, err := (Policy{SessionDir: "/s", Layout: l}).Args("/opt/bwrap", []string{"sh"}); err == nil {
		t.Errorf("a remote command line without the filter's path was accepted")
	}
	c, err := Policy{SessionDir: "/s", Layout: l, SeccompFile: "/s/seccomp.bpf"}.Args("/opt/bwrap", []string{"sh"})
	if err != nil {
		t.Fatal(err)
	}
	a := c.Args
	s := strings.Join(a, " ")
	if len(c.Files) != 0 || !strings.HasPrefix(s, `/bin/sh -c exec "$@" 3<"$0" /s/seccomp.bpf /opt/bwrap --seccomp 3 `) {
		t.Errorf("remote filter not read from its file: %s", s)
	}
	for _, w := range []string{"/opt/bwrap ", "--ro-bind /s/seccomp.bpf /s/seccomp.bpf", "--ro-bind /usr /usr", "--ro-bind /etc /etc", "--symlink usr/bin /bin",
		"--ro-bind /dev/null /etc/remote-secret", "--tmpfs /etc/remote-keys --remount-ro /etc/remote-keys"} {
		if !strings.Contains(s, w) {
			t.Errorf("argv lacks %q: %s", w, s)
		}
	}
	for _, bad := range []string{"/lib", "/sbin", "/lib64", "/etc/shadow"} {
		if slices.Contains(a, bad) {
			t.Errorf("argv names %s, which the layout does not have: %s", bad, s)
		}
	}
}

func TestWorkDirRefused(t *testing.T) {
	for _, w := range []string{"/", "/etc", "/usr/lib", "/proc/1", "/tmp", "/dev/shm", "/run"} {
		p := Policy{SessionDir: "/var/tmp/s", TmpDir: "/var/tmp/s/tmp", WorkDir: w}
		if err := p.Validate(); err == nil {
			t.Errorf("working folder %s accepted", w)
		}
	}
	for _, w := range []string{"/tmp/repo", "/home/u/project", "/srv/data", "/var/tmp/work"} {
		p := Policy{SessionDir: "/var/tmp/s", TmpDir: "/var/tmp/s/tmp", WorkDir: w}
		if err := p.Validate(); err != nil {
			t.Errorf("working folder %s refused: %v", w, err)
		}
	}
}

// The summary names bwrap's version when Version found one, and prints no
// empty parentheses when it did not (Probe leaves it to Version).
func TestReportSummaryVersion(t *testing.T) {
	r := Report{Bwrap: "/usr/bin/bwrap"}
	if first := strings.SplitN(r.String(), "\n", 2)[0]; first != "bubblewrap: /usr/bin/bwrap" {
		t.Errorf("without a version: %q", first)
	}
	r.BwrapVersion = "bubblewrap 0.8.0"
	if first := strings.SplitN(r.String(), "\n", 2)[0]; first != "bubblewrap: /usr/bin/bwrap (bubblewrap 0.8.0)" {
		t.Errorf("with a version: %q", first)
	}
}
