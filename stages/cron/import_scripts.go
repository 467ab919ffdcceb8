package cron

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// importScripts copies the scripts of the jobs `cron import` takes from
// Hermes' scripts folder (dir; "" = none given or found) into
// <home>/cron/scripts, and takes back what it copied for a job that is then
// refused.
type importScripts struct {
	dir    string
	copied map[string][]string // script copied by this import -> the jobs using it
}

// importScriptsDir is the scripts folder of an import: the one given
// (--scripts-dir), else Hermes' <hermes home>/scripts beside a file that is
// <hermes home>/cron/jobs.json, when that folder exists.
func importScriptsDir(file, given string) (*importScripts, error) {
	s := &importScripts{copied: map[string][]string{}}
	if given != "" {
		abs, err := filepath.Abs(given)
		if err != nil {
			return nil, usagef("--scripts-dir %s: %v", given, err)
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return nil, usagef("--scripts-dir %s is not a folder", given)
		}
		s.dir = abs
		return s, nil
	}
	abs, err := filepath.Abs(file)
	if err != nil || filepath.Base(abs) != "jobs.json" || filepath.Base(filepath.Dir(abs)) != "cron" {
		return s, nil
	}
	cand := filepath.Join(filepath.Dir(filepath.Dir(abs)), "scripts")
	if fi, err := os.Stat(cand); err == nil && fi.IsDir() {
		s.dir = cand
	}
	return s, nil
}

// take makes j's script a name inside <home>/cron/scripts, copying it from
// the scripts folder when it is not there yet. A path naming a file in
// either folder (Hermes accepts absolute paths inside its own) becomes the
// name relative to it. missing says the script is in neither folder: the
// job is not taken, reason says what was looked for where. Any other
// reason refuses the job as a bad one.
func (s *importScripts) take(home string, j *Job) (reason string, missing bool) {
	if j.Script == "" {
		return "", false
	}
	name := s.relName(home, string(j.Script))
	if name == "" {
		return "", false // a path outside both folders: ValidateJob says so
	}
	j.Script = NullString(name)
	dst := filepath.Join(ScriptsDir(home), name)
	var src string
	if s.dir != "" {
		src = filepath.Join(s.dir, name)
	}
	body, err := s.read(src)
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("script %s: %v", name, err), false
	case err != nil || src == "":
		if _, err := os.Lstat(dst); err == nil {
			return "", false // already installed here
		}
		if s.dir == "" {
			return fmt.Sprintf("script %s is not in %s (give --scripts-dir DIR, the folder Hermes keeps it in: <hermes home>/scripts)", name, ScriptsDir(home)), true
		}
		return fmt.Sprintf("script %s is neither in %s nor in %s", name, s.dir, ScriptsDir(home)), true
	}
	if _, err := os.Lstat(dst); err == nil {
		if _, ours := s.copied[name]; ours {
			s.copied[name] = append(s.copied[name], j.ID)
		}
		if err := sameScript(home, name, name, dst, body); err != nil {
			return strings.TrimPrefix(err.Error(), ErrUsage.Error()+": "), false
		}
		return "", false
	}
	if err := installNew(home, name, body); err != nil {
		return fmt.Sprintf("script %s: %v", name, strings.TrimPrefix(err.Error(), ErrUsage.Error()+": ")), false
	}
	s.copied[name] = append(s.copied[name], j.ID)
	return "", false
}

// relName is the script's name relative to the scripts folders: a
// relative name as it is (cleaned), a path inside Hermes' folder or
// <home>/cron/scripts relative to it; "" for a path outside both.
func (s *importScripts) relName(home, script string) string {
	p := script
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		h, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		p = filepath.Join(h, rest)
	}
	if !filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	for _, dir := range []string{s.dir, ScriptsDir(home)} {
		if dir == "" {
			continue
		}
		if rel, err := filepath.Rel(dir, p); err == nil && filepath.IsLocal(rel) {
			return rel
		}
	}
	return ""
}

// read returns the script at src (a regular file inside s.dir, links
// resolved, at most maxScriptSize bytes); fs.ErrNotExist when there is
// none.
func (s *importScripts) read(src string) ([]byte, error) {
	if src == "" {
		return nil, fs.ErrNotExist
	}
	p, err := filepath.EvalSymlinks(src)
	if err != nil {
		return nil, err
	}
	dir, err := filepath.EvalSymlinks(s.dir)
	if err != nil {
		return nil, err
	}
	if rel, err := filepath.Rel(dir, p); err != nil || !filepath.IsLocal(rel) {
		return nil, fmt.Errorf("%s resolves outside %s", src, s.dir)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", src)
	}
	if fi.Size() > maxScriptSize {
		return nil, fmt.Errorf("%s is %d bytes, over the %d a script may have", src, fi.Size(), maxScriptSize)
	}
	return os.ReadFile(p)
}

// undoJob takes back the scripts copied for a refused job that no other
// job of the import uses.
func (s *importScripts) undoJob(home, id string) {
	for name, jobs := range s.copied {
		jobs = slices.DeleteFunc(jobs, func(j string) bool { return j == id })
		s.copied[name] = jobs
		if len(jobs) == 0 {
			_ = os.Remove(filepath.Join(ScriptsDir(home), name))
			delete(s.copied, name)
		}
	}
}

// undoAll takes back every script this import copied (the import was
// refused, nothing written).
func (s *importScripts) undoAll(home string) {
	for name := range s.copied {
		_ = os.Remove(filepath.Join(ScriptsDir(home), name))
	}
	clear(s.copied)
}

// names are the scripts this import copied, sorted.
func (s *importScripts) names() []string {
	out := make([]string, 0, len(s.copied))
	for name := range s.copied {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
