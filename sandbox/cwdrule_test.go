package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mkdirs creates the folders under base and returns base's real path (the
// temp dir may itself be reached through a link).
func mkdirs(t *testing.T, base string, dirs ...string) string {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	real, err := filepath.EvalSymlinks(base)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

// checkAll runs rule.Check on each cwd and compares: "" = allowed, else a
// piece of the error's text.
func checkAll(t *testing.T, rule *CwdRule, cases map[string]string) {
	t.Helper()
	for dir, want := range cases {
		err := rule.Check(dir)
		switch {
		case want == "" && err != nil:
			t.Errorf("cwd %s: refused (%v), want allowed", dir, err)
		case want != "" && err == nil:
			t.Errorf("cwd %s: allowed, want refused with %q", dir, want)
		case want != "" && !strings.Contains(err.Error(), want):
			t.Errorf("cwd %s: %v, want %q in it", dir, err, want)
		}
	}
}

// TestCwdRuleWithoutRootsRefusesEveryFolder: by default no folder of the
// host may be a row's cwd, and the error says what to give.
func TestCwdRuleWithoutRootsRefusesEveryFolder(t *testing.T) {
	rule, err := NewCwdRule(nil, false)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	checkAll(t, rule, map[string]string{
		"/root": "working folder refused: /root is not under a --cwd-root (none given: give --cwd-root DIR to allow the folders under DIR)",
		"/var":  "not under a --cwd-root",
		dir:     "not under a --cwd-root",
	})
}

// TestCwdRuleAllowsOnlyFoldersUnderARoot: a root and the folders under it
// are allowed; everything else is refused, compared by path element (not a
// string prefix), through symbolic links either way, and a missing folder
// or a file is unavailable.
func TestCwdRuleAllowsOnlyFoldersUnderARoot(t *testing.T) {
	base := mkdirs(t, t.TempDir(), "root/a/b", "rootx", "outside")
	root := filepath.Join(base, "root")
	for link, target := range map[string]string{
		"root/to-slash-root": "/root",
		"root/to-outside":    filepath.Join(base, "outside"),
		"into-root":          filepath.Join(root, "a"),
	} {
		if err := os.Symlink(target, filepath.Join(base, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	rule, err := NewCwdRule([]string{root}, false)
	if err != nil {
		t.Fatal(err)
	}
	checkAll(t, rule, map[string]string{
		root:                                 "",
		root + "/":                           "",
		filepath.Join(root, "a", "b"):        "",
		filepath.Join(base, "into-root"):     "",
		"/root":                              "working folder refused: /root is not under a --cwd-root (" + root + "; give --cwd-root DIR",
		"/var":                               "not under a --cwd-root",
		"/":                                  "not under a --cwd-root",
		base:                                 "not under a --cwd-root",
		filepath.Join(base, "rootx"):         "not under a --cwd-root",
		filepath.Join(root, "to-slash-root"): "(a link to /root) is not under a --cwd-root",
		filepath.Join(root, "to-outside"):    "a link to " + filepath.Join(base, "outside"),
		root + "/a/../a":                     `holds ".."`,
		filepath.Join(root, "missing"):       "working folder unavailable: " + filepath.Join(root, "missing") + ": no such folder",
		filepath.Join(root, "file"):          "is not a folder",
		"relative":                           "is not an absolute path",
	})
}

// TestCwdRuleKeepsProtectedFoldersOut: the output folder (even one that
// does not exist yet, or is named through a link), what is inside it and
// every folder holding it are refused although they are under a root; a
// root inside a protected folder is an error of the flag.
func TestCwdRuleKeepsProtectedFoldersOut(t *testing.T) {
	base := mkdirs(t, t.TempDir(), "work/proj", "work/runs/real-out/data", "work/home")
	work := filepath.Join(base, "work")
	if err := os.Symlink(filepath.Join(work, "runs", "real-out"), filepath.Join(base, "out-link")); err != nil {
		t.Fatal(err)
	}
	rule, err := NewCwdRule([]string{work}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range [][2]string{ // in order: the first one met is named
		{"the output folder", filepath.Join(base, "out-link")},
		{"the hermes-pipe home", filepath.Join(work, "home")},
		{"the viewer's cache", filepath.Join(work, "cache", "hermes-pipe", "view")}, // not created yet
	} {
		if err := rule.Protect(p[0], p[1]); err != nil {
			t.Fatal(err)
		}
	}
	mkdirs(t, work, "cache/hermes-pipe/view/x")
	out := filepath.Join(work, "runs", "real-out")
	checkAll(t, rule, map[string]string{
		filepath.Join(work, "proj"):  "",
		out:                          "is the output folder (a row may not work in or above",
		filepath.Join(out, "data"):   "is inside the output folder " + out,
		filepath.Join(work, "runs"):  "holds the output folder " + out,
		work:                         "holds the output folder",
		filepath.Join(work, "home"):  "is the hermes-pipe home",
		filepath.Join(work, "cache"): "holds the viewer's cache",
		filepath.Join(work, "cache/hermes-pipe/view/x"): "is inside the viewer's cache",
		"/": "not under a --cwd-root",
	})
	if err := rule.Protect("the output folder", filepath.Join(work, "..")); err == nil ||
		!strings.Contains(err.Error(), "--cwd-root "+work+": inside the output folder") {
		t.Errorf("a root inside a protected folder: %v", err)
	}
}

// TestCwdRuleRoots: a root must be an existing folder given by an absolute
// path; on a remote host only its form is checked.
func TestCwdRuleRoots(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for root, want := range map[string]string{
		"rel":                         `--cwd-root "rel": is not an absolute path`,
		"":                            `--cwd-root "": is empty`,
		filepath.Join(dir, "missing"): "--cwd-root " + filepath.Join(dir, "missing") + ": no such folder",
		file:                          "--cwd-root " + file + ": not a folder",
		dir + "/../x":                 `holds ".."`,
	} {
		if _, err := NewCwdRule([]string{root}, false); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("root %q: %v, want %q", root, err, want)
		}
	}
	if _, err := NewCwdRule([]string{"/srv/not-here"}, true); err != nil {
		t.Errorf("a remote root is not looked up here: %v", err)
	}
}

// TestCwdRuleRemoteChecksTheForm: for ssh the cwd is a path of the remote
// host: it must be under a root by path element, with no "..", and clear of
// the protected folders; whether it exists is not known here.
func TestCwdRuleRemoteChecksTheForm(t *testing.T) {
	rule, err := NewCwdRule([]string{"/srv/work"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := rule.Protect("the output folder", "/srv/work/out"); err != nil {
		t.Fatal(err)
	}
	checkAll(t, rule, map[string]string{
		"/srv/work/proj/a":    "",
		"/srv/work":           "holds the output folder",
		"/srv/work/out/data":  "is inside the output folder",
		"/srv/workx":          "not under a --cwd-root (/srv/work;",
		"/srv/work/../../etc": `holds ".."`,
		"/root":               "not under a --cwd-root",
	})
}
