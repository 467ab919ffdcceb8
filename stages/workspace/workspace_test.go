package workspace_test

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hermes-pipe/hermes-pipe/sandbox"
	"github.com/hermes-pipe/hermes-pipe/sandbox/docker"
	"github.com/hermes-pipe/hermes-pipe/sandbox/docker/dockertest"
	"github.com/hermes-pipe/hermes-pipe/sandbox/local"
	"github.com/hermes-pipe/hermes-pipe/sandbox/ssh"
	"github.com/hermes-pipe/hermes-pipe/sandbox/ssh/sshtest"
	"github.com/hermes-pipe/hermes-pipe/stages/workspace"
)

func TestMain(m *testing.M) {
	code := m.Run()
	dockertest.Done()
	os.Exit(code)
}

// drivers are the sandboxes a workspace is kept from and restored into.
var drivers = map[string]func(t *testing.T) sandbox.Driver{
	"local": func(t *testing.T) sandbox.Driver {
		d, err := local.New(sandbox.Config{RunID: "workspace-test", Local: sandbox.LocalConfig{BaseDir: t.TempDir()}})
		if err != nil {
			t.Fatal(err)
		}
		// A closed idle session is reset in the background for the pool;
		// Release waits for that before the folder is removed.
		t.Cleanup(func() { _ = d.Release() })
		return d
	},
	"docker": func(t *testing.T) sandbox.Driver {
		dockertest.Require(t) // the busybox test image: its tar and head
		d, err := docker.New(sandbox.Config{RunID: "workspace-test", Docker: sandbox.DockerConfig{DefaultImage: dockertest.Image()}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Release() })
		return d
	},
	"ssh": func(t *testing.T) sandbox.Driver {
		e := sshtest.Env(t)
		d, err := ssh.New(ssh.Options{Addr: e["HERMES_TEST_SSH_ADDR"], User: e["HERMES_TEST_SSH_USER"],
			KeyFiles: []string{e["HERMES_TEST_SSH_KEY"]}, KnownHosts: []string{e["HERMES_TEST_SSH_KNOWN_HOSTS"]}, NoAgent: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Release() })
		return d
	},
}

