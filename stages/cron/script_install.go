package cron

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// maxScriptSize bounds a script copied into the scripts folder.
const maxScriptSize = 1 << 20

// InstallScript makes the --script argument of cron add and edit a name
// inside <home>/cron/scripts. A relative name of a script already there
// (x.sh, tools/x.sh; not ./x.sh) is kept as it is. Otherwise arg is a path to an existing regular file
// (relative to the working folder), copied into the scripts folder
// (created 0700 when missing) under its base name, mode 0700; a file of
// that name already there is reused only when its content is the same.
// undo removes what was copied (for when the job is then refused); it is
// a no-op when nothing was. Errors wrap ErrUsage and name the scripts
// folder and the path tried.
func InstallScript(home, arg string) (name string, undo func(), err error) {
	undo = func() {}
	dir := ScriptsDir(home)
	if arg == "" {
		return "", undo, usagef("empty script name")
	}
	sep := string(filepath.Separator)
	named := !filepath.IsAbs(arg) && !strings.HasPrefix(arg, "~") &&
		!strings.HasPrefix(arg, "."+sep) && !strings.HasPrefix(arg, ".."+sep)
	if named {
		if _, err := os.Lstat(filepath.Join(dir, arg)); err == nil {
			if _, err := ResolveScript(home, arg); err != nil {
				return "", undo, err
			}
			return arg, undo, localCopyAgrees(home, arg)
		}
	}
	src, err := filepath.Abs(arg)
	if err != nil {
		return "", undo, usagef("script %q: %v", arg, err)
	}
	st, err := os.Stat(src)
	if errors.Is(err, fs.ErrNotExist) {
		return "", undo, usagef("script %q: no file at %s, and no script %q in %s (scripts live there; give a path to the file to copy it in)", arg, src, filepath.Base(arg), dir)
	}
	if err != nil {
		return "", undo, usagef("script %q: %v", arg, err)
	}
	if !st.Mode().IsRegular() {
		return "", undo, usagef("script %q: %s is not a regular file", arg, src)
	}
	if st.Size() > maxScriptSize {
		return "", undo, usagef("script %q: %s is %d bytes, over the %d a script may have", arg, src, st.Size(), maxScriptSize)
	}
	body, err := os.ReadFile(src)
	if err != nil {
		return "", undo, usagef("script %q: %v", arg, err)
	}
	name = filepath.Base(src)
	dst := filepath.Join(dir, name)
	if err := installNew(home, name, body); errors.Is(err, fs.ErrExist) {
		return name, undo, sameScript(home, arg, name, dst, body)
	} else if err != nil {
		return "", undo, usagef("script %q: %v", arg, err)
	}
	return name, func() { _ = os.Remove(dst) }, nil
}

// installNew writes body as the new script name of <home>/cron/scripts
// (its folders made) and checks it resolves as a job's script does
// (ResolveScript); a script of that name already there is fs.ErrExist and
// left alone; on any other failure nothing is left behind. cron add and
// cron import install through it.
func installNew(home, name string, body []byte) error {
	dst := filepath.Join(ScriptsDir(home), name)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return fmt.Errorf("scripts folder: %w", err)
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o700)
	if errors.Is(err, fs.ErrExist) {
		return err
	}
	if err != nil {
		return fmt.Errorf("copy into %s: %w", ScriptsDir(home), err)
	}
	_, werr := io.Copy(f, bytes.NewReader(body))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = os.Remove(dst)
		return fmt.Errorf("copy to %s: %w", dst, werr)
	}
	if _, err := ResolveScript(home, name); err != nil {
		_ = os.Remove(dst)
		return err
	}
	return nil
}

// localCopyAgrees refuses a bare name found both in the scripts folder and
// in the working folder with other content: which one was meant is unclear.
func localCopyAgrees(home, name string) error {
	body, err := os.ReadFile(name)
	if err != nil {
		return nil // none here (or unreadable): the scripts folder's is meant
	}
	return sameScript(home, name, name, filepath.Join(ScriptsDir(home), name), body)
}

// sameScript accepts a script of that name already in the scripts folder
// only when it is a regular file inside it (ResolveScript's checks) with
// the content being copied: another job's script is never replaced.
func sameScript(home, arg, name, dst string, body []byte) error {
	p, err := ResolveScript(home, name)
	if err != nil {
		return err
	}
	have, err := os.ReadFile(p)
	if err != nil {
		return usagef("script %q: %v", arg, err)
	}
	if !bytes.Equal(have, body) {
		return usagef("script %q: %s already exists with other content (another job may use it); rename the file, or edit %s and give --script %s", arg, dst, dst, name)
	}
	return nil
}