func openIn(t *testing.T, d sandbox.Driver) sandbox.Session {
	t.Helper()
	s, err := d.Open(context.Background(), sandbox.Spec{RunID: "workspace-test", RolloutID: strings.ReplaceAll(t.Name(), "/", "-")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func openLocal(t *testing.T) sandbox.Session { return openIn(t, drivers["local"](t)) }

func newLocal(tb testing.TB) sandbox.Driver {
	tb.Helper()
	d, err := local.New(sandbox.Config{RunID: "workspace-test", Local: sandbox.LocalConfig{BaseDir: tb.TempDir()}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = d.Release() }) // as in drivers["local"]
	return d
}

func openInB(tb testing.TB, d sandbox.Driver) sandbox.Session {
	tb.Helper()
	s, err := d.Open(context.Background(), sandbox.Spec{RunID: "workspace-test", RolloutID: "bench"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func openLocalB(tb testing.TB) sandbox.Session { return openInB(tb, newLocal(tb)) }

func runB(tb testing.TB, s sandbox.Session, cmd string) {
	tb.Helper()
	res, err := s.Exec(context.Background(), sandbox.Cmd{Command: cmd})
	if err != nil || res.ExitCode != 0 {
		tb.Fatalf("%s: %v %+v", cmd, err, res)
	}
}

func run(t *testing.T, s sandbox.Session, cmd string) string {
	t.Helper()
	res, err := s.Exec(context.Background(), sandbox.Cmd{Command: cmd})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%s: %v %+v", cmd, err, res)
	}
	return res.Stdout
}

// A workspace kept from one session comes back whole in a fresh one: files,
// folders, modes and links; with a folder given, that folder is kept
// whatever folder the shell is in.
func TestKeepAndRestore(t *testing.T) {
	for name, open := range drivers {
		t.Run(name, func(t *testing.T) {
			d := open(t)
			ctx := context.Background()
			out := t.TempDir()
			k := &workspace.Keeper{Out: out}
			if err := k.Prepare(); err != nil {
				t.Fatal(err)
			}
			s := openIn(t, d)
			run(t, s, `mkdir -p w/src/pkg && cd w && printf 'hello\n' >src/pkg/a.txt && printf '#!/bin/sh\necho ran\n' >run.sh && chmod 755 run.sh && ln -s pkg/a.txt src/link`)
			dir := strings.TrimSpace(run(t, s, `pwd`))
			run(t, s, `cd ..`)
			info, err := k.Keep(ctx, s, "row-1/../evil", dir)
			if err != nil || !info.Kept() {
				t.Fatalf("keep: %v %+v", err, info)
			}
			if !regexp.MustCompile(`^[0-9a-f]{32}-[0-9a-f]{16}\.tar\.zst$`).MatchString(info.File) {
				t.Fatalf("unsafe name %q", info.File)
			}
			if fi, err := os.Stat(filepath.Join(out, workspace.Dir, info.File)); err != nil || fi.Size() != info.Bytes {
				t.Fatalf("archive: %v %v, info %+v", fi, err, info)
			}
			if left := run(t, s, `ls -a /tmp | grep hermes-workspace || true`); left != "" {
				t.Fatalf("the session's tar was left behind: %q", left)
			}
			clean, err := workspace.Load(out, info, 0)
			if err != nil {
				t.Fatal(err)
			}
			s2 := openIn(t, d)
			if err := workspace.Restore(ctx, s2, clean); err != nil {
				t.Fatal(err)
			}
			got := run(t, s2, `cat src/link; ./run.sh; readlink src/link; ls /tmp | grep -c hermes-restore || true`)
			if got != "hello\nran\npkg/a.txt\n0\n" {
				t.Fatalf("restored workspace says %q", got)
			}
		})
	}
}

// A folder larger than the cap is recorded as truncated, with no archive.
func TestKeepOverCap(t *testing.T) {
	out := t.TempDir()
	k := &workspace.Keeper{Out: out, Max: 4096}
	if err := k.Prepare(); err != nil {
		t.Fatal(err)
	}
	s := openLocal(t)
	run(t, s, `head -c 100000 /dev/zero >big`)
	info, err := k.Keep(context.Background(), s, "k", "")
	if err != nil || info.Kept() || !info.Truncated || info.MaxBytes != 4096 || info.TarBytes <= 4096 {
		t.Fatalf("keep over cap: %v %+v", err, info)
	}
	if ents, _ := os.ReadDir(filepath.Join(out, workspace.Dir)); len(ents) != 0 {
		t.Fatalf("an archive over the cap was written: %v", ents)
	}
	if !strings.Contains(info.Why(), "over --keep-workspace-max") {
		t.Fatalf("why: %q", info.Why())
	}
}

type member struct {
	name, link string
	typ        byte
	body       string
}

func tarOf(t *testing.T, ms ...member) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, m := range ms {
		h := &tar.Header{Name: m.name, Linkname: m.link, Typeflag: m.typ, Mode: 0o4755, Size: int64(len(m.body)), Uid: 7}
		if m.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if m.typ == tar.TypeReg {
			tw.Write([]byte(m.body))
		}
	}
	tw.Close()
	return b.Bytes()
}

// Clean refuses every archive that would write outside the folder it is
// unpacked in, and keeps the harmless ones (links pointing anywhere, with
// nothing under them).
func TestCleanRefusesEscapes(t *testing.T) {
	bad := map[string][]member{
		"absolute":          {{name: "/etc/x", typ: tar.TypeReg, body: "x"}},
		"dotdot":            {{name: "a/../../x", typ: tar.TypeReg, body: "x"}},
		"through symlink":   {{name: "l", link: "/etc", typ: tar.TypeSymlink}, {name: "l/passwd", typ: tar.TypeReg, body: "x"}},
		"symlink then dir":  {{name: "l", link: "..", typ: tar.TypeSymlink}, {name: "l/", typ: tar.TypeDir}},
		"hardlink outside":  {{name: "h", link: "/etc/passwd", typ: tar.TypeLink}},
		"hardlink to link":  {{name: "l", link: "/etc", typ: tar.TypeSymlink}, {name: "h", link: "l", typ: tar.TypeLink}},
		"device":            {{name: "d", typ: tar.TypeChar}},
		"fifo":              {{name: "f", typ: tar.TypeFifo}},
		"duplicate":         {{name: "a", typ: tar.TypeReg, body: "1"}, {name: "./a", typ: tar.TypeReg, body: "2"}},
		"under a file":      {{name: "a", typ: tar.TypeReg, body: "1"}, {name: "a/b", typ: tar.TypeReg, body: "2"}},
		"hardlink then sub": {{name: "a", typ: tar.TypeReg, body: "1"}, {name: "h", link: "a", typ: tar.TypeLink}, {name: "h/x", typ: tar.TypeReg}},
	}
	for name, ms := range bad {
		if _, err := workspace.Clean(bytes.NewReader(tarOf(t, ms...))); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	good, err := workspace.Clean(bytes.NewReader(tarOf(t,
		member{name: "./", typ: tar.TypeDir},
		member{name: "./d/", typ: tar.TypeDir},
		member{name: "./d/f", typ: tar.TypeReg, body: "body"},
		member{name: "out", link: "/etc/passwd", typ: tar.TypeSymlink},
		member{name: "h", link: "./d/f", typ: tar.TypeLink})))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(good))
	var names []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if h.Mode&^0o777 != 0 || h.Uid != 0 {
			t.Errorf("%s: mode %o uid %d kept", h.Name, h.Mode, h.Uid)
		}
		names = append(names, h.Name)
	}
	if strings.Join(names, " ") != "d/ d/f out h" {
		t.Fatalf("clean tar holds %v", names)
	}
}

// A damaged or renamed archive is refused before anything is unpacked.
func TestLoadRefusesDamage(t *testing.T) {
	out := t.TempDir()
	k := &workspace.Keeper{Out: out}
	if err := k.Prepare(); err != nil {
		t.Fatal(err)
	}
	s := openLocal(t)
	run(t, s, `echo hi >f`)
	info, err := k.Keep(context.Background(), s, "k", "")
	if err != nil || !info.Kept() {
		t.Fatal(err, info)
	}
	p := filepath.Join(out, workspace.Dir, info.File)
	b, _ := os.ReadFile(p)
	b[len(b)/2] ^= 1
	os.WriteFile(p, b, 0o644)
	if _, err := workspace.Load(out, info, 0); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("damaged archive: %v", err)
	}
	other := info
	other.File = "../../etc/passwd"
	if _, err := workspace.Load(out, other, 0); err == nil {
		t.Fatal("a path as archive name was accepted")
	}
	os.Remove(p)
	os.Symlink("/etc/passwd", p)
	if _, err := workspace.Load(out, info, 0); err == nil {
		t.Fatal("an archive that is a link was followed")
	}
	// Sweep removes what no record names, and leaves other files alone.
	os.WriteFile(filepath.Join(out, workspace.Dir, "notes.txt"), nil, 0o644)
	n, err := workspace.Sweep(out, map[string]bool{})
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	if _, err := os.Stat(filepath.Join(out, workspace.Dir, "notes.txt")); err != nil {
		t.Fatal("sweep removed a file it does not own")
	}
}
